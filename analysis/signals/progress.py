"""Progress: any counter a training loop prints as it goes, in the forms frameworks print it.

- a named counter: `step=12`, `step: 12`, `Step 12/1000`, `global_step=99.0`, `'global_step':
  12`, `iteration 12/ 1000` (Megatron), `iter 12`, `steps: 12` (DeepSpeed), `step:  1  loss:`
  (torchtitan);
- a progress bar: tqdm's `101/1000 [00:41<06:10,  2.43it/s]` (HF Trainer, Accelerate,
  torchtune), Lightning's `Epoch 2:  45%|████▌ | 45/100 [00:10<00:12, ...]` (the count as printed:
  it starts again at 0 each epoch), or `101it [00:41, 2.43it/s]`; a named counter printed on
  the same line (`global_step=99`) is preferred to the bar;
- a trainer's metrics dict: HF Trainer's `{'loss': 1.2, 'learning_rate': 5e-05, 'epoch': 0.3}`
  (no counter of its own: the step is its `'step'` when it has one, else none, and the line
  still proves the loop ran).

Lines of a job scheduler's "steps" (Slurm job steps) and of NCCL are not training progress.
Every expression is bounded and searched in the first `HEAD` characters of a message.
"""

from __future__ import annotations

import re

HEAD = 2000

_COUNTER = re.compile(
    r"(?<![\w.\-])(global[_ ]step|steps?|iteration|iter)['\"]?\s{0,8}[:=]?\s{0,8}\[?\s{0,8}"
    r"(\d{1,12})(?:\.0)?(?![\deE%]|\.\d)",
    re.IGNORECASE,
)
_BAR = re.compile(r"(?<![\d/])(\d{1,12})/(\d{1,12}) \[(?:\d{1,4}:)?\d\d:\d\d(?:<|, )")
_BAR_NO_TOTAL = re.compile(r"(?<![\d/])(\d{1,12})it \[(?:\d{1,4}:)?\d\d:\d\d, ")
_AFTER = re.compile(r"\(after (\d{1,12}) iterations?\)")
_DICT_STEP = re.compile(r"'(?:global_)?step': (\d{1,12})\b")
# `[511/1736]`, `[ 201/5005]`, `[1400/5004 ( 28%)]`: a batch counter in brackets.
_BRACKETS = re.compile(r"\[ {0,8}(\d{1,12})/(\d{1,12})(?: \( {0,3}\d{1,3}%\))?\]")
# `Batch 15/37700`: a batch counter with its total (a bare "batch 32" is a batch size).
_BATCH = re.compile(r"\b[Bb]atch:? {1,4}(\d{1,12}) ?/ ?(\d{1,12})\b")
_NOT_TRAINING = (
    "srun",
    "slurmstepd",
    "StepId",
    "job step",
    "NCCL",
    "step creation",
    "stepd",
    "*** STEP",
    "CANCELLED AT",
    "JobId",
)


def progress(message: str) -> tuple[bool, int | None]:
    """(is this a progress line, the counter's value or None)."""
    head = message[:HEAD]
    if "{'loss'" in head or "{'train_loss'" in head or "{'eval_loss'" in head:
        step = _DICT_STEP.search(head)
        return True, int(step.group(1)) if step else None
    named = _named(head)
    if named is not None:
        return True, named  # a named counter beats a bar printed on the same line
    bar = _bar(head)
    if bar is not None:
        return True, bar
    if "/" in head and ("poch" in head or "oss" in head or "rain" in head):
        # torchvision's `Epoch: [0][511/1736]  Loss ...`, timm's `Train: 72 [1400/5004 ( 28%)]`
        bracketed = _BRACKETS.search(head)
        if bracketed:
            return True, int(bracketed.group(1))
    if "atch" in head and "/" in head:
        batch = _BATCH.search(head)
        if batch:
            return True, int(batch.group(1))
    return False, None


def _named(head: str) -> int | None:
    lowered = head.lower()
    if "step" not in lowered and "iter" not in lowered:
        return None
    for word in _NOT_TRAINING:
        if word in head:
            return None
    after = _AFTER.search(head) if "(after " in head else None
    if after:
        return int(after.group(1))  # Megatron's memory report: "(after 1 iterations)"
    best: tuple[int, int] | None = None  # (rank of the word, value)
    for count, match in enumerate(_COUNTER.finditer(head)):
        word = match.group(1).lower()
        order = 0 if word.startswith("global") else 1
        if best is None or order < best[0]:
            best = (order, int(match.group(2)))
        if count >= 8:
            break
    return best[1] if best else None


def _bar(head: str) -> int | None:
    if "[" not in head or ("/" not in head and "it [" not in head):
        return None
    match = _BAR.search(head)
    if match:
        return int(match.group(1))  # as printed: a per-epoch bar starts again at 0
    match = _BAR_NO_TOTAL.search(head)
    return int(match.group(1)) if match else None


# tqdm's measured pace at the end of its bar: `3.52it/s]`, `11.06s/it]` (with `, loss=...` after
# it on Lightning's bars).
_RATE = re.compile(r"(\d{1,9}(?:\.\d{1,6})?)(it/s|s/it)[],]")


def _bar_rate(head: str) -> re.Match | None:
    """The pace at the end of a progress bar's text (`3.52it/s]`), when `head` is a bar."""
    return _RATE.search(head) if _bar(head) is not None else None


def bar_end(message: str) -> int | None:
    """Where a progress bar's own text ends (after its rate's `]`), when more follows it on the
    same line: a terminal's carriage return ran the bar into the next log line."""
    head = message[:HEAD]
    match = _bar_rate(head)
    if not match:
        return None
    end = head.find("]", match.end() - 1)
    return end + 1 if 0 <= end < len(head) - 1 else None


def bar_step_time(message: str) -> float | None:
    """The seconds per step a progress bar reports (`2.43it/s` -> 0.41), or None."""
    match = _bar_rate(message[:HEAD])
    if not match:
        return None
    value = float(match.group(1))
    if value <= 0:
        return None
    return 1 / value if match.group(2) == "it/s" else value
