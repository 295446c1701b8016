"""The NCCL / PyTorch process-group line parsers on published lines, near misses and hostile input.

Every positive case reads a verbatim line from tests/analysis/samples/public/nccl_wild/, one
file per source, whose first line names the URL it was copied from.
"""

import pytest

from analysis.parsers.nccl import (
    LINE_CAP,
    CollectiveFact,
    collective_facts,
    comm_init_fact,
    nccl_config_fact,
    peer_fact,
    slow_facts,
)
from tests.analysis.sample_evidence import SAMPLES

WILD = SAMPLES / "public" / "nccl_wild"


def wild(name: str) -> list[str]:
    """The published lines of one sample file, without its `# source:` header."""
    text = (WILD / name).read_text().splitlines()
    assert text[0].startswith("# source: https://")
    return text[1:]


def only(facts: list[CollectiveFact]) -> CollectiveFact:
    assert len(facts) == 1, facts
    return facts[0]


def test_every_sample_file_names_its_source():
    names = sorted(p.name for p in WILD.glob("*.log"))
    assert len(names) >= 30
    for name in names:
        assert len(wild(name)) >= 1


# --- collective_facts: the watchdog in its several PyTorch versions ---------------------------


def test_it_reads_the_work_nccl_timeout_with_numel():
    fact = only(collective_facts(wild("watchdog_basicsr_737.log")[0]))
    assert fact.source == "watchdog"
    assert (fact.rank, fact.seq, fact.op) == (1, 808, "ALLREDUCE")
    assert (fact.numel_in, fact.numel_out, fact.timeout_ms) == (9801523, 9801523, 600000)
    assert fact.pg is None  # this wording does not say which group


def test_it_reads_the_pg_id_guid_desc_queue_state():
    fact = only(collective_facts(wild("watchdog_basicsr_737.log")[1]))
    assert (fact.rank, fact.pg, fact.seq) == (1, "0", 808)
    assert (fact.last_enqueued, fact.last_completed) == (811, 807)
    assert fact.op is None


def test_it_reads_the_old_watchdog_without_rank_prefix_or_numel():
    fact = only(collective_facts(wild("watchdog_ofa_271.log")[0]))
    assert (fact.rank, fact.seq, fact.op, fact.timeout_ms) == (1, 469508, "ALLREDUCE", 1800000)
    assert fact.numel_in is None and fact.numel_out is None


def test_it_reads_failure_detected_with_pg_status():
    fact = only(collective_facts(wild("watchdog_nccl_1730.log")[0]))
    assert (fact.rank, fact.pg, fact.seq) == (118, "0", 2398459)
    assert (fact.last_enqueued, fact.last_completed) == (2398578, 2398458)


def test_it_reads_pg_number_rank_and_a_line_counter_prefix():
    timeout, queue = wild("watchdog_llamafactory_7396.log")
    assert only(collective_facts(timeout)).rank == 0
    fact = only(collective_facts(queue))
    assert (fact.rank, fact.pg, fact.seq, fact.last_enqueued, fact.last_completed) == (
        0,
        "1",
        1580,
        1582,
        1579,
    )


def test_it_reads_underscore_ops_and_timeout_at_nccl_work():
    timeout, queue = wild("watchdog_llamafactory_6269.log")
    fact = only(collective_facts(timeout))
    assert (fact.op, fact.numel_in, fact.numel_out) == ("_REDUCE_SCATTER_BASE", 544997376, 68124672)
    fact = only(collective_facts(queue))
    assert (fact.rank, fact.pg, fact.seq, fact.last_enqueued, fact.last_completed) == (
        2,
        "1",
        7753,
        7755,
        7752,
    )


def test_it_takes_the_group_from_the_terminated_watchdog_prefix():
    fact = only(collective_facts(wild("watchdog_sglang_1693.log")[0]))
    assert (fact.rank, fact.pg, fact.seq, fact.op) == (5, "3", 9141, "_ALLGATHER_BASE")
    assert (fact.numel_in, fact.numel_out) == (19008, 152064)


def test_it_reads_the_torch_2_3_pg_number_forms():
    queue, terminated = wild("watchdog_vllm_5458.log")
    fact = only(collective_facts(queue))
    assert (fact.rank, fact.pg, fact.seq, fact.last_enqueued, fact.last_completed) == (
        3,
        "0",
        1,
        1,
        0,
    )
    fact = only(collective_facts(terminated))
    assert (fact.rank, fact.pg, fact.seq, fact.op) == (3, "0", 1, "ALLREDUCE")


def test_it_keeps_a_negative_last_completed_and_coalesced_ops():
    queue, terminated = wild("watchdog_nccl_1504.log")
    fact = only(collective_facts(queue))
    assert (fact.seq, fact.last_enqueued, fact.last_completed) == (1, 1, -1)
    fact = only(collective_facts(terminated))
    assert (fact.op, fact.numel_in) == ("COALESCED", 18446744073709551615)


def test_it_prefers_the_global_rank_prefix_over_the_group_rank():
    # "[rank13]" is the process, "Rank 1" its rank within PG 3
    timeout, queue = wild("watchdog_prime_rl_3186.log")
    fact = only(collective_facts(timeout))
    assert (fact.rank, fact.op, fact.seq) == (13, "ALLTOALL_BASE", 1438)
    fact = only(collective_facts(queue))
    assert (fact.rank, fact.pg, fact.seq, fact.last_enqueued, fact.last_completed) == (
        13,
        "3",
        1438,
        1441,
        1437,
    )


def test_it_reads_a_subgroup_with_a_numeric_guid():
    timeout, exception, queue = wild("watchdog_diffsynth_458.log")
    assert only(collective_facts(timeout)).pg is None
    for line in (exception, queue):
        fact = only(collective_facts(line))
        assert (fact.rank, fact.pg, fact.seq, fact.last_enqueued, fact.last_completed) == (
            4,
            "2",
            610,
            616,
            609,
        )


def test_it_reads_the_queue_of_a_dump_signal_line():
    fact = only(collective_facts(wild("watchdog_simple_grpo_46.log")[0]))
    assert (fact.rank, fact.pg, fact.seq) == (5, "0", None)
    assert (fact.last_enqueued, fact.last_completed) == (136, 136)


def test_it_caps_the_stored_line():
    line = wild("watchdog_simple_grpo_46.log")[0] + " x" * 2000
    fact = only(collective_facts(line))
    assert len(fact.line) == LINE_CAP


# --- collective_facts: desync report and DETAIL fingerprints ----------------------------------


def test_it_reads_the_desync_report():
    header, timeout, preamble, lagging = wild("desync_pytorch_152623.log")
    assert collective_facts(header) == []
    assert collective_facts(preamble) == []
    fact = only(collective_facts(timeout))
    assert (fact.source, fact.rank, fact.op, fact.seq, fact.last_enqueued) == (
        "desync",
        0,
        "ALLREDUCE",
        315,
        315,
    )
    fact = only(collective_facts(lagging))
    # finished 182 and never joined 183: stuck short of 183, outside any collective
    assert (fact.rank, fact.seq, fact.last_enqueued, fact.last_completed) == (7, 183, 182, 182)


def test_it_reads_a_desync_line_without_count_from_one():
    fact = only(collective_facts(wild("desync_nccl_2213.log")[0]))
    assert (fact.rank, fact.seq, fact.last_completed) == (1, 1155874, 1155873)


def test_it_reads_every_rank_a_desync_line_lists():
    # Same wording as the samples, several ranks (TraceUtils.h ranksToString joins with ", ").
    facts = collective_facts("\t   - [1, 3] joined but didn't finish collective #5 (count from 1)")
    assert [(f.rank, f.seq, f.last_enqueued, f.last_completed) for f in facts] == [
        (1, 5, 5, 4),
        (3, 5, 5, 4),
    ]
    facts = collective_facts(
        "\t - To our best knowledge, ranks [2, 6] are the lagging ranks that caused this "
        "timeout. They never joined any collectives"
    )
    assert [(f.rank, f.last_completed) for f in facts] == [(2, 0), (6, 0)]


def test_it_reads_both_ranks_of_a_short_fingerprint():
    facts = collective_facts(wild("detail_pytorch_148976.log")[0])
    assert [(f.source, f.rank, f.seq, f.op) for f in facts] == [
        ("detail", 1, 1, "BARRIER"),
        ("detail", 2, 0, "BARRIER"),
    ]


def test_it_reads_shapes_and_dtypes_of_full_fingerprints():
    facts = collective_facts(wild("detail_speechbrain_2401.log")[0])
    assert [(f.rank, f.seq, f.op, f.shapes, f.dtype) for f in facts] == [
        (1, 485, "ALLREDUCE", "[25]", "Float"),
        (0, 485, "BROADCAST", "[1]", "Long"),
    ]
    facts = collective_facts(wild("detail_ms_swift_9443.log")[0])
    assert [(f.rank, f.shapes, f.dtype) for f in facts] == [
        (1, "[195812480]", "BFloat16"),
        (0, "[51123456]", "BFloat16"),
    ]


def test_it_reads_mixed_full_and_short_fingerprints():
    facts = collective_facts(wild("detail_pytorch_pr_100213.log")[0])
    assert [(f.rank, f.seq, f.op, f.shapes) for f in facts] == [
        (26, 683057617, "BROADCAST", "[1]"),
        (1, 513876813, "BROADCAST", None),
    ]


def test_it_reads_the_oldest_inconsistent_collective_form():
    fact = only(collective_facts(wild("detail_pytorch_pr_79724.log")[0]))
    assert (fact.rank, fact.seq, fact.op) == (3, None, "BARRIER")


# --- peer_fact ---------------------------------------------------------------------------------


def test_it_blames_the_ib_peer_of_a_completion_error():
    fact = peer_fact(wild("peer_nccl_ib_1405.log")[0])
    assert (fact.peer_addr, fact.peer_host, fact.peer_rank) == ("10.216.210.236", None, None)
    assert fact.reason == "remote process exited or network error"
    assert peer_fact(wild("peer_nccl_ib_1405.log")[1]) is None


def test_it_strips_port_and_scope_of_an_ipv6_peer():
    fact = peer_fact(wild("peer_nccl_ib_928.log")[0])
    assert fact.peer_addr == "fe80::966d:ae03:8b:df78"


def test_it_reads_older_ib_wording_and_ignores_service_thread_closes():
    error, service = wild("peer_nccl_tests_252.log")
    assert peer_fact(error).peer_addr == "10.0.35.1"
    assert peer_fact(service) is None  # a local rank's proxy connection, closed at any exit


def test_it_finds_the_peer_inside_pytorchs_flattened_nccl_error():
    fact = peer_fact(wild("peer_stanford_alpaca_207.log")[0])
    assert fact.peer_addr == "11.214.147.122"


def test_it_reads_socket_closes_and_failed_connects():
    closed, connect, proxy = wild("peer_nccl_tests_166.log")
    fact = peer_fact(closed)
    assert (fact.peer_host, fact.peer_addr) == ("gpu004.ds-a4-r02.abc.com", None)
    assert fact.reason == "connection closed by peer"
    fact = peer_fact(connect)
    assert (fact.peer_addr, fact.reason) == ("10.0.0.2", "connection aborted")
    assert peer_fact(proxy) is None  # "from rank 0" there is the proxy's own rank


def test_it_blames_a_peer_only_once_connect_retries_are_exhausted():
    # No published copy of this WARN was found; built from NCCL's format in src/os/linux.cc
    # ("%s: connect to %s returned %s, exceeded error retry count after %d attempts") with the
    # peer of modelscope/ms-swift#8043's title.
    fact = peer_fact(
        "h20-1:1200:1300 [0] misc/socket.cc:590 NCCL WARN socketPollConnect: connect to "
        "169.254.20.10<52597> returned Connection refused, exceeded error retry count after 35 "
        "attempts"
    )
    assert (fact.peer_addr, fact.reason) == ("169.254.20.10", "connection refused")
    # the INFO line of each retry before that (same file) is not yet trouble
    assert (
        peer_fact(
            "h20-1:1200:1300 [0] NCCL INFO socketPollConnect: connect to 169.254.20.10<52597> "
            "returned Connection refused, retrying (1/34) after sleep for 100 msec"
        )
        is None
    )


def test_it_reads_socket_closes_by_address_and_the_older_net_wording():
    assert peer_fact(wild("peer_nccl_1612.log")[0]).peer_addr == "10.10.1.3"
    recv, closed = wild("peer_nccl_795.log")
    fact = peer_fact(recv)
    assert (fact.peer_addr, fact.reason) == ("10.200.84.247", "broken pipe")
    fact = peer_fact(closed)
    assert fact.peer_host.startswith("a100-st-p4d24xlarge-22.")
    assert fact.peer_host.endswith(".pcluster")
    assert peer_fact(wild("peer_nccl_1514.log")[0]).peer_host == "user"


def test_it_reads_gloo_peers():
    closed, reset = wild("peer_gloo_rvc_1882.log")
    fact = peer_fact(closed)
    assert (fact.peer_addr, fact.reason) == ("127.0.0.1", "connection closed by peer")
    fact = peer_fact(reset)
    assert (fact.peer_addr, fact.reason) == ("192.168.70.92", "connection reset by peer")


def test_it_names_the_rank_that_missed_the_monitored_barrier():
    barrier, gloo = wild("peer_monitored_barrier_pytorch_docs.log")
    fact = peer_fact(barrier)
    assert (fact.peer_rank, fact.reason) == (1, "did not reach the monitored barrier")
    assert peer_fact(gloo).peer_addr == "2401:db00:eef0:1100:3560:0:1c05:25d"
    # wait_all_ranks=True wording (ProcessGroupGloo.cpp): the first rank named is kept
    assert (
        peer_fact("[Rank 0]: Ranks 2, 5 failed to pass monitoredBarrier in 1000 ms").peer_rank == 2
    )


def test_it_reads_c10d_connect_timeouts():
    client, store = wild("peer_c10d_vllm_19670.log")
    for line in (client, store):
        fact = peer_fact(line)
        assert (fact.peer_addr, fact.reason) == ("172.17.0.9", "timed out")


def test_it_reads_store_peers():
    fact = peer_fact(wild("peer_store_kaito_135.log")[0])
    assert (fact.peer_rank, fact.reason) == (0, "timed out")
    fact = peer_fact(wild("peer_store_pytorch_pr_153586.log")[0])
    assert (fact.peer_host, fact.reason) == ("localhost", "connection closed by peer")


def test_a_dump_signal_from_another_rank_is_not_blame():
    # The rank named there is the first to see the timeout, usually a victim.
    assert peer_fact(wild("watchdog_simple_grpo_46.log")[0]) is None


@pytest.mark.parametrize(
    "line",
    [
        "node0:13571:13571 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
        "gpu01:351578:351578 [0] NCCL INFO Call to connect returned Connection refused, retrying",
        "[03/16][2025-02-25 15:46:48,390] [misc/socket.cc:551] [s11gn1268:pid=3987720] NCCL INFO "
        "socketPollConnect: connect returned Connection timed out, retrying (1/34) after sleep "
        "for 100 msec",
        "[/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
        "1800000ms for recv operation to complete",
        "RuntimeError: Socket Timeout",
        "Rank 0: Completed store-based barrier for key:store_based_barrier_key:1 with 2 nodes.",
        "curl: (7) Failed to connect to example.com port 443 after 5 ms: Couldn't connect",
        "Connection closed by peer",
        "",
    ],
)
def test_it_blames_no_peer_on_ordinary_lines(line):
    assert peer_fact(line) is None


# --- nccl_config_fact --------------------------------------------------------------------------


def test_it_reads_a_roce_host_and_the_bare_version_banner():
    lines = wild("config_nccl_tests_185.log")
    facts = [nccl_config_fact(line) for line in lines]
    got = [(f.host, f.key, f.value, f.addresses) if f else None for f in facts]
    assert got == [
        ("dgxh100-4", "bootstrap", "enp220s0np0", ("11.1.128.136",)),
        ("dgxh100-4", "net_plugin", "internal", ()),
        ("dgxh100-4", "cuda_driver", "12000", ()),
        (None, "version", "2.19.3+cuda12.3", ()),
        (
            "dgxh100-4",
            "interfaces",
            "IB mlx5_10:1/RoCE mlx5_11:1/RoCE [RO]; OOB enp220s0np0",
            ("11.1.128.136",),
        ),
        None,  # "Using non-device net plugin version 0"
        ("dgxh100-4", "net", "IB", ()),
        ("dgxh100-3", "net_plugin", "internal", ()),
        ("dgxh100-3", "net_plugin", "internal", ()),
        (
            "dgxh100-3",
            "interfaces",
            "IB mlx5_10:1/RoCE mlx5_11:1/RoCE [RO]; OOB enp220s0np0",
            ("11.1.128.128",),
        ),
    ]


def test_equal_setups_on_two_hosts_compare_equal():
    lines = wild("config_nccl_tests_185.log")
    a, b = nccl_config_fact(lines[4]), nccl_config_fact(lines[9])
    assert a.host != b.host and a.addresses != b.addresses
    assert (a.key, a.value) == (b.key, b.value)


def test_it_reads_the_2_21_plugin_wording():
    facts = [nccl_config_fact(line) for line in wild("config_nccl_1504.log")]
    assert [(f.key, f.value) for f in facts] == [
        ("bootstrap", "eth0"),
        ("net_plugin", "internal"),
        ("net_plugin", "internal"),
        ("net_plugin", "internal"),
        ("cuda_driver", "12040"),
        ("version", "2.21.5+cuda12.4"),
    ]
    assert facts[0].host == "678c7278cb2d" and facts[0].addresses == ("172.17.2.7",)


def test_it_reads_a_loaded_external_plugin():
    facts = [nccl_config_fact(line) for line in wild("config_nccl_1357.log")]
    got = [(f.key, f.value) if f else None for f in facts]
    assert got == [
        ("net", "IBext"),
        (
            "interfaces",
            "IB mlx5_0:1/IB/SHARP mlx5_1:1/IB/SHARP mlx5_4:1/IB/SHARP "
            "mlx5_5:1/IB/SHARP [RO]; OOB ibp25s0",
        ),
        None,  # "Failed to find ncclNetPlugin_v8 symbol." is a probe, not a choice
        ("net_plugin", "NCCL RDMA Plugin v6 (v6)"),
        ("net_plugin", "collnet:SHARP (v6)"),
        ("net_plugin", "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"),
    ]


def test_it_reads_socket_interfaces_and_leaves_env_lines_to_logs_py():
    facts = [nccl_config_fact(line) for line in wild("config_nccl_tests_188.log")]
    assert facts[2] is None  # NCCL_IB_DISABLE set by environment
    assert (facts[3].key, facts[3].value, facts[3].addresses) == (
        "interfaces",
        "Socket ibs85f0 ib0",
        ("192.168.1.14", "192.168.1.15"),
    )
    assert (facts[4].key, facts[4].value) == ("net", "Socket")
    assert facts[1].value == "ibs85f0" and facts[1].host == "user"


def test_it_reads_the_2_11_wording():
    facts = [nccl_config_fact(line) for line in wild("config_nccl_687.log")]
    assert [(f.key, f.value) for f in facts] == [
        ("bootstrap", "ib0"),
        ("net_plugin", "internal"),
        ("interfaces", "IB mlx5_10:1/IB mlx5_11:1/IB mlx5_12:1/IB mlx5_13:1/IB; OOB ib0"),
        ("version", "2.11.4+cuda11.4"),
        ("net_plugin", "internal"),
    ]
    assert facts[2].addresses == ("10.1.21.11",)


def test_it_reads_the_host_behind_a_line_counter():
    fact = nccl_config_fact(wild("config_nccl_302.log")[0])
    assert fact.host == "crow-ib-new-nccl-256-info-19"
    assert fact.addresses == ("10.100.62.64",)


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("config_nccl_1814.log", 1),  # NCCL_SOCKET_IFNAME set by environment: logs.py's
        ("config_nccl_1267.log", 0),  # comm ... Init START
        ("config_nccl_1514.log", 0),  # "NCCL version 2.14.3" inside PyTorch's error text
    ],
)
def test_it_reads_no_config_from_other_nccl_lines(name, index):
    assert nccl_config_fact(wild(name)[index]) is None


def test_it_reads_interface_aliases_and_ipv6_bootstrap_addresses():
    # NCCL's own format "Bootstrap : Using <ifname>:<addr><port>" (bootstrap.cc)
    fact = nccl_config_fact("h:1:1 [0] NCCL INFO Bootstrap : Using eno1:avahi:10.0.0.7<0>")
    assert (fact.value, fact.addresses) == ("eno1:avahi", ("10.0.0.7",))
    fact = nccl_config_fact("h:1:1 [0] NCCL INFO Bootstrap: Using ib0:fe80::1%ib0<0>")
    assert (fact.value, fact.addresses) == ("ib0", ("fe80::1",))


# --- slow_facts --------------------------------------------------------------------------------


def test_it_names_megatrons_longest_round_trip_rank():
    summary, bottom, top = wild("slow_megatron_readme_straggler.log")
    facts = slow_facts(summary)
    assert [(f.rank, f.source, f.value) for f in facts] == [(0, "megatron", 3468.20)]
    facts = slow_facts(bottom)
    assert [(f.rank, f.value) for f in facts] == [
        (0, 296.02),
        (2, 296.17),
        (1, 296.23),
        (4, 296.23),
    ]
    assert slow_facts(top) == []


def test_it_reads_nvrx_straggler_warnings():
    lines = wild("slow_megatron_bridge_resiliency.log")
    assert [slow_facts(line) for line in lines[:5]] == [[], [], [], [], []]  # tables: best & worst
    assert [f.rank for f in slow_facts(lines[5])] == [76, 13, 45]
    assert [(f.rank, f.source, f.value) for f in slow_facts(lines[6])] == [
        (162, "nvrx", None),
        (79, "nvrx", None),
        (357, "nvrx", None),
    ]


def test_it_reads_nvrx_straggler_ids():
    # The callback prints the set of StragglerId dataclasses (nvidia-resiliency-ext
    # ptl_resiliency/straggler_det_callback.py, attribution/straggler/reporting.py).
    line = (
        "STRAGGLER DETECTION WARNING: Some GPUs have worse relative performance. Affected ranks: "
        "{StragglerId(rank=3, node='node-1'), StragglerId(rank=12, node='node-2')}"
    )
    assert sorted(f.rank for f in slow_facts(line)) == [3, 12]


# --- nothing from noise, and bounded on hostile input ------------------------------------------

NOISE = [
    "",
    " iteration       10/ 1000000 | consumed samples:           40 | elapsed time per iteration "
    "(ms): 356.2 | learning rate: 0.000E+00 |",
    "node2:22555:22555 [0] NCCL INFO Connected all rings",
    "[rank1]:[E813 12:25:30.692194747 ProcessGroupNCCL.cpp:670] Stack trace of the failed "
    "collective not found, potentially because FlightRecorder is disabled. You can enable it by "
    "setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.",
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL",
    "Traceback (most recent call last):",
    "the job finished collective #work today",
    "Rank 3 is running collective: something else entirely",
    "2024-01-01 12:00:00 INFO [rank3] host=h step=42 loss=1.0 step_time=0.5s",
]


@pytest.mark.parametrize("line", NOISE)
def test_noise_yields_nothing(line):
    assert collective_facts(line) == []
    assert peer_fact(line) is None
    assert nccl_config_fact(line) is None
    assert slow_facts(line) == []


def hostile(size: int) -> list[str]:
    """Lines of about `size` characters built to defeat careless regular expressions."""
    return [
        "NCCL INFO " + "a" * size,
        "CollectiveFingerPrint(" * (size // 22),
        "10." * (size // 3),
        "Rank 1 is running collective: " * (size // 30),
        "[" + "1, " * (size // 3) + "] finished collective #5, but didn't join collective #6",
        "WorkNCCL(SeqNum=" + "9" * size,
        "[PG ID 0 PG GUID " + "0" * size + " Rank 1] detected by watchdog at work: 1",
        "Got completion from peer " + "a" * size + "<1>",
        "Connection closed by peer [" + ":" * size,
        "x:1:1 [0] NCCL INFO NET/IB : Using " + "[0]mlx5_0:1/IB " * (size // 15),
        "x:1:1 [0] NCCL INFO Bootstrap : Using " + "eth0:" * (size // 5) + "<0>",
        "MxRtt/Rnk: " + "1" * size,
        "^^^^ Bottom 4 Ranks with lowest  Etpt(TF): " + "1.0/2, " * (size // 7),
        "STRAGGLER DETECTION WARNING Affected ranks: {" + "StragglerId(rank=1, " * (size // 20),
        " failed to pass monitoredBarrier" * (size // 32),
        "remote=[" * (size // 8) + " Failed to recv",
    ]


@pytest.mark.parametrize("size", [10**6, 2 * 10**6])
def test_it_survives_hostile_megabyte_lines(size):
    # Every regex in the module is linear by construction and runs on a bounded window (see the
    # module docstring), so these return promptly; wall-clock is deliberately not asserted here.
    for line in hostile(size):
        facts = collective_facts(line)
        assert len(facts) <= 1024
        assert all(len(f.line) <= LINE_CAP for f in facts)
        fact = peer_fact(line)
        assert fact is None or len(fact.line) <= LINE_CAP
        config = nccl_config_fact(line)
        assert config is None or (len(config.value) <= 200 and len(config.addresses) <= 16)
        assert len(slow_facts(line)) <= 1024


def test_comm_init_names_the_rank_pid_and_size_of_a_communicator():
    # NVIDIA/nccl#1027 (Init COMPLETE) and NVIDIA/nccl#1267 (Init START), verbatim.
    done = comm_init_fact(
        "UIBE-DC-GPUSVR-01:13313:13992 [4] NCCL INFO comm 0x55b4098c56f0 rank 4 nranks 8 "
        "cudaDev 4 nvmlDev 4 busId ce000 commId 0xb9b42cb8fce289f2 - Init COMPLETE"
    )
    assert (done.host, done.pid, done.rank, done.nranks) == ("UIBE-DC-GPUSVR-01", 13313, 4, 8)
    start = comm_init_fact(
        "instance-8g-96c-3:2744870:2745046 [0] NCCL INFO comm 0x55f08a1c83d0 rank 0 nranks 1 "
        "cudaDev 0 nvmlDev 0 busId 30 commId 0x438c8edb9fb0064f - Init START"
    )
    assert (start.pid, start.rank, start.nranks) == (2744870, 0, 1)


def test_comm_init_ignores_other_lines_and_hostile_ones():
    assert comm_init_fact("host:1:2 [0] NCCL INFO Channel 00/02 :    0   1") is None
    assert comm_init_fact("rank 3 nranks 8 - Init COMPLETE") is None  # no NCCL INFO prefix
    # Linear by construction: substring checks, then one bounded search near NCCL INFO.
    assert comm_init_fact(" - Init nranks NCCL INFO comm 0x" + "1" * 2_000_000) is None
