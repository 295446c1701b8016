from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.core.validators import MaxLengthValidator

from clusters.models import Cluster
from readings import classes

from .models import (
    STATUS_TRANSITIONS,
    Incident,
    PostMortem,
    PostMortemStatus,
    Severity,
    Status,
)
from .postmortem_text import EDITABLE, MAX_SECTION_CHARS


def _people():
    return get_user_model().objects.filter(is_active=True).order_by("username")


class IncidentOpenForm(forms.ModelForm):
    commander = forms.ModelChoiceField(queryset=_people(), required=False)
    slurm_job = forms.CharField(
        required=False,
        max_length=64,
        label="Slurm job id",
        help_text="On a Slurm cluster: the job's id (4417203, 4417203_7, 4417203+1). Its nodes "
        "are asked of the controller and snapshot at once.",
    )
    ray_job = forms.CharField(
        required=False,
        max_length=64,
        label="Ray job",
        help_text="On a Ray cluster: the job's submission id (raysubmit_...), Ray job id or Ray "
        "Train run name. Its workers are asked of the Ray head and snapshot at once.",
    )

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
        clusters = self.fields["cluster"]
        clusters.queryset = Cluster.objects.order_by("name")
        only = list(clusters.queryset[:2])
        if len(only) == 1:  # nothing to choose: the one cluster, not "---------"
            clusters.empty_label = None
            clusters.initial = only[0].pk
        else:
            clusters.empty_label = "Choose a cluster"


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
    # What people type in a URL for "every status" and "the active ones".
    STATUS_ALIASES = {"any": "all", "*": "all", "active": ""}

    def __init__(self, data=None, *args, **kwargs):
        if data is not None and "status" in data:
            data = data.copy()
            status = data["status"].strip().lower()
            data["status"] = self.STATUS_ALIASES.get(status, status)
        super().__init__(data, *args, **kwargs)
        names = Cluster.objects.order_by("name").values_list("name", flat=True)
        self.fields["cluster"].choices = [("", "Any"), *((n, n) for n in names)]

    def chosen(self) -> dict:
        """The filters that are valid; a wrong one is dropped (and its error shown), never
        turned into a filter that silently matches nothing."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if k not in self.errors}


class PostMortemForm(forms.ModelForm):
    """The written sections (Markdown), the class, the status, and the version it started from."""

    classification = forms.ChoiceField(choices=[("", "—"), *classes.choices()], required=False)
    status = forms.ChoiceField(choices=PostMortemStatus.choices)
    base_version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=0)

    class Meta:
        model = PostMortem
        fields = list(EDITABLE)
        widgets = {
            name: forms.Textarea(attrs={"rows": 4, "class": "markdown"})
            for name in EDITABLE
            if name != "classification"
        } | {"action_items": forms.Textarea(attrs={"rows": 6, "class": "markdown"})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in EDITABLE:
            if name != "classification":
                self.fields[name].max_length = MAX_SECTION_CHARS
                self.fields[name].validators.append(MaxLengthValidator(MAX_SECTION_CHARS))
        self.fields["base_version"].initial = self.instance.version if self.instance.pk else None
        self.fields["status"].initial = self.instance.status
