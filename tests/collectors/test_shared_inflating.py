"""A gzipped frame whose compressed bytes open as an earlier frame's did is inflated from that
frame's saved state (hangdesk/inflating.py): the very output of inflating it from its first
byte, within the same caps, whatever the bytes that follow; the frames kept are bounded."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from hangdesk import inflating
from hangdesk.frames import FrameReader
from hangdesk.inflating import MemberInflater, Remembered

# What opens every rank's dump of a 32,000-rank job: the default group's member list.
WORLD = str(list(range(32_000))).encode()


def _member(body: bytes) -> bytes:
    return gzip.compress(body, 1, mtime=0)


def _dump(rank: int) -> bytes:
    rng = random.Random(rank)
    return b"pg_config " + WORLD + b" entries " + rng.randbytes(20_000)


def _inflate(member: bytes, remembered: Remembered, *, cap: int = 1 << 22, chunk: int = 4096):
    inflater = MemberInflater(cap, remembered)
    added = sum(inflater.feed(member[at : at + chunk]) for at in range(0, len(member), chunk))
    added += inflater.finish()
    assert added == inflater.size
    return inflater


def test_a_member_opening_as_an_earlier_one_resumes_from_its_state_and_gives_the_same_output():
    remembered = Remembered()
    first, second = _member(_dump(0)), _member(_dump(1))
    assert first[:20_000] == second[:20_000]  # gzip -1 makes the same opening the same bytes
    one = _inflate(first, remembered)
    assert one.whole and one.body() == _dump(0)
    one.remember(first, one.body())
    fed = []
    real = MemberInflater._inflate

    def counted(self, data):
        fed.append(len(data))
        return real(self, data)

    MemberInflater._inflate = counted  # type: ignore[method-assign]
    try:
        for chunk in (1, 777, 4096, 1 << 20):
            fed.clear()
            two = _inflate(second, remembered, chunk=chunk)
            assert two.whole and two.body() == _dump(1)
            assert two.adler == zlib.adler32(_dump(1))
            assert sum(fed) < len(second) // 2  # most of it taken from the first member's state
    finally:
        MemberInflater._inflate = real  # type: ignore[method-assign]


def test_what_differs_after_the_shared_opening_is_read_as_it_is_bad_bytes_included():
    remembered = Remembered()
    first = _member(_dump(0))
    one = _inflate(first, remembered)
    one.remember(first, one.body())
    second = bytearray(_member(_dump(1)))
    second[len(second) - 100 : len(second) - 90] = b"\xff" * 10  # damaged past the opening
    fresh = _inflate(bytes(second), Remembered())
    resumed = _inflate(bytes(second), remembered)
    assert fresh.error is not None or not fresh.whole  # the damage is seen...
    assert (resumed.error, resumed.whole) == (fresh.error, fresh.whole)  # ... the same way
    assert resumed.body() == fresh.body()[: resumed.size]
    shorter = _member(_dump(0))[:30_000]  # the same bytes, cut short
    assert not _inflate(shorter, remembered).whole


def test_a_smaller_cap_is_kept_when_the_earlier_member_gave_more_before_its_state():
    remembered = Remembered()
    first = _member(_dump(0))
    one = _inflate(first, remembered)
    one.remember(first, one.body())
    for cap in (1_000, 50_000, len(WORLD) // 2):
        small = _inflate(_member(_dump(1)), remembered, cap=cap + 1)
        assert small.cut and small.size == cap + 1
        assert small.body() == _dump(1)[:cap]


def test_the_frame_reader_reads_the_dumps_of_a_node_the_same_with_or_without_the_states():
    members = [(f"fr.{r}", _dump(r)) for r in range(4)]
    stream = b"HDPROBE1 n\n" + b"".join(
        b"HD1 %s %d gz %d\n" % (k.encode(), len(b), len(_member(b))) + _member(b)
        for k, b in members
    ) + b"HD1 end 0\n"  # fmt: skip
    inflating.REMEMBERED.clear()
    readers = []
    for _ in range(2):  # the second time every member finds one remembered
        reader = FrameReader("n", frame_cap=1 << 22, total_cap=1 << 24)
        for at in range(0, len(stream), 65_536):
            reader.feed(stream[at : at + 65_536])
        assert reader.ended and reader.error is None
        readers.append(reader)
    for reader in readers:
        assert reader.frames == dict(members)
        assert reader.unpacked == sum(len(b) for _, b in members)
        for _, body in members:
            assert zlib.decompress(reader.packed.find(body)) == body


def test_the_members_remembered_stay_in_their_budget():
    remembered = Remembered(budget=8 * 1024 * 1024)
    for rank in range(40):
        body = str(list(range(rank, rank + 60_000))).encode()
        member = _member(body)
        got = _inflate(member, remembered)
        got.remember(member, got.body())
    assert 0 < remembered._weight <= remembered.budget
    assert 1 <= len(remembered._known) < 40


@pytest.mark.parametrize("chunk", [1, 1000, 1 << 20])
def test_a_bomb_after_a_shared_opening_is_cut_at_the_cap(chunk):
    remembered = Remembered()
    body = WORLD + bytes(8 << 20)
    first = _member(WORLD + b"x" * 1000)
    one = _inflate(first, remembered)
    one.remember(first, one.body())
    bomb = _inflate(_member(body), remembered, cap=(1 << 20) + 1, chunk=chunk)
    assert bomb.cut and bomb.size == (1 << 20) + 1 and bomb.body() == body[: 1 << 20]
