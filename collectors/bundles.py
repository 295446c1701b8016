"""Evidence bundles as the console handles them. The format, its reader and its writer are
hangdesk/bundles.py (pure, shared with the `hangdesk` command); here a refused bundle becomes
the console's `Invalid`, which the API answers with a 400 about the upload and pages show."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

from analysis.evidence import SnapshotEvidence
from core.errors import Invalid
from hangdesk import bundles as bundle_format
from hangdesk.bundles import BundleLimits, write_bundle

__all__ = [
    "BundleLimits",
    "BundleRefused",
    "read_bundle",
    "read_bundle_bytes",
    "read_bundle_fileobj",
    "write_bundle",
]

T = TypeVar("T")


class BundleRefused(Invalid, bundle_format.BundleRefused):
    """The bundle is malformed or hostile; the message says which member and why."""

    field = "bundle"  # the upload it is about, for the API's answer


@contextmanager
def _as_console_refusal() -> Iterator[None]:
    try:
        yield
    except BundleRefused:
        raise
    except bundle_format.BundleRefused as exc:
        raise BundleRefused(str(exc)) from exc


def _read(reader: Callable[..., T], source, limits: BundleLimits | None) -> T:
    with _as_console_refusal():
        return reader(source, limits)


def read_bundle(path: Path, limits: BundleLimits | None = None) -> SnapshotEvidence:
    """A bundle file (.tar.gz / .tgz / .tar) or a directory laid out the same way."""
    return _read(bundle_format.read_bundle, path, limits)


def read_bundle_bytes(data: bytes, limits: BundleLimits | None = None) -> SnapshotEvidence:
    return _read(bundle_format.read_bundle_bytes, data, limits)


def read_bundle_fileobj(fileobj: IO[bytes], limits: BundleLimits | None = None) -> SnapshotEvidence:
    """A bundle archive from an open binary file (an upload), streamed within the limits."""
    return _read(bundle_format.read_bundle_fileobj, fileobj, limits)
