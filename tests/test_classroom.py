"""A class: each lesson's exercises have a check and a linked solution, or say why not; every exercise's check
fails on the code before its exercise and on the blank start (tests/checkpoints/test_exercises.py passes each on
its solution); a GitHub Classroom copy follows the README and pushes without force; and the GitHub
Classroom workflow's commands pass on the reference code, fail on the blank start, and grade the
course's checks, not a learner's edit of them. The instructor's report: tests/test_report.py."""
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import (ROOT, apply_solution, checkpoints, classroom_copy, clean_env, copy_code,
                     course_clone, solution)

sys.path.insert(0, str(ROOT / "phases"))
import report  # noqa: E402

LESSONS_WITH_EXERCISES = list(range(len(checkpoints())))  # every lesson: its exercises checked, or why not
WORKFLOW = ROOT / ".github" / "workflows" / "classroom.yml"
LEARNER = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}


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
    """The steps of a workflow, each {key: value} from its own lines and its `with:` lines, a block
    (`run: |`) as its lines: a reader for the plain YAML of .github/workflows/classroom.yml (no flow
    style, no anchors)."""
    steps, step, indent, block = [], None, None, None
    for line in text.splitlines():
        if block and (not line.strip() or len(line) - len(line.lstrip()) > block[1]):
            step[block[0]] += line[block[1] + 2:] + "\n"  # a block's lines: two more than its key
            continue
        block = None
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.match(r"^(\s*)- (name|uses): (.*)$", line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent, step = len(match.group(1)), {}
            steps.append(step)
            line = line.replace("- ", "  ", 1)
        if step is not None:
            pair = re.match(r"^(\s+)([\w-]+): (.*)$", line)
            if pair and pair.group(3).strip() == "|":
                block, step[pair.group(2)] = (pair.group(2), len(pair.group(1))), ""
            elif pair:
                value = pair.group(3).strip()
                quoted = value.startswith('"')
                step[pair.group(2)] = json.loads(value) if quoted else value.strip("'")
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


def test_the_workflow_commands_fail_on_the_blank_start_and_pass_on_the_reference(tmp_path):
    """The graders' commands, as the workflow names them (their setup, pip install, needs the network: not run
    here). On the blank start (v0.0-start: the course without the learner's code) each fails. On the reference (the
    top-level files) the last phase's command passes; the commands differ only in their --phase, and the suite
    itself runs every phase's check on the last checkpoint, which test_course.py shows is the top-level code, and
    with --phase on the second implementation."""
    steps = graders()
    assert all(step["setup-command"].startswith("python -m pip install") for step in steps)
    commands = [step["command"].replace("python ", f"{sys.executable} ", 1) for step in steps]
    one = re.sub(r"--phase \d+", "--phase N", commands[0])
    assert all(re.sub(r"--phase \d+", "--phase N", command) == one for command in commands), commands

    def run(command, folder):
        done = subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True, env=clean_env(),
                              timeout=int(steps[0]["timeout"]) * 60)
        return done.returncode, done.stdout[-3000:]

    blank = tree(tmp_path, "blank", False)
    with ThreadPoolExecutor(4) as pool:
        failed = list(pool.map(lambda command: run(command, blank), commands))
    for step, (code, said) in zip(steps, failed):
        assert code == 1, f"{step['test-name']} does not fail on the blank start (exit 1):\n{said}"
    code, said = run(commands[-1], tree(tmp_path, "reference", True))
    assert code == 0 and " passed" in said.splitlines()[-1], f"{steps[-1]['test-name']} fails on the reference:\n{said}"


def restore_step():
    """The workflow's step that takes the checks back from the repository's first commit."""
    steps = workflow_steps(WORKFLOW.read_text())
    name = "Take the checks from the course"
    found = [n for n, step in enumerate(steps) if step.get("name") == name]
    assert found and found[0] < steps.index(graders()[0]), "the checks come back before any grader"
    return steps[found[0]]


def test_the_workflow_takes_back_every_file_the_checks_load():
    """The step lists exactly the files the report watches for tampering (report.CHECK_FILES), and
    requirements.txt, which each grader's setup installs (a pytest plugin added there would load
    with the checks); the checkout before it fetches the whole history, with the first commit."""
    script = restore_step()["run"]
    listed = set(" ".join(re.findall(r'^checks="(?:\$checks )?(.*)"$', script, re.M)).split())
    assert listed == {path.rstrip("/") for path in report.CHECK_FILES} | {"requirements.txt"}
    checkout = next(step for step in workflow_steps(WORKFLOW.read_text())
                    if step.get("uses", "").startswith("actions/checkout@"))
    assert checkout["fetch-depth"].split()[0] == "0"


pytestmark = pytest.mark.xdist_group("test_classroom")  # one worker runs the module: one clone of the course

@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A clone of this course, with its tags built: where an instructor makes the template from."""
    return course_clone(tmp_path_factory.mktemp("course") / "course")


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env=clean_env(**LEARNER)).stdout.strip()


def start(folder, phase):
    """README step 1 (phase 0) and step 6 (a later phase): `python phases/tags.py start PHASE`."""
    done = subprocess.run([sys.executable, "phases/tags.py", "start", str(phase)], cwd=folder,
                          capture_output=True, text=True, env=clean_env(**LEARNER))
    assert done.returncode == 0 and f"my-phase-{phase}" in done.stdout, done.stdout + done.stderr
    return git(folder, "rev-parse", "HEAD")


def commit(folder, message, checkpoint):
    """Copy a checkpoint's code to the top of folder and commit it, as the learner who typed it."""
    for source in checkpoint.glob("*.py"):
        shutil.copy(source, folder / source.name)
    git(folder, "add", "-A")
    git(folder, "commit", "--quiet", "-m", message)
    return git(folder, "rev-parse", "HEAD")


def push(folder):
    """`git push origin HEAD:main`, as the README says, with no force; then main on origin."""
    done = subprocess.run(["git", "push", "origin", "HEAD:main"], cwd=folder, capture_output=True,
                          text=True, env=clean_env(**LEARNER))
    assert done.returncode == 0, f"git push origin HEAD:main was refused:\n{done.stderr}"
    return git(f"{folder}.git", "rev-parse", "main")


def test_a_classroom_copy_follows_the_readme_and_every_push_needs_no_force(course, tmp_path):
    """A learner's GitHub Classroom copy (one "Initial commit" by the bot): README step 1's
    `python phases/tags.py start 0`, phases 0 and 1 committed and pushed, then step 6's
    `python phases/tags.py start 3`. Each push goes through without force; origin's main keeps every
    commit in order, the Classroom's first; phase 0's start is the copy as it is (no commit), phase
    3's one new commit, with the tree of the tag v0.3-guardrails."""
    ada = classroom_copy(course, tmp_path / "ada")
    first = git(ada, "rev-parse", "HEAD")
    assert start(ada, 0) == first and push(ada) == first, "phase 0 starts from the Classroom's copy"
    hello = commit(ada, "Phase 0: hello", checkpoints()[0])
    assert push(ada) == hello
    loop = commit(ada, "Phase 1: the loop", checkpoints()[1])
    assert push(ada) == loop
    third = start(ada, 3)
    assert push(ada) == third
    pushed = git(f"{ada}.git", "log", "--first-parent", "--reverse", "--format=%H", "main").split()
    assert pushed == [first, hello, loop, third]
    tag = git(ada, "rev-parse", "v0.3-guardrails^{tree}")
    assert git(ada, "rev-parse", f"{third}^{{tree}}") == tag
    harness = (checkpoints()[1] / "harness.py").read_text().rstrip("\n")
    assert git(ada, "show", f"{loop}:harness.py") == harness
    assert git(ada, "symbolic-ref", "--short", "HEAD") == "my-phase-3"


def graded(folder, phase):
    """A grader's command for phase, as the workflow names it, run in folder: (exit, output)."""
    command = next(step["command"] for step in graders()
                   if re.search(rf"--phase {phase}\b", step["command"]))
    done = subprocess.run(command.replace("python ", f"{sys.executable} ", 1), shell=True,
                          cwd=folder, capture_output=True, text=True, env=clean_env(), timeout=600)
    return done.returncode, done.stdout[-3000:]


def test_a_check_edited_in_a_learners_repository_fails_its_graded_step(course, tmp_path):
    """Ben starts phase 1 in his GitHub Classroom copy (phase 0's code comes in), writes no loop,
    and edits phase 1's check until it passes in his repository, then pushes. The workflow, run as
    GitHub runs it (a clone with the whole history, then its steps in order), takes the check back
    from the first commit: phase 1's graded step fails; phase 0's, on the course's code, passes."""
    ben = classroom_copy(course, tmp_path / "ben")
    start(ben, 1)
    edited = "PHASE = 1\n\n\ndef test_loop():\n    pass\n"
    (ben / "tests" / "checkpoints" / "test_phase1_loop.py").write_text(edited)
    git(ben, "commit", "--quiet", "-am", "Phase 1: done?")
    push(ben)
    assert graded(ben, 1)[0] == 0, "the edited check passes in Ben's own repository"
    runner = tmp_path / "runner"
    git(tmp_path, "clone", "--quiet", f"{ben}.git", str(runner))
    restored = subprocess.run(["bash", "-e", "-c", restore_step()["run"]], cwd=runner,
                              capture_output=True, text=True, env=clean_env())
    assert restored.returncode == 0, restored.stderr
    code, said = graded(runner, 1)
    assert code == 1 and "harness" in said, f"phase 1 earns its points on an edited check:\n{said}"
    code, said = graded(runner, 0)
    assert code == 0, f"phase 0 fails on the course's own code:\n{said}"
