from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from analysis import guide

from .models import STATUS_TRANSITIONS, Cluster, Incident, Node, PostMortem, Severity, Status
from .postmortems import EDITABLE
from .validators import normalise_host_key


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


def _people():
    return get_user_model().objects.filter(is_active=True).order_by("username")


class IncidentOpenForm(forms.ModelForm):
    commander = forms.ModelChoiceField(queryset=_people(), required=False)

    class Meta:
        model = Incident
        fields = ["title", "cluster", "severity", "commander", "description"]
        widgets = {
            "title": forms.TextInput(attrs={"placeholder": "gpt-70b run 12 stuck at step 14,200"}),
            "description": forms.Textarea(attrs={"rows": 4}),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["commander"].queryset = _people()


class IncidentEditForm(forms.ModelForm):
    commander = forms.ModelChoiceField(queryset=_people(), required=False)

    class Meta:
        model = Incident
        fields = ["title", "severity", "commander", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 4})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["commander"].queryset = _people()


class StatusChangeForm(forms.Form):
    to_status = forms.ChoiceField(choices=Status.choices)
    note = forms.CharField(required=False, max_length=400)

    def __init__(self, *args, incident: Incident, **kwargs):
        super().__init__(*args, **kwargs)
        self.incident = incident

    def clean_to_status(self) -> str:
        to_status = self.cleaned_data["to_status"]
        if to_status not in STATUS_TRANSITIONS[self.incident.status]:
            allowed = ", ".join(STATUS_TRANSITIONS[self.incident.status]) or "nothing (closed)"
            raise forms.ValidationError(
                f"{self.incident.reference} is {self.incident.status}; it can move to: {allowed}."
            )
        return to_status


class NoteForm(forms.Form):
    text = forms.CharField(
        max_length=2000, widget=forms.Textarea(attrs={"rows": 2, "placeholder": "What you saw"})
    )
    pinned = forms.BooleanField(required=False)


class IncidentFilterForm(forms.Form):
    status = forms.ChoiceField(
        choices=[("", "Active"), ("all", "Any"), *Status.choices], required=False
    )
    severity = forms.ChoiceField(choices=[("", "Any"), *Severity.choices], required=False)
    cluster = forms.ChoiceField(required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = Cluster.objects.order_by("name").values_list("name", flat=True)
        self.fields["cluster"].choices = [("", "Any"), *((n, n) for n in names)]


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
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


class NodeForm(forms.ModelForm):
    class Meta:
        model = Node
        fields = ["name", "address", "port", "username", "key_path", "host_key"]
        widgets = {"host_key": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, cluster: Cluster, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.cluster = cluster

    def clean_host_key(self) -> str:
        return normalise_host_key(self.cleaned_data["host_key"])

    def clean_port(self) -> int:
        port = self.cleaned_data["port"]
        if not 1 <= port <= 65535:
            raise forms.ValidationError("A port is a number from 1 to 65535.")
        return port

    def validate_unique(self):
        # The cluster is set on the instance, not a form field, so check the pair here
        # to give the form error instead of an IntegrityError.
        name = self.cleaned_data.get("name")
        others = Node.objects.filter(cluster=self.instance.cluster, name=name)
        if self.instance.pk:
            others = others.exclude(pk=self.instance.pk)
        if name and others.exists():
            self.add_error("name", f"{self.instance.cluster.name} already has a node named {name}.")


class PostMortemForm(forms.ModelForm):
    classification = forms.ChoiceField(
        choices=[("", "—"), *guide.CLASS_NAMES.items()], required=False
    )

    class Meta:
        model = PostMortem
        fields = list(EDITABLE)
        widgets = {
            name: forms.Textarea(attrs={"rows": 3})
            for name in ("summary", "impact", "root_cause", "detection", "resolution")
        } | {"action_items": forms.Textarea(attrs={"rows": 5})}
