"""Plain names for what the analysis says, wherever a page shows a class or a time."""

from django import template

from analysis.progress import Progress
from readings import classes, guide

register = template.Library()


@register.filter
def class_name(code: str | None) -> str:
    return guide.class_name(code or "")


@register.filter
def class_hint(code: str | None) -> str:
    return classes.reading(code).hint


@register.filter
def class_subtitle(code: str | None) -> str:
    return classes.reading(code).subtitle


@register.filter
def duration(seconds: float | None) -> str:
    return guide.duration(seconds)


@register.filter
def progress_line(progress: Progress | None) -> str:
    return guide.progress_line(progress)
