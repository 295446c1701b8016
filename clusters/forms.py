from __future__ import annotations

from django import forms

from .models import METRICS_FIELDS, SOURCE_FIELDS, Cluster, Node


class LinesField(forms.CharField):
    """A textarea of one item per line, cleaned to a list of stripped, non-empty lines."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(value)
        return value

    def to_python(self, value) -> list[str]:
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class ClusterForm(forms.ModelForm):
    log_globs = LinesField(required=False, help_text="One glob per line, e.g. /var/log/train/*.log")
    flight_recorder_globs = LinesField(
        required=False, help_text="One glob per line, e.g. /var/log/train/fr/*"
    )

    class Meta:
        model = Cluster
        fields = [
            "name",
            "description",
            "expected_world_size",
            "process_pattern",
            "log_globs",
            "flight_recorder_globs",
            "pyspy_command",
            *SOURCE_FIELDS,
            *METRICS_FIELDS,
        ]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "controller_host_key": forms.Textarea(attrs={"rows": 2}),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A cluster of listed nodes need not fill in a scheduler's settings: an empty field
        # keeps the model's default.
        for name in (*SOURCE_FIELDS, *METRICS_FIELDS):
            self.fields[name].required = False

    def clean(self):
        cleaned = super().clean()
        for name in (*SOURCE_FIELDS, *METRICS_FIELDS):
            if cleaned.get(name) in (None, ""):
                cleaned[name] = Cluster._meta.get_field(name).get_default()
        return cleaned


class NodeForm(forms.ModelForm):
    """The node's rules are the model's (Node.clean() and its validators), as for the API."""

    class Meta:
        model = Node
        fields = ["name", "address", "port", "username", "key_path", "host_key"]
        widgets = {"host_key": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, cluster: Cluster, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.cluster = cluster
