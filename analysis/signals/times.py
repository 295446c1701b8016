"""A line's own time, in the forms logs print it near their start.

ISO 8601 (`2024-06-26 06:24:44,906`, `...T06:24:44.906Z`), glog / PyTorch C++ (`[E626
06:24:44.906457629 ProcessGroupNCCL.cpp:1785]`, `I0626 06:24:44.906`), `dmesg -T`
(`[Wed Jun 26 06:24:44 2024]`), syslog (`Jun 26 06:24:44 host ...`) and Slurm
(`[2024-06-26T06:24:44.906]`). Stamps without a year (glog, syslog) take the year of the
source's collection time, or the year before when that would put them in the future; without a
collection time they give no time at all rather than a guessed one. Everything is read as UTC,
like every other log time in the analysis. Only the first 64 characters are looked at.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

HEAD = 64
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,9}))?")
_GLOG = re.compile(r"(?:^|[\[\s:])[IWEF](\d\d?)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")
_CTIME = re.compile(r"\w{3} (\w{3}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d)(?: (\d{4}))?")
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_SYSLOG = re.compile(r"^(\w{3}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d) ")


def utc_stamp(year, month, day, hour, minute, second, fraction=None) -> datetime | None:
    """The UTC time the parts name (strings or ints, the fraction's digits as written); None for
    a date that does not exist."""
    micro = int((fraction or "0").ljust(6, "0")[:6])
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=UTC
        )
    except ValueError:
        return None


def _with_year(month: int, rest: tuple, now: datetime | None) -> datetime | None:
    if now is None:
        return None
    stamp = utc_stamp(now.year, month, *rest)
    if stamp is not None and stamp > now + timedelta(days=1):
        stamp = utc_stamp(now.year - 1, month, *rest)
    return stamp


def line_time(line: str, now: datetime | None = None) -> datetime | None:
    """The time printed at the start of `line`, or None."""
    head = line[:HEAD]
    if "-" in head:
        iso = _ISO.search(head)
        if iso:
            return utc_stamp(*iso.groups())
    if ":" not in head:
        return None
    glog = _GLOG.search(head)
    if glog:
        month, day, hour, minute, second, fraction = glog.groups()
        return _with_year(int(month), (day, hour, minute, second, fraction), now)
    ctime = _CTIME.search(head)
    if ctime and ctime.group(1) in _MONTHS:
        month = _MONTHS[ctime.group(1)]
        rest = ctime.group(2, 3, 4, 5)
        if ctime.group(6):
            return utc_stamp(ctime.group(6), month, *rest)
        return _with_year(month, (*rest, None), now)
    syslog = _SYSLOG.match(head)
    if syslog and syslog.group(1) in _MONTHS:
        return _with_year(_MONTHS[syslog.group(1)], (*syslog.group(2, 3, 4, 5), None), now)
    return None
