"""Every lesson runs as written: each `$ command` of its console blocks, run in a fresh copy of the course at the
lesson's checkpoint, prints what the lesson shows (tests/lessons.py). And the runner can fail."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import checkpoints
from lessons import commands, matches, run_lesson

LESSONS = [p / "README.md" for p in checkpoints()]
STARTED = {}  # lesson -> a future of its problems: the lessons run side by side, each in a tree of its own


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_every_command_of_the_lesson_prints_what_it_shows(lesson):
    assert commands(lesson.read_text(encoding="utf-8")), f"{lesson} shows no command to run"
    if not STARTED:
        pool = ThreadPoolExecutor(max_workers=3)
        STARTED.update({path: pool.submit(run_lesson, path) for path in LESSONS})
    problems = STARTED[lesson].result()
    assert problems == [], "\n\n".join(problems)


def test_an_edited_output_in_a_lesson_fails_the_runner(tmp_path):
    """The phase 0 lesson with one word of its shown output changed: the runner reports that command."""
    lesson = checkpoints()[0] / "README.md"
    edited = tmp_path / "00-hello" / "README.md"
    edited.parent.mkdir()
    for source in checkpoints()[0].glob("*.py"):
        (edited.parent / source.name).write_bytes(source.read_bytes())
    text = lesson.read_text(encoding="utf-8")
    assert "I run on your machine" in text
    edited.write_text(text.replace("I run on your machine", "I run in the cloud", 1), encoding="utf-8")
    problems = run_lesson(edited)
    assert len(problems) == 1 and "I run in the cloud" in problems[0] and "$ python backend.py" in problems[0]


def test_the_runner_reads_ellipses_as_anything():
    assert matches("a\n...\nz x...\n", "a\nb\nc\nz x=1\n")
    assert matches("total: ... s\n", "total: 0.4 s\n")
    assert not matches("a\nb\n", "a\nc\n")
    assert not matches("a\n", "a\nextra\n")
