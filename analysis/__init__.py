"""Pure analysis of hung-job evidence: parsers, ranks, stack groups, verdicts.

Nothing in this package imports Django or paramiko; it works on plain data.
"""

from analysis.diagnosis import Diagnosis, diagnose, diagnose_parses
from analysis.snapshot_parse import Abandoned, RankState, extract_ranks
from analysis.stacks import compact_ranks

__all__ = [
    "Abandoned",
    "Diagnosis",
    "RankState",
    "compact_ranks",
    "diagnose",
    "diagnose_parses",
    "extract_ranks",
]
