"""A world size is a claim of the evidence (a manifest, WORLD_SIZE, a log line): the analysis is
linear in it up to MAX_WORLD and does not believe it past that. The review found 50,000 ranks
took 24 s and 1,000,000 were killed (quadratic); here each claim runs in a child under
RLIMIT_CPU 30 s / RLIMIT_AS 1 GiB, which a quadratic analysis at 131,072 would blow many times.
"""

import json

from tests import hostile

_CLAIMS = """
import json, sys, time
import analysis
from tests.analysis.sample_evidence import load_snapshot
out = {}
for world in (50_000, 131_072, 1_000_000, 10**12):
    evidence = load_snapshot("outside")
    evidence.expected_world_size = world
    for node in evidence.nodes:  # the same claim from every rank's environment and log
        node.environ = {pid: env.replace(b"WORLD_SIZE=4", b"WORLD_SIZE=%d" % world)
                        for pid, env in node.environ.items()}
        node.logs = {p: t.replace("world_size=4", f"world_size={world}")
                     for p, t in node.logs.items()}
    began = time.process_time()
    diagnosis = analysis.diagnose(evidence).to_json()
    out[world] = {"cpu_s": round(time.process_time() - began, 2), "world": diagnosis["world_size"],
                  "json_mb": round(len(json.dumps(diagnosis)) / 1e6, 1),
                  "problems": [p["problem"] for p in diagnosis["parse_problems"]]}
print(json.dumps(out))
"""


def test_world_size_claims_stay_linear_and_huge_ones_are_not_believed():
    done = hostile.run_limited(_CLAIMS)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["50000"]["world"] == 50_000 and out["131072"]["world"] == 131_072
    for huge in ("1000000", "1000000000000"):
        assert out[huge]["world"] != int(huge)
        assert any("not believed" in p for p in out[huge]["problems"]), out[huge]
