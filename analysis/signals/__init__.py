"""Signals that do not depend on wording: every line tied to a rank or node, read by the kind
of evidence it is (progress, a kill, a timeout, a lost peer, NCCL RAS, ...).

`read_text(text, LineSource(...))` is the whole interface (issue 17, Interface 1); the
analysis reads its logs through `SignalReader` one line at a time, in the same pass as the
specific parsers, and sums the signals per rank in `analysis.signals.summary`.
"""

from analysis.signals.model import (
    FAILURE_KINDS,
    SIGNAL_KINDS,
    LineSource,
    Signal,
)
from analysis.signals.reader import SignalReader, read_text

__all__ = [
    "FAILURE_KINDS",
    "SIGNAL_KINDS",
    "LineSource",
    "Signal",
    "SignalReader",
    "read_text",
]
