"""Fuzzing every parser and the bundle reader: generated inputs (hypothesis) and mutations of
the real captured samples (tests/analysis/fuzz_corpus.py). A parser reports problems and never
raises; the bundle reader refuses (BundleRefused) or reads; a diagnosis of whatever was read is
JSON. The mutation run goes in a child under RLIMIT_AS 1 GiB / RLIMIT_CPU 240 s: time and
memory are part of what is checked.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import tarfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analysis
from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.parsers.dmesg import parse_dmesg
from analysis.parsers.environ import parse_environ
from analysis.parsers.flight_recorder import MAX_TEXT_CHARS, parse_flight_recorder
from analysis.parsers.logs import parse_log
from analysis.parsers.nvidia_smi import parse_nvidia_smi
from analysis.parsers.ps import parse_ps
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.parsers.shell_init import parse_shell_init
from analysis.stacks import stack_signature
from collectors.bundles import BundleRefused, read_bundle_bytes
from hangdesk.frames import parse_probe_output
from tests import hostile
from tests.analysis.adversarial_lines import literals, module_patterns
from tests.analysis.fuzz_corpus import PARSER_MODULES, TROUBLE

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples in every CI run; a failure reproduces
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_PIECES = sorted(
    {piece for m in PARSER_MODULES for p in module_patterns(m).values() for piece in literals(p)}
    | {t.decode("utf-8", "replace") for t in TROUBLE}
    | {" ", "\n", "\t", ":", "=", "[", "]", "(", ")", "0", "7", "-1", "rank", "RANK="}
)
# Lines assembled from the parsers' own literals, with noise between them.
lines = st.lists(st.sampled_from(_PIECES) | st.text(max_size=8), max_size=40).map("".join)
texts = st.lists(lines, max_size=12).map("\n".join)


@FUZZ
@given(texts)
def test_text_parsers_never_raise(text):
    for facts in (parse_log("/var/log/train/rank3.log", text), parse_dmesg(text)):
        assert isinstance(facts.problems, list)
    parse_nvidia_smi(text)
    parse_ps(text)
    parse_shell_init(text)
    parse_environ(text.replace("\n", "\0").encode())
    threads, _ = parse_pyspy(text)
    thread = main_thread(threads)
    if thread is not None:
        stack_signature(thread.frames)


_KEYS = [
    "entries", "collective_seq_id", "p2p_seq_id", "is_p2p", "profiling_name", "input_sizes",
    "output_sizes", "state", "process_group", "frames", "name", "filename", "line", "rank",
    "pg_config", "ranks", "pg_status", "last_completed_collective", "version", "retired",
    "thread_name", "thread_id", "active", "short_filename", "time_created_ns",
]  # fmt: skip
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
)
plain = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), inner, max_size=6)
    ),
    max_leaves=60,
)
dumps = st.dictionaries(st.sampled_from(_KEYS), plain, max_size=8).map(
    lambda d: {"entries": [d, {**d, "collective_seq_id": 1}], **d}
)


@FUZZ
@given(dumps, st.integers(min_value=0, max_value=pickle.HIGHEST_PROTOCOL))
def test_flight_recorder_dumps_of_any_shape_are_read_or_reported(dump, protocol):
    for blob in (pickle.dumps(dump, protocol=protocol), json.dumps(dump).encode()):
        parsed = parse_flight_recorder("fr/trace_rank_1", blob)
        for entry in parsed.entries:
            assert len(entry.input_sizes) <= MAX_TEXT_CHARS and len(entry.op) <= MAX_TEXT_CHARS
            assert isinstance(entry.seq, int) and abs(entry.seq) < 2**63


@FUZZ
@given(st.binary(max_size=600))
def test_flight_recorder_bytes_never_raise(blob):
    parse_flight_recorder("fr/trace_rank_1", b"\x80\x02" + blob)
    parse_flight_recorder("fr/trace_rank_1", blob)


@FUZZ
@given(plain)
def test_pyspy_json_of_any_shape_never_raises(value):
    threads, _problems = parse_pyspy(json.dumps(value))
    thread = main_thread(threads)
    if thread is not None:
        assert isinstance(stack_signature(thread.frames), str)


@FUZZ
@given(st.binary(max_size=2000))
def test_probe_output_never_raises(blob):
    parse_probe_output("gpu-0", b"HD1 ps 5\n" + blob)


_segments = st.sampled_from(
    ["gpu-0", "gpu-1", "ps.txt", "dmesg.txt", "nvidia-smi.txt", "shell-init.txt", "node.json",
     "environ", "pyspy", "logs", "flight_recorder", "7", "²", "٣", "9" * 30, "..", ".", "",
     "a.json", "a.txt", "rank0.log", "trace_rank_0", "manifest.json", "\\", "x\0y"]
)  # fmt: skip
_names = st.lists(_segments, min_size=1, max_size=5).map("/".join)
_contents = st.sampled_from(
    [
        b"",
        b"[]",
        b"{}",
        b"[" * 2000,
        b'{"hostname": 5}',
        b"RANK=0\0WORLD_SIZE=2\0",
        hostile.PS_HEADER + b"7 1 S 5 python train.py\n",
        hostile.shared_reference_pickle(20),
    ]
) | st.binary(max_size=200)
_members = st.lists(
    st.tuples(_names, _contents, st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE])),
    max_size=12,
)


def _tar(members, fmt) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=fmt) as tar:
        for name, content, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.size = len(content) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(content) if kind == tarfile.REGTYPE else None)
    return buffer.getvalue()


@FUZZ
@given(_members, st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]), st.data())
def test_any_archive_is_read_or_refused_and_what_is_read_is_diagnosed(members, fmt, data):
    archive = _tar(members, fmt)
    if data.draw(st.booleans()):  # damage it too
        at = data.draw(st.integers(min_value=0, max_value=len(archive)))
        archive = archive[:at] + data.draw(st.binary(max_size=8)) + archive[at + 8 :]
    try:
        evidence = read_bundle_bytes(archive)
    except BundleRefused as refused:
        assert str(refused) and "\n" not in str(refused)
        return
    diagnosis = analysis.diagnose(evidence).to_json()
    _assert_finite(json.loads(json.dumps(diagnosis)))


def _assert_finite(value) -> None:
    """A stored diagnosis is JSONB: no inf, no NaN anywhere."""
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for item in value.values():
            _assert_finite(item)
    elif isinstance(value, list):
        for item in value:
            _assert_finite(item)


@FUZZ
@given(texts, texts, st.binary(max_size=300))
def test_a_snapshot_of_generated_evidence_is_diagnosed_as_json(log, other, environ):
    node = NodeEvidence(
        node="gpu-0",
        ps=other,
        environ={7: environ},
        pyspy={7: other},
        dmesg=log,
        nvidia_smi=other,
        logs={"/var/log/train/rank0.log": log, "/var/log/train/rank1.log": other},
        shell_init=other,
    )
    diagnosis = analysis.diagnose(SnapshotEvidence(nodes=[node], expected_world_size=2))
    _assert_finite(json.loads(json.dumps(diagnosis.to_json())))


_MUTATE = """
import json, sys
from tests.analysis import fuzz_corpus
print(json.dumps(fuzz_corpus.run(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
"""


@pytest.mark.slow
def test_mutations_of_every_captured_sample_never_escape_within_the_limits():
    done = hostile.run_limited(_MUTATE, "11", "25", "200", cpu_seconds=240, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Error" not in done.stderr, done.stderr[-3000:]  # nothing printed from a destructor
    report = json.loads(done.stdout)
    assert report["samples"] > 300 and report["runs"] > 8000
    assert report["failures"] == [], "\n\n".join(report["failures"])
