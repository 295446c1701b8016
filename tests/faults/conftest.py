"""The fault suite reuses the collector suite's sshd (a real OpenSSH on loopback with its own
host key) and its fake training ranks."""

from tests.collectors.conftest import ranks, sshd  # noqa: F401  (fixtures)
