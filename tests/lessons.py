"""The lesson runner: runs every `$ command` of a lesson's console blocks, in a fresh copy of the course with your
code at the top (a new git repository), and compares what it prints with what the lesson shows. In a shown output,
a line `...` stands for any lines, and `...` inside a line for any text. A command ending in ` &` (a server) runs
in the background until the lesson ends, and its first line is compared. The port a lesson's server is given
(`--port 8000`) is one free here instead, the lesson's in all that is shown: another run beside this one (a second
terminal, a classmate, a second clone) may be using the lesson's.

Run:  python tests/lessons.py phases/01-loop/README.md              (your code: the repository root's .py files)
      python tests/lessons.py --code DIR phases/01-loop/README.md   (the code in DIR)
      python tests/lessons.py --reference phases/01-loop/README.md  (the lesson's checkpoint: tests/test_lessons.py)
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from helpers import ROOT, checkpoints, clean_env

NO_SANDBOX = "note: no sandbox ("  # the one line the harness prints where bubblewrap cannot run
UNSANDBOXED = "[differs here, where there is no sandbox] "  # a difference the lesson's own machine would not show
OTHER_PHASE = "[differs here: your code is {code}'s, this lesson's is {lesson}'s] "  # a later phase prints more
HOME = "/home/you/harness"  # where the lessons say the course lives; the real place is put in its stead
# Windows: the lessons' commands are bash's (VAR=value, &, kill), their output as Linux and macOS print it
NOT_HERE = ("the lessons' commands are bash's, and show what Linux prints: on Windows run this in WSL 2"
            if os.name == "nt" else "")


def commands(lesson_text):
    """[(command, shown output)] of a lesson's ```console blocks, in order, those indented inside a list
    item too."""
    found = []
    for indent, block in re.findall(r"^([ \t]*)```console\n(.*?)^\1```", lesson_text, re.M | re.S):
        block = re.sub(rf"^{indent}", "", block, flags=re.M)
        for part in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, shown = part.partition("\n")
            found.append((command, shown))
    return found


def own_ports(lesson_text):
    """{a port the lesson's servers are given: a port free here}, e.g. {"8000": "40123"}."""
    ports = {}
    for port in re.findall(r"--port (\d+)", lesson_text):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports[port] = str(sock.getsockname()[1])
    return ports


def swap(text, ports):
    """text with each port of `ports` (where it is a port: after `--port `, `127.0.0.1:`, `localhost:`) put for
    its key; swap(text, {v: k for k, v in ports.items()}) turns it back."""
    for old, new in ports.items():
        text = re.sub(rf"(?<=--port ){old}\b|(?<=127\.0\.0\.1:){old}\b|(?<=localhost:){old}\b", new, text)
    return text


def course_tree(code, destination):
    """A copy of the course as a learner has it: the course's files, the code files of the folder `code` at the
    top, in a git repository of its own with one commit."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    top_code = {p.name for c in checkpoints() for p in c.glob("*.py")}
    for name in listed:
        if name and name not in top_code and (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    for source in Path(code).glob("*.py"):
        shutil.copy2(source, destination / source.name)
    env = git_env()
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "the course"]):
        subprocess.run(["git", *command], cwd=destination, env=env, check=True, capture_output=True)
    return destination


def git_env():
    return clean_env(GIT_AUTHOR_NAME="you", GIT_AUTHOR_EMAIL="you@example.com", GIT_COMMITTER_NAME="you",
                     GIT_COMMITTER_EMAIL="you@example.com", GIT_CONFIG_GLOBAL=os.devnull, PYTHONUNBUFFERED="1",
                     PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", TERM="dumb")


def checkpoint_of(code):
    """The checkpoint whose every code file the folder `code` holds as it is (the latest such), or None: your own
    code."""
    for checkpoint in reversed(checkpoints()):
        if all((Path(code) / p.name).is_file() and (Path(code) / p.name).read_bytes() == p.read_bytes()
               for p in checkpoint.glob("*.py")):
            return checkpoint
    return None


def cause(code, lesson, unsandboxed):
    """What starts each difference the runner reports: that the code is another phase's checkpoint (phase 13's
    prints "(0 of them cached)" where lesson 12 shows none), or that there is no sandbox here; else nothing."""
    checkpoint, phase = checkpoint_of(code), Path(lesson).parent.name
    if checkpoint is not None and checkpoint.name != phase and phase in {c.name for c in checkpoints()}:
        return OTHER_PHASE.format(code=checkpoint.name, lesson=phase)
    return UNSANDBOXED if unsandboxed else ""


def matches(shown, printed):
    """True when printed fits shown, where `...` stands for any lines (a line of its own) or any text (in a line).

    Example: matches("a\\n...\\nz x...\\n", "a\\nb\\nc\\nz x=1\\n") -> True
    """
    parts = []
    for line in shown.rstrip("\n").split("\n") if shown.strip() else []:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.rstrip().split("...")) + r"[ \t]*\n")
    return re.fullmatch("".join(parts), printed) is not None


def run_lesson(lesson, code, show=False):
    """Run a lesson's commands in a fresh course tree with the code of the folder `code` (the lesson's own folder:
    the reference); return the differences found."""
    lesson = Path(lesson).resolve()
    found, servers, unsandboxed = [], [], False
    with tempfile.TemporaryDirectory() as scratch:
        tree = course_tree(code, Path(scratch) / "harness")
        text = lesson.read_text(encoding="utf-8")
        ports = own_ports(text)
        try:
            for command, shown in commands(text):
                mine = swap(command, ports)
                printed = background(mine, tree, servers) if command.endswith(" &") else run(mine, tree)
                printed = swap(printed, {new: old for old, new in ports.items()})
                printed = "".join(line.rstrip() + "\n" for line in printed.replace(str(tree), HOME).splitlines())
                if show:
                    print(f"$ {command}\n{printed}")
                unsandboxed = unsandboxed or (NO_SANDBOX in printed and NO_SANDBOX not in shown)  # no bubblewrap here:
                if unsandboxed:  # the lesson shows what a learner with bubblewrap sees, from here on
                    printed = "".join(line for line in printed.splitlines(keepends=True) if NO_SANDBOX not in line)
                if not matches(shown, printed):
                    found.append(f"{cause(code, lesson, unsandboxed)}$ {command}\n--- the lesson shows ---\n{shown}"
                                 f"--- it printed ---\n{printed}")
        finally:
            for server in servers:
                server.kill()
    return found


def run(command, tree):
    """What a command prints, stdout and stderr together, as a terminal would show them."""
    done = subprocess.run(["bash", "-c", f"{command} 2>&1"], cwd=tree, env=git_env(), capture_output=True,
                          text=True, timeout=120)
    return done.stdout


def background(command, tree, servers):
    """Start a command that runs on (a server) and return its first line, once it printed it."""
    server = subprocess.Popen(["bash", "-c", f"exec {command[:-2]} 2>&1"], cwd=tree, env=git_env(),
                              stdout=subprocess.PIPE, text=True)
    servers.append(server)
    return server.stdout.readline()


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run each command a lesson shows on your code, and compare what it "
                                     "prints with what the lesson shows.")
    parser.add_argument("lessons", nargs="+", type=Path, metavar="LESSON", help="a lesson, e.g. "
                        "phases/01-loop/README.md (or its folder)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--code", type=Path, metavar="DIR", default=ROOT, help="the folder whose .py files are your "
                       "code (default: the repository root)")
    which.add_argument("--reference", action="store_true", help="run the lesson's own checkpoint instead")
    args = parser.parse_args(argv)
    if NOT_HERE:
        parser.error(NOT_HERE)
    args.lessons = [lesson / "README.md" if lesson.is_dir() else lesson for lesson in args.lessons]
    for lesson in args.lessons:
        if not lesson.is_file() or not commands(lesson.read_text(encoding="utf-8", errors="replace")):
            parser.error(f"{lesson}: no lesson with commands to run (give a phase's README.md, or its folder)")
    if not args.code.is_dir():
        parser.error(f"--code {args.code}: no such folder")
    problems = [problem for lesson in args.lessons
                for problem in run_lesson(lesson, lesson.parent if args.reference else args.code, show=True)]
    print("\n".join(problems) or "every command printed what the lesson shows")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
