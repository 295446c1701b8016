"""The block a line sits in, for outputs that name their subject once and its state below.

`scontrol show node` names the node on its first line (`NodeName=gpu-a04 Arch=...`) and its
state on an indented line further down (`State=DOWN+DRAIN ... Reason=Not responding`);
`ibstat` and `ibstatus` name the HCA (`CA 'mlx5_10'`, `Infiniband device 'mlx5_11' port 1
status:`) and give each port's `State: Down` / `state: 1: DOWN` / `Physical state: Disabled`
below. A block ends at the next line that is not indented and is no header of its own.
"""

from __future__ import annotations

import re

_NODE_NAME = re.compile(r"NodeName=([\w.\[\],-]{1,255})")
_HCA = re.compile(r"(?:CA|Infiniband device) '([\w.-]{1,64})'")
_NODE_BAD = ("state=down", "state=drain", "state=fail", "state=unknown", "+drain", "not_responding")
_PORT_STATE = re.compile(r"^(?:physical )?state:\s{0,16}(?:\d{1,2}: )?(\w{1,32})")
_PORT_BAD = frozenset({"down", "disabled", "polling", "init", "armed", "linkerror"})


# Horovod's stall inspector: `Missing ranks:` (`Stalled ranks:` in older releases), then one
# `<rank>: [<tensor>, ...]` a line: the tensors that rank has not submitted (`<rank>!: [` when
# that rank has already shut down).
_LIST_HEADINGS = ("Missing ranks:", "Stalled ranks:")
_MISSING_LINE = re.compile(r"(\d{1,7})!?: \[")
# MPICH Hydra's banner: its `EXIT CODE: 9` is the signal that ended the process.
_HYDRA_CODE = re.compile(r"=\s{1,8}exit code: (\d{1,3})\b")


class Blocks:
    def __init__(self) -> None:
        self.node: str | None = None  # scontrol's node whose block this is
        self.hca: str | None = None  # ibstat's device whose ports follow
        self.missing = False  # inside Horovod's "Missing ranks:" list
        self.hydra = False  # inside MPICH Hydra's BAD TERMINATION banner

    @property
    def listing(self) -> bool:
        """Lines of this block say something though none of them names a failure."""
        return self.missing

    def listed(self, message: str) -> bool:
        """Inside a stall report's list, `1: [` opens the line of rank 1's missing tensors
        (not an srun `--label` prefix)."""
        return self.missing and _MISSING_LINE.match(message) is not None

    def see(self, message: str, indented: bool) -> None:
        if message in _LIST_HEADINGS:
            self.missing = True
            return
        if self.missing and _MISSING_LINE.match(message):
            return
        self.missing = False
        if "BAD TERMINATION" in message:
            self.hydra = True
            return
        if self.hydra and message.startswith("="):
            return
        self.hydra = False
        self._see_node_or_hca(message, indented)

    def _see_node_or_hca(self, message: str, indented: bool) -> None:
        if message.startswith("NodeName="):
            match = _NODE_NAME.match(message)
            self.node = match.group(1) if match else None
            self.hca = None
            return
        hca = _HCA.match(message) if "'" in message[:40] else None
        if hca:
            self.hca, self.node = hca.group(1), None
            return
        if not indented:
            self.node = self.hca = None

    def adjust(self, message: str, low: str, found: list) -> list:
        """What the block makes of a line's own findings: a listed missing rank, Hydra's
        exit code as the signal it is."""
        if self.missing:
            listed = _MISSING_LINE.match(message)
            if listed:
                return [*found, ("desync", None, int(listed.group(1)))]
        if self.hydra:
            code = _HYDRA_CODE.match(low)
            if code:
                number = int(code.group(1))
                kind = {9: "killed", 11: "segfault"}.get(number, "exit")
                return [(kind, number, None), *(f for f in found if f[0] != "exit")]
        return found

    def kinds(self, low: str, found: set[str]) -> list[tuple[str, int | None, int | None]]:
        """What the block makes of a line that says nothing by itself."""
        if self.node is not None and "node_state" not in found:
            for bad in _NODE_BAD:  # read only inside a node's block: most lines are in none
                if bad in low:
                    return [("node_state", None, None)]
        if self.hca is not None and "link" not in found:
            match = _PORT_STATE.match(low)
            if match and match.group(1) in _PORT_BAD:
                return [("link", None, None)]
        return []
