"""What an instructor sees: each learner's repository, phase by phase, checked offline with this
course's own checks.

Run:  python phases/report.py REPO... [--list FILE] [--csv FILE] [--html FILE] [--jobs 4]
      python phases/report.py --list class.txt --phases 0-5 --csv week3.csv --html week3.html
REPO is a learner's folder or a clone URL; --list FILE names one a line, "REPO [NAME]". For each, on
the latest commit (HEAD, or --branch): each phase's check and the exercises that pass, when the
phase first went green, the points the Classroom workflow gives, and the course's check files the
learner changed. A repository that cannot be read is a row saying why. Their code runs in
bubblewrap.
"""

import argparse
import concurrent.futures
import csv
import datetime
import functools
import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = 4  # repositories checked at a time: a check mostly waits on clocks, so more than the cores
# the longest one run of the checks may take; past it, the learner's row says so
CHECK_SECONDS = 900
# top-level .py files that are the course's, not the learner's
COURSE_FILES = {"demo_model.py", "ticket_server.py"}
# What the checks load or start: a change to one of these can make a learner's own check pass. The
# report never runs a learner's copy of them; it flags those that match no version of the course's.
CHECK_FILES = ("tests/checkpoints/", "tests/conftest.py", "tests/helpers.py", "tests/cases.py",
               "tests/warm.py", "tests/mcp_servers.py", "demo_model.py", "ticket_server.py",
               "pytest.ini", "conftest.py")
# All a check gets of your environment: no key, no token, nothing a learner's code could send back;
# only what programs need for their language and terminal, and Windows to start one at all.
KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SYSTEMROOT", "WINDIR", "COMSPEC",
        "PATHEXT", "TEMP", "TMP")
# The learner's code runs in bubblewrap, as the harness runs a command (shell.py): the system
# read-only as shell.py shows it, Python, and of the course only what the checks read (SHOWN): never
# your home, the course's .env or its .git. Writable: the learner's code, a scratch folder, an empty
# /tmp. No network: its 127.0.0.1 is its own.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives",
          "/etc/ld.so.cache", "/etc/ssl/certs", "/etc/localtime", "/etc/passwd", "/etc/group",
          sys.base_prefix, sys.prefix)
SHOWN = ("tests", "phases", "demo_model.py", "ticket_server.py", "pytest.ini")
NOBODY = 65534  # whom the checks run as when you run the report as root: the user id of "nobody"
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0  # Windows has no root, nor geteuid
WORKFLOW = ROOT / ".github" / "workflows" / "classroom.yml"  # GitHub Classroom's grading: points
POINTS = 10  # a phase's points when there is no workflow to read: the workflow's own default
# Runs the checks in a process of their own, reporting through recorder() below.
RUNNER = ("import sys; sys.path.insert(0, sys.argv[1]); import pytest, report; sys.path.pop(0); "
          "sys.exit(pytest.main(sys.argv[3:], plugins=[report.recorder(sys.argv[2])]))")


class Problem(Exception):
    """Why a repository could not be checked, in words for its row."""


def git(repo, *args):
    """Run git in repo; its output, or Problem with git's own words (its first fatal line)."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    if done.returncode != 0:
        said = ([line for line in done.stderr.splitlines() if line.strip()]
                or [f"git {args[0]} failed"])
        raise Problem(next((line for line in said if line.startswith("fatal: ")),
                           said[-1]).removeprefix("fatal: "))
    return done.stdout


def blob_id(data):
    """The id git gives a file's content. Example: blob_id(b"") ->
    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" """
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_check_file(path):
    """Example: is_check_file("tests/checkpoints/test_phase2_guardrails.py") -> True"""
    return (path in CHECK_FILES or path.startswith(CHECK_FILES[0])) and "__pycache__" not in path


def course_check_files():
    """The course's own check files, as they are now: {path relative to the course: its blob id}."""
    paths = [ROOT / p for p in CHECK_FILES
             if not p.endswith("/")] + list((ROOT / CHECK_FILES[0]).rglob("*"))
    return {p.relative_to(ROOT).as_posix(): blob_id(p.read_bytes()) for p in paths
            if p.is_file() and is_check_file(p.relative_to(ROOT).as_posix())}


def known_check_files():
    """Every version the course's check files have had: {path: {blob ids}}, from the course's
    history (all branches) and its files as they are now, so a learner on an older version of the
    course is not flagged."""
    known = {path: {blob} for path, blob in course_check_files().items()}
    try:
        log = git(ROOT, "log", "--all", "--format=", "--raw", "--no-abbrev", "--no-renames", "--",
                  *[p.rstrip("/") for p in CHECK_FILES])
    except Problem:  # not a clone (a downloaded archive): the files as they are now
        return known
    for line in log.splitlines():
        if line.startswith(":") and "\t" in line:
            fields, path = line.split("\t", 1)
            if is_check_file(path):
                known.setdefault(path, set()).update(fields.split()[2:4])
    return known


def phase_numbers(text):
    """Example: phase_numbers("0-3,7") -> [0, 1, 2, 3, 7]"""
    numbers = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        numbers.update(range(int(first), int(last or first) + 1))
    return sorted(numbers)


def checkpoints():
    return sorted(p for p in (ROOT / "phases").iterdir() if p.is_dir() and p.name[:2].isdigit())


def exercises_of(phase):
    """A lesson's exercises that have a check (and a solution). Example: exercises_of(4) -> [1,
    2]"""
    return sorted(int(p.stem.split("-")[1])
                  for p in (checkpoints()[phase] / "solutions").glob("exercise-*.diff"))


# ---- the checks, run on one state of a learner's code
# ----------------------------------------------------------

def recorder(path):
    """The pytest plugin a run of the checks reports through: one result for each check (a phase's,
    or an exercise's), written to path as JSON. A check stops at its first failure, as with -x, but
    only that check; its tests that call the code in this process run first, since code that lacks a
    function fails those at once, where a whole run of the harness may wait out a timeout first."""
    import pytest

    class Recorder:
        def __init__(self):
            self.checks, self.failed, self.ran = {}, {}, set()

        @pytest.hookimpl(trylast=True)  # after conftest.py has chosen the tests
        def pytest_collection_modifyitems(self, items):
            for item in items:
                exercise = item.get_closest_marker("exercise")
                self.checks[item.nodeid] = tuple(exercise.args) if exercise else (item.module.PHASE,
                                                                                  None)
            order = {item.nodeid: n for n, item in enumerate(items)}
            items.sort(key=lambda item: (str(self.checks[item.nodeid]),
                                         not {"load", "harness"} & set(
                item.fixturenames), order[item.nodeid]))

        def pytest_runtest_setup(self, item):
            if self.checks[item.nodeid] in self.failed:
                pytest.skip("an earlier test of this check failed")

        def pytest_runtest_logreport(self, report):
            check = self.checks.get(report.nodeid)
            if report.failed and check not in self.failed:
                self.failed[check] = str(report.longrepr).strip()[:1000]
            if report.when == "call" and report.passed:
                # a check whose every test was skipped here (no bubblewrap) is no pass
                self.ran.add(check)

        def pytest_sessionfinish(self, session):
            results = [[*check, check not in self.failed and check in self.ran,
                        self.failed.get(check, "" if check in self.ran
                                        else "skipped on this machine")]
                       for check in sorted(set(self.checks.values()), key=str)]
            Path(path).write_text(json.dumps(results))

    return Recorder()


def find_sandbox():
    """(bubblewrap's path, "") where the checks can run in it here, a bubblewrap inside it included
    (phase 3's check starts one), else (None, why not). Looked for on PATH, as guards.py looks."""
    if not sys.platform.startswith("linux"):
        return None, f"bubblewrap runs on Linux only, and this is {sys.platform}"
    found = shutil.which("bwrap")
    if not found:
        return None, "bubblewrap is not installed (Debian and Ubuntu: sudo apt install bubblewrap)"
    with tempfile.TemporaryDirectory() as scratch:
        inside = [found, "--ro-bind", "/", "/", "--unshare-all", "--proc", "/proc", "--dev", "/dev",
                  "true"]
        tried = subprocess.run(boxed(inside, found, [owned(scratch)]), capture_output=True,
                               text=True)
    if tried.returncode:
        return None, ("bubblewrap does not start here, or not inside itself: "
                      f"{tried.stderr.strip()[:200]}")
    return found, ""


def boxed(command, sandbox, writable):
    """command inside bubblewrap: namespaces of its own (its network has only its own 127.0.0.1;
    its processes all end with it), SYSTEM and the course's SHOWN files read-only, the folders in
    writable writable, an empty /tmp for its home. Run as root, see below."""
    shown = [*SYSTEM, *(str(ROOT / name) for name in SHOWN)]
    places = ["--setenv", "HOME", "/tmp"]
    for place in shown:
        places += ["--ro-bind-try", place, place]
    for place in writable:
        places += ["--bind", str(place), str(place)]
    places += ["--chdir", str(writable[-1])]
    common = ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"]
    if not AS_ROOT:
        return [sandbox, "--unshare-all", *common, "--tmpfs", "/tmp", *places, "--", *command]
    # Run as root, bubblewrap keeps root's capabilities inside (enough to make a read-only folder
    # writable again) and covers parts of /proc, which stops a bubblewrap inside from mounting its
    # own. So: the same namespaces but the user's, the folders on the way readable, a /proc with
    # nothing covered, then the checks as nobody, with no capability (owned() gives them writable).
    parents = {str(up) for place in [*shown, *writable] for up in Path(place).parents}
    parents -= {"/", "/tmp"}
    folders = [arg for up in sorted(parents) for arg in ("--perms", "0755", "--dir", up)]
    as_nobody = (f'mount -t proc proc /proc && exec setpriv --reuid={NOBODY} --regid={NOBODY} '
                 '--clear-groups -- "$@"')
    return [sandbox, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", *common, "--perms", "1777", "--tmpfs", "/tmp", *folders,
            *places, "--", "sh", "-c", as_nobody, "sh", *command]


def owned(folder):
    """Run as root, a folder the checks write in the sandbox is nobody's, as whom they run."""
    if AS_ROOT:
        for path in [Path(folder), *Path(folder).rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
    return folder


def run_checks(code, phases, exercises, sandbox=None):
    """Run the course's checks of these phases (or their exercises) on the code in folder code, in a
    process of its own, inside bubblewrap when sandbox names it; returns {(phase, exercise or None):
    (passed, what failed)}."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "results.json"
        command = [sys.executable, "-c", RUNNER, str(Path(__file__).parent), str(out),
                   str(ROOT / "tests" / "checkpoints"), "--code", str(code), "-p",
                   "no:cacheprovider", "-o", "addopts=", "-q",
                   *[arg for phase in phases for arg in ("--phase", str(phase))],
                   *(["--exercise", "all"] if exercises else [])]
        env = {name: os.environ[name] for name in KEPT if name in os.environ}
        # only the plugins the course names: another pytest plugin in your environment can neither
        # change a verdict nor slow each check (LangSmith's added a second to every one)
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if sandbox:
            command = boxed(command, sandbox, [owned(code), owned(scratch)])
        else:  # as you: your home, and your temporary folder
            env.update({name: os.environ[name] for name in ("HOME", "TMPDIR")
                        if name in os.environ})
        # its own process group: stopped whole on a timeout
        process = subprocess.Popen(command, cwd=scratch,
                                   env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            printed = process.communicate(timeout=CHECK_SECONDS)[0]
        except subprocess.TimeoutExpired:
            printed = None
        try:  # and whatever it started that is still running (Windows: the process alone)
            os.killpg(process.pid, signal.SIGKILL) if hasattr(os, "killpg") else process.kill()
        except ProcessLookupError:
            pass
        if printed is None:
            process.communicate()
            raise Problem(f"the checks took more than {CHECK_SECONDS} s")
        if not out.exists():
            said = [line for line in printed.splitlines() if line.strip()]
            raise Problem(f"the checks could not run: {(said or ['no output'])[-1][:300]}")
        return {(phase, exercise): (passed, why) for phase, exercise, passed,
                why in json.loads(out.read_text())}


class Checker:
    """Runs the checks once for each state of a learner's code (the same code in two repositories is
    checked once), keeping the results in memory, and in a cache file when one is given."""

    def __init__(self, cache=None, sandbox=None):
        self.path, self.lock, self.fresh, self.retried = cache, threading.Lock(), set(), set()
        self.sandbox = sandbox  # bubblewrap's path, or None: the checks run as you
        try:
            self.results = (json.loads(Path(cache).read_text()) if cache and Path(cache).exists()
                            else {})
        except (OSError, ValueError) as error:
            # not one this report wrote: start afresh, and overwrite it
            print(f"note: --cache {cache} could not be read ({error}); starting without it",
                  file=sys.stderr)
            self.results = {}
        self.course = blob_id(json.dumps(sorted(course_check_files().items())).encode())[:12]

    def key(self, state, phase, exercise):
        """The results of a check depend on the code, the check, and the course's check files."""
        return f"{self.course} {state.key} {phase} {exercise}"

    def check(self, repo, state, phases, exercises=False, again=False):
        """{(phase, exercise): (passed, why)} for the state's code; exercises=True: the exercises of
        the phases. again=True: a check that failed in this run is run once more (a busy machine can
        fail right code)."""
        wanted = [(p, k) for p in phases for k in (exercises_of(p) if exercises else [None])]
        if not state.files:  # no code at all (the start of the course): nothing can pass
            return {check: (False, "no code yet") for check in wanted}
        with self.lock:
            for key in [self.key(state, p, k) for p, k in wanted] if again else []:
                if key in self.fresh and key not in self.retried and not self.results[key][0]:
                    self.retried.add(key)
                    del self.results[key]
            missing = sorted({p for p, k in wanted if self.key(state, p, k) not in self.results and
                              not (k is None and p <= state.done)})
        if missing:
            with tempfile.TemporaryDirectory() as code:
                for name, blob in state.files:
                    Path(code, name).write_bytes(git_bytes(repo, "cat-file", "blob", blob))
                try:
                    found = run_checks(code, missing, exercises, self.sandbox)
                except Problem as problem:  # not kept: the next run tries again
                    return {(p, k): self.known(state, p, k) or (False, str(problem)) for p,
                            k in wanted}
            with self.lock:
                for p, k in wanted:
                    if p in missing:
                        self.results[self.key(state, p, k)] = found.get(
                            (p, k), (False, "the check did not run")
                        )
                        self.fresh.add(self.key(state, p, k))
        return {(p, k): self.known(state, p, k) for p, k in wanted}

    def known(self, state, phase, exercise):
        if exercise is None and phase <= state.done:
            # the course's own code passes its phase's check, and earlier
            return True, ""
        with self.lock:
            found = self.results.get(self.key(state, phase, exercise))
        return found and tuple(found)

    def passes(self, repo, state, phase):
        return self.check(repo, state, [phase])[(phase, None)][0]

    def save(self):
        if self.path:
            with self.lock:
                Path(self.path).write_text(json.dumps(self.results, indent=0))


def git_bytes(repo, *args):
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if done.returncode != 0:
        raise Problem(done.stderr.decode(errors="replace").strip() or f"git {args[0]} failed")
    return done.stdout


# ---- one learner
# ---------------------------------------------------------------------------------------------

@functools.cache
def reference_code():
    """{a checkpoint's code, as State.files holds it: its phase}, for the course's checkpoints as
    they are. A commit holding one (a tag, or the start `python phases/tags.py start N` made) holds
    the course's code."""
    return {code_files(folder.glob("*.py")): phase for phase, folder in enumerate(checkpoints())}


def code_files(paths):
    """The learner's code among these files, as ((name, blob id), ...): the .py files but the
    course's."""
    return tuple(sorted((p.name, blob_id(p.read_bytes())) for p in paths
                        if p.name not in COURSE_FILES))


class State:
    """A commit and the state of the learner's code in it: the top-level .py files but the course's,
    as blobs. done: when that is the code of one of the course's checkpoints (v0.5-contracts: phase
    4's), that phase; the course's code passes the checks of its phase and those before: none need
    run."""

    def __init__(self, repo, line):
        self.commit, seconds = line.split()[:2]
        self.time = int(seconds)
        listing = git(repo, "ls-tree", self.commit)  # "100644 blob <id>\tbackend.py"
        self.files = tuple(sorted((name, entry.split()[2]) for entry, name in
                                  (line.split("\t", 1) for line in listing.splitlines())
                                  if entry.split()[1] == "blob" and name.endswith(".py")
                                  and name not in COURSE_FILES))
        self.done = reference_code().get(self.files, -1) if self.files else -1
        self.reference = self.done >= 0
        self.key = hashlib.sha256(repr(self.files).encode()).hexdigest()[:16]

    def date(self):
        """Example: "2026-03-02 10:00" (UTC)"""
        return datetime.datetime.fromtimestamp(self.time, datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M"
        )

    def when(self):
        """Example: "2026-03-02 10:00 1a2b3c4", or "reference" for a commit of the course's code."""
        return "reference" if self.reference else f"{self.date()} {self.commit[:7]}"


def history(repo, latest):
    """The commits leading to latest (first parents), oldest first, one for each run of the same
    code."""
    states = []
    log = git(repo, "log", "--first-parent", "--reverse", "--format=%H %ct", latest)
    for line in log.splitlines():
        state = State(repo, line)
        if not states or states[-1].files != state.files:
            states.append(state)
    return states


def first_green(checker, repo, states, phase, lo=0):
    """The index of the first state where phase's check passes, the last one passing. It assumes
    that a phase, once green, stays green, and that phases go green in order: the search starts at
    lo, where the phase before went green, and gallops (lo, lo+1, lo+2, lo+4, ...) to the first
    state that passes, then bisects back to the last that failed. A phase usually goes green a few
    commits after the one before, and a check that fails is quick where one that passes runs whole:
    so few states pass through the check, and one or two of them pass. If the state before lo passes
    too, the search goes on before it."""
    last, red, probe = len(states) - 1, lo - 1, lo
    while probe < last and not checker.passes(repo, states[probe], phase):
        red, probe = probe, min(lo + (2 * (probe - lo) or 1), last)
    green = probe  # passes: the last state does
    while green - red > 1:
        middle = (red + green) // 2
        if checker.passes(repo, states[middle], phase):
            green = middle
        else:
            red = middle
    if green == lo > 0 and checker.passes(repo, states[lo - 1], phase):
        # green before the phase before it
        return first_green(checker, repo, states[:lo], phase)
    return green


def open_repository(source, scratch):
    """A git directory to read the learner's commits from: the folder itself, or a bare clone of the
    URL."""
    if Path(source).is_dir():
        try:
            git(source, "rev-parse", "--git-dir")
        except Problem:
            raise Problem(f"{source} is not a git repository") from None
        return Path(source)
    if Path(source).exists() or not any(mark in source for mark in (":", "/", "\\")):
        raise Problem(f"{source} is neither a folder nor a clone URL")
    clone = Path(scratch) / "learner.git"
    try:
        git(scratch, "clone", "--bare", "--quiet", source, str(clone))
    except Problem as error:
        raise Problem(f"could not clone {source}: {error}") from None
    return clone


def check_learner(source, name, phases, args, checker, known):
    """One row of the report: the learner's latest commit, checked."""
    row = {"learner": name, "repository": source, "checks": {}, "exercises": {}, "green": {},
           "tampered": [], "problem": "", "seconds": 0.0}
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            repo = open_repository(source, scratch)
            try:
                latest = git(repo, "rev-parse", "--verify", "--quiet",
                             f"{args.branch or 'HEAD'}^{{commit}}").strip()
            except Problem:
                raise Problem(f"no commit on {args.branch or 'HEAD'} yet") from None
            states = history(repo, latest)
            last = State(repo, git(repo, "log", "-1", "--format=%H %ct", latest).strip())
            row["commit"], row["committed"] = last.commit[:7], last.date()
            row["checks"] = checker.check(repo, states[-1], phases)
            failed = [p for p in phases if not row["checks"][(p, None)][0]]
            row["checks"].update(checker.check(repo, states[-1], failed, again=True))
            with_exercises = [p for p in phases if exercises_of(p)]
            for (phase, exercise), (passed, _) in checker.check(repo, states[-1], with_exercises,
                                                                True).items():
                row["exercises"].setdefault(phase, [])
                if passed:
                    row["exercises"][phase].append(exercise)
            lo = 0
            for phase in phases:
                if row["checks"][(phase, None)][0] and not args.no_history:
                    lo = first_green(checker, repo, states, phase, lo)
                    row["green"][phase] = states[lo].when()
            row["tampered"] = tampered(repo, latest, known)
    except Problem as problem:
        row["problem"] = str(problem)
    except Exception as error:
        # the row says what went wrong; the other learners are still reported
        row["problem"] = f"the report failed on this repository: {type(error).__name__}: {error}"
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def tampered(repo, commit, known):
    """The check files in commit that match no version of the course's: ["tests/checkpoints/x.py
    (edited)", ...]."""
    found = []
    for line in git(repo, "ls-tree", "-r", commit).splitlines():
        entry, path = line.split("\t", 1)
        if is_check_file(path) and entry.split()[2] not in known.get(path, ()):
            found.append(f"{path} ({'edited' if path in known else 'added'})")
    return found


# ---- what the instructor reads
# -------------------------------------------------------------------------------

def points_of_phases():
    """{phase: points} as the GitHub Classroom workflow counts them: each grader's max-score, the
    first after the command naming its --phase; POINTS each without a workflow. Example: {0: 10}"""
    try:
        text = WORKFLOW.read_text(encoding="utf-8")
    except OSError:
        return {phase: POINTS for phase in range(len(checkpoints()))}
    found = {}
    for command in re.finditer(r"command: .*--phase (\d+)", text):
        score = re.compile(r"max-score: (\d+)").search(text, command.end())
        found.setdefault(int(command.group(1)), int(score.group(1)) if score else 0)
    return found


def statuses(row, phases):
    """{phase: "pass", "fail", or "" when it was not checked (the repository could not be)}"""
    return {p: "" if (p, None) not in row["checks"] else "pass" if row["checks"][(p, None)][0]
            else "fail" for p in phases}


def progress(row, phases, points):
    """What a learner's line says: {"furthest": the last phase that passes, or None; "points";
    "wrong": the problem, the tampered files and the first failure, in words, or ""}."""
    status = statuses(row, phases)
    passed = [p for p in phases if status[p] == "pass"]
    failed = [p for p in phases if status[p] == "fail"]
    wrong = [row["problem"], "tampered: " + "; ".join(row["tampered"]) if row["tampered"] else "",
             f"phase {failed[0]}: {' '.join(row['checks'][(failed[0], None)][1].split())}"
             if failed else ""]
    return {"furthest": max(passed, default=None), "points": sum(points.get(p, 0) for p in passed),
            "wrong": " · ".join(filter(None, wrong))}


def table(rows, phases, points):
    """The report as rows of text, the first its header: what the CSV holds and the page shows."""
    header = ["learner", "repository", "commit", "committed", "furthest", "points"]
    for phase in phases:
        header += [f"phase {phase}", f"phase {phase} exercises", f"phase {phase} first green"]
    lines = [header + ["tampered", "problem", "what is wrong"]]
    for row in rows:
        said, status = progress(row, phases, points), statuses(row, phases)
        line = [row["learner"], row["repository"], row.get("commit", ""), row.get("committed", ""),
                "" if said["furthest"] is None else said["furthest"], said["points"]]
        for phase in phases:
            line += [status[phase], " ".join(map(str, row["exercises"].get(phase, []))),
                     row["green"].get(phase, "")]
        lines.append(line + ["; ".join(row["tampered"]), row["problem"], said["wrong"]])
    return lines


def grid(rows, phases):
    """The report on the terminal: a line for each learner, then when each phase first went
    green."""
    width = max([len(row["learner"]) for row in rows] + [7])
    out = ([f"{'learner':{width}}  commit   " + "".join(f"{'phase ' + str(p):10}"
                                                        for p in phases) + "tampered"])
    for row in rows:
        cells = []
        for phase in phases:
            result = row["checks"].get((phase, None))
            cell = "" if result is None else "ok" if result[0] else "--"
            done = row["exercises"].get(phase)
            cells.append(f"{cell + (' +' + ','.join(map(str, done)) if done else ''):10}")
        said = row["problem"] or ", ".join(t.split(" (")[0] for t in row["tampered"]) or "-"
        out.append(f"{row['learner']:{width}}  {row.get('commit', ''):7}  {''.join(cells)}{said}")
    out.append(f"\nfirst green (UTC; reference: the course's own code)\n{'learner':{width}}  " +
               "".join(f"{'phase ' + str(p):26}" for p in phases))
    for row in rows:
        out.append(f"{row['learner']:{width}}  " + "".join(f"{row['green'].get(p, ''):26}"
                                                           for p in phases))
    return "\n".join(line.rstrip() for line in out)


# One file, no script, nothing fetched. Its tables have a fixed layout: their columns share the
# window's width (1400 px: a line a learner, then the grid), and a longer text ends in "...".
STYLE = """body { font: 14px/1.45 sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; margin: 0; } h2 { font-size: 16px; margin: 28px 0 6px; }
p { margin: 4px 0 12px; color: #444; } small { color: #666; }
table { border-collapse: collapse; table-layout: fixed; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
th { font-size: 12px; color: #555; }
col.learner { width: 170px; } col.phases { width: 230px; } col.furthest { width: 80px; }
col.points { width: 90px; } col.commit { width: 190px; }
i { display: inline-block; width: 11px; height: 14px; margin-right: 2px; vertical-align: -2px; }
i.pass { background: #3b9b48; } i.fail { background: #d9534f; } i.none { background: #e4e4e4; }
td.wrong:not(:empty) { background: #fff0c2; }
table.grid td { font-size: 12px; padding: 3px 4px; }
table.grid b, table.grid span { display: block; }
table.grid td.pass { background: #d9f2d9; } table.grid td.fail { background: #f9dcdc; }
dl { font-size: 13px; } dt { font-weight: bold; margin-top: 8px; }
dd { margin: 2px 0 0 16px; white-space: pre-wrap; }"""
INTRO = ("Made {made} UTC with the course's own checks, on each learner's latest commit: "
         "{count} learners, phases {first} to {last}, furthest first. Points as the GitHub "
         "Classroom workflow counts them. What is wrong: the repository's problem, the check files "
         "that match no version of the course's (tampered), and the first phase that fails, in the "
         "check's words (in full at the bottom).")
GRID = ("A cell: the phase's check on the latest commit, the exercises that pass there, and when "
        "the phase first went green (month-day hour:minute, UTC; reference: the course's own "
        "code). Hover a cell for the date, the commit and the failure.")


def summary_line(row, said, phases, most):
    """The learner's one line: name, a box a phase, the furthest phase, the points, the last commit,
    what is wrong. The repository shows on hover over the name."""
    cell, status = html.escape, statuses(row, phases)
    boxes = "".join(f'<i class="{status[p] or "none"}" title="phase {p}: '
                    f'{status[p] or "not checked"}"></i>' for p in phases)
    furthest = "none" if said["furthest"] is None else f"phase {said['furthest']}"
    return (f'<tr><td class="learner" title="{cell(row["learner"] + ": " + row["repository"])}">'
            f'{cell(row["learner"])}</td><td class="phases">{boxes}</td>'
            f'<td class="furthest">{furthest}</td>'
            f'<td class="points">{said["points"]} <small>of {most}</small></td>'
            f'<td class="commit">{cell(row.get("committed", ""))} '
            f'<small>{cell(row.get("commit", ""))}</small></td>'
            f'<td class="wrong" title="{cell(said["wrong"])}">{cell(said["wrong"])}</td></tr>')


def grid_line(row, phases):
    """The learner's row of the grid: a cell a phase, with its status, its exercises that pass, and
    when it first went green (month-day hour:minute; the rest, and any failure, on hover)."""
    cell, status, cells = html.escape, statuses(row, phases), []
    for phase in phases:
        green = row["green"].get(phase, "")  # "2026-03-02 10:00 1a2b3c4", or "reference"
        hover = " ".join(f"{green} {row['checks'].get((phase, None), (False, ''))[1]}".split())
        done = " ".join(map(str, row["exercises"].get(phase, [])))
        cells.append(f'<td class="{status[phase] or "none"}" title="{cell(hover)}">'
                     f'<b>{status[phase]}</b><span class="ex">{"ex " + done if done else ""}</span>'
                     f'<span class="green">{cell(green[5:16] if green[:1].isdigit() else green)}'
                     "</span></td>")
    who = cell(row["learner"] + ": " + row["repository"])
    return f'<tr><td class="learner" title="{who}">{cell(row["learner"])}</td>{"".join(cells)}</tr>'


def page(rows, phases, points, made):
    """One self-contained HTML page: a line a learner, furthest first (those that could not be
    read last); the full grid below; then what is wrong, in full."""
    said = [progress(row, phases, points) for row in rows]
    order = sorted(range(len(rows)), key=lambda n: (
        1 if said[n]["furthest"] is None else -said[n]["furthest"], -said[n]["points"],
        rows[n]["learner"].lower()))
    most = sum(points.get(p, 0) for p in phases)
    lines = "".join(summary_line(rows[n], said[n], phases, most) for n in order)
    grid_rows = "".join(grid_line(rows[n], phases) for n in order)
    full = "".join(f"<dt>{html.escape(rows[n]['learner'])}</dt>"
                   f"<dd>{html.escape(said[n]['wrong'])}</dd>" for n in order if said[n]["wrong"])
    passing = {p: sum(statuses(row, [p])[p] == "pass" for row in rows) for p in phases}
    heads = "".join(f"<th>phase {p}<br><small>{passing[p]} of {len(rows)}</small></th>"
                    for p in phases)
    intro = INTRO.format(made=made, count=len(rows), first=phases[0], last=phases[-1])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Course report, '
            f"{made}</title><style>{STYLE}</style></head><body><h1>Course report</h1><p>{intro}</p>"
            '<table class="summary"><colgroup><col class="learner"><col class="phases">'
            '<col class="furthest"><col class="points"><col class="commit"><col></colgroup><thead>'
            "<tr><th>learner</th><th>phases</th><th>furthest</th><th>points</th>"
            f"<th>last commit (UTC)</th><th>what is wrong</th></tr></thead><tbody>{lines}</tbody>"
            f"</table><h2>Every phase</h2><p>{GRID}</p>"
            '<table class="grid"><colgroup><col class="learner"></colgroup><thead><tr>'
            f"<th>learner</th>{heads}</tr></thead><tbody>{grid_rows}</tbody></table>"
            f"<h2>What is wrong, in full</h2><dl>{full or '<dt>nothing</dt>'}</dl></body></html>\n")


def learners(args, parser):
    """(source, name) for each repository given, from the command line and --list, in that order."""
    given = [(source, None) for source in args.repos]
    if args.list:
        try:
            lines = Path(args.list).read_text(encoding="utf-8").splitlines()
        except OSError as error:
            parser.error(f"--list {args.list}: {error.strerror}")
        given += [(line.split()[0], " ".join(line.split()[1:]) or None) for line in lines
                  if line.strip() and not line.lstrip().startswith("#")]
    if not given:
        parser.error("name at least one repository, or --list FILE")
    return [(source, name or Path(source.rstrip("/\\")).name.removesuffix(".git")) for source,
            name in given]


def main(argv=None):
    parser = (argparse.ArgumentParser(description="Check learners' repositories with the "
                                                  "course's own checks."))
    parser.add_argument("repos", nargs="*", metavar="REPO", help="a learner's folder or clone URL")
    parser.add_argument("--list", metavar="FILE",
                        help='a file naming one repository a line: "REPO [NAME]"')
    parser.add_argument("--csv", metavar="FILE", help="write the report as CSV too")
    parser.add_argument("--html", metavar="FILE", help="write the report as one HTML page too")
    parser.add_argument("--jobs", type=int, default=JOBS,
                        help=f"repositories checked at a time (default {JOBS})")
    parser.add_argument("--phases", default=f"0-{len(checkpoints()) - 1}",
                        help="which phases, e.g. 0-5 or 2,3")
    parser.add_argument("--branch", help="check this branch's latest commit, not HEAD's")
    parser.add_argument("--no-history", action="store_true",
                        help="skip when each phase first went green")
    parser.add_argument("--cache", metavar="FILE",
                        help="keep the results here, to check only new code next time")
    args = parser.parse_args(argv)
    try:
        phases = phase_numbers(args.phases)
    except ValueError:
        parser.error(f"--phases {args.phases}: give numbers, e.g. 0-5 or 2,3")
    if not phases or not set(phases) <= set(range(len(checkpoints()))) or args.jobs < 1:
        parser.error(f"--phases are 0 to {len(checkpoints()) - 1}, and --jobs at least 1")
    sources, started = learners(args, parser), time.time()
    sandbox, why = find_sandbox()
    if not sandbox:
        print(f"note: no sandbox ({why}): the learners' code runs as you, able to read and change "
              "your files", file=sys.stderr, flush=True)
    checker, known, points = Checker(args.cache, sandbox), known_check_files(), points_of_phases()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        rows = (list(pool.map(lambda pair: check_learner(*pair, phases, args, checker, known),
                              sources)))
    checker.save()
    print(grid(rows, phases))
    seconds = time.time() - started
    print(f"\n{len(rows)} repositories in {seconds:.0f} s, {args.jobs} at a time "
          f"({sum(r['seconds'] for r in rows) / len(rows):.0f} s each on average)")
    made = datetime.datetime.fromtimestamp(started, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M"
    )
    try:
        if args.csv:
            with open(args.csv, "w", newline="", encoding="utf-8") as out:
                csv.writer(out).writerows(table(rows, phases, points))
        if args.html:
            Path(args.html).write_text(page(rows, phases, points, made), encoding="utf-8")
    except OSError as error:
        sys.exit(f"error: could not write {error.filename}: {error.strerror}")


if __name__ == "__main__":
    main()
