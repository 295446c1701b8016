"""An exported bundle is plain files any `tar` unpacks: GNU tar extracts it without a word,
and the extracted directory imports back to the same verdict (issue 19: `system/df -h ` and
`system/df -h /dev/shm` made tar fail with "Cannot open: Not a directory")."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from django.core.management import call_command

from collectors.bundles import read_bundle_bytes, write_bundle
from collectors.models import Snapshot
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from hangdesk.bundles import MemberNames
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

TAR = shutil.which("tar")
# The facts the probe collects on every node (hangdesk/probe.sh), named as it names them.
PROBE_FACTS = {
    "df -h /dev/shm": "Filesystem Size Used Avail Use% Mounted on\nshm 64M 0 64M 0% /dev/shm\n",
    "df -h /": "Filesystem Size Used Avail Use% Mounted on\n/dev/vda1 40G 9G 31G 23% /\n",
    "loadavg": "0.52 0.41 0.30 1/123 4567",
    "free -m": "total used free\nMem: 24000 3000 21000\n",
    "date": "2026-11-29T09:15:20+00:00",
    "dmesg source": "dmesg -T",
    "collection": "1 connection, 0.9 s",
}


def _gnu_tar_unpacks(data: bytes, tmp_path) -> list[str]:
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(data)
    out = tmp_path / "unpacked"
    out.mkdir()
    done = subprocess.run(
        [TAR, "xzf", str(archive), "-C", str(out)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


@pytest.mark.django_db
def test_an_export_unpacks_with_gnu_tar_and_imports_back_to_the_same_verdict(
    bob, cluster, tmp_path, django_capture_on_commit_callbacks
):
    assert TAR, "GNU tar is missing (Debian's tar package)"
    evidence = load_snapshot("outside")
    for node in evidence.nodes:
        node.system.update(PROBE_FACTS)
    incident = incident_open(opened_by=bob, title="outside", cluster=cluster)
    with django_capture_on_commit_callbacks():
        first = snapshot_import_bundle(incident=incident, evidence=evidence)
    snapshot_analyse(snapshot_id=first.pk)
    first.refresh_from_db()

    exported = tmp_path / "export.tar.gz"
    call_command("bundle", "export", str(first.pk), str(exported))
    files = _gnu_tar_unpacks(exported.read_bytes(), tmp_path)
    assert "lab-node-0/system/df-shm.txt" in files and "lab-node-0/system/df-root.txt" in files
    assert all(part == part.strip() for name in files for part in name.split("/"))

    call_command("bundle", "import", str(incident.pk), str(tmp_path / "unpacked"))
    again = Snapshot.objects.exclude(pk=first.pk).get(incident=incident)
    snapshot_analyse(snapshot_id=again.pk)
    again.refresh_from_db()
    before, after = first.diagnosis, again.diagnosis
    for key in ("classification", "suspect_ranks", "missing_ranks", "last_completed_step"):
        assert after[key] == before[key], key
    assert after["classification"] == "A" and after["suspect_ranks"] == [3]
    node = next(n for n in read_bundle_bytes(exported.read_bytes()).nodes)
    assert node.system["df -h /dev/shm"] == PROBE_FACTS["df -h /dev/shm"]  # the names come back


def test_paths_a_node_reports_that_no_file_system_takes_as_they_are_still_unpack(tmp_path):
    assert TAR, "GNU tar is missing (Debian's tar package)"
    evidence = load_snapshot("outside")
    node = evidence.nodes[0]
    node.logs.update(
        {
            "/var/log/job": "a file where another log needs a directory\n",
            "/var/log/job/rank9.log": "under it\n",
            "/var/log/trailing ": "a trailing space\n",
            "/var/log/trailing": "the same name without it\n",
            "/var/log/tab\tand:colon?.log": "odd characters\n",
            "/var/log/" + "x" * 300 + ".log": "a name past ext4's 255 bytes\n",
        }
    )
    node.system["a fact/with a slash "] = "odd name\n"
    files = _gnu_tar_unpacks(write_bundle(evidence), tmp_path)
    logs = [f for f in files if "/logs/var/log/" in f]
    assert len(logs) == len({f.lower() for f in logs})
    again = read_bundle_bytes(write_bundle(evidence)).nodes[0]
    assert len(again.logs) == len(node.logs)  # nothing dropped, nothing merged
    assert sorted(again.logs.values()) == sorted(node.logs.values())


def test_member_names_are_unique_and_never_a_file_under_a_file():
    names = MemberNames()
    taken = [names.take(p) for p in ("logs/a", "logs/a/b", "logs/a/c", "logs/a", "x.log", "x.log")]
    assert taken == ["logs/a", "logs/a~2/b", "logs/a~2/c", "logs/a~3", "x.log", "x~2.log"]
