"""A FIFO (or any non-regular file) as a node's key path hung the web request that saved the
node, and the worker that used it: both opened it and waited for a writer. Now it is looked
at before it is read, without waiting."""

from __future__ import annotations

import os
import threading

import pytest
from django.core.exceptions import ValidationError

from clusters.sshspec import private_key_problem
from collectors.remote import CollectionError

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvMWB+brretqGfLz6OJdOfzHeoYv4p+Xobv7TaQ26J1"


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "id_ed25519"
    os.mkfifo(path)
    yield str(path)
    # A reader still blocked on it (the old code) is let go: opening the write end wakes it.
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK) if _has_reader(path) else None
    if fd is not None:
        os.close(fd)


def _has_reader(path) -> bool:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        return True
    except OSError:  # ENXIO: nobody has it open for reading
        return False


def _within(seconds: float, call):
    """call() in a thread; (finished, result or exception)."""
    outcome: list = []

    def run():
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return (not thread.is_alive()), (outcome[0] if outcome else None)


def test_saving_a_node_with_a_fifo_as_its_key_answers_at_once(cluster, fifo):
    from clusters.services import node_create

    finished, result = _within(5, lambda: node_create(
        cluster=cluster, name="gpu-9", address="127.0.9.9", port=22, username="root",
        key_path=fifo, host_key=HOST_KEY,
    ))  # fmt: skip
    assert finished, "saving the node hung on the FIFO"
    assert isinstance(result, ValidationError) and "not a regular file" in str(result)


def test_the_worker_refuses_a_fifo_key_at_once(fifo):
    from collectors.remote import _load_client_key

    finished, result = _within(5, lambda: _load_client_key(fifo))
    assert finished, "the worker hung on the FIFO"
    assert isinstance(result, CollectionError) and "not a regular file" in str(result)


def test_devices_and_directories_are_not_keys(tmp_path):
    assert "not a regular file" in private_key_problem("/dev/zero")
    assert "not a regular file" in private_key_problem(str(tmp_path))
    assert private_key_problem(str(tmp_path / "absent")) is None  # maybe on the worker only
