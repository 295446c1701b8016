"""{% guided_workflow as g %}: the guided panel's content, from what the incident page already
has in its context (incident, snapshot, events, user), so the page's view needs no change."""

from django import template

from pages.guided import guided_context

register = template.Library()


@register.simple_tag(takes_context=True)
def guided_workflow(context):
    incident = context.get("incident")
    if incident is None:
        return None
    events = context.get("events")
    events = list(events) if events is not None else list(incident.events.order_by("at", "pk"))
    # The snapshot whose verdict the page shows (the newest may still be running).
    snapshot = context.get("diagnosed") or context.get("snapshot")
    return guided_context(incident, snapshot, events, context.get("user"))
