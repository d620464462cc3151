"""Helpers the tests, the scripted cases, the benchmark and the lesson runner share, each defined once here."""
import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_model  # noqa: E402, F401 (tests import it from here)
import pytest  # noqa: E402
from warm import WARM, Started, run_warm  # noqa: E402 (a script's run in a warm process: tests/warm.py)

# Variables that would point a child process at a real provider: never inherited by tests.
PROVIDER_VARS = ("GROQ_API_KEY", "OPENAI_API_KEY", "API_KEY", "BACKEND", "MODEL", "BASE_URL")


def bubblewrap_problem():
    """Why bubblewrap cannot run commands here, in one line, or "" when it can."""
    found = shutil.which("bwrap")
    if sys.platform == "darwin":
        return "bubblewrap is Linux's sandbox: on macOS the harness uses Seatbelt, which tests/test_seatbelt.py attacks"
    if not sys.platform.startswith("linux"):
        return "bubblewrap is Linux's sandbox, and Windows has none: WSL 2, with bubblewrap, runs these checks"
    if not found:
        return "bubblewrap is not installed here (Debian and Ubuntu: sudo apt install bubblewrap)"
    done = subprocess.run([found, "--ro-bind", "/", "/", "--unshare-all", "true"], capture_output=True, text=True)
    return f"bubblewrap cannot start here: {done.stderr.strip()}" if done.returncode else ""


BUBBLEWRAP_MISSING = bubblewrap_problem()
needs_bubblewrap = pytest.mark.skipif(bool(BUBBLEWRAP_MISSING), reason=BUBBLEWRAP_MISSING)


def path_without_bubblewrap(folder):
    """A PATH holding every program of this one but bwrap (links in folder/bin-without-bwrap): the machine of a
    learner who has no sandbox. Windows has none: its PATH as it is. A Mac's Seatbelt is found by its own path,
    which no PATH hides: the test skips there."""
    if sys.platform == "darwin":
        pytest.skip("a Mac's sandbox, /usr/bin/sandbox-exec, is found by its own path, which no PATH hides: the "
                    "Linux jobs check the harness without a sandbox")
    if os.name == "nt":
        return os.environ.get("PATH", os.defpath)
    bare = Path(folder) / "bin-without-bwrap"
    bare.mkdir(exist_ok=True)
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        for program in Path(entry).iterdir() if os.path.isdir(entry) else []:
            if program.name != "bwrap" and not (bare / program.name).exists():
                (bare / program.name).symlink_to(program)
    return str(bare)


# What Windows lacks, for the tests that need it. Windows sends no signal: os.kill() ends the
# process, and Popen.send_signal() ends it (SIGTERM) or raises ValueError (SIGINT, SIGHUP). Closing
# standard output (>&-) is sh's, and /dev/full, a disk always full, is Linux's.
needs_fifos = pytest.mark.skipif(
    not hasattr(os, "mkfifo"), reason="os.mkfifo is POSIX only: on Windows this runs in WSL 2")
needs_signals = pytest.mark.skipif(
    os.name == "nt", reason="sends SIGINT, SIGTERM or SIGHUP, which Windows cannot send a process "
    "(it ends it instead): on Windows this runs in WSL 2")
posix_redirections = pytest.mark.skipif(
    os.name == "nt", reason="closes standard output with sh's >&-, which Windows' cmd lacks: on "
    "Windows this runs in WSL 2")
posix_shell = pytest.mark.skipif(
    os.name == "nt", reason="runs sh's commands (sleep, yes, setsid, &, a while loop), which Windows' "
    "cmd lacks: on Windows this runs in WSL 2")
needs_plain_programs = pytest.mark.skipif(os.name == "nt", reason=(
    "Windows keeps none of READ_ONLY's programs (ls, cat, grep...) in System32, where system_program() "
    "looks, so there every command asks: on Windows this runs in WSL 2"))


def can_link():
    """True where this user may make a symbolic link: always on Linux and macOS; on Windows only in
    Developer Mode or as an administrator."""
    if os.name != "nt":
        return True
    with tempfile.TemporaryDirectory() as folder:
        try:
            os.symlink(folder, os.path.join(folder, "link"), target_is_directory=True)
            return True
        except OSError:
            return False


needs_symlinks = pytest.mark.skipif(
    os.name == "nt" and not can_link(), reason="makes a symbolic link, which Windows allows only in "
    "Developer Mode or to an administrator: turn Developer Mode on, or run this in WSL 2")


def touch(name):
    """The command that makes an empty file, in the shell run_shell uses: sh's `touch NAME`, or
    cmd's `type nul > NAME` on Windows, which has no touch."""
    return f"type nul > {name}" if os.name == "nt" else f"touch {name}"


def sleep_then(seconds, word=None):
    """A command that waits whole seconds (then prints a word), in the shell run_shell uses: sh's
    sleep, or on Windows cmd's own (no sleep there: ping waits a second between its echoes, and &
    runs one command, then the next)."""
    if os.name == "nt":
        return f"ping -n {seconds + 1} 127.0.0.1 > nul" + (f" & echo {word}" if word else "")
    return f"sleep {seconds}" + (f"; echo {word}" if word else "")


needs_a_subreaper = pytest.mark.skipif(not sys.platform.startswith("linux"), reason=(
    "only Linux lets the harness adopt what left a command's group (a subreaper); on macOS and "
    "Windows the group, or the tree, is all there is: Linux (a VM, WSL 2, or CI's ubuntu job) runs this"))
needs_dev_full = pytest.mark.skipif(
    not os.path.exists("/dev/full"), reason="fills standard output with /dev/full, which only "
    "Linux has: on macOS this runs on Linux (a VM, or CI's ubuntu job)")

PRESSED_BY_A_TEST = []  # set while a test's own Ctrl-C is on its way, so conftest does not take it for yours


def press_ctrl_c():
    """Send this process the SIGINT that Ctrl-C sends, as a test of what the code under test does with it."""
    PRESSED_BY_A_TEST.append(True)
    if os.name == "nt":  # os.kill() would end this process there; raise_signal() runs the handler
        signal.raise_signal(signal.SIGINT)
    else:
        os.kill(os.getpid(), signal.SIGINT)


def checkpoints():
    """The phase folders, in order: [Path('phases/00-hello'), Path('phases/01-loop'), ...]."""
    return sorted(p for p in (ROOT / "phases").iterdir() if p.is_dir() and p.name[:2].isdigit())


def tag_name(checkpoint):
    """Example: tag_name(Path("phases/01-loop")) -> "v0.2-loop" """
    number, name = Path(checkpoint).name.split("-", 1)
    return f"v0.{int(number) + 1}-{name}"


def fingerprint(folder, files=None):
    """A hash of a folder's code files (all *.py, or those named): two checkpoints with the same code share it."""
    digest = hashlib.sha256()
    for path in sorted(Path(folder).glob("*.py")):
        if files is None or path.name in files:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def copy_code(code_dir, destination):
    """Copy a folder's code files, and the offline model, into destination (made if needed); returns it."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for source in [*Path(code_dir).glob("*.py"), ROOT / "demo_model.py"]:
        if not (destination / source.name).exists():
            shutil.copy(source, destination / source.name)
    return destination


def solution(phase, exercise):
    """The reference solution of a lesson's exercise: a patch on the checkpoint's code, e.g.
    solution(4, 1) -> Path("phases/04-contracts/solutions/exercise-1.diff")."""
    return checkpoints()[phase] / "solutions" / f"exercise-{exercise}.diff"


def apply_solution(folder, phase, exercise):
    """Apply an exercise's reference solution to a copy of its checkpoint's code in folder (as `git apply` does in
    a learner's repository); AssertionError, saying so, when it no longer applies."""
    applied = subprocess.run(["git", "apply", "--whitespace=nowarn", str(solution(phase, exercise))], cwd=folder,
                             capture_output=True, text=True, env=clean_env(GIT_CEILING_DIRECTORIES=str(folder.parent)))
    assert applied.returncode == 0, f"{solution(phase, exercise)} does not apply: {applied.stderr.strip()}"


# GitHub Classroom makes each learner's repository from the template: one commit, by its bot.
CLASSROOM_BOT = {"GIT_AUTHOR_NAME": "github-classroom[bot]", "GIT_COMMITTER_NAME": "GitHub",
                 "GIT_AUTHOR_EMAIL": "66690702+github-classroom[bot]@users.noreply.github.com",
                 "GIT_COMMITTER_EMAIL": "noreply@github.com"}


def course_clone(folder):
    """A clone of this course's committed state in folder, with its tags (python phases/tags.py)."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(folder)], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "phases/tags.py"], cwd=folder, check=True, capture_output=True)
    return Path(folder)


def classroom_copy(course, folder):
    """A learner's repository as GitHub Classroom makes it from the template (the course's
    v0.0-start, pushed as the README's "For instructors" says): a bare origin, folder.git, whose one
    commit, "Initial commit" by the Classroom bot, holds the template's files; and the learner's
    clone of it in folder."""
    def git(cwd, *args):
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                              env=clean_env(**CLASSROOM_BOT)).stdout.strip()

    origin = Path(f"{folder}.git")
    template = git(course, "rev-parse", "v0.0-start^{tree}")
    first = git(course, "commit-tree", template, "-m", "Initial commit")
    git(course, "init", "--quiet", "--bare", "--initial-branch", "main", str(origin))
    git(course, "push", "--quiet", str(origin), f"{first}:refs/heads/main")
    git(origin.parent, "clone", "--quiet", str(origin), str(folder))
    return Path(folder)


def clean_env(**settings):
    """This environment without provider settings, plus those given, for a child process that must not reach a
    real provider or write bytecode into the code under test."""
    while True:  # the scripted cases call this from threads while pytest sets and unsets PYTEST_CURRENT_TEST
        try:
            env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
            break
        except KeyError:  # a variable went away while it was copied: copy again
            continue
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8", **settings}


def run_python(cwd, *args, env=None, input="", timeout=60):
    """Run `python ARGS...` in cwd with no provider settings but those given; returns the CompletedProcess. A
    script (python SCRIPT.py ...) runs in a process forked from a warm one (see run_warm); anything else, such as
    `python -X importtime ...`, in a new interpreter."""
    if WARM and args and args[0].endswith(".py"):
        return run_warm(cwd, *args, env=clean_env(**(env or {})), input=input, timeout=timeout)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=clean_env(**(env or {})), input=input,
                          capture_output=True, encoding="utf-8", timeout=timeout)


def start_python(cwd, *args, env=None, stdin=subprocess.DEVNULL, text=False):
    """Start `python SCRIPT.py ARGS...` in cwd with no provider settings but those given, its output in pipes: a
    process forked from the warm one (tests/warm.py's Started), or, where there is none, a new interpreter."""
    if WARM:
        return Started(cwd, *args, env=clean_env(**(env or {})), stdin=stdin, text=text)
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=clean_env(**(env or {})), stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text)


def groq_env(server, key="gsk_test"):
    """Settings that point the code at a scripted server imitating Groq (Groq's path, key and model)."""
    return {"BACKEND": "groq", "GROQ_API_KEY": key, "BASE_URL": server.url.replace("/v1", "/openai/v1"),
            "MODEL": "openai/gpt-oss-120b"}


def scripted_backend(server, name="groq"):
    """The backend settings run() and chat() take, pointing at a scripted server."""
    return {"name": name, "base_url": server.url, "api_key": "gsk_test", "model": "openai/gpt-oss-120b"}


def since_first_request(server, started):
    """Seconds since the server got its first request: a harness's time on the clock, without its start-up, which
    takes seconds of its own on a busy machine. Since `started` if a slow start used up the deadline first."""
    return time.monotonic() - (server.requests[0]["time"] if server.requests else started)


def tool_calls(*pairs):
    """A scripted reply calling tools, ids call_0, call_1, ...: tool_calls(("run_shell", {"command": "ls"}), ...)"""
    return {"tool_calls": [{"name": name, "arguments": args, "id": f"call_{n}"}
                           for n, (name, args) in enumerate(pairs)]}


def trace_records(path):
    """The records of a JSONL trace file; a trace not written, or a line that is no JSON object, fails the check
    with what was found."""
    assert Path(path).is_file(), f"the trace {Path(path).name} was not written"
    records = []
    for number, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"line {number} of the trace is not JSON: {line[:200]!r}") from None
        assert isinstance(records[-1], dict), f"line {number} of the trace is no JSON object: {line[:200]!r}"
    return records


def answer_of(value):
    """What run() answered: phases 1 to 3 return the text (or None), later phases a Result with .answer."""
    return getattr(value, "answer", value)


SLEEPS = itertools.count()


def own_seconds(whole):
    """A number of seconds for `sleep` that no other test uses, in this run or in another on the
    same machine: whole seconds, then this process's id and a count (own_seconds(51) ->
    "51.00123450003"). running_commands(f"sleep {seconds}") then sees what this test started."""
    return f"{whole}.{os.getpid():07d}{next(SLEEPS):04d}"


def running_commands(command):
    """Live processes (zombies left out) whose command line is exactly command, e.g. "sleep 61.25"."""
    if sys.platform == "win32":  # the commands such a test runs are sh's, found with ps
        pytest.skip("runs sh's commands (sleep, setsid, &) and finds them with ps: on Windows "
                    "this runs in WSL 2")
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 1) for line in ps.splitlines() if line.strip()]
    return [row for row in rows if len(row) == 2 and row[1] == command and not row[0].startswith("Z")]


def wait_for(condition, process=None, seconds=30):
    """Until condition() is true, or seconds have passed, or the process given (a harness the test started) has
    ended: a harness that fails as it starts fails its test at once, not after the seconds. Returns condition()."""
    until = time.monotonic() + seconds
    while not condition() and time.monotonic() < until and (process is None or process.poll() is None):
        time.sleep(0.05)
    return condition()


def ended(process):
    """What to add to a failed wait's message: "" while the process runs; once it has ended, its exit code and the
    end of what it wrote on stderr (the traceback of a harness that failed as it started)."""
    if process.poll() is None:
        return ""
    _, stderr = process.communicate()
    stderr = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr or ""
    return f"; your harness ended first (exit {process.returncode}):\n{stderr[-2000:]}"


def returns_within(seconds, function):
    """function()'s value (or its exception) if it returns within seconds; else an AssertionError then and there,
    while it goes on in a thread nobody waits for: a check of a deadline fails in the seconds it allows, not after
    the 30 s a model or a person would take to answer a run that has no deadline yet."""
    outcome = {}

    def call():
        try:
            outcome["value"] = function()
        except BaseException as error:  # raised again in the test's own thread
            outcome["error"] = error

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"still waiting after {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def still_running(command, patience=10):
    """The processes running command once they are gone, or `patience` seconds have passed: []
    when a killed one has ended. The kernel ends a killed process (and the rest of a sandbox's
    processes) when it gets to it, which a busy machine can put off for seconds; a process nobody
    killed, such as `sleep 51`, is still there after them. So a check waits on what it judges."""
    until = time.monotonic() + patience
    while (left := running_commands(command)) and time.monotonic() < until:
        time.sleep(0.1)
    return left

