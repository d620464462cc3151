"""Build the course tags from the phase checkpoints, touching none of your files; or start a phase on a branch of
your own.

Run:  python phases/tags.py              builds v0.0-start, v0.1-hello, v0.2-loop, ...
                                         (then: git diff v0.2-loop v0.3-guardrails)
      python phases/tags.py start 1      puts you on a new branch my-phase-1 at phase 1's start (v0.1-hello)
v0.0-start is HEAD's committed tree without the code you write; each later tag is that tree with the top-level
code of its checkpoint, and the tags form one linear history. Building them leaves your working tree, index and
branch alone, and running it again gives the same tags (same trees, fixed author and dates).
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = "v0.0-start"
AUTHOR = {"GIT_AUTHOR_NAME": "course", "GIT_AUTHOR_EMAIL": "course@example.invalid",
          "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00", "GIT_COMMITTER_NAME": "course",
          "GIT_COMMITTER_EMAIL": "course@example.invalid", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00"}


def git(*args, env=None, check=True):
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        sys.exit(f"git {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def names(tree):
    """Names in a committed folder, e.g. names("HEAD:phases") -> ["00-hello", "01-loop", "tags.py"]."""
    return git("ls-tree", "--name-only", tree).splitlines()


def tag_name(phase):
    """Example: tag_name("01-loop") -> "v0.2-loop"."""
    number, name = phase.split("-", 1)
    return f"v0.{int(number) + 1}-{name}"


def build_tree(phase, code_files):
    """HEAD's tree with the top-level code files taken from phases/<phase>/ (removed where it has none; phase None
    removes them all)."""
    with tempfile.TemporaryDirectory() as scratch:
        index = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}  # a private index: yours is untouched
        git("read-tree", "HEAD", env=index)
        for name in sorted(code_files):
            if phase and name in names(f"HEAD:phases/{phase}"):
                blob = git("rev-parse", f"HEAD:phases/{phase}/{name}")
                git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=index)
            else:
                git("update-index", "--force-remove", name, env=index)
        return git("write-tree", env=index)


def title(phase):
    """The lesson's first line without the '#', e.g. "Phase 1: the loop"."""
    lesson = git("show", f"HEAD:phases/{phase}/README.md") if "README.md" in names(f"HEAD:phases/{phase}") else ""
    return (lesson.splitlines() or [phase])[0].lstrip("# ").strip()


def phases():
    return [n for n in names("HEAD:phases") if n[:2].isdigit()]


def build():
    """Make every tag, from v0.0-start on, and print them."""
    code_files = {n for p in phases() for n in names(f"HEAD:phases/{p}") if n.endswith(".py")}
    commit = git("commit-tree", build_tree(None, code_files), "-m", f"The course, before your code ({START})",
                 env=AUTHOR)
    git("update-ref", f"refs/tags/{START}", commit)
    print(f"{START:18} {commit[:10]}  The course, before your code")
    for phase in phases():
        commit = git("commit-tree", build_tree(phase, code_files), "-p", commit, "-m",
                     f"{title(phase)} ({tag_name(phase)})", env=AUTHOR)
        git("update-ref", f"refs/tags/{tag_name(phase)}", commit)
        print(f"{tag_name(phase):18} {commit[:10]}  {title(phase)}")


def start(number, branch=None):
    """Put the learner on a new branch at phase `number`'s start: v0.0-start for phase 0, else the checkpoint
    before it. The tags are built first when they are missing."""
    if number not in range(len(phases())):
        sys.exit(f"there is no phase {number}: the phases are 0 to {len(phases()) - 1}")
    if not git("tag", "--list", START):
        build()
    where = START if number == 0 else tag_name(phases()[number - 1])
    branch = branch or f"my-phase-{number}"
    switched = subprocess.run(["git", "switch", "-c", branch, where], cwd=ROOT, capture_output=True, text=True)
    if switched.returncode != 0:
        sys.exit(f"could not start {branch} at {where}: {switched.stderr.strip()}\n(commit or stash your changes "
                 f"first; if {branch} exists, `git switch {branch}` returns to it, or give another name: "
                 f"python phases/tags.py start {number} NAME)")
    print(f"You are on {branch}, at the start of phase {number} ({where}). Follow phases/{phases()[number]}/"
          f"README.md, then check your work:  python -m pytest tests/checkpoints --phase {number}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["start"] and len(sys.argv) in (3, 4) and sys.argv[2].isdigit():
        start(int(sys.argv[2]), *sys.argv[3:])
    elif len(sys.argv) == 1:
        build()
    else:
        sys.exit(__doc__)
