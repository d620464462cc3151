"""A class: each lesson's exercises have a check and a linked solution, or say why not; every exercise's check
fails on the code before its exercise and on the blank start (tests/checkpoints/test_exercises.py passes each on
its solution); and the GitHub Classroom workflow's commands pass on the reference code and fail on the blank
start. The instructor's report: tests/test_report.py."""
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import ROOT, apply_solution, checkpoints, clean_env, copy_code, solution

sys.path.insert(0, str(ROOT / "phases"))
import report  # noqa: E402

LESSONS_WITH_EXERCISES = list(range(len(checkpoints())))  # every lesson: its exercises checked, or why not
WORKFLOW = ROOT / ".github" / "workflows" / "classroom.yml"
def exercises(text):
    """A lesson's exercises: {number: text}."""
    section = text.split("## Exercises", 1)[1].split("\n## ", 1)[0]
    return {int(n): " ".join(body.split())
            for n, body in re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |^\S|\Z)", section, re.M | re.S)}


def checked_exercises():
    """(phase, exercise) of every exercise check in tests/checkpoints/test_exercises.py."""
    source = (ROOT / "tests" / "checkpoints" / "test_exercises.py").read_text()
    return sorted({(int(p), int(k)) for p, k in re.findall(r"^@exercise\((\d+), (\d+)\)", source, re.M)})


@pytest.mark.parametrize("phase", LESSONS_WITH_EXERCISES)
def test_each_exercise_has_a_check_and_a_linked_solution_or_says_why_not(phase):
    """An exercise with a check has a reference solution, linked at the end of its lesson; one without says
    `no check:` and has neither."""
    lesson = (checkpoints()[phase] / "README.md").read_text(encoding="utf-8")
    checked = {k for p, k in checked_exercises() if p == phase}
    for number, text in exercises(lesson).items():
        link = f"(solutions/exercise-{number}.diff)"
        if number in checked:
            assert "no check" not in text and solution(phase, number).exists() and link in lesson, (phase, number)
            assert f"--phase {phase} --exercise" in lesson, "the lesson shows how to check an exercise"
        else:
            assert "no check:" in text and not solution(phase, number).exists() and link not in lesson, (phase, number)
    assert checked <= set(exercises(lesson)), "a check for an exercise the lesson does not have"


def run_exercise_checks(code, phases):
    """{(phase, exercise): passed} for every exercise of these phases, checked on the code in folder code."""
    found = report.run_checks(code, phases, exercises=True)
    return {check: passed for check, (passed, _) in found.items()}


def test_every_exercise_check_fails_on_its_checkpoint_and_on_the_blank_start(tmp_path):
    """Without its solution, each exercise's check fails on its phase's checkpoint; on the blank start (no code at
    all) every exercise's check fails. (With the solution each passes: test_exercises.py, in the suite.) A check
    that needs bubblewrap, on a machine without it, is skipped, and a skipped check is no pass."""
    phases = sorted({p for p, _ in checked_exercises()})
    with ThreadPoolExecutor(4) as pool:
        results = dict(zip(phases, pool.map(lambda p: run_exercise_checks(checkpoints()[p], [p]), phases)))
        blank = tmp_path / "blank"
        blank.mkdir()
        results["blank"] = run_exercise_checks(blank, phases)
    for phase, exercise in checked_exercises():
        assert results[phase].get((phase, exercise)) is False, f"exercise {exercise} of phase {phase} passes unsolved"
        assert results["blank"].get((phase, exercise)) is False, f"exercise {exercise} of phase {phase} on nothing"


def test_the_solutions_of_a_lesson_apply_together(tmp_path):
    """A learner who did every exercise of a lesson has all its solutions at once: they apply one after another."""
    for phase in sorted({p for p, _ in checked_exercises()}):
        code = copy_code(checkpoints()[phase], tmp_path / checkpoints()[phase].name)
        for p, exercise in checked_exercises():
            if p == phase:
                apply_solution(code, phase, exercise)


# ---- GitHub Classroom ----------------------------------------------------------------------------------------

def workflow_steps(text):
    """The steps of a workflow, each {key: value} from its own lines and its `with:` lines: a reader for the
    plain YAML of .github/workflows/classroom.yml (no flow style, no anchors)."""
    steps, step, indent = [], None, None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.match(r"^(\s*)- (name|uses): (.*)$", line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent, step = len(match.group(1)), {}
            steps.append(step)
            line = line.replace("- ", "  ", 1)
        if step is not None:
            pair = re.match(r"^\s+([\w-]+): (.*)$", line)
            if pair:
                value = pair.group(2).strip()
                step[pair.group(1)] = json.loads(value) if value.startswith('"') else value.strip("'")
    return steps


def graders():
    return [s for s in workflow_steps(WORKFLOW.read_text()) if s.get("uses", "").startswith(
        "classroom-resources/autograding-command-grader@")]


def test_the_workflow_has_one_graded_test_per_phase_reported_to_classroom():
    """One command-grader step per phase, each running that phase's check, with a timeout and points, and the
    reporter reading every one of them, as GitHub Classroom wants (its workflow and job names)."""
    text = WORKFLOW.read_text()
    assert "\nname: Autograding Tests\n" in text and "\n  run-autograding-tests:\n" in text
    steps = graders()
    assert [re.search(r"--phase (\d+)", s["command"]).group(1) for s in steps] == [
        str(n) for n in range(len(checkpoints()))]
    for step in steps:
        assert step["command"].startswith("python -m pytest tests/checkpoints --phase ")
        assert int(step["timeout"]) > 0 and int(step["max-score"]) > 0 and step["test-name"] and step["id"]
    reporter = next(s for s in workflow_steps(text) if "autograding-grading-reporter@" in s.get("uses", ""))
    assert reporter["runners"].split(",") == [s["id"] for s in steps]
    for step in steps:
        assert reporter[f"{step['id'].upper()}_RESULTS"] == f"${{{{steps.{step['id']}.outputs.result}}}}"


def tree(tmp_path, name, with_code):
    """This course's files (as git lists them), with the top-level code or without it (the blank start)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    code = {p.name for c in checkpoints() for p in c.glob("*.py")}
    for path in listed:
        if (ROOT / path).is_file() and (with_code or path not in code):
            (tmp_path / name / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / path, tmp_path / name / path)
    return tmp_path / name


def test_the_workflow_commands_pass_on_the_reference_and_fail_on_the_blank_start(tmp_path):
    """The graders' commands, as the workflow names them (their setup, pip install, needs the network: not run
    here). On the blank start (v0.0-start: the course without the learner's code) each fails. On the reference code
    (the top-level files) they pass, run two by two: the commands differ only in their --phase, and the checks
    take it more than once, so two pytest processes run them all (even phases, odd phases), not fourteen."""
    steps = graders()
    assert all(step["setup-command"].startswith("python -m pip install") for step in steps)
    commands = [step["command"].replace("python ", f"{sys.executable} ", 1) for step in steps]
    one = re.sub(r"--phase \d+", "--phase N", commands[0])
    assert all(re.sub(r"--phase \d+", "--phase N", command) == one for command in commands), commands
    blank = tree(tmp_path, "blank", False)

    def run(command, folder):
        done = subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True, env=clean_env(),
                              timeout=int(steps[0]["timeout"]) * 60 * len(steps))
        return done.returncode, done.stdout[-3000:]

    with ThreadPoolExecutor(4) as pool:
        failed = list(pool.map(lambda command: run(command, blank), commands))
    for step, (code, said) in zip(steps, failed):
        assert code == 1, f"{step['test-name']} does not fail on the blank start (exit 1):\n{said}"
    reference = tree(tmp_path, "reference", True)
    halves = [one.replace("--phase N", " ".join(f"--phase {n}" for n in range(first, len(steps), 2)))
              for first in (0, 1)]
    with ThreadPoolExecutor(2) as pool:
        for code, said in pool.map(lambda command: run(command, reference), halves):
            assert code == 0 and " passed" in said.splitlines()[-1], f"fails on the reference:\n{said}"
