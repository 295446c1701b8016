from __future__ import annotations

from django import forms

from .webhooks import validate_webhook_url


class WatchForm(forms.Form):
    enabled = forms.BooleanField(required=False, label="Watch this cluster")
    step_time_multiplier = forms.FloatField(
        min_value=1.5, max_value=100, initial=5.0, label="Step time multiplier",
        help_text="A last step older than this many learned step times is a hang.",
    )  # fmt: skip
    floor_s = forms.FloatField(
        min_value=1, max_value=86400, initial=120, label="Floor (s)",
        help_text="Never raise before the last step is at least this old.",
    )  # fmt: skip
    checkpoint_allowance_s = forms.FloatField(
        min_value=0, max_value=86400, initial=900, label="Checkpoint allowance (s)",
        help_text="Added while a checkpoint is being written.",
    )  # fmt: skip
    webhook_url = forms.CharField(
        required=False, max_length=500, validators=[validate_webhook_url], label="Webhook URL",
        help_text="Slack-compatible incoming webhook, told of every raise (JSON POST).",
    )  # fmt: skip
    slurm_job = forms.CharField(
        required=False, max_length=64, label="Slurm job id",
        help_text="On a Slurm cluster: the job to follow (its nodes and state each period).",
    )  # fmt: skip
    step_nodes = forms.CharField(
        required=False, max_length=2000, label="Step nodes",
        help_text="Nodes whose logs carry step lines, comma-separated; empty: learned.",
    )  # fmt: skip

    def __init__(self, *args, admin: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not admin:  # where the page goes is an admin's choice (docs/security.md)
            field = self.fields["webhook_url"]
            field.disabled = True
            field.help_text = "Set by an admin: where the watch's page goes."

    def clean_step_nodes(self) -> list[str]:
        raw = self.cleaned_data.get("step_nodes") or ""
        return sorted({name.strip() for name in raw.split(",") if name.strip()})
