"""The diagnosis as the API serves it: every field documented in the OpenAPI schema.

The stored diagnosis is `analysis.Diagnosis.to_json()`. The API serves it read back through
`Diagnosis.from_json()`, so a diagnosis stored by an older version is served in today's shape
(analysis/schema.py); these read-only serializers describe that shape field by field.
"""

from __future__ import annotations

from rest_framework import serializers

from analysis.fr_records import FR_STOP_KINDS
from analysis.records import GroupKind, RankStatus
from analysis.schema import DIAGNOSIS_SCHEMA_VERSION
from readings import classes


def _ranks(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(), read_only=True, help_text=help_text
    )


class GpuRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    node = serializers.CharField()
    gpu = serializers.IntegerField(allow_null=True, help_text="the GPU's index on its node")
    source = serializers.ChoiceField(choices=["nvidia-smi", "dcgm"])
    reading = serializers.ChoiceField(
        choices=[
            ("spin", "flat at 100 %: NCCL busy-waiting in a collective"),
            ("idle", "0 % with memory held: stuck on the CPU side"),
            ("busy", "moving: working"),
            ("empty", "0 % and no memory: no job on it"),
            ("unknown", "no utilisation read"),
        ]
    )
    util = serializers.ListField(
        child=serializers.IntegerField(allow_null=True),
        help_text="utilisation in percent, oldest first (at most 60 cells: each the newest "
        "reading in its slice of time, null for none; points counted when untimed)",
    )
    cell_s = serializers.FloatField(
        allow_null=True, help_text="seconds each cell of util spans (null: points counted)"
    )
    memory_mib = serializers.IntegerField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True, help_text="when the reading began")
    joined_by = serializers.CharField(help_text="pid, CUDA_VISIBLE_DEVICES or LOCAL_RANK")


class EvidenceSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="stack, gpu, dmesg_oom, exit_code, watchdog, ...")
    node = serializers.CharField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    text = serializers.CharField(help_text="the line quoted from the evidence")


class AlternativeSerializer(serializers.Serializer):
    classification = serializers.ChoiceField(choices=classes.choices())
    confidence = serializers.FloatField(min_value=0, max_value=1)
    summary = serializers.CharField()
    suspect_ranks = _ranks("ranks this reading blames")
    suspect_ranks_compact = serializers.CharField(allow_blank=True)
    suspect_nodes = serializers.ListField(child=serializers.CharField())
    check = serializers.CharField(allow_blank=True, help_text="the check that would confirm it")
    rule = serializers.CharField()


class ProgressSerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=["two_snapshots", "last_step_age", "none"])
    progressing = serializers.BooleanField(
        allow_null=True, help_text="null: nothing proves the job moving or stuck"
    )
    age_s = serializers.FloatField(allow_null=True, help_text="last_step_age: since the last step")
    threshold_s = serializers.FloatField(
        allow_null=True, help_text="last_step_age: a step younger than this proves motion"
    )
    step_time_s = serializers.FloatField(
        allow_null=True, help_text="the job's median time between step lines"
    )
    advanced_ranks = serializers.CharField(
        allow_blank=True, help_text="two_snapshots: ranks whose step moved"
    )
    stacks_changed = serializers.CharField(
        allow_blank=True, help_text="two_snapshots: ranks whose stack moved"
    )
    step_before = serializers.IntegerField(allow_null=True)
    step_after = serializers.IntegerField(allow_null=True)
    note = serializers.CharField(
        required=False, allow_blank=True, help_text="why motion is proven, disproven or neither"
    )


class RankRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    node = serializers.CharField(allow_null=True)
    pid = serializers.IntegerField(allow_null=True)
    state = serializers.CharField(help_text="ps state: R/S/D/Z/T, empty when unknown")
    local_rank = serializers.IntegerField(allow_null=True)
    status = serializers.ChoiceField(choices=[s.value for s in RankStatus])
    suspect = serializers.BooleanField()
    last_step = serializers.IntegerField(allow_null=True)
    last_step_at = serializers.DateTimeField(allow_null=True)
    step_time = serializers.FloatField(allow_null=True)
    frame = serializers.CharField(allow_blank=True)
    stack_signature = serializers.CharField(allow_blank=True)
    stack_group = serializers.IntegerField(allow_null=True)
    exit_code = serializers.IntegerField(allow_null=True)
    gpu_util = serializers.IntegerField(allow_null=True)


class StackGroupSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    signature = serializers.CharField(allow_blank=True)
    frame = serializers.CharField()
    location = serializers.CharField(allow_blank=True)
    kind = serializers.ChoiceField(
        choices=[k.value for k in GroupKind],
        help_text="collective, init, outside: the innermost frame of the group's stack; the "
        "others group ranks with no stack by why",
    )
    ranks = serializers.CharField(help_text="compact: 0-6, 8-39")
    rank_list = _ranks("the group's ranks")
    rank_count = serializers.IntegerField()
    nodes = serializers.ListField(child=serializers.CharField())
    node_count = serializers.IntegerField()
    stack = serializers.ListField(child=serializers.CharField(), help_text="innermost first")


class DiffValueSerializer(serializers.Serializer):
    value = serializers.CharField()
    ranks = serializers.CharField()
    rank_count = serializers.IntegerField(required=False)
    nodes = serializers.ListField(child=serializers.CharField())
    node_count = serializers.IntegerField()


class EnvDiffSerializer(serializers.Serializer):
    name = serializers.CharField()
    values = DiffValueSerializer(many=True)
    expected_per_rank = serializers.BooleanField()


class NcclConfigDiffSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="version, net_plugin, net, interfaces, cuda_driver")
    values = DiffValueSerializer(many=True)
    minority_nodes = serializers.ListField(child=serializers.CharField())
    minority_ranks = _ranks("ranks on the nodes that differ")
    lines = serializers.ListField(child=serializers.CharField())


class ShellInitSerializer(serializers.Serializer):
    node = serializers.CharField()
    path = serializers.CharField()
    line_number = serializers.IntegerField()
    name = serializers.CharField()
    value = serializers.CharField()
    line = serializers.CharField()


class ParseProblemSerializer(serializers.Serializer):
    node = serializers.CharField()
    source = serializers.CharField()
    problem = serializers.CharField()


class FrCollectiveSerializer(serializers.Serializer):
    signature = serializers.CharField(help_text="op, sizes and dtypes as the dump records them")
    op = serializers.CharField()
    ranks = serializers.CharField(help_text="compact")
    rank_list = _ranks("the ranks that ran it")
    frame = serializers.CharField(allow_blank=True, help_text="where the job called it")
    state = serializers.CharField(
        allow_blank=True, help_text="scheduled | started | completed, as torch recorded it"
    )


class FrMismatchSerializer(serializers.Serializer):
    pg = serializers.CharField(help_text="the process group's name")
    group = serializers.CharField(help_text="its name, or name[members] for split groups")
    desc = serializers.CharField(allow_blank=True)
    members = serializers.CharField(allow_blank=True, help_text="compact")
    seq = serializers.IntegerField(help_text="its collective (or send/recv) sequence id")
    kind = serializers.ChoiceField(choices=list(FR_STOP_KINDS))
    op = serializers.CharField()
    op_index = serializers.IntegerField(help_text="the op of a coalesced group that differs")
    missing_ranks = serializers.CharField(allow_blank=True, help_text="compact")
    missing_rank_list = _ranks("members that never issued it, or left no dump")
    without_dump = _ranks("members that left no dump")
    culprits = _ranks("where the group stops")
    victims = _ranks("ranks waiting because of it")
    waiting_elsewhere = _ranks("absent members blocked in another group's op (victims)")
    detail = serializers.CharField(help_text="one sentence")
    collectives = FrCollectiveSerializer(many=True, help_text="most ranks first")
    lines = serializers.ListField(child=serializers.CharField(), help_text="the lines behind it")


class SeqRanksSerializer(serializers.Serializer):
    seq = serializers.IntegerField(allow_null=True, help_text="null: none completed")
    ranks = serializers.CharField()


class FrGroupSerializer(serializers.Serializer):
    group = serializers.CharField()
    pg = serializers.CharField()
    desc = serializers.CharField(allow_blank=True)
    members = serializers.CharField(allow_blank=True, help_text="compact")
    members_from = serializers.ChoiceField(choices=["pg_config", "world", "entries", "siblings"])


class FlightRecorderSerializer(serializers.Serializer):
    ranks_with_dumps = serializers.CharField()
    dump_count = serializers.IntegerField()
    world_size = serializers.IntegerField(allow_null=True)
    ranks_without_dump = serializers.CharField(allow_blank=True, help_text="compact")
    first_mismatch = FrMismatchSerializer(
        allow_null=True, help_text="the first stop that is not everyone waiting alike"
    )
    stops = FrMismatchSerializer(many=True, help_text="each group's stop, cause first")
    groups = FrGroupSerializer(many=True)
    last_completed_seq = SeqRanksSerializer(many=True)


class StuckCollectiveSerializer(serializers.Serializer):
    seq = serializers.IntegerField(allow_null=True)
    op = serializers.CharField(allow_null=True)
    reports = serializers.IntegerField(help_text="watchdog lines that name it")


class WatchdogSerializer(serializers.Serializer):
    stuck_collective = StuckCollectiveSerializer(allow_null=True)
    last_completed = serializers.DictField(
        child=serializers.IntegerField(), help_text="rank -> its last completed NCCL work"
    )
    lagging_ranks = _ranks("ranks whose last completed work is behind the others'")


class DiagnosisSerializer(serializers.Serializer):
    schema_version = serializers.IntegerField(
        help_text=f"{DIAGNOSIS_SCHEMA_VERSION}: diagnoses stored by older versions are served "
        "upgraded to it"
    )
    # The schema lists each code with its plain name (readings/classes.py).
    classification = serializers.ChoiceField(choices=classes.choices())
    confidence = serializers.FloatField(min_value=0, max_value=1)
    summary = serializers.CharField()
    next_steps = serializers.ListField(
        child=serializers.CharField(), help_text="what to do first, before the class's advice"
    )
    rule = serializers.CharField(
        allow_blank=True, help_text="the rule whose finding the verdict took (analysis/rules/)"
    )
    check = serializers.CharField(
        allow_blank=True, help_text="the one check that would confirm the verdict"
    )
    alternatives = AlternativeSerializer(
        many=True, help_text="other classes the evidence also supports"
    )
    findings = AlternativeSerializer(many=True, help_text="what every rule found (analysis/rules/)")
    suspect_ranks = _ranks("ranks a line of evidence blames")
    suspect_ranks_compact = serializers.CharField()
    suspect_nodes = serializers.ListField(child=serializers.CharField())
    world_size = serializers.IntegerField()
    ranks_seen = serializers.IntegerField(help_text="ranks observed and not gone")
    ranks_seen_compact = serializers.CharField()
    missing_ranks = _ranks("gone on positive evidence: not in ps, exited, reported gone")
    missing_ranks_compact = serializers.CharField()
    exited_ranks = _ranks("missing ranks with an exit code or a zombie process")
    unobserved_ranks = _ranks("ranks the evidence says nothing about: never suspects for that")
    unobserved_ranks_compact = serializers.CharField()
    last_completed_step = serializers.IntegerField(allow_null=True)
    max_step = serializers.IntegerField(allow_null=True)
    progress = ProgressSerializer()
    evidence = EvidenceSerializer(many=True)
    per_rank = RankRowSerializer(many=True)
    stack_groups = StackGroupSerializer(many=True)
    env_diffs = EnvDiffSerializer(many=True)
    nccl_config_diffs = NcclConfigDiffSerializer(many=True)
    shell_init = ShellInitSerializer(many=True)
    flight_recorder = FlightRecorderSerializer(
        allow_null=True, help_text="first unmatched collective and last completed per rank"
    )
    watchdog = WatchdogSerializer(allow_null=True, help_text="stuck collective, laggards")
    parse_problems = ParseProblemSerializer(many=True)
    collected_at = serializers.DateTimeField(allow_null=True)
    gpu_shape = GpuRowSerializer(many=True, help_text="each rank's GPU utilisation over time")
    job_started_at = serializers.DateTimeField(
        allow_null=True,
        help_text="when the job began (its first process, else its first whole log's first "
        "line); kernel and log lines stamped before it are not quoted",
    )


class DiagnosisPageSerializer(DiagnosisSerializer):
    """The diagnosis as the API serves it: whole but for its per-rank table, of which the
    first page comes (a 32,000-rank table is 12 MB of JSON); `per_rank_next` is the rest."""

    per_rank = RankRowSerializer(
        many=True,
        help_text="the per-rank table's first page: its first rows in rank order, at most the "
        "ranks endpoint's page size (all of a smaller job's)",
    )
    per_rank_total = serializers.IntegerField(help_text="rows in the whole per-rank table")
    per_rank_next = serializers.URLField(
        allow_null=True,
        help_text="the table's next page (GET .../ranks/?offset=K&limit=L); null when "
        "`per_rank` is the whole table",
    )


class RankPageSerializer(serializers.Serializer):
    """One page of the per-rank table, in rank order."""

    count = serializers.IntegerField(help_text="rows in the whole table")
    offset = serializers.IntegerField(help_text="the first row's index in the table")
    limit = serializers.IntegerField(help_text="rows asked for (at most the page size)")
    next = serializers.URLField(allow_null=True, help_text="the next page; null after the last")
    previous = serializers.URLField(allow_null=True, help_text="the page before; null on the first")
    results = RankRowSerializer(many=True)
