"""Field validators that give an SRE a clear reason, not a stack trace."""

from __future__ import annotations

import ipaddress
import re

from django.core.exceptions import ValidationError

from . import sshspec

_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


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
    try:
        return sshspec.parse_host_key(line).line
    except sshspec.InvalidHostKey as exc:
        raise ValidationError(
            "Not a usable host key: %(error)s. Paste one line of ssh-keyscan or known_hosts.",
            params={"error": exc},
            code="host_key",
        ) from exc


def validate_host_key(value: str) -> None:
    normalise_host_key(value)


def validate_port(value: int) -> None:
    if not 1 <= value <= 65535:
        raise ValidationError("A port is a number from 1 to 65535.", code="port")


def validate_process_pattern(value: str) -> None:
    """Matched by awk on the nodes: a POSIX extended regular expression."""
    try:
        sshspec.validate_process_pattern(value)
    except ValueError as exc:
        raise ValidationError("%(error)s", params={"error": exc}, code="bad_pattern") from exc


def validate_globs(value: list) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError("A list of path globs is expected.", code="bad_globs")
    for pattern in value:
        try:
            sshspec.validate_glob(pattern)
        except ValueError as exc:
            raise ValidationError("%(error)s", params={"error": exc}, code="bad_glob") from exc


def validate_metrics_url(value: str) -> None:
    """A Prometheus the console will query: an http(s) URL whose host the egress policy lets
    the "metrics" purpose reach (checked again, resolved anew, on every query)."""
    from core import egress

    if not value:
        return
    if len(value) > 500 or any(c in value for c in "\r\n\t \0"):
        raise ValidationError("A Prometheus URL is one line without spaces, at most 500 chars.")
    try:
        egress.check_url(value, purpose="metrics")
    except egress.EgressRefused as exc:
        raise ValidationError(exc.reason) from None
