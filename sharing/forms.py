from __future__ import annotations

from django import forms

from .services import DEFAULT_DAYS, MAX_DAYS


class ShareLinkForm(forms.Form):
    label = forms.CharField(
        max_length=120,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "for the training team"}),
    )
    days = forms.IntegerField(
        min_value=1, max_value=MAX_DAYS, initial=DEFAULT_DAYS, label="Expires after (days)"
    )
    include_evidence = forms.BooleanField(
        required=False,
        label="Include the evidence summary (verdict, rank timeline, stack groups, env diff, "
        "evidence lines; secret-looking values masked)",
    )
