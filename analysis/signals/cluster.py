"""Kinds of what the cluster around the ranks says: links (InfiniBand, mlx5, NVLink), a node's
state (a scheduler's or Kubernetes'), evictions, and what is no failure: a checkpoint under
way, NCCL's configuration.

Readers of `analysis.signals.kinds.classify`, like those of `analysis.signals.comms`.
"""

from __future__ import annotations

from analysis.parsers import nccl
from analysis.signals import nodes
from analysis.signals.triggers import LINK_TOPIC, holds_any

Found = tuple[str, int | None, int | None]  # (kind, code, peer)

# --- links, nodes, evictions, stragglers -------------------------------------------------------

_LINK_STATE = (
    "link down",
    "link is down",
    "linkdown",
    "port state change",
    "state: down",
    "down",
    "error",
    "fatal",
    "catastrophic",
    "syndrome",
    "retry",
    "flap",
    "inactive",
    "unplugged",
    "fail",
    "port error",
    "async event",
    "completion with error",
)
_IB_RETRY = ("status=12", "retry_exc_err", "transport retry counter exceeded", "vendor err 129")


def link(message: str, low: str) -> list[Found]:
    if holds_any(low, _IB_RETRY):
        return [("link", None, None)]
    if not holds_any(low, LINK_TOPIC):
        return []
    if "nccl info" in low:
        return []  # "NET/IB : Using [0]mlx5_0:1/IB": configuration, not a fault
    return [("link", None, None)] if holds_any(low, _LINK_STATE) else []


_NODE_STATE = (
    "kill task failed",
    "reason set to",
    "node failure",
    "nodestatusunknown",
    "stopped posting node status",
    "node has crashed",
    "node crashed",
    "not responding",
    "notready",
    "not ready",
    "state=down",
    "state=drain",
    "state=fail",
    "drained",
    "draining",
    "node_fail",
    "marked dead",
    "is dead",
    "kill task failed",
    "nodelost",
    "node lost",
    "down*",
    "drain*",
    "unhealthy",
)
_NODE_TOPIC = ("node", "slurmctld", "kubelet", "raylet", "host")


def node_state(message: str, low: str) -> list[Found]:
    if not holds_any(low, _NODE_STATE):
        return []
    if holds_any(low, _NODE_TOPIC) or "kill task failed" in low:
        return [("node_state", None, None)]
    return []


def table_row(message: str, low: str) -> list[Found]:
    """A row of `kubectl get nodes/pods`, `sinfo`: a cell of its own says the state."""
    kind = nodes.row_state(message)[0]
    return [(kind, None, None)] if kind else []


_EVICTED = (
    "evict",
    "preempt",
    "spot interruption",
    "spot instance interruption",
    "low on resource",
)


def evicted(message: str, low: str) -> list[Found]:
    return [("evicted", None, None)] if holds_any(low, _EVICTED) else []


# --- what is not a failure: checkpoints, NCCL's configuration ----------------------------------

_CHECKPOINT_TOPIC = ("checkpoint", "torch.save", "dcp.save", "state dict", "state_dict")
_CHECKPOINT_BEGINS = (
    "saving",
    "save",
    "writing",
    "checkpointing",
    "persisting",
    "storing",
    "getting",  # torchtune gathers the full state dict before it writes it
    "retrieving",
    "gathering",
    "consolidating",
    "checkpoint request",
    "async checkpoint",
)
_CHECKPOINT_DONE = ("saved", "finished", "completed", "done", "success", "load", "resum", "restor")


def checkpoint(message: str, low: str) -> list[Found]:
    if not holds_any(low, _CHECKPOINT_TOPIC):
        return []
    if not holds_any(low, _CHECKPOINT_BEGINS):
        return []
    if holds_any(low, _CHECKPOINT_DONE) or ("took" in low and "sav" in low):
        return []  # the save is over (a phase of it that took a while is not)
    return [("checkpoint", None, None)]


_CONFIG_WORDS = (" using ", "no device found", "plugin", "nccl version", " via ")


def nccl_config(message: str, low: str) -> list[Found]:
    """What NCCL chose: a variable it was given, a version, a plugin, the network it uses (or
    the lack of one: `NET/IB : No device found.` sends it over sockets)."""
    if "set by environment to" in low or nccl.nccl_config_fact(message) is not None:
        return [("nccl_config", None, None)]
    if "nccl info" in low and holds_any(low, _CONFIG_WORDS):
        return [("nccl_config", None, None)]
    return []


_TABLE_STEMS = ("notready", "unknown", "down", "drain", "fail", "evicted", "preempted", "error")
_TABLE_STEMS += ("crashloopbackoff", "oomkilled")
READERS = (
    (LINK_TOPIC + _IB_RETRY, link),
    (_NODE_STATE, node_state),
    (_TABLE_STEMS, table_row),
    (_EVICTED, evicted),
    (_CHECKPOINT_TOPIC, checkpoint),
    (("nccl info", "nccl version", "set by environment"), nccl_config),
)
