"""Write the diagnoses an older hangdesk stored, as it stored them, for the upgrade tests.

Run it with an older source tree first on the path (the tree's own analysis and samples):

    git archive 03a87aa | tar -x -C /tmp/old     # the last commit of schema 1 (no version)
    .venv/bin/python tests/analysis/stored/capture.py /tmp/old schema1

Each scenario is one of the tree's captured lab samples, analysed by that tree's
`analysis.diagnose` exactly as its worker did before storing the result. The trees it was made
for (schema 1 and 2) still gave a node's status as a text ("partial: ...").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main(tree: str, label: str) -> None:
    sys.path.insert(0, tree)
    import analysis
    from tests.analysis.sample_evidence import drop_rank_process, load_snapshot, split_nodes

    try:  # stored diagnoses are masked since 5bd2386 (older rows by migration 0005)
        from hangdesk.masking import mask_json
    except ImportError:
        mask_json = None

    def as_stored(result) -> dict:
        stored = result.to_json() if hasattr(result, "to_json") else result
        return mask_json(stored, key=b"capture") if mask_json else stored

    def unreachable():
        snapshot = split_nodes(load_snapshot("outside"))
        lost = snapshot.nodes[1]
        snapshot.nodes[1] = type(lost)(node=lost.node, status="unreachable: timed out after 10s")
        return snapshot

    def partial():
        snapshot = load_snapshot("mismatch")
        snapshot.nodes[0].status = "partial: output cut at 300000 bytes"
        return snapshot

    scenarios = {
        "outside": lambda: analysis.diagnose(load_snapshot("outside")),
        "crash": lambda: analysis.diagnose(load_snapshot("crash")),
        "mismatch": lambda: analysis.diagnose(load_snapshot("mismatch")),
        "init": lambda: analysis.diagnose(load_snapshot("init")),
        "straggler": lambda: analysis.diagnose(
            load_snapshot("straggler", "snap1"), load_snapshot("straggler", "snap0")
        ),
        "healthy": lambda: analysis.diagnose(
            load_snapshot("healthy", "snap1"), load_snapshot("healthy", "snap0")
        ),
        "rank-gone": lambda: analysis.diagnose(
            split_nodes(drop_rank_process(load_snapshot("outside"), 3))
        ),
        "unreachable": lambda: analysis.diagnose(unreachable()),
        "partial": lambda: analysis.diagnose(partial()),
    }
    for name, run in scenarios.items():
        path = HERE / f"{label}-{name}.json"
        path.write_text(json.dumps(as_stored(run()), indent=1, sort_keys=True) + "\n")
        print(path.name)


if __name__ == "__main__":
    main(*sys.argv[1:3])
