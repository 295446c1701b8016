"""The words a tired responder reads: plain class names, times that say what they are."""

from analysis.diagnosis import Diagnosis
from analysis.progress import Progress
from analysis.verdict import CLASSES
from readings import classes, guide


def test_every_class_the_verdict_names_has_one_row_of_the_table():
    assert tuple(classes.CLASSES) == CLASSES
    assert classes.choices() == [(c.code, c.name) for c in classes.CLASSES.values()]


def test_every_class_has_a_plain_name_and_metaphors_are_only_subtitles():
    subtitles = [c.subtitle for c in classes.CLASSES.values() if c.subtitle]
    for code, of_class in classes.CLASSES.items():
        assert of_class.name.startswith(code.capitalize() if code not in "ABC" else code)
        for metaphor in subtitles:
            assert metaphor not in of_class.name
        assert of_class.hint.endswith(".")
        assert of_class.next_steps
    assert guide.class_name("A") == "A · a rank left or stalled outside the collective"
    assert guide.class_label("B")["subtitle"] == "meetings in a different order"
    assert guide.class_label("mystery") == {
        "code": "mystery",
        "name": "mystery",
        "subtitle": "",
        "hint": "",
    }


def test_durations_read_as_spoken():
    assert guide.duration(4.24) == "4.2 s"
    assert guide.duration(30) == "30 s"
    assert guide.duration(240) == "4 min"
    assert guide.duration(7500) == "2 h 5 min"
    assert guide.duration(7200) == "2 h"
    assert guide.duration(None) == "-"


def test_progress_line_names_the_silence_and_the_threshold():
    line = guide.progress_line(
        Progress("last_step_age", False, age_s=240.2, threshold_s=30.0, step_time_s=1.5)
    )
    assert line == "no step for 4 min; threshold 30 s (a step takes 1.5 s)"
    assert guide.progress_line(Progress("last_step_age", None, age_s=12.4)) == (
        "no step for 12 s; no step time known to compare it with"
    )
    assert guide.progress_line(Progress("two_snapshots", False, step_before=9, step_after=9)) == (
        "compared with the previous snapshot: step 9 → 9"
    )
    assert guide.progress_line(None) == "one observation only"


def test_slow_or_dead_basis_is_the_progress_line():
    diagnosis = {
        "classification": "A",
        "last_completed_step": 9,
        "progress": {
            "method": "last_step_age",
            "progressing": False,
            "age_s": 12.4,
            "threshold_s": 5.0,
            "step_time_s": 0.5,
        },
    }
    question = guide.decision_questions(Diagnosis.from_json(diagnosis))[3]
    assert question["answer"] == "Dead: nothing moved."
    assert question["basis"] == "no step for 12 s; threshold 5.0 s (a step takes 0.5 s)"


def test_the_last_step_question_names_the_collective_the_watchdog_reports_stuck():
    stored = {
        "classification": "B",
        "last_completed_step": 9,
        "watchdog": {
            "stuck_collective": {"seq": 1580, "op": "ALLREDUCE", "reports": 3},
            "last_completed": {"0": 1579, "3": 1577},
            "lagging_ranks": [3],
        },
    }
    question = guide.decision_questions(Diagnosis.from_json(stored))[2]
    assert question["basis"] == "watchdog: ALLREDUCE #1580"


def test_reading_order_puts_the_verdict_and_suspects_first_and_keeps_every_key():
    stored = {
        "collected_at": "t",
        "world_size": 4,
        "summary": "s",
        "suspect_ranks": [3],
        "classification": "A",
        "evidence": [],
        "suspect_ranks_compact": "3",
    }
    diagnosis = Diagnosis.from_json(stored)
    ordered = guide.reading_order(diagnosis)
    assert list(ordered)[:4] == [
        "classification",
        "summary",
        "suspect_ranks_compact",
        "suspect_ranks",
    ]
    assert ordered == diagnosis.to_json()
    assert set(stored) <= set(ordered)
