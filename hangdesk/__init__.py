"""The `hangdesk` command and what it shares with the console, none of it needing Django: the
bundle format (read within hostile-input limits, and written), the probe a node runs and the
reader of its frames, the evidence-kind table that names every piece of evidence.

`pip install .` installs this package and `analysis/` with the `hangdesk` entry point
(`hangdesk diagnose`, `collect`, `upload`: hangdesk/cli.py). The console's apps import it as a
floor below them (docs/architecture.md).
"""
