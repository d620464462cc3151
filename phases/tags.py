"""Build the course tags (v0.1-hello, v0.2-loop, ...) from the phase checkpoints, touching none of your files.

Run:  python phases/tags.py      then   git checkout v0.2-loop   or   git diff v0.2-loop v0.3-guardrails
Each tag is HEAD's committed tree with the top-level code files replaced by that phase's checkpoint, and the
tags form one linear history. The working tree, the index and the current branch are left alone, and
running it again gives the same tags (same trees, fixed author and dates).
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AUTHOR = {"GIT_AUTHOR_NAME": "course", "GIT_AUTHOR_EMAIL": "course@example.invalid",
          "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00", "GIT_COMMITTER_NAME": "course",
          "GIT_COMMITTER_EMAIL": "course@example.invalid", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00"}


def git(*args, env=None):
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if result.returncode != 0:
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
    """HEAD's tree with the top-level code files taken from phases/<phase>/ (or removed if it has none)."""
    with tempfile.TemporaryDirectory() as scratch:
        index = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}  # a private index: yours is untouched
        git("read-tree", "HEAD", env=index)
        for name in sorted(code_files):
            path = f"phases/{phase}/{name}"
            if name in names(f"HEAD:phases/{phase}"):
                blob = git("rev-parse", f"HEAD:{path}")
                git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=index)
            else:
                git("update-index", "--force-remove", name, env=index)
        return git("write-tree", env=index)


def title(phase):
    """The lesson's first line without the '#', e.g. "Phase 1: the loop"."""
    lesson = git("show", f"HEAD:phases/{phase}/README.md") if "README.md" in names(f"HEAD:phases/{phase}") else ""
    return (lesson.splitlines() or [phase])[0].lstrip("# ").strip()


def main():
    phases = [n for n in names("HEAD:phases") if n[:2].isdigit()]
    code_files = {n for p in phases for n in names(f"HEAD:phases/{p}") if n.endswith(".py")}
    parent = []
    for phase in phases:
        tree = build_tree(phase, code_files)
        commit = git("commit-tree", tree, *parent, "-m", f"{title(phase)} ({tag_name(phase)})", env=AUTHOR)
        git("update-ref", f"refs/tags/{tag_name(phase)}", commit)
        print(f"{tag_name(phase):18} {commit[:10]}  {title(phase)}")
        parent = ["-p", commit]


if __name__ == "__main__":
    main()
