"""py-spy's sampling window (`py-spy record --format raw --idle --threads`), read."""

from __future__ import annotations

from analysis.parsers.pyspy_samples import MAX_LINES, parse_samples
from tests.analysis.sample_evidence import SAMPLES

C10D = "all_reduce (torch/distributed/distributed_c10d.py:3252)"
WINDOW = (
    f"thread (7): MainThread;<module> (train.py:80);train_step (train.py:64);{C10D} 60\n"
    "thread (7): MainThread;<module> (train.py:80);train_step (train.py:60);load (data.py:9) 30\n"
    "thread (7): MainThread;<module> (train.py:80);train_step (train.py:70) 10\n"
    "thread (9): Thread-1 (_pin_memory_loop);Thread._bootstrap (threading.py:1002) 100\n"
)


def test_it_reads_the_main_threads_share_of_waiting():
    window, problems = parse_samples(WINDOW, 7)
    assert problems == []
    assert (window.samples, window.waiting) == (100, 60)
    assert window.wait_share == 0.6
    assert window.busiest == "load (data.py:9)"


def test_a_wait_on_an_asynchronous_collective_counts_as_waiting():
    text = "thread (7): MainThread;step (t.py:3);synchronize (torch/cuda/__init__.py:985) 40\n"
    text += "thread (7): MainThread;step (t.py:4);synchronize (mylib/sync.py:2) 60\n"
    window, _ = parse_samples(text, 7)
    assert window.waiting == 40  # only torch's own synchronize is a wait on the GPU


def test_the_main_thread_is_found_by_name_when_the_pid_is_not_its_id():
    window, _ = parse_samples(WINDOW.replace("thread (7)", "thread (123)"), 7)
    assert window.samples == 100 and window.waiting == 60


def test_a_window_without_threads_reads_the_process_line():
    text = f'process 7:"python train.py";<module> (train.py:80);{C10D} 5\n'
    window, _ = parse_samples(text, 7)
    assert (window.samples, window.waiting) == (5, 5)


def test_garbage_is_reported_not_believed():
    window, problems = parse_samples("not a stack\n\x00\xff 12\nthread (7): x;y 1e9\n", 7)
    assert window is None
    assert problems and "raw format" in problems[0]
    assert parse_samples("", 7) == (None, [])


def test_a_huge_window_is_read_up_to_its_bound():
    line = f"thread (7): MainThread;{C10D} 1\n"
    window, problems = parse_samples(line * (MAX_LINES + 5), 7)
    assert window.samples == MAX_LINES
    assert problems == [f"over {MAX_LINES} stacks: the rest ignored"]


def test_the_captured_straggler_rarely_waits():
    # tests/analysis/samples/straggler: rank 2 sleeps in load_batch_slowly, the rest wait.
    snap = SAMPLES / "straggler" / "snap1"
    shares = {}
    for path in snap.glob("samples_*.txt"):
        pid = int(path.stem.split("_")[1])
        rank = int((snap / f"environ_{pid}").read_bytes().split(b"RANK=")[1].split(b"\0")[0])
        window, _ = parse_samples(path.read_text(), pid)
        shares[rank] = window.wait_share
    assert shares[2] < 0.1 and min(shares[r] for r in (0, 1, 3)) > 0.8
