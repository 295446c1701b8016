#!/usr/bin/env bash
# Baseline for the collector benchmark: the very same probe, sent over plain OpenSSH
# (`ssh node 'sh -s' < probe`) to every node in parallel with xargs -P.
#
# Usage: bench/bench_collect_baseline.sh <nodes.json> [parallelism=16] [out-dir]
#   nodes.json is the file `python -m lab up` writes (cluster settings + nodes with key_path
#   and host_key). Each node's raw probe output lands in <out-dir>/<name>.out; the last line
#   printed is "baseline: <n> nodes, <complete> complete, <seconds>s wall".
# Decode an output with hangdesk.frames.parse_probe_output(name, bytes) for a like-for-like
# comparison with collect_node().
set -euo pipefail

nodes_json=${1:?usage: $0 <nodes.json> [parallelism] [out-dir]}
parallel=${2:-16}
out=${3:-$(mktemp -d /tmp/hangdesk-baseline.XXXXXX)}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"

# Render the probe exactly as collect_node() does, plus a known_hosts file and a node list.
(cd "$root" && .venv/bin/python - "$nodes_json" "$out") <<'PY'
import json
import sys
from pathlib import Path

from collectors.remote import CollectionPlan, render_probe

nodes_json, out = Path(sys.argv[1]), Path(sys.argv[2])
data = json.loads(nodes_json.read_text())
cluster = data["cluster"]
plan = CollectionPlan(
    process_pattern=cluster["process_pattern"],
    log_globs=cluster["log_globs"],
    flight_recorder_globs=cluster["flight_recorder_globs"],
    pyspy_command=cluster.get("pyspy_command") or "py-spy",
)
(out / "probe.sh").write_bytes(render_probe(plan, packed=True))  # gzipped frames, as a visit asks
known, rows = [], []
for node in data["nodes"]:
    host = node["address"] if node["port"] == 22 else f"[{node['address']}]:{node['port']}"
    known.append(f"{host} {node['host_key']}")
    fields = [node["name"], node["address"], str(node["port"]), node["username"], node["key_path"]]
    rows.append("\t".join(fields))
(out / "known_hosts").write_text("\n".join(known) + "\n")
(out / "nodes.tsv").write_text("\n".join(rows) + "\n")
PY

collect_one() {
	IFS=$'\t' read -r name address port user key <<<"$1"
	timeout 70 ssh -T -o BatchMode=yes -o StrictHostKeyChecking=yes \
		-o UserKnownHostsFile="$OUT/known_hosts" -o GlobalKnownHostsFile=/dev/null \
		-o ConnectTimeout=10 -o IdentitiesOnly=yes -i "$key" -p "$port" "$user@$address" \
		'timeout -k 2 55 sh -s' <"$OUT/probe.sh" >"$OUT/$name.out" 2>"$OUT/$name.err" || true
}
export -f collect_one
export OUT=$out

started=$(date +%s.%N)
tr '\n' '\0' <"$out/nodes.tsv" | xargs -0 -r -P "$parallel" -I{} bash -c 'collect_one "$1"' _ {}
finished=$(date +%s.%N)

total=$(grep -c . "$out/nodes.tsv")
complete=0
while IFS=$'\t' read -r name _rest; do
	[ -n "$name" ] || continue
	if tail -c 10 "$out/$name.out" 2>/dev/null | grep -qx 'HD1 end 0'; then
		complete=$((complete + 1))
	fi
done <"$out/nodes.tsv"
echo "outputs in $out"
awk -v n="$total" -v c="$complete" -v a="$started" -v b="$finished" \
	'BEGIN { printf "baseline: %d nodes, %d complete, %.2fs wall\n", n, c, b - a }'
