"""The evidence viewer: a page per artifact, the verdict's quoted lines marked and linked."""

import pytest

from analysis.verdict import Quote
from collectors.evidence_viewer import (
    LINE_CHARS,
    first_line_with,
    quote_core,
    quoted_line_numbers,
    render_lines,
    usable_quotes,
)
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot


def test_quoted_lines_are_found_by_containment_and_annotations_dropped():
    assert quote_core("NVRM: Xid (PCI:0000:3b:00): 79, GPU fell off  [fell off the bus]") == (
        "NVRM: Xid (PCI:0000:3b:00): 79, GPU fell off"
    )
    evidence = [
        Quote("stack", "n0", None, "all_reduce (c10d.py:1)"),  # analysis' words
        Quote("exit_code", "n0", None, "exitcode  : -9 (pid: 7)"),
        Quote("log_error", "n1", None, "RuntimeError: boom"),  # other node
        Quote("log_error", "n0", None, "OK"),  # too short to mean anything
    ]
    quotes = usable_quotes(evidence, "n0")
    assert quotes == [(1, "exitcode  : -9 (pid: 7)")]
    lines = ["start", "  exitcode  : -9 (pid: 7)  (SIGKILL)", "end"]
    assert quoted_line_numbers(lines, quotes) == {2: 1}
    assert first_line_with("\n".join(lines), "exitcode") == 2
    assert first_line_with("abc", "zzz") is None


def test_rendered_lines_are_escaped_numbered_and_cut():
    text = "<script>alert(1)</script>\nfatal: x\n" + "y" * (LINE_CHARS + 10) + "\n"
    page = render_lines(text, [(4, "fatal: x")])
    assert "<script>" not in page.rows and "&lt;script&gt;" in page.rows
    assert '<tr id="L2" class="quoted" data-quote="4">' in page.rows
    assert '<a href="#L3">3</a>' in page.rows
    assert page.lines_total == 3 and page.cut_lines == 1 and page.quoted == {2: 4}


@pytest.fixture
def crashed(bob, cluster, django_capture_on_commit_callbacks):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("crash"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    return incident, snapshot


@pytest.mark.django_db
def test_a_quote_opens_the_file_that_holds_it_with_the_line_marked(as_user, bob, crashed):
    incident, snapshot = crashed
    client = as_user(bob)
    page = client.get(incident.get_absolute_url()).content.decode()
    evidence = snapshot.diagnosis["evidence"]
    at = next(  # the exitcode -15 line, wherever the verdict orders it
        i
        for i, e in enumerate(evidence)
        if e["kind"] == "exit_code" and e["text"].startswith("exitcode  : -15")
    )
    assert f'href="/snapshots/{snapshot.pk}/evidence/{at}/"' in page
    response = client.get(f"/snapshots/{snapshot.pk}/evidence/{at}/")
    assert response.status_code == 200
    body = response.content.decode()
    quote = evidence[at]
    marked = body[body.index(f'class="quoted" data-quote="{at}"') :]
    assert quote["text"] in marked[: marked.index("</tr>")]
    assert f'href="{incident.get_absolute_url()}#diagnosis"' in body  # the way back
    assert "?download=1" in body and 'id="viewer-search"' in body
    # the line the link was for is where the page opens
    line = response.context["line"]
    assert f'data-line="{line}"' in body and f'<tr id="L{line}" class="quoted"' in body


@pytest.mark.django_db
def test_the_viewer_and_its_download_go_through_the_one_checked_view(as_user, bob, carol, crashed):
    _, snapshot = crashed
    artifact = snapshot.collections.first().artifacts.order_by("name").first()
    base = f"/snapshots/{snapshot.pk}/artifacts/{artifact.pk}/"
    assert as_user(carol).get(f"{base}view/").status_code == 403  # viewers read no artifact
    assert as_user(carol).get(f"/snapshots/{snapshot.pk}/evidence/3/").status_code == 403
    client = as_user(bob)
    download = client.get(f"{base}?download=1")
    assert download["Content-Disposition"].startswith("attachment;")
    assert download["Content-Type"] == "text/plain; charset=utf-8"
    assert client.get(f"{base}view/").status_code == 200
    assert client.get(f"/snapshots/{snapshot.pk}/evidence/0/").status_code in (200, 404)
    assert client.get(f"/snapshots/{snapshot.pk}/evidence/999/").status_code == 404
