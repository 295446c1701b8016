"""Keys, known_hosts and sshd configuration for the lab's nodes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def keygen(path: Path, comment: str) -> str:
    """Create an ed25519 key pair at path (no passphrase); return the public key line."""
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        timeout=30,
    )
    os.chmod(path, 0o600)
    return path.with_name(path.name + ".pub").read_text().strip()


def host_key_entry(pub_line: str) -> str:
    """'ssh-ed25519 AAAA... comment' -> 'ssh-ed25519 AAAA...'."""
    kind, blob = pub_line.split()[:2]
    return f"{kind} {blob}"


def known_hosts_line(address: str, port: int, pub_line: str) -> str:
    host = address if port == 22 else f"[{address}]:{port}"
    return f"{host} {host_key_entry(pub_line)}"


def sshd_config(
    address: str, port: int, host_key: Path, authorized_keys: Path, pid_file: Path
) -> str:
    # StrictModes is off because the state dir may live under /tmp (world-writable parent).
    return f"""\
ListenAddress {address}:{port}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized_keys}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
UseDNS no
PrintMotd no
MaxStartups 200:30:400
MaxSessions 64
LogLevel INFO
Subsystem sftp /usr/lib/openssh/sftp-server
"""


def bashrc(extra_exports: dict[str, str]) -> str:
    """The node's ~/.bashrc. Exports (env-drift) sit at the top, before the interactive
    guard, the way a forgotten debugging line usually does, so every shell gets them."""
    lines = ["# ~/.bashrc: executed by bash(1) for non-login shells."]
    for key, value in extra_exports.items():
        lines.append(f"export {key}={value}  # added while debugging the IB fabric")
    lines += [
        "case $- in *i*) ;; *) return;; esac",
        "HISTCONTROL=ignoreboth",
        "PS1='\\u@\\h:\\w\\$ '",
        "alias ll='ls -l'",
    ]
    return "\n".join(lines) + "\n"
