"""The one table of classes: for each class a verdict can name (analysis.verdict.CLASSES), its
code, its plain name, the sources' image as a subtitle, a one-sentence hint, the next steps, the
guided branch's title and questions, and the post-mortem's story. Pages, the API, the command
line, the guided workflow and the post-mortem draft all read a class here.

Plain names first: what the evidence shows. The sources' images ("someone did not come") are
at most a subtitle, never the name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from analysis.diagnosis import Diagnosis
from readings import questions, stories


@dataclass(frozen=True)
class ClassReading:
    code: str
    name: str
    subtitle: str
    hint: str  # one sentence, for a tooltip and the API's label help
    next_steps: tuple[str, ...]
    branch_title: str
    questions: Callable[[Diagnosis], list[dict]]
    story: Callable[[Diagnosis, str | None], str]  # (diagnosis, the cause confirmed for A)

    def label(self) -> dict[str, str]:
        """Name, subtitle and hint, for pages and the API."""
        return {"code": self.code, "name": self.name, "subtitle": self.subtitle, "hint": self.hint}


_TABLE = (
    ClassReading(
        code="A",
        name="A · a rank left or stalled outside the collective",
        subtitle="someone did not come",
        hint="One or more ranks exited, were killed or are stuck outside any collective; the others wait for them in the same collective.",
        next_steps=(
            "Read the first rank that left: its log tail and exit code (137 = SIGKILL/OOM, 139 = segfault).",
            "Read dmesg on its node: the OOM killer, NVRM Xid (79 fell off the bus, 48 ECC, 74 NVLink).",
            "If the rank is alive but outside the collective: data loading, I/O, /dev/shm, a Python lock.",
        ),
        branch_title="Someone did not come",
        questions=questions.a_questions,
        story=stories.a_story,
    ),
    ClassReading(
        code="B",
        name="B · ranks in different collectives",
        subtitle="meetings in a different order",
        hint="Every rank is alive, but they wait in different collectives (or a different op at the same sequence number): a code path differs between ranks.",
        next_steps=(
            "Find the code path that differs: a collective under `if rank == 0:`, a data-dependent branch, variable-length batches, an exception path.",
            "The flight recorder's first unmatched sequence id names the collective and the ranks.",
        ),
        branch_title="Meetings in a different order",
        questions=questions.b_questions,
        story=stories.b_story,
    ),
    ClassReading(
        code="C",
        name="C · configuration differs between ranks",
        subtitle="the dance steps differ",
        hint="Every rank is alive and in the same collective, nobody is missing: look at what differs between ranks (environment, NCCL's choices, the network).",
        next_steps=(
            "Compare the environment: NCCL_* left in /etc/profile, /etc/bashrc, ~/.bashrc by an earlier debugging session; NCCL_SOCKET_IFNAME / NCCL_IB_HCA that differ between nodes.",
            "Then the network: links, IB ports (ibstat), the interfaces NCCL chose (NET/IB : Using ...).",
        ),
        branch_title="The dance steps differ",
        questions=questions.c_questions,
        story=stories.c_story,
    ),
    ClassReading(
        code="straggler",
        name="Straggler · one rank is slow, the others wait",
        subtitle="",
        hint="The job still moves, at the pace of its slowest rank.",
        next_steps=(
            "Look at the slow rank's node: data sharding, CPU contention, NUMA, throttling, ECC, storage.",
            "The others are waiting for it in collectives; fixing the slow node fixes the job.",
        ),
        branch_title="A slow rank",
        questions=questions.straggler_questions,
        story=stories.straggler_story,
    ),
    ClassReading(
        code="init",
        name="Init / rendezvous · ranks never all arrived",
        subtitle="",
        hint="No step was completed by every rank: rendezvous or communicator set-up hangs.",
        next_steps=(
            "Check MASTER_ADDR / MASTER_PORT, DNS and the firewall; look for a duplicate node_rank.",
            "The ranks that never arrived are the ones to look at; the others wait for them.",
        ),
        branch_title="Stuck at start-up",
        questions=questions.init_questions,
        story=stories.init_story,
    ),
    ClassReading(
        code="healthy",
        name="Healthy · steps are still completing",
        subtitle="",
        hint="Steps are still completing.",
        next_steps=("Steps are still completing. Take another snapshot if the job slows again.",),
        branch_title="Not classified yet",
        questions=questions.other_questions,
        story=stories.other_story,
    ),
    ClassReading(
        code="unknown",
        name="Unknown · not enough evidence",
        subtitle="",
        hint="The evidence does not decide: collect more or take a second snapshot.",
        next_steps=(
            "Collect more: make sure py-spy can attach (root / SYS_PTRACE) and the log globs match.",
            "Take a second snapshot some seconds later to tell slow from dead.",
        ),
        branch_title="Not classified yet",
        questions=questions.other_questions,
        story=stories.other_story,
    ),
)
CLASSES: dict[str, ClassReading] = {reading.code: reading for reading in _TABLE}


def reading(code: str | None) -> ClassReading:
    """The class `code`, or for a code no verdict names, itself as its name and no advice."""
    found = CLASSES.get(code or "")
    if found is not None:
        return found
    return ClassReading(
        code=code or "",
        name=code or "",
        subtitle="",
        hint="",
        next_steps=(),
        branch_title="Not classified yet",
        questions=questions.other_questions,
        story=stories.other_story,
    )


def choices() -> list[tuple[str, str]]:
    """(code, plain name) of every class, in the verdict's order: a form's or a schema's choices."""
    return [(c.code, c.name) for c in _TABLE]
