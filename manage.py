#!/usr/bin/env python
"""Django's command line for the console.

With DJANGO_SETTINGS_MODULE unset, commands run on the production settings, which refuse to
start without their secrets; the commands that read no database (`diagnose --bundle`, `help`,
any `--help`) run on the offline settings instead, so they work on a laptop as written. A
refusal of the settings is one line on stderr (exit status 2), not a traceback.
"""

import os
import sys

# The first argument that is no option is the command (Django's own rule).
NO_DATABASE_COMMANDS = {"help", "version"}


def offline_command(argv: list[str]) -> bool:
    """Does this command line read no database (and so need no production settings)?"""
    words = [arg for arg in argv if not arg.startswith("-")]
    command = words[0] if words else None
    if command is None or command in NO_DATABASE_COMMANDS:
        return True
    if any(arg in ("-h", "--help", "--version") for arg in argv):
        return True
    return command == "diagnose" and any(
        arg == "--bundle" or arg.startswith("--bundle=") for arg in argv
    )


def main() -> None:
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        offline = offline_command(sys.argv[1:])
        os.environ["DJANGO_SETTINGS_MODULE"] = (
            "console.settings.offline" if offline else "console.settings.prod"
        )
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 - load the settings now, to refuse them in one line
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        print(f"manage.py: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
