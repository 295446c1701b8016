"""A node's evidence status: gathered or not, and a note; the text older bundles and stored
rows carry is read in one place."""

from analysis.evidence import GATHERED, EvidenceStatus, not_gathered, stopped_short


def test_the_three_states_and_how_people_read_them():
    cut = stopped_short("output cut at 10 bytes")
    lost = not_gathered("unreachable: timed out after 10s")
    assert GATHERED.complete and not GATHERED.partial and GATHERED.describe() == "ok"
    assert cut.gathered and cut.partial and not cut.complete
    assert cut.describe() == "partial: output cut at 10 bytes"
    assert not lost.gathered and not lost.partial and not lost.complete
    assert lost.describe() == "unreachable: timed out after 10s"


def test_the_status_text_of_older_bundles_and_rows_reads_as_the_same_status():
    for status in (GATHERED, stopped_short("output cut at 10 bytes"), not_gathered("no route")):
        assert EvidenceStatus.from_text(status.describe()) == status
    assert EvidenceStatus.from_text("partial:") == stopped_short("stopped short")
    # A failure text that mentions partial evidence is still a failure.
    lost = EvidenceStatus.from_text("connection lost: reset (partial evidence kept)")
    assert not lost.gathered


def test_a_bundle_manifest_entry_is_read_typed_first_then_as_text_and_bounded():
    status = not_gathered("node removed from the cluster")
    assert EvidenceStatus.from_json(status.to_json()) == status
    assert EvidenceStatus.from_json({"status": "partial: cut"}) == stopped_short("cut")
    assert EvidenceStatus.from_json({"gathered": False, "note": "x" * 10_000}).note == "x" * 200
    for odd in (None, "ok", [], {"gathered": "no"}, {"status": 7}):
        assert EvidenceStatus.from_json(odd) == GATHERED
