"""`python -m hangdesk ...`: the same as the `hangdesk` command."""

from hangdesk.cli import run

run()
