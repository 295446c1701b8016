"""What the clusters app tells the floors above it, without importing them."""

from django.dispatch import Signal

# Sent (node=...) once a node's connection fields were saved by an admin's hand (the form, the
# API, a cluster import): collectors checks the connection in the background. Nodes a
# scheduler registers for a snapshot are not sent: the snapshot itself is their check.
node_connection_changed = Signal()
