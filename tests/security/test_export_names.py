"""An exported bundle never holds a `..`, absolute or empty member name: node names are
what admins typed and log paths what the nodes reported (issue 11)."""

import io
import tarfile
from pathlib import PurePosixPath

from analysis.evidence import NodeEvidence, SnapshotEvidence
from collectors.bundles import read_bundle_bytes, write_bundle


def _members(bundle: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        return tar.getnames()


def _hostile_evidence() -> SnapshotEvidence:
    nodes = []
    for name in ("..", "../../etc", "/abs", "a\\b", "gpu-0", "gpu-0/", "manifest.json", "."):
        node = NodeEvidence(node=name, ps="PID CMD\n")
        node.logs = {
            "/var/log/../../etc/cron.d/job": "a log\n",
            "/var/log/./train//rank0.log": "b log\n",
            "/..": "c log\n",
        }
        nodes.append(node)
    return SnapshotEvidence(nodes=nodes, cluster="lab")


def test_an_exported_bundle_has_no_escaping_member_names():
    members = _members(write_bundle(_hostile_evidence()))
    for member in members:
        path = PurePosixPath(member)
        assert not path.is_absolute(), member
        assert ".." not in path.parts and "." not in path.parts, member
        assert "\\" not in member and "//" not in member, member


def test_each_node_keeps_its_own_folder_and_the_bundle_reads_back():
    evidence = _hostile_evidence()
    bundle = write_bundle(evidence)
    folders = {m.split("/", 1)[0] for m in _members(bundle) if "/" in m}
    assert len(folders) == len(evidence.nodes)  # "gpu-0" and "gpu-0/" did not merge
    again = read_bundle_bytes(bundle)
    assert len(again.nodes) == len(evidence.nodes)
    assert all(len(node.logs) == 3 for node in again.nodes)
