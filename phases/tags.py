"""Build the course tags from the phase checkpoints, touching none of your files; or start a phase
on a branch of your own.

Run:  python phases/tags.py              builds v0.0-start, v0.1-hello, v0.2-loop, ...
                                         (then: git diff v0.2-loop v0.3-guardrails)
      python phases/tags.py start 3      puts you on a new branch my-phase-3 at phase 3's start
v0.0-start is HEAD's committed tree without the code you write (nor the course's own CI); each
later tag adds a checkpoint's code, in one linear history, the same each time, leaving your files
and branch alone. In your own repository (a Classroom copy) a phase's start is a new commit on top
of yours: no push needs force.
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
          "GIT_COMMITTER_EMAIL": "course@example.invalid",
          "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00"}
# The course's own CI (8 jobs a push, on three OSes): not in a learner's copy, whose checks are
# classroom.yml's
COURSE_ONLY = (".github/workflows/course.yml",)
# Who makes a phase's start on top of your commits: the course, dated now (your history in order).
NOW = {name: value for name, value in AUTHOR.items() if not name.endswith("_DATE")}


def git(*args, env=None, check=True):
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        sys.exit(f"git {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def names(tree):
    """Names in a committed folder, e.g. names("HEAD:phases") -> ["00-hello", "01-loop",
    "tags.py"]."""
    return git("ls-tree", "--name-only", tree).splitlines()


def tag_name(phase):
    """Example: tag_name("01-loop") -> "v0.2-loop"."""
    number, name = phase.split("-", 1)
    return f"v0.{int(number) + 1}-{name}"


def build_tree(phase, files):
    """HEAD's tree with the top-level code files taken from phases/<phase>/ (removed where it has
    none; phase None removes them all)."""
    with tempfile.TemporaryDirectory() as scratch:
        # a private index: yours is untouched
        index = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git("read-tree", "HEAD", env=index)
        for name in sorted(files):
            if phase and name in names(f"HEAD:phases/{phase}"):
                blob = git("rev-parse", f"HEAD:phases/{phase}/{name}")
                git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=index)
            else:
                git("update-index", "--force-remove", name, env=index)
        for name in COURSE_ONLY:
            git("update-index", "--force-remove", name, env=index)
        return git("write-tree", env=index)


def title(phase):
    """The lesson's first line without the '#', e.g. "Phase 1: the loop"."""
    lesson = (git("show", f"HEAD:phases/{phase}/README.md")
              if "README.md" in names(f"HEAD:phases/{phase}") else "")
    return (lesson.splitlines() or [phase])[0].lstrip("# ").strip()


def phases():
    return [n for n in names("HEAD:phases") if n[:2].isdigit()]


def build():
    """Make every tag, from v0.0-start on, and print them."""
    files = code_files()
    commit = git("commit-tree", build_tree(None, files), "-m",
                 f"The course, before your code ({START})", env=AUTHOR)
    git("update-ref", f"refs/tags/{START}", commit)
    print(f"{START:18} {commit[:10]}  The course, before your code")
    for phase in phases():
        commit = git("commit-tree", build_tree(phase, files), "-p", commit, "-m",
                     f"{title(phase)} ({tag_name(phase)})", env=AUTHOR)
        git("update-ref", f"refs/tags/{tag_name(phase)}", commit)
        print(f"{tag_name(phase):18} {commit[:10]}  {title(phase)}")


def code_files():
    """Every top-level code file a checkpoint has, e.g. {"backend.py", "harness.py", ...}."""
    return {n for p in phases() for n in names(f"HEAD:phases/{p}") if n.endswith(".py")}


def is_the_course():
    """True in the course's own repository: HEAD's top-level code is its last checkpoint's, as the
    course keeps it. A Classroom copy starts with no code, and a learner's branch holds theirs."""
    last = f"HEAD:phases/{phases()[-1]}"
    return all(git("rev-parse", "--verify", "--quiet", f"HEAD:{name}", check=False) ==
               git("rev-parse", f"{last}/{name}") for name in names(last) if name.endswith(".py"))


def on_top(number, tag):
    """A commit on top of HEAD holding phase `number`'s start: HEAD's tree with the top-level code
    of the checkpoint before it (none for phase 0), so that everything else of yours stays; HEAD
    itself when it holds that already (a fresh Classroom copy, for phase 0). Your code stays in
    the history."""
    tree = build_tree(phases()[number - 1] if number else None, code_files())
    if tree == git("rev-parse", "HEAD^{tree}"):
        return git("rev-parse", "HEAD")
    message = (f"Phase {number}'s start, from the course: the code of {tag}\n\nMade by `python "
               f"phases/tags.py start {number}` on top of the commits before it, which keep "
               "your code.")
    return git("commit-tree", tree, "-p", "HEAD", "-m", message, env=NOW)


def start(number, branch=None):
    """Put the learner on a new branch at phase `number`'s start: in the course's own repository,
    the tag (v0.0-start for phase 0, else the checkpoint before it); anywhere else, a new commit on
    top of HEAD holding the same code, so that a push to your own repository needs no force. The
    tags are built first when missing."""
    if number not in range(len(phases())):
        sys.exit(f"there is no phase {number}: the phases are 0 to {len(phases()) - 1}")
    if not git("tag", "--list", START):
        build()
    tag = START if number == 0 else tag_name(phases()[number - 1])
    where = tag if is_the_course() else on_top(number, tag)
    branch = branch or f"my-phase-{number}"
    switched = subprocess.run(["git", "switch", "-c", branch, where], cwd=ROOT, capture_output=True,
                              text=True)
    if switched.returncode != 0:
        sys.exit(f"could not start {branch} at {tag}: {switched.stderr.strip()}\n(commit or stash "
                 f"your changes first; if {branch} exists, `git switch {branch}` returns to it, or "
                 f"give another name: python phases/tags.py start {number} NAME)")
    mine = "" if where == tag else (", on top of the commits you had (no force needed: "
                                    "git push origin HEAD:main)")
    print(f"You are on {branch}, at the start of phase {number} ({tag}){mine}. Follow "
          f"phases/{phases()[number]}/README.md, then check your work:  "
          f"python -m pytest tests/checkpoints --phase {number}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["start"] and len(sys.argv) in (3, 4) and sys.argv[2].isdigit():
        start(int(sys.argv[2]), *sys.argv[3:])
    elif len(sys.argv) == 1:
        build()
    else:
        sys.exit(__doc__)
