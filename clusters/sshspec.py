"""What a node's SSH spec must be before anyone connects: pure rules, no Django, no paramiko.

The process pattern is matched by awk on the node (POSIX ERE) and globs are expanded there
(absolute paths only): their rules live with the probe (hangdesk/plan.py). The host key is
pinned: parsed here from the known_hosts-style line an admin pastes, by the SSH wire format
(RFC 4253, 5656, 8709), down to the point on the curve. collectors/remote.py hands the parsed
key to paramiko when it connects.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import stat
from dataclasses import dataclass

# The probe's own rules (the pattern awk matches, the globs the node expands), kept with the
# probe; a node's spec must meet them.
from hangdesk.plan import (  # noqa: F401 - re-exported for the spec's readers
    DEFAULT_PROCESS_PATTERN,
    validate_glob,
    validate_process_pattern,
)

HOST_KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)

# The longest line taken as a host key: a 16384-bit RSA key is under 3 KiB of base64.
MAX_HOST_KEY_LINE = 16 * 1024


# --- the target ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeTarget:
    """Where and as whom the collector connects: a node (`Node.ssh_target()`), a scheduler's
    controller, a node a scheduler named."""

    name: str
    address: str
    port: int
    username: str
    # Private key file on the worker machine; None means "ask the ssh-agent".
    key_path: str | None
    # One known_hosts-style public key ("ssh-ed25519 AAAA..."); no key, no connection.
    host_key: str

    def to_json(self) -> dict:
        """The target as a task's JSON argument (no key material: the key stays a path)."""
        return {
            "name": self.name,
            "address": self.address,
            "port": self.port,
            "username": self.username,
            "key_path": self.key_path or "",
            "host_key": self.host_key,
        }

    @classmethod
    def from_json(cls, data: dict) -> NodeTarget:
        return cls(
            name=data["name"],
            address=data["address"],
            port=int(data["port"]),
            username=data["username"],
            key_path=data.get("key_path") or None,
            host_key=data["host_key"],
        )


# --- host keys ---------------------------------------------------------------------------


class InvalidHostKey(ValueError):
    """The text given as a host key is not one usable known_hosts-style public key."""


@dataclass(frozen=True)
class HostKey:
    key_type: str
    blob: bytes  # the key in SSH wire format, as a server presents it
    fingerprint: str

    @property
    def line(self) -> str:
        """The key as stored on a node: `type base64`, without host names or comment."""
        return f"{self.key_type} {base64.b64encode(self.blob).decode()}"


def parse_host_key(line: str) -> HostKey:
    """Parse `ssh-ed25519 AAAA... [comment]`, optionally preceded by known_hosts host names."""
    if len(line) > MAX_HOST_KEY_LINE:
        raise InvalidHostKey(f"a host key line is at most {MAX_HOST_KEY_LINE} characters")
    fields = line.strip().split()
    if fields and fields[0] not in HOST_KEY_TYPES and len(fields) >= 3:
        if fields[0].startswith("@"):
            raise InvalidHostKey(f"known_hosts markers are not supported: {fields[0]}")
        fields = fields[1:]  # drop the host-name column of a known_hosts line
    if len(fields) < 2:
        raise InvalidHostKey("expected '<key type> <base64 key>', e.g. 'ssh-ed25519 AAAA...'")
    key_type, encoded = fields[0], fields[1]
    if key_type not in HOST_KEY_TYPES:
        raise InvalidHostKey(
            f"unsupported host key type {key_type!r}; use one of {', '.join(HOST_KEY_TYPES)}"
        )
    try:
        blob = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidHostKey("the key is not valid base64") from exc
    try:
        blob = _checked_blob(key_type, blob)
    except ValueError as exc:
        raise InvalidHostKey(f"not a valid {key_type} public key ({exc})") from exc
    return HostKey(key_type=key_type, blob=blob, fingerprint=blob_fingerprint(blob))


def fingerprint(host_key_line: str) -> str:
    """OpenSSH-style SHA256 fingerprint of a known_hosts-style key line."""
    return parse_host_key(host_key_line).fingerprint


def blob_fingerprint(blob: bytes) -> str:
    """`SHA256:...` as `ssh-keygen -l` prints it, of a key in SSH wire format."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


# --- the wire format ---------------------------------------------------------------------

# NIST curves as SSH names them: field prime p, coefficient b (a = -3), coordinate bytes.
_CURVES: dict[str, tuple[int, int, int]] = {
    "nistp256": (
        2**256 - 2**224 + 2**192 + 2**96 - 1,
        int("5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b", 16),
        32,
    ),
    "nistp384": (
        2**384 - 2**128 - 2**96 + 2**32 - 1,
        int(
            "b3312fa7e23ee7e4988e056be3f82d19181d9c6efe8141120314088f5013875a"
            "c656398d8a2ed19d2a85c8edd3ec2aef",
            16,
        ),
        48,
    ),
    "nistp521": (
        2**521 - 1,
        int(
            "0051953eb9618e1c9a1f929a21a0b68540eea2da725b99b315f3b8b489918ef1"
            "09e156193951ec7e937b1652c0bd3bb1bf073573df883d2c34f1ef451fd46b503f00",
            16,
        ),
        66,
    ),
}


class _Reader:
    """Length-prefixed fields of an SSH key blob; every read is bounded by what is left."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def string(self) -> bytes:
        if len(self._data) - self._at < 4:
            raise ValueError("the key ends early")
        size = int.from_bytes(self._data[self._at : self._at + 4], "big")
        start = self._at + 4
        if size > len(self._data) - start:
            raise ValueError("the key ends early")
        self._at = start + size
        return self._data[start : self._at]

    def mpint(self) -> int:
        raw = self.string()
        if raw and raw[0] & 0x80:
            raise ValueError("a negative number")
        return int.from_bytes(raw, "big")

    def end(self) -> None:
        if self._at != len(self._data):
            raise ValueError("unexpected bytes after the key")


def _string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _mpint(value: int) -> bytes:
    return _string(value.to_bytes((value.bit_length() + 8) // 8, "big") if value else b"")


def _checked_blob(key_type: str, blob: bytes) -> bytes:
    """The blob as a server sends it (numbers in their shortest form), or ValueError."""
    reader = _Reader(blob)
    inner = reader.string()
    if inner != key_type.encode():
        raise ValueError(f"it holds a {inner[:40].decode('ascii', 'replace')!r} key")
    if key_type == "ssh-ed25519":
        if len(reader.string()) != 32:
            raise ValueError("an ed25519 key is 32 bytes")
        reader.end()
        return blob
    if key_type == "ssh-rsa":
        exponent, modulus = reader.mpint(), reader.mpint()
        reader.end()
        if modulus < 3 or not 3 <= exponent < modulus or exponent % 2 == 0:
            raise ValueError("not an RSA public key")
        return _string(inner) + _mpint(exponent) + _mpint(modulus)
    curve = key_type.removeprefix("ecdsa-sha2-")
    if reader.string() != curve.encode():
        raise ValueError("the curve does not match the key type")
    _check_point(curve, reader.string())
    reader.end()
    return blob


def _check_point(curve: str, point: bytes) -> None:
    prime, b, size = _CURVES[curve]
    if len(point) != 1 + 2 * size or point[0] != 4:
        raise ValueError("not an uncompressed curve point")
    x, y = int.from_bytes(point[1 : 1 + size], "big"), int.from_bytes(point[1 + size :], "big")
    if x >= prime or y >= prime or (y * y - (x * x * x - 3 * x + b)) % prime:
        raise ValueError(f"the point is not on {curve}")


# --- the client's private key ------------------------------------------------------------

# What a node failure and the node form say about a key no worker can use unattended.
PASSPHRASE_KEY_MESSAGE = "key is passphrase-protected; use ssh-agent or an unencrypted key"  # noqa: S105
# Private keys are a few KiB; past this the file is not read (nor taken for a key).
MAX_PRIVATE_KEY_FILE = 64 * 1024
_OPENSSH_BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
_OPENSSH_END = "-----END OPENSSH PRIVATE KEY-----"
_OPENSSH_MAGIC = b"openssh-key-v1\x00"


def private_key_is_encrypted(text: str) -> bool:
    """Whether a private key file's text is protected by a passphrase: a PKCS#8
    `ENCRYPTED PRIVATE KEY`, a legacy PEM key with `Proc-Type: 4,ENCRYPTED`, or an OpenSSH
    key whose cipher is not `none` (PROTOCOL.key: magic, then the cipher name)."""
    text = text[:MAX_PRIVATE_KEY_FILE]
    if "-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or "Proc-Type: 4,ENCRYPTED" in text:
        return True
    start = text.find(_OPENSSH_BEGIN)
    if start < 0:
        return False
    end = text.find(_OPENSSH_END, start)
    body = text[start + len(_OPENSSH_BEGIN) : end if end >= 0 else len(text)]
    try:
        data = base64.b64decode("".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    if not data.startswith(_OPENSSH_MAGIC):
        return False
    try:
        cipher = _Reader(data[len(_OPENSSH_MAGIC) :]).string()
    except ValueError:
        return False
    return cipher != b"none"


def private_key_problem(path: str) -> str | None:
    """What is wrong with the private key file at `path` for a worker that must use it
    unattended, when this process can read it (None when fine or not readable here: the
    key lives on the worker's machine, which may not be this one). A FIFO, a device or a
    directory is refused without waiting on it: opened non-blocking, looked at before read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"{path} is not a regular file: not a private key"
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            raw = handle.read(MAX_PRIVATE_KEY_FILE + 1)
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > MAX_PRIVATE_KEY_FILE:
        return f"{path} is larger than {MAX_PRIVATE_KEY_FILE // 1024} KiB: not a private key"
    if private_key_is_encrypted(raw.decode("ascii", "replace")):
        return f"{path}: {PASSPHRASE_KEY_MESSAGE}"
    return None


# --- known_hosts -------------------------------------------------------------------------

MAX_KNOWN_HOSTS_FILE = 64 * 1024 * 1024


class KnownHostsError(ValueError):
    """No usable key for a host in the operator's known_hosts file; the message says why."""


def known_host_key(text: str, host: str, port: int = 22) -> str:
    """The host key (`type base64`) that known_hosts `text` holds for `host` on `port`, as
    OpenSSH would match it: plain names and patterns (`*`, `?`, `!negation`), `[host]:port`
    for another port, hashed names (`|1|salt|hash`). A key marked @revoked is refused;
    @cert-authority lines are not host keys. Several keys: ed25519 first, then the order of
    the file. Raises KnownHostsError when there is none."""
    wanted = host if port == 22 else f"[{host}]:{port}"
    found: list[HostKey] = []
    revoked: set[bytes] = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        marker = ""
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
        names, _, key_text = line.partition(" ")
        if marker == "@cert-authority" or not _names_match(names, wanted):
            continue
        try:
            key = parse_host_key(key_text.strip())
        except InvalidHostKey:
            continue
        if marker == "@revoked":
            revoked.add(key.blob)
        else:
            found.append(key)
    usable = [k for k in found if k.blob not in revoked]
    if not usable:
        why = " (its key is marked @revoked)" if found else ""
        raise KnownHostsError(f"no host key for {wanted} in the known_hosts file{why}")
    usable.sort(key=lambda k: k.key_type != "ssh-ed25519")
    return usable[0].line


def _names_match(names: str, wanted: str) -> bool:
    if names.startswith("|1|"):
        return _hashed_match(names, wanted)
    matched = False
    for pattern in names.split(","):
        negated = pattern.startswith("!")
        if _pattern_match(pattern.lstrip("!"), wanted):
            if negated:
                return False
            matched = True
    return matched


def _pattern_match(pattern: str, text: str) -> bool:
    """OpenSSH's host patterns: `*` and `?` are wildcards, everything else (brackets of
    `[host]:port` included) is literal; host names compare without case."""
    if len(pattern) > 1024:
        return False
    regex = "".join(
        ".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower()
    )
    return re.fullmatch(regex, text.lower()) is not None


def _hashed_match(entry: str, wanted: str) -> bool:
    parts = entry.split("|")
    if len(parts) != 4:
        return False
    try:
        salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except (ValueError, binascii.Error):
        return False
    mine = hmac.new(salt, wanted.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(mine, digest)
