"""The line that says what a Python exception was, and where a traceback was raised.

`ValueError: bad shape`, `torch.distributed.DistBackendError: NCCL error in: ...`,
`ray.exceptions.RayTaskError(RuntimeError): ray::...`, `KeyboardInterrupt`, or the same name
inside a logger's line (`... Training failed: RuntimeError: CUDA error`). Not `Traceback (most
recent call last):`, not a frame (`File "x.py", line 3, in f`), not the source line a frame
quotes (`raise ValueError(...)`, which the reader skips), not `ERROR: ...` or a bare `Error:`.
Names are read with `str.find` and a bounded walk back over the name's characters.
"""

from __future__ import annotations

import re

_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit", "Failure", "Timeout")
_BARE = frozenset({"StopIteration", "KeyboardInterrupt", "SystemExit", "GeneratorExit"})
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
_BEFORE = frozenset(" \t[(:'\"")
_NAME_RUN = re.compile(r"[A-Za-z0-9_.]*")  # _NAME_CHARS, as one match
_NOT_EXCEPTIONS = ("Traceback", "During handling", "The above exception", "raise ", 'File "')
_MAX_NAME = 300
_RENDEZVOUS_FRAMES = (
    "/rendezvous/",
    "rendezvous_backend",
    "dynamic_rendezvous",
    "_store_based_barrier",
    "init_process_group",
    "_create_c10d_store",
    "TCPStore(",
    "store.wait",
    "store.get",
    "next_rendezvous",
    "_rendezvous",
)


def _is_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    if not last or not (last[0].isalpha() or last[0] == "_"):
        return False
    if last in _BARE:
        return True
    return any(last.endswith(s) and len(last) > len(s) for s in _SUFFIXES)


def _name_before(message: str, end: int) -> str | None:
    start = end
    floor = max(0, end - _MAX_NAME)
    while start > floor and message[start - 1] in _NAME_CHARS:
        start -= 1
    if start > 0 and message[start - 1] not in _BEFORE:
        return None
    name = message[start:end].strip(".")
    return name if name and _is_name(name) else None


def _followed_by_message(message: str, end: int) -> bool:
    rest = message[end : end + 2]
    if rest in ("", ":") or rest.startswith(": "):
        return True
    if rest.startswith("("):  # RayTaskError(RuntimeError): ...
        close = message.find("): ", end, end + 120)
        return close > 0
    return False


def exception_line(message: str) -> str | None:
    """The exception's (qualified) name when this message states one, else None."""
    if message.startswith(_NOT_EXCEPTIONS):
        return None
    head = message[:_MAX_NAME]
    end = _NAME_RUN.match(head).end()  # the name's characters from the start
    if end and _followed_by_message(message, end):
        name = _name_before(message, end)
        if name:
            return name
    for suffix in ("Error", "Exception"):
        at = message.find(suffix, 1, 4096)
        for _ in range(4):
            if at < 0:
                break
            stop = at + len(suffix)
            if _followed_by_message(message, stop) and message[stop : stop + 1] != "":
                name = _name_before(message, stop)
                if name:
                    return name
            at = message.find(suffix, stop, 4096)
    return None


def in_rendezvous(line: str) -> bool:
    """A traceback frame (or the source it quotes) inside the rendezvous or the c10d store."""
    return any(marker in line for marker in _RENDEZVOUS_FRAMES)
