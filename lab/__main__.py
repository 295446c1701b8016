"""python -m lab up|down|status -- see docs/lab.md."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab import cluster, farm_nodes, scenarios


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab", description="hangdesk's hanging lab")
    p.add_argument(
        "--state-dir", type=Path, default=None, help="default: $HANGDESK_LAB_DIR or .lab"
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="start a lab")
    u.add_argument("--nodes", type=int, default=2)
    u.add_argument("--ranks-per-node", type=int, default=2)
    u.add_argument("--scenario", default="healthy", choices=sorted(scenarios.SCENARIOS))
    u.add_argument("--light", action="store_true", help="no torch: stand-in ranks (benchmarks)")
    u.add_argument("--base-address", default=None, help="first node address, e.g. 127.42.1.1")
    u.add_argument("--port", type=int, default=22, help="sshd port on every node address")
    u.add_argument(
        "--master-port", type=int, default=None, help="default: 29500, or the next free pair"
    )
    u.add_argument("--fault-step", type=int, default=10)
    u.add_argument("--step-time", type=float, default=0.5)
    u.add_argument("--watchdog-timeout", type=float, default=10.0)
    u.add_argument("--json", type=Path, default=None, help="also write the node JSON here")
    u.add_argument(
        "--slurm", action="store_true", help="real Slurm: sbatch/srun start the ranks (slurmd -N)"
    )
    u.add_argument(
        "--ray", action="store_true", help="real Ray: the ranks are Ray Train workers (ray start)"
    )
    sub.add_parser("down", help="stop the lab and remove what it created")
    fm = sub.add_parser("farm", help="serve N virtual SSH nodes answering captured probe output")
    fm.add_argument("--nodes", type=int, default=50)
    fm.add_argument("--ranks-per-node", type=int, default=8)
    fm.add_argument("--fault", default="rank-gone", choices=sorted(farm_nodes.FAULTS))
    fm.add_argument("--slow-s", type=float, default=30.0, help="node-slow: seconds late")
    fm.add_argument("--base-address", default=None, help="first node address, e.g. 127.210.0.1")
    fm.add_argument("--port", type=int, default=22)
    fm.add_argument("--lifetime", type=float, default=7200.0, help="stop after this long")
    fm.add_argument(
        "--dump-world", type=int, default=0,
        help="the world the flight-recorder dumps list (default nodes x ranks): a few nodes "
        "sending what a node of a bigger job sends",
    )  # fmt: skip
    fc = sub.add_parser("farm-capture", help="capture a torch lab's probe output for the farm")
    fc.add_argument("--scenario", required=True, choices=sorted(scenarios.SCENARIOS))
    fc.add_argument("--nodes", type=int, default=2)
    fc.add_argument("--ranks-per-node", type=int, default=8)
    s = sub.add_parser("status", help="show the lab")
    s.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    state_dir = args.state_dir or cluster.default_state_dir()

    if args.cmd == "up":
        opts = cluster.LabOptions(
            nodes=args.nodes,
            ranks_per_node=args.ranks_per_node,
            scenario=args.scenario,
            state_dir=state_dir,
            base_address=args.base_address,
            port=args.port,
            master_port=args.master_port,
            light=args.light,
            fault_step=args.fault_step,
            step_time=args.step_time,
            watchdog_timeout=args.watchdog_timeout,
            slurm=args.slurm,
            ray=args.ray,
        )
        try:
            node_json = cluster.up(opts)
        except cluster.LabError as exc:
            print(f"lab: cannot start: {exc}", file=sys.stderr)
            return 2
        text = json.dumps(node_json, indent=2)
        if args.json:
            args.json.write_text(text)
        print(text)
        print(
            f"lab: up in {node_json['ready_seconds']} s; node list: {state_dir}/nodes.json",
            file=sys.stderr,
        )
        return 0
    if args.cmd == "farm":
        from lab import farm

        try:
            return farm.run(
                farm.FarmOptions(
                    nodes=args.nodes, ranks_per_node=args.ranks_per_node, fault=args.fault,
                    slow_s=args.slow_s, base_address=args.base_address, port=args.port,
                    state_dir=state_dir, lifetime_s=args.lifetime, dump_world=args.dump_world,
                )
            )  # fmt: skip
        except (ValueError, OSError) as exc:
            print(f"lab: cannot start the farm: {exc}", file=sys.stderr)
            return 2
    if args.cmd == "farm-capture":
        from lab import farm_capture

        try:
            where = farm_capture.capture(
                args.scenario, nodes=args.nodes, ranks_per_node=args.ranks_per_node
            )
        except cluster.LabError as exc:
            print(f"lab: cannot capture: {exc}", file=sys.stderr)
            return 2
        print(f"lab: captured {args.scenario} into {where}", file=sys.stderr)
        return 0
    if args.cmd == "down":
        problems = cluster.down(state_dir)
        for line in problems:
            print(f"lab: left over: {line}", file=sys.stderr)
        print("lab: down" if not problems else "lab: down with leftovers", file=sys.stderr)
        return 1 if problems else 0
    info = cluster.status(state_dir)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    if not info["running"]:
        print(f"lab: not running ({info['state_dir']})")
        return 0
    print(f"lab: scenario {info['scenario']}, state {info['state_dir']}")
    for n in info["nodes"]:
        print(f"  {n['name']:<12} {n['address']:<15} alive={n['alive']} sshd={n['sshd']}")
    for rank, r in sorted(info["ranks"].items()):
        print(f"  rank{rank:<4} {r['host']:<12} last step {r['step']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
