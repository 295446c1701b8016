"""What the incidents app tells the floors above it, without importing them."""

from django.dispatch import Signal

# Sent (incident=...) once an incident's move to resolved or closed is committed: the watch
# resolves the pagers its raises paged (watch/apps.py).
incident_resolved = Signal()
