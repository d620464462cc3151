"""The course holds together: the top-level code is the last checkpoint, lessons show only code their checkpoint
has, the tag builder makes the tags without touching anything, a learner can start any phase on a branch of their
own, the phase folders run as they are, every definition a phase adds or changes is named in its lesson (so a fix
that missed a checkpoint shows), and the learner's check passes correct code (ours, and a second
implementation written from the lessons alone) and fails broken code with the symptom the lesson shows."""
import ast
import difflib
import re
import subprocess
import sys
import textwrap

import pytest
from helpers import ROOT, checkpoints, clean_env, copy_code, run_python, tag_name

LESSONS = [p / "README.md" for p in checkpoints()]
MAX_LESSON_BYTES = 12 * 1024  # a lesson a learner can read in a class session
MAX_TYPED = 250  # lines a phase asks a learner to type
MAX_CORE = 1500  # lines of the harness up to the structured answers
LEARNER = ROOT / "tests" / "learner"


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def checkpoint_at_head():
    """The checkpoint a course tag at HEAD stands for (None for v0.0-start); otherwise (on main) the latest."""
    try:
        tags = git("tag", "--points-at", "HEAD").split()
    except (OSError, subprocess.CalledProcessError):
        tags = []
    if "v0.0-start" in tags:
        return None
    return next((c for c in checkpoints() if tag_name(c) in tags), checkpoints()[-1])


def test_top_level_code_equals_its_checkpoint():
    checkpoint = checkpoint_at_head()
    code = {p.name for c in checkpoints() for p in c.glob("*.py")}
    for name in sorted(code):
        if checkpoint and (checkpoint / name).exists():
            assert (ROOT / name).read_bytes() == (checkpoint / name).read_bytes(), \
                f"{name} differs from {checkpoint.name}"
        else:
            assert not (ROOT / name).exists(), f"{name} is not part of {checkpoint and checkpoint.name}"


def python_blocks(markdown):
    """The ```python blocks of a lesson, dedented."""
    return [textwrap.dedent(b) for b in re.findall(r"^ *```python\n(.*?)^ *```", markdown, re.M | re.S)]


def shown_in(block, sources):
    """True when a block appears in one of the sources, line for line at any indentation; a line '...' in
    the block stands for any number of lines.

    Example: shown_in("x = 1\\n...\\ny = 2", ["x = 1\\nz = 0\\ny = 2"]) -> True
    """
    segments = [[]]
    for line in block.rstrip().splitlines():
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line.rstrip())
    segments = [trim(s) for s in segments if any(line.strip() for line in s)]
    return any(found_in_order(segments, source.splitlines()) for source in sources)


def trim(lines):
    while not lines[0].strip():
        lines = lines[1:]
    while not lines[-1].strip():
        lines = lines[:-1]
    return lines


def found_in_order(segments, lines):
    """True when the segments appear in lines one after another."""
    start = 0
    for segment in segments:
        at = next((i for i in range(start, len(lines)) if matches(segment, lines[i:])), None)
        if at is None:
            return False
        start = at + len(segment)
    return True


def matches(segment, lines):
    """True when lines begin with the segment, every line shifted right by the same indentation."""
    if len(lines) < len(segment):
        return False
    shift = indent(lines[0]) - indent(segment[0])
    return shift >= 0 and all(line.rstrip() == " " * shift + s if s else not line.strip()
                              for s, line in zip(segment, lines))


def indent(line):
    return len(line) - len(line.lstrip(" "))


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_lesson_shows_only_code_its_checkpoint_contains(lesson):
    sources = [p.read_text(encoding="utf-8") for p in lesson.parent.glob("*.py")]
    blocks = python_blocks(lesson.read_text(encoding="utf-8"))
    assert blocks, f"{lesson} shows no code"
    for block in blocks:
        assert shown_in(block, sources), f"{lesson.parent.name}/README.md shows code its checkpoint lacks:\n{block}"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_a_lesson_fits_a_class_session(lesson):
    """At most 12 KB, a stated time, and a "What the check expects" box: the check's contract with the learner."""
    text = lesson.read_text(encoding="utf-8")
    assert len(text.encode()) <= MAX_LESSON_BYTES, f"{lesson.parent.name}: {len(text.encode())} bytes"
    assert "## What the check expects" in text and "minutes typed" in text


def typed(earlier, later):
    """The lines a learner types to go from one checkpoint's code to the next: those added, by difflib."""
    added = 0
    for path in later.glob("*.py"):
        before = (earlier / path.name).read_text().splitlines() if earlier and (earlier / path.name).exists() else []
        added += sum(line.startswith("+") and not line.startswith("+++")
                     for line in difflib.unified_diff(before, path.read_text().splitlines(), lineterm="", n=0))
    return added


def test_no_phase_asks_for_more_than_its_budget_and_the_core_stays_small():
    """No phase asks a learner to type more than 250 lines; the core harness, up to the structured answers, is at
    most 1,500 lines."""
    folders = checkpoints()
    sizes = {later.name: typed(earlier, later) for earlier, later in zip([None, *folders], folders)}
    assert max(sizes.values()) <= MAX_TYPED, sizes
    core = next(folder for folder in folders if folder.name.endswith("-structured"))
    assert sum(len(path.read_text().splitlines()) for path in core.glob("*.py")) <= MAX_CORE


def test_the_readme_map_says_what_each_phase_asks():
    """The README's table of phases gives each phase's tag, lesson, lines typed and the lesson's stated minutes."""
    readme, folders = (ROOT / "README.md").read_text(encoding="utf-8"), checkpoints()
    for number, (earlier, later) in enumerate(zip([None, *folders], folders)):
        minutes = re.search(r"\*\*Time:\*\* (\d+) minutes typed", (later / "README.md").read_text()).group(1)
        row = f"| {number} | `{tag_name(later)}` | [{later.name}](phases/{later.name}/README.md) |"
        said = f"| {typed(earlier, later)} lines, {minutes} min |"
        assert row in readme and said in readme.split(row)[1].split("\n")[0], f"README.md, phase {number}: {said}"


def definitions(folder):
    """{(file, name): its code, docstrings left out} for a checkpoint's functions, classes, their methods, and
    CONSTANTS: what a lesson explains."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            named = [(node.name, node)] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else \
                [(n.id, node) for target in getattr(node, "targets", [getattr(node, "target", None)]) if target
                 for n in ast.walk(target) if isinstance(n, ast.Name) and n.id.isupper()]
            if isinstance(node, ast.ClassDef):
                named += [(f"{node.name}.{item.name}", item) for item in node.body
                          if isinstance(item, ast.FunctionDef) and not item.name.startswith("__")]
            for name, definition in named:
                for inner in ast.walk(definition):  # a docstring is prose: rewording it changes no code
                    body = getattr(inner, "body", None)
                    if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                            isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                        inner.body = body[1:] or [ast.Pass()]
                found[(path.name, name)] = ast.dump(definition)
    return found


def test_every_definition_a_phase_adds_or_changes_is_named_in_its_lesson():
    """Each function, class, method and constant whose code a phase adds or changes is named in that phase's
    lesson. This is also how a fix that missed a checkpoint shows: the copies of shared code differ where no
    lesson says they do. (The behaviour tests run on the checkpoint that introduced them and on the last.)"""
    missing, before = [], {}
    for folder in checkpoints():
        now, lesson = definitions(folder), (folder / "README.md").read_text(encoding="utf-8")
        for (file, name), code in now.items():
            word = name.split(".")[-1]
            if before.get((file, name)) != code and not re.search(rf"(?<!\w){re.escape(word)}(?!\w)", lesson):
                missing.append(f"{folder.name}: {file} {name} ({'changed' if (file, name) in before else 'added'})")
        before = now
    assert not missing, "defined or changed, and not named in the lesson:\n" + "\n".join(missing)


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_lesson_says_what_it_takes_and_links_its_code(lesson):
    """Each lesson gives its time and prerequisites, a picture, a way to check each exercise, its files."""
    text = lesson.read_text(encoding="utf-8")
    assert "**Time:**" in text and "**You need:**" in text, "time and prerequisites"
    assert "```text" in text, "a picture of what the phase adds"
    assert "](" in text and "--phase" in text, "a link to the checkpoint's code, and the check to run"
    exercises = text.split("## Exercises", 1)[1].split("\n## ", 1)[0]
    for number, exercise in enumerate(re.split(r"^\d+\. ", exercises, flags=re.M)[1:], 1):
        assert "succeeded" in exercise, f"exercise {number} does not say how you know you succeeded"


def test_the_lesson_check_catches_code_that_is_not_in_the_checkpoint():
    source = (checkpoints()[1] / "harness.py").read_text(encoding="utf-8")
    real = ("    for step in range(1, MAX_STEPS + 1):\n"
            "        message = chat(messages, tools=TOOLS, backend=backend).choices[0].message\n")
    assert shown_in(real, [source])
    assert shown_in("def run(task, backend=None):\n    ...\n    return None\n", [source])
    assert not shown_in(real.replace("MAX_STEPS + 1", "MAX_STEPS"), [source])
    assert not shown_in("def run(task, backend=None):\n    ...\n    return 42\n", [source])
    assert not shown_in("return None\n...\ndef run(task, backend=None):\n", [source])  # out of order


@pytest.fixture
def clone(tmp_path):
    """A clone of this repository's committed state, with an uncommitted change and a staged one."""
    path = tmp_path / "clone"
    git("clone", "--quiet", str(ROOT), str(path), cwd=tmp_path)
    git("checkout", "--quiet", "-B", "main", git("rev-parse", "HEAD"), cwd=path)
    (path / "backend.py").write_text("# my unfinished work\n")
    (path / "notes.txt").write_text("staged\n")
    git("add", "notes.txt", cwd=path)
    return path


ALL_TAGS = ["v0.0-start", *[tag_name(c) for c in checkpoints()]]


def test_tag_builder_makes_one_tag_per_phase_and_touches_nothing(clone):
    before = (git("status", "--porcelain", cwd=clone), git("rev-parse", "HEAD", cwd=clone),
              git("symbolic-ref", "HEAD", cwd=clone), (clone / ".git" / "index").read_bytes())
    build = subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    tags = {name: git("rev-parse", name, cwd=clone) for name in ALL_TAGS}
    assert before == (git("status", "--porcelain", cwd=clone), git("rev-parse", "HEAD", cwd=clone),
                      git("symbolic-ref", "HEAD", cwd=clone), (clone / ".git" / "index").read_bytes())
    again = subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, text=True)
    assert again.returncode == 0 and {name: git("rev-parse", name, cwd=clone) for name in ALL_TAGS} == tags
    for older, newer in zip(ALL_TAGS, ALL_TAGS[1:]):
        assert git("rev-parse", f"{newer}^", cwd=clone) == git("rev-parse", older, cwd=clone)  # one linear history
        changed = git("diff", "--name-only", older, newer, cwd=clone).split()
        assert changed and all("/" not in name and name.endswith(".py") for name in changed), changed
    start = git("ls-tree", "--name-only", "v0.0-start", cwd=clone).split()
    assert "demo_model.py" in start and "phases" in start and not {"backend.py", "harness.py"} & set(start)
    for checkpoint in checkpoints():
        for source in checkpoint.glob("*.py"):
            assert git("show", f"{tag_name(checkpoint)}:{source.name}", cwd=clone) == source.read_text().rstrip("\n")


def test_a_learner_starts_a_phase_on_a_branch_of_their_own(clone):
    """`python phases/tags.py start 2`: a branch my-phase-2 at phase 2's start, with phase 1's code, which passes
    phase 1's check; a second start refuses, saying how to go back to the branch."""
    git("stash", "--quiet", "--include-untracked", cwd=clone)
    started = subprocess.run([sys.executable, "phases/tags.py", "start", "2"], cwd=clone, capture_output=True,
                             text=True)
    assert started.returncode == 0 and "my-phase-2" in started.stdout, started.stderr
    assert git("symbolic-ref", "--short", "HEAD", cwd=clone) == "my-phase-2"
    assert (clone / "harness.py").read_text() == (checkpoints()[1] / "harness.py").read_text()
    assert not (clone / "guards.py").exists(), "phase 2's own code is for the learner to write"
    check = subprocess.run([sys.executable, "-m", "pytest", "tests/checkpoints", "--phase", "0", "-p",
                            "no:cacheprovider"], cwd=clone, capture_output=True, text=True, env=clean_env())
    assert check.returncode == 0, check.stdout[-2000:]
    again = subprocess.run([sys.executable, "phases/tags.py", "start", "2"], cwd=clone, capture_output=True, text=True)
    assert again.returncode != 0 and "git switch my-phase-2" in again.stderr


def test_the_start_tag_and_the_first_tag_are_runnable_trees(clone, tmp_path):
    subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, check=True)
    for tag, runs in [("v0.0-start", False), ("v0.1-hello", True)]:
        tree = tmp_path / tag
        tree.mkdir()
        archive = subprocess.run(["git", "archive", tag], cwd=clone, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        assert not (tree / "harness.py").exists()
        assert (tree / "backend.py").exists() == runs
        if runs:
            result = run_python(tree, "backend.py")
            assert result.returncode == 0 and "demo model" in result.stdout, result.stderr


@pytest.mark.parametrize("command", [["phases/00-hello/backend.py"],
                                     ["phases/01-loop/harness.py", "List the files here"],
                                     ["phases/04-contracts/harness.py", "Read README.md"],
                                     ["phases/10-structured/harness.py", "List the files here"]])
def test_phase_folders_run_as_they_are_from_the_repository_root(command):
    result = run_python(ROOT, *command, env={"BACKEND": "demo"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


def check_command(tree, phase, *args):
    return subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "tests" / "checkpoints"), "--phase", str(phase),
                           "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=clean_env())


def test_the_check_passes_a_good_loop_and_fails_a_broken_one_with_the_lessons_words(tmp_path):
    good = check_command(None, 1, "--code", str(checkpoints()[1]))
    assert good.returncode == 0, good.stdout[-2000:]
    assert " passed" in good.stdout and "deselected" in good.stdout
    broken = copy_code(checkpoints()[1], tmp_path / "broken")
    source = (broken / "harness.py").read_text()
    forgot_the_assistant_message = "        messages.append(assistant_message(message))\n"
    assert forgot_the_assistant_message in source
    (broken / "harness.py").write_text(source.replace(forgot_the_assistant_message, ""))
    failed = check_command(None, 1, "--code", str(broken))
    assert failed.returncode == 1 and "preceeding message with 'tool_calls'" in failed.stdout, failed.stdout[-3000:]
    assert "expected: " in failed.stdout and "Traceback" not in failed.stdout, "a failure reads as the lesson's words"


@pytest.mark.parametrize("phase", [0, 1, 2, 3, 11])
def test_a_second_implementation_written_from_the_lessons_passes(phase, tmp_path):
    """tests/learner/ holds code written from the lessons alone, in another style, each phase on the learner's own
    earlier one (phases 0 to 3), and phase 11's mcp_client.py in the reference harness: each passes its check."""
    code = LEARNER / f"phase{phase}"
    if not (code / "harness.py").exists():  # a file written alone: the rest is the checkpoint's
        code = copy_code(LEARNER / f"phase{phase}", tmp_path / "code")
        copy_code(checkpoints()[phase], code)
    result = check_command(None, phase, "--code", str(code))
    assert result.returncode == 0, result.stdout[-3000:]


def learner_bugs():
    sys.path.insert(0, str(LEARNER))
    import bugs
    return bugs


@pytest.mark.parametrize("name", list(learner_bugs().BUGS) if (LEARNER / "bugs.py").exists() else [])
def test_each_troubleshooting_bug_shows_its_symptom_and_fails_the_check(tmp_path, name):
    """Each broken loop of phase 1's troubleshooting table, applied to the second implementation, prints the
    symptom the table shows, and the check fails it."""
    bugs = learner_bugs()
    bug = bugs.BUGS[name]
    tree = copy_code(LEARNER / "phase1", tmp_path / name)
    source = (tree / bug["file"]).read_text()
    assert bug["old"] in source
    (tree / bug["file"]).write_text(source.replace(bug["old"], bug["new"]))
    result = run_python(tree, "harness.py", bugs.TASK)
    assert bug["symptom"] in result.stdout + result.stderr and result.returncode == bug["exit"], result.stdout + \
        result.stderr
    lesson = (checkpoints()[1] / "README.md").read_text()
    assert bug["symptom"].split(" ...")[0][:40] in lesson, "the symptom is the one the lesson shows"
    assert check_command(None, 1, "--code", str(tree), "-x").returncode == 1
