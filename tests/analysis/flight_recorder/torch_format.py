"""Flight-recorder dumps in torch 2.13's on-disk format, written from a short description.

The layout is what `torch._C._distributed_c10d._dump_nccl_trace()` (and the gloo
`_dump_fr_trace()`) writes, field for field, in torch's order (FlightRecorderDetail.hpp in the
torch 2.13 wheel): a dict of `version` ("2.10"), `pg_config` (name -> name, desc, ranks as the
text "[0, 1]"), `comm_lib_version`, `pg_status` (the rank's own group count -> last enqueued /
started / completed sequence id) and `entries`, each with frames, record_id, pg_id,
process_group (name, desc), thread_name, thread_id, collective_seq_id, p2p_seq_id, op_id,
profiling_name, time_created_ns, duration_ms (completed NCCL entries), input_sizes,
input_dtypes, output_sizes, output_dtypes, state, time_discovered_started_ns,
time_discovered_completed_ns, retired, timeout_ms, is_p2p. Pickled with protocol 2, as torch's
pickler writes; named `<prefix><rank>` as torch names them.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = "2.10"  # FlightRecorder.hpp's version_val in torch 2.13
NCCL_VERSION = "2.27.5"
PREFIX = "nccl_trace_rank_"
_T0 = 1_796_000_000_000_000_000  # a creation time, ns (any fixed clock)
_STEP_NS = 1_000_000


@dataclass
class Op:
    """One entry as a scenario describes it; the writer fills in the rest."""

    name: str  # profiling name without the backend: "all_reduce", "send 0->1"
    seq: int  # collective_seq_id, or p2p_seq_id for a send/recv
    inputs: Any = ((4, 4),)
    outputs: Any = None  # None: as the inputs
    state: str = "completed"  # scheduled | started | completed
    pg: str = "0"
    desc: str = "default_pg"
    dtype: Any = "Float"  # one name for inputs and outputs, or (inputs, outputs)
    retired: bool | None = None  # None: retired once completed
    frame: str = ""  # the user's call site, "file.py:line:function"


@dataclass
class Rank:
    rank: int
    ops: list[Op]
    # group name -> (desc, members); the default group and every op's group are filled in
    groups: dict[str, tuple[str, list[int]]] = field(default_factory=dict)
    backend: str = "nccl"
    first_record_id: int = 0  # > 0: the ring buffer dropped that many older entries
    gloo_config: bool = False  # gloo leaves pg_config empty: {'': {name, desc: '', ranks: []}}


def _sizes(value: Any) -> list[list[int]]:
    return [list(shape) for shape in value]


def _dtypes(value: Any, sizes: list[list[int]]) -> list[str]:
    return [value] * len(sizes) if isinstance(value, str) else list(value)


def entry(op: Op, rank: Rank, record_id: int, pg_ids: dict[str, int]) -> dict[str, Any]:
    inputs = _sizes(op.inputs)
    outputs = _sizes(op.outputs if op.outputs is not None else op.inputs)
    in_dtype, out_dtype = op.dtype if isinstance(op.dtype, tuple) else (op.dtype, op.dtype)
    p2p = op.name.split(" ", 1)[0] in ("send", "recv")
    state, retired = op.state, (op.state == "completed") if op.retired is None else op.retired
    if rank.backend == "gloo":
        state = "scheduled"  # gloo never marks an entry started or completed: it retires it
    created = _T0 + record_id * _STEP_NS
    started = created + 1000 if op.state in ("started", "completed") else None
    completed = created + 5000 if op.state == "completed" else None
    frames = []
    if op.frame:
        filename, line, name = op.frame.split(":")
        frames = [{"name": name, "filename": f"/job/{filename}", "line": int(line)}]
    frames.append({"name": "all_reduce", "filename": "/torch/distributed/c10d.py", "line": 1})
    out: dict[str, Any] = {
        "frames": frames,
        "record_id": record_id,
        "pg_id": pg_ids[op.pg],
        "process_group": (op.pg, op.desc),
        "thread_name": "pt_main_thread",
        "thread_id": "140000000000000",
        "collective_seq_id": 0 if p2p else op.seq,
        "p2p_seq_id": op.seq if p2p else 0,
        "op_id": record_id + 1,
        "profiling_name": f"{rank.backend}:{op.name}",
        "time_created_ns": created,
    }
    if completed is not None and rank.backend != "gloo":
        out["duration_ms"] = 0.004
    out.update(
        input_sizes=inputs,
        input_dtypes=_dtypes(in_dtype, inputs),
        output_sizes=outputs,
        output_dtypes=_dtypes(out_dtype, outputs),
        state=state,
        time_discovered_started_ns=started if rank.backend != "gloo" else None,
        time_discovered_completed_ns=completed if rank.backend != "gloo" else None,
        retired=retired,
        timeout_ms=600000,
        is_p2p=p2p,
    )
    return out


def dump(rank: Rank, world: int) -> dict[str, Any]:
    groups = {"0": ("default_pg", list(range(world)))}
    for op in rank.ops:
        groups.setdefault(op.pg, (op.desc, []))
    groups.update(rank.groups)
    pg_ids = {name: index for index, name in enumerate(groups)}
    entries = [
        entry(op, rank, rank.first_record_id + index, pg_ids) for index, op in enumerate(rank.ops)
    ]
    if rank.gloo_config:
        config = {"": {"name": "", "desc": "", "ranks": "[]"}}
    else:
        config = {
            name: {"name": name, "desc": desc, "ranks": str(members)}
            for name, (desc, members) in groups.items()
        }
    status = {}
    for name, index in pg_ids.items():
        mine = [e for e, op in zip(entries, rank.ops, strict=True) if op.pg == name]
        seqs = [e["collective_seq_id"] for e in mine if not e["is_p2p"]]
        done = [e["collective_seq_id"] for e in mine if not e["is_p2p"] and e["retired"]]
        status[str(index)] = {
            "last_enqueued_collective": max(seqs, default=-1),
            "last_started_collective": -1,
            "last_completed_collective": max(done, default=-1),
        }
    return {
        "version": VERSION,
        "pg_config": config,
        "comm_lib_version": NCCL_VERSION if rank.backend == "nccl" else "",
        "pg_status": status,
        "entries": entries,
    }


def write(directory: Path, ranks: list[Rank], world: int, as_json: bool = False) -> list[Path]:
    """One file per rank, as torch names them; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in ranks:
        data = dump(rank, world)
        path = directory / f"{PREFIX}{rank.rank}"
        if as_json:
            for item in data["entries"]:
                item["process_group"] = list(item["process_group"])
            path.write_text(json.dumps(data))
        else:
            path.write_bytes(pickle.dumps(data, protocol=2))
        paths.append(path)
    return paths
