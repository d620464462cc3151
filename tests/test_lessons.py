"""Every lesson runs as written: each `$ command` of its console blocks, run in a fresh copy of the course with the
lesson's checkpoint (the reference) at the top, prints what the lesson shows (tests/lessons.py). And the runner can
fail, runs your code unless told otherwise, and says how to use it."""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, wait

import pytest
from helpers import ROOT, checkpoints
from lessons import NOT_HERE, UNSANDBOXED, commands, main, matches, run_lesson

LESSONS = [p / "README.md" for p in checkpoints()]
runs_bash = pytest.mark.skipif(os.name == "nt", reason=NOT_HERE)
STARTED = {}  # lesson -> a future of its problems: the lessons run side by side, each in a tree of its own
pytestmark = pytest.mark.xdist_group("test_lessons")  # one worker runs the module: its first test starts every lesson


@runs_bash
@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_every_command_of_the_lesson_prints_what_it_shows(lesson):
    assert commands(lesson.read_text(encoding="utf-8")), f"{lesson} shows no command to run"
    if not STARTED:
        pool = ThreadPoolExecutor(max_workers=3)
        STARTED.update({path: pool.submit(run_lesson, path, path.parent) for path in LESSONS})
    problems = STARTED[lesson].result()
    if any(not problem.startswith(UNSANDBOXED) for problem in problems):
        # once more, when no other lesson runs: a deadline's demo on a machine too busy to start Python within 8 s
        # differs once; a difference that repeats is the lesson's
        wait(STARTED.values())
        problems = run_lesson(lesson, lesson.parent)
    if problems and all(problem.startswith(UNSANDBOXED) for problem in problems):
        pytest.skip(f"{len(problems)} command(s) of the lesson show what bubblewrap does, and there is none here")
    assert problems == [], "\n\n".join(problems)


@runs_bash
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
    problems = run_lesson(edited, edited.parent)
    assert len(problems) == 1 and "I run in the cloud" in problems[0] and "$ python backend.py" in problems[0]


def test_the_runner_reads_ellipses_as_anything():
    assert matches("a\n...\nz x...\n", "a\nb\nc\nz x=1\n")
    assert matches("total: ... s\n", "total: 0.4 s\n")
    assert not matches("a\nb\n", "a\nc\n")
    assert not matches("a\n", "a\nextra\n")


@runs_bash
def test_the_runner_runs_your_code_unless_asked_for_the_reference(tmp_path):
    """A lesson showing the first line of backend.py: by default the runner runs the repository root's (yours);
    --code DIR runs DIR's; --reference runs the lesson's own folder, the checkpoint."""
    lesson = tmp_path / "00-made-up" / "README.md"
    lesson.parent.mkdir()
    (lesson.parent / "backend.py").write_text("# the reference\n")
    yours = (ROOT / "backend.py").read_text().splitlines()[0]
    lesson.write_text(f"```console\n$ head -1 backend.py\n{yours}\n```\n")
    assert main([str(lesson)]) == 0
    assert main(["--reference", str(lesson)]) == 1
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "backend.py").write_text(yours + "\n")
    assert main(["--code", str(mine), str(lesson)]) == 0


@pytest.mark.parametrize("args, code", [(["--help"], 0), ([], 2), (["no/such/README.md"], 2),
                                        (["--code", "no/such/dir", "phases/00-hello/README.md"], 2),
                                        (["tests/lessons.py"], 2)])
def test_the_runner_says_how_to_use_it(args, code):
    """--help, no lesson, a lesson or a folder that is not there: a usage message, never a traceback."""
    done = subprocess.run([sys.executable, "tests/lessons.py", *args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == code and "usage: lessons.py" in done.stdout + done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_the_runner_names_another_phase_s_code_as_the_cause(tmp_path):
    """Phase 13's code run on a lesson of phase 12 (made up: one command whose output differs): the difference says
    the code is phase 13's, not that there is no sandbox here. Run on its own checkpoint: no such words."""
    lesson = tmp_path / checkpoints()[12].name / "README.md"
    lesson.parent.mkdir()
    lesson.write_text("```console\n$ python -c \"print(1)\"\n2\n```\n")
    problems = run_lesson(lesson, checkpoints()[13])
    assert len(problems) == 1 and problems[0].startswith(
        f"[differs here: your code is {checkpoints()[13].name}'s, this lesson's is {checkpoints()[12].name}'s]")
    assert not run_lesson(lesson, checkpoints()[12])[0].startswith("[")
