"""`hangdesk`: the console's analysis and its node probe on the command line, no Django.

    hangdesk diagnose BUNDLE|DIR [--previous BUNDLE] [--json|--markdown]
    hangdesk collect [--out FILE] [--logs GLOB]... [--flight-recorder GLOB]... [--pattern ERE]
    hangdesk upload FILE|- --incident ID [--url URL] [--token TOKEN]

Every subcommand imports only what it runs (the analysis for `diagnose`, the probe for
`collect`, urllib for `upload`): start-up is part of the 0.5 s `diagnose` takes on 8 ranks.
Exit statuses: hangdesk/report.py (`diagnose`), hangdesk/collect.py and hangdesk/upload.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

VERSION = "0.1.0"
EXIT_USAGE = 2

DIAGNOSE_EPILOG = """\
exit status: 0 the job moves (healthy, or a straggler); 1 it is stuck (A, B, C, init);
3 the evidence does not decide (unknown); 2 the bundle cannot be read.
Secrets in the evidence are masked ([REDACTED:1a2b3c4d]) in every output."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hangdesk",
        description="Diagnose hung distributed training jobs from evidence bundles; gather "
        "a node's evidence; send it to a hangdesk console.",
    )
    parser.add_argument("--version", action="version", version=f"hangdesk {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    diagnose = commands.add_parser(
        "diagnose",
        help="analyse a bundle offline: verdict, suspects, evidence",
        description="Analyse an evidence bundle (a .tar.gz from `hangdesk collect` or a "
        "console's 'Download bundle', or a directory laid out the same way). No database, no "
        "network.",
        epilog=DIAGNOSE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diagnose.add_argument("bundle", type=Path, metavar="BUNDLE|DIR")
    diagnose.add_argument(
        "--previous", type=Path, metavar="BUNDLE", help="an earlier bundle: slow or dead?"
    )
    output = diagnose.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="the whole diagnosis as JSON")
    output.add_argument("--markdown", action="store_true", help="a report to paste in a ticket")

    collect = commands.add_parser(
        "collect",
        help="gather this node's evidence into a bundle",
        description="Run the console's probe on this node (ranks and their environments, "
        "py-spy stacks, dmesg, nvidia-smi sampled over a short window, logs, flight-recorder "
        "dumps, NCCL settings in shell start-up files, system facts), every step bounded, and "
        "write one bundle.",
        epilog="exit status: 0 complete; 1 partial (the bundle says what is missing); "
        "2 nothing gathered or a bad setting.",
    )
    collect.add_argument("--out", default="-", help="bundle file (default: standard output)")
    collect.add_argument("--node", help="this node's name in the bundle (default: its hostname)")
    collect.add_argument(
        "--logs", action="append", metavar="GLOB", help="training and NCCL logs (repeatable)"
    )
    collect.add_argument(
        "--flight-recorder", action="append", metavar="GLOB", help="PyTorch flight-recorder dumps"
    )
    collect.add_argument("--pattern", help="POSIX ERE matched against process command lines")
    collect.add_argument("--py-spy", dest="pyspy", help="py-spy as invoked here (default: py-spy)")
    collect.add_argument("--world-size", type=int, help="the job's total number of ranks")
    collect.add_argument("--timeout", type=float, help="seconds for the whole probe (default 60)")

    upload = commands.add_parser(
        "upload",
        help="send a bundle to a console's incident",
        description="Send a bundle (`-`: standard input) to a hangdesk console, into the "
        "incident's snapshot that waits for its nodes.",
        epilog="The console's address and the token come from --url / --token, or from "
        "HANGDESK_URL / HANGDESK_TOKEN. The token is the snapshot's upload token the incident "
        "page shows, or a responder's API token. Exit status: 0 stored; 1 refused or "
        "unreachable; 2 a bad command line.",
    )
    upload.add_argument("file", metavar="FILE|-")
    upload.add_argument("--incident", required=True, help="the incident: its number or INC-N")
    upload.add_argument("--url", default=os.environ.get("HANGDESK_URL", ""))
    upload.add_argument("--token", default=os.environ.get("HANGDESK_TOKEN", ""))
    upload.add_argument("--timeout", type=float, default=60.0, help="seconds per attempt")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "diagnose":
        return diagnose_command(
            args.bundle,
            previous=args.previous,
            output="json" if args.json else "markdown" if args.markdown else "text",
        )
    if args.command == "collect":
        from hangdesk.collect import collect_command

        return collect_command(args)
    from hangdesk.upload import upload_command

    return upload_command(args)


def diagnose_command(
    bundle: Path,
    *,
    previous: Path | None = None,
    output: str = "text",
    stdout=None,
    prog: str = "hangdesk diagnose",
) -> int:
    """Read, diagnose, print; the exit status says stuck, moving or undecided. Shared with
    `manage.py diagnose --bundle`, so both print the same."""
    import json

    import analysis
    from analysis.diagnosis import Diagnosis
    from hangdesk import report
    from hangdesk.bundles import BundleRefused, read_bundle
    from hangdesk.masking import masked_diagnosis
    from readings import guide

    stdout = stdout or sys.stdout
    try:
        evidence = read_bundle(_existing(bundle))
        earlier = read_bundle(_existing(previous)) if previous is not None else None
    except (BundleRefused, FileNotFoundError) as exc:
        print(f"{prog}: bundle refused: {exc}", file=sys.stderr)
        return EXIT_USAGE
    masked = masked_diagnosis(analysis.diagnose(evidence, previous=earlier))
    diagnosis = Diagnosis.from_json(masked)
    if output == "json":
        stdout.write(json.dumps(guide.reading_order(diagnosis), indent=2) + "\n")
    elif output == "markdown":
        stdout.write(report.markdown_report(diagnosis, title=evidence.cluster or bundle.name))
    else:
        stdout.write(report.text_report(diagnosis) + "\n")
    return report.exit_status(diagnosis)


def _existing(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    return path


def run() -> None:
    """The console script's entry point (`[project.scripts]`)."""
    sys.exit(main())
