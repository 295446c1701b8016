"""Directory entries and PAX / GNU payloads in a bundle were not counted toward the unpacked
total: a 1.5 GiB payload in 11 MB was accepted through the API and the page. Every payload
counts now. Tried on a 1 MiB total (the real one is 256 MiB), with payloads of random bytes:
they compress no better than they would in an 11 MB attack, so the ratio check stays silent
and only the total can stop them."""

from __future__ import annotations

import gzip
import io
import os

import pytest

from hangdesk.tarstream import TarLimits, TarRefused, read_tar
from tests.hostile import tar_end, tar_file, tar_header

SMALL = TarLimits(max_total_bytes=1 << 20, max_pax_bytes=512 << 10, max_name_bytes=512 << 10)
PAYLOAD = 400 << 10  # three of them pass 1 MiB


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def _pax(size: int) -> bytes:
    # One well-formed record that is mostly its value: `<len> comment=<random>\n`.
    value = os.urandom(size // 2).hex().encode()[: size - 40]
    body = b" comment=" + value + b"\n"
    length = len(body) + len(str(len(body) + 7))
    record = b"%d" % length + body
    assert len(record) == length
    return tar_header(b"PaxHeader/x", len(record), b"x") + _padded(record)


@pytest.mark.parametrize(
    "entry",
    [
        lambda: tar_header(b"gpu-0/d/", PAYLOAD, b"5") + _padded(os.urandom(PAYLOAD)),
        lambda: _pax(PAYLOAD) + tar_file(b"gpu-0/ps.txt", b"x"),
        lambda: (
            tar_header(b"././@LongLink", PAYLOAD, b"L")
            + _padded(os.urandom(PAYLOAD // 2).hex().encode()[:PAYLOAD])
            + tar_file(b"gpu-0/ps.txt", b"x")
        ),
    ],
    ids=["directory data", "PAX header", "GNU long name"],
)
def test_every_payload_counts_toward_the_unpacked_total(entry):
    archive = gzip.compress(b"".join(entry() for _ in range(3)) + tar_end())
    with pytest.raises(TarRefused, match="bytes once unpacked"):
        list(read_tar(io.BytesIO(archive), SMALL))


def test_payloads_under_the_total_still_read():
    archive = gzip.compress(
        tar_header(b"gpu-0/", 0, b"5")
        + _pax(1000)
        + tar_file(b"gpu-0/ps.txt", b"PID\n")
        + tar_end()
    )
    assert [m.name for m in read_tar(io.BytesIO(archive), SMALL)] == ["gpu-0/", "gpu-0/ps.txt"]
