from __future__ import annotations

from django import forms

from .webhooks import validate_webhook_url

PAGER_FIELDS = ("pagerduty_routing_key", "opsgenie_api_key")


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
    init_threshold_s = forms.FloatField(
        required=False, min_value=1, max_value=86400, initial=600, label="Init threshold (s)",
        help_text="No first step this long after the training processes started is an init "
        "hang; the floor instead once every rank is seen inside init_process_group.",
    )  # fmt: skip
    webhook_url = forms.CharField(
        required=False, max_length=500, validators=[validate_webhook_url], label="Webhook URL",
        help_text="Slack-compatible incoming webhook, told of every raise (JSON POST).",
    )  # fmt: skip
    # Secrets: never shown back (the inputs come back empty); an empty input keeps the key.
    pagerduty_routing_key = forms.CharField(
        required=False, max_length=64, label="PagerDuty routing key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Events API v2 integration key: each raise triggers an alert (one per "
        "incident), resolved when the incident is. Empty: keep the one set.",
    )  # fmt: skip
    opsgenie_api_key = forms.CharField(
        required=False, max_length=128, label="Opsgenie API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="An API integration's key: each raise opens an alert, closed when the "
        "incident resolves. Empty: keep the one set.",
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
            for name in PAGER_FIELDS:
                self.fields[name].disabled = True
                self.fields[name].help_text = "Set by an admin."

    def clean_step_nodes(self) -> list[str]:
        raw = self.cleaned_data.get("step_nodes") or ""
        return sorted({name.strip() for name in raw.split(",") if name.strip()})
