"""The course holds together: top-level code equals its checkpoint, lessons show only checkpoint code,
the tag builder makes the tags without touching anything, and the learner's check command tells good from broken."""
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, checkpoints, run_python

LESSONS = [p / "README.md" for p in checkpoints()]


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def tag_name(checkpoint):
    number, name = checkpoint.name.split("-", 1)
    return f"v0.{int(number) + 1}-{name}"


def checkpoint_at_head():
    """The checkpoint a course tag at HEAD stands for; otherwise (on main) the latest one."""
    try:
        tags = git("tag", "--points-at", "HEAD").split()
    except (OSError, subprocess.CalledProcessError):
        tags = []
    return next((c for c in checkpoints() if tag_name(c) in tags), checkpoints()[-1])


def test_top_level_code_equals_its_checkpoint():
    checkpoint = checkpoint_at_head()
    code = {p.name for c in checkpoints() for p in c.glob("*.py")}
    for name in sorted(code):
        if (checkpoint / name).exists():
            assert (ROOT / name).read_bytes() == (checkpoint / name).read_bytes(), f"{name} differs from {checkpoint.name}"
        else:
            assert not (ROOT / name).exists(), f"{name} is not part of {checkpoint.name}"


def python_blocks(markdown):
    """The ```python blocks of a lesson, dedented."""
    return [textwrap.dedent(b) for b in re.findall(r"^ *```python\n(.*?)^ *```", markdown, re.M | re.S)]


def shown_in(block, sources):
    """True when a block appears in one of the sources, line for line at any indentation; a line '...' in
    the block stands for any number of lines. Example: shown_in("x = 1\\n...\\ny = 2", ["x = 1\\nz = 0\\ny = 2"]) -> True
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
    return shift >= 0 and all(l.rstrip() == " " * shift + s if s else not l.strip() for s, l in zip(segment, lines))


def indent(line):
    return len(line) - len(line.lstrip(" "))


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_lesson_shows_only_code_its_checkpoint_contains(lesson):
    sources = [p.read_text(encoding="utf-8") for p in lesson.parent.glob("*.py")]
    blocks = python_blocks(lesson.read_text(encoding="utf-8"))
    assert blocks, f"{lesson} shows no code"
    for block in blocks:
        assert shown_in(block, sources), f"{lesson.parent.name}/README.md shows code its checkpoint lacks:\n{block}"


def test_the_lesson_check_catches_code_that_is_not_in_the_checkpoint():
    source = (checkpoints()[1] / "harness.py").read_text(encoding="utf-8")
    real = "    for step in range(1, MAX_STEPS + 1):\n        message = chat(messages, tools=TOOLS, backend=backend)\n"
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


def test_tag_builder_makes_one_tag_per_phase_and_touches_nothing(clone, tmp_path):
    before = (git("status", "--porcelain", cwd=clone), git("rev-parse", "HEAD", cwd=clone),
              git("symbolic-ref", "HEAD", cwd=clone), (clone / ".git" / "index").read_bytes())
    build = subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    tags = {c: git("rev-parse", tag_name(c), cwd=clone) for c in checkpoints()}
    assert before == (git("status", "--porcelain", cwd=clone), git("rev-parse", "HEAD", cwd=clone),
                      git("symbolic-ref", "HEAD", cwd=clone), (clone / ".git" / "index").read_bytes())

    again = subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, text=True)
    assert again.returncode == 0 and {c: git("rev-parse", tag_name(c), cwd=clone) for c in checkpoints()} == tags

    names = [tag_name(c) for c in checkpoints()]
    for older, newer in zip(names, names[1:]):
        assert git("rev-parse", f"{newer}^", cwd=clone) == git("rev-parse", older, cwd=clone)  # one linear history
        changed = git("diff", "--name-only", older, newer, cwd=clone).split()
        assert changed and all("/" not in name and name.endswith(".py") for name in changed)
    for checkpoint in checkpoints():
        for source in checkpoint.glob("*.py"):
            assert git("show", f"{tag_name(checkpoint)}:{source.name}", cwd=clone) == source.read_text().rstrip("\n")


def test_the_first_tag_is_a_runnable_tree(clone, tmp_path):
    subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, check=True)
    tree = tmp_path / "v0.1"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", tag_name(checkpoints()[0])], cwd=clone, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    assert not (tree / "harness.py").exists()
    result = run_python(tree, "backend.py")
    assert result.returncode == 0 and "demo model" in result.stdout, result.stderr


def course_copy(tmp_path, checkpoint):
    """The course's files with the top-level code taken from one checkpoint, as a learner's tree would be."""
    tree = tmp_path / "course"
    shutil.copytree(ROOT / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "phases", tree / "phases", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("demo_model.py", "pytest.ini"):
        shutil.copy(ROOT / name, tree / name)
    for source in checkpoint.glob("*.py"):
        shutil.copy(source, tree / source.name)
    return tree


def check_command(tree, phase):
    return subprocess.run([sys.executable, "-m", "pytest", "tests/checkpoints", "--phase", str(phase), "-x",
                           "-p", "no:cacheprovider"], cwd=tree, capture_output=True, text=True, timeout=300)


def test_the_check_command_passes_a_good_loop_and_fails_a_broken_one(tmp_path):
    tree = course_copy(tmp_path, checkpoints()[1])
    good = check_command(tree, 1)
    assert good.returncode == 0, good.stdout[-2000:]
    assert " passed" in good.stdout and "deselected" in good.stdout

    harness = tree / "harness.py"
    source = harness.read_text()
    forgot_the_assistant_message = "        messages.append(assistant_message(message))\n"
    assert forgot_the_assistant_message in source
    harness.write_text(source.replace(forgot_the_assistant_message, ""))
    broken = check_command(tree, 1)
    assert broken.returncode == 1
    assert "1 failed" in broken.stdout and "preceeding message with 'tool_calls'" in broken.stdout
