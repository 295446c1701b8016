"""The diagnosis as the API serves it: every field documented in the OpenAPI schema.

The stored diagnosis is `analysis.Diagnosis.to_json()`; these read-only serializers describe
it (and omit a field an older stored diagnosis lacks instead of failing).
"""

from __future__ import annotations

from rest_framework import serializers

from analysis import guide
from analysis.diagnosis import DIAGNOSIS_SCHEMA_VERSION
from analysis.verdict import CLASSES


def _ranks(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(), read_only=True, help_text=help_text
    )


class EvidenceSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="stack, gpu, dmesg_oom, exit_code, watchdog, ...")
    node = serializers.CharField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    text = serializers.CharField(help_text="the line quoted from the evidence")


class AlternativeSerializer(serializers.Serializer):
    classification = serializers.ChoiceField(choices=[(c, guide.class_name(c)) for c in CLASSES])
    confidence = serializers.FloatField(min_value=0, max_value=1)
    summary = serializers.CharField()
    suspect_ranks = _ranks("ranks this reading blames")
    suspect_ranks_compact = serializers.CharField()
    suspect_nodes = serializers.ListField(child=serializers.CharField())
    check = serializers.CharField(allow_blank=True, help_text="the check that would confirm it")
    rule = serializers.CharField()


class ProgressSerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=["two_snapshots", "last_step_age", "none"])
    progressing = serializers.BooleanField(
        allow_null=True, help_text="null: nothing proves the job moving or stuck"
    )
    age_s = serializers.FloatField(required=False, allow_null=True)
    threshold_s = serializers.FloatField(required=False, allow_null=True)
    step_time_s = serializers.FloatField(required=False, allow_null=True)
    advanced_ranks = serializers.CharField(required=False)
    stacks_changed = serializers.CharField(required=False)
    step_before = serializers.IntegerField(required=False, allow_null=True)
    step_after = serializers.IntegerField(required=False, allow_null=True)


class RankRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    node = serializers.CharField(allow_null=True)
    pid = serializers.IntegerField(allow_null=True)
    state = serializers.CharField(help_text="ps state: R/S/D/Z/T, empty when unknown")
    local_rank = serializers.IntegerField(allow_null=True)
    status = serializers.ChoiceField(
        choices=[
            "in_collective",
            "init",
            "outside",
            "no_stack",
            "log_only",
            "missing",
            "exited",
            "unobserved",
        ]
    )
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
    kind = serializers.CharField(
        help_text="collective, init, outside, missing, exited, no_stack, log_only, unobserved"
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


class DiagnosisSerializer(serializers.Serializer):
    schema_version = serializers.IntegerField(
        help_text=f"{DIAGNOSIS_SCHEMA_VERSION} today; absent on diagnoses stored before it"
    )
    # The schema lists each code with its plain name (guide.CLASS_NAMES).
    classification = serializers.ChoiceField(choices=[(c, guide.class_name(c)) for c in CLASSES])
    confidence = serializers.FloatField(min_value=0, max_value=1)
    summary = serializers.CharField()
    next_steps = serializers.ListField(
        child=serializers.CharField(), help_text="what to do first, before the class's advice"
    )
    rule = serializers.CharField(help_text="the rule whose finding the verdict took")
    check = serializers.CharField(
        required=False, allow_blank=True, help_text="the one check that would confirm the verdict"
    )
    alternatives = AlternativeSerializer(
        many=True, required=False, help_text="other classes the evidence also supports"
    )
    findings = AlternativeSerializer(
        many=True, required=False, help_text="what every rule found (analysis/rules/)"
    )
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
    flight_recorder = serializers.JSONField(
        allow_null=True, help_text="first unmatched collective and last completed per rank"
    )
    watchdog = serializers.JSONField(allow_null=True, help_text="stuck collective, laggards")
    parse_problems = ParseProblemSerializer(many=True)
    collected_at = serializers.DateTimeField(allow_null=True)
