"""Field validators that give an SRE a clear reason, not a stack trace."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import struct

from django.core.exceptions import ValidationError

_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
HOST_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
)


def validate_remote_host(value: str) -> None:
    """An IP address or a DNS host name; nothing that could pass for an option or a path."""
    candidate = value.strip().strip("[]")
    try:
        ipaddress.ip_address(candidate)
        return
    except ValueError:
        pass
    labels = candidate.rstrip(".").split(".")
    if len(candidate) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise ValidationError(
            "%(value)s is not a host: use an IP address or a host name such as gpu-node-17.",
            params={"value": value},
            code="invalid_host",
        )


def normalise_host_key(line: str) -> str:
    """`[hosts] type base64 [comment]` -> `type base64`, or ValidationError saying what is wrong."""
    fields = line.split()
    if fields and fields[0] not in HOST_KEY_TYPES and len(fields) >= 3:
        fields = fields[1:]  # a known_hosts line: drop the host list
    if len(fields) < 2:
        raise ValidationError(
            "Paste the host key as 'ssh-ed25519 AAAA...' (one line of ssh-keyscan or known_hosts).",
            code="host_key_format",
        )
    key_type, blob = fields[0], fields[1]
    if key_type not in HOST_KEY_TYPES:
        raise ValidationError(
            "Unsupported host key type %(type)s; expected one of: %(types)s.",
            params={"type": key_type, "types": ", ".join(HOST_KEY_TYPES)},
            code="host_key_type",
        )
    try:
        raw = base64.b64decode(blob, validate=True)
        (name_length,) = struct.unpack(">I", raw[:4])
        embedded_type = raw[4 : 4 + name_length].decode("ascii")
    except (binascii.Error, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ValidationError(
            "The host key is not valid base64 key data.", code="host_key_data"
        ) from exc
    if embedded_type != key_type:
        raise ValidationError(
            "The key data is a %(embedded)s key but the line says %(type)s.",
            params={"embedded": embedded_type, "type": key_type},
            code="host_key_mismatch",
        )
    return f"{key_type} {blob}"


def validate_host_key(value: str) -> None:
    normalise_host_key(value)


def validate_process_pattern(value: str) -> None:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValidationError(
            "Not a valid regular expression: %(error)s", params={"error": exc}, code="bad_pattern"
        ) from exc
