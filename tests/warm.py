"""A process that imported openai once, and forks a child for each run: the same run as `python SCRIPT ...`, less
the half second of importing openai again. The scripted cases use it: they run the harness 150 times.

This module imports nothing but the standard library, because each child imports it to find warm_child(): a child
that imported helpers (pytest, demo_model, and a bubblewrap probe that runs a process) spent a quarter of a CPU
second on it before the harness began, more than the harness's own run.
"""
import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import threading
from multiprocessing import reduction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WARM = multiprocessing.get_context("forkserver") if "forkserver" in multiprocessing.get_all_start_methods() else None
if WARM:  # httpcore (openai 2) or httpcore2 (openai 3): imported when the harness makes its client, not before
    WARM.set_forkserver_preload(["openai", "openai.types.chat", "httpcore", "httpcore2", "warm"])


def run_warm(cwd, *args, env, input="", timeout=60):
    """`python SCRIPT.py ARGS...` in cwd with exactly the environment env, in a process forked from the warm one: a
    real process of its own, with its own environment, files and exit code, only without Python's start and
    openai's import."""
    with tempfile.TemporaryDirectory() as scratch:
        paths = [Path(scratch, name) for name in ("stdin", "stdout", "stderr", "exit")]
        for path, text in zip(paths, (input, "", "", "")):
            path.write_text(text)
        settings = (str(cwd), args, env, [str(p) for p in paths])
        child = WARM.Process(target=warm_child, args=settings)
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(args, timeout)
        # the exit code comes in a file, as the output does: the forkserver reports a child whose status it
        # could not pass on as 255, which made a passing run look failed now and then
        code = int(paths[3].read_text() or child.exitcode)  # empty: killed by a signal before it could write
        return subprocess.CompletedProcess(args, code, paths[1].read_text(), paths[2].read_text())


class Started:
    """`python SCRIPT.py ARGS...` in cwd with exactly the environment env, forked from the warm process, its
    standard input from /dev/null (or a pipe: stdin=subprocess.PIPE) and its output in pipes: the part of
    subprocess.Popen(..., stdout=PIPE, stderr=PIPE) the checks use (pid, send_signal(), kill(), poll(),
    wait(), communicate(), returncode), for the checks that send a run signals: a real process of its own, which
    the signals reach as they reach a new one, without the seconds of a new Python's start on a busy machine."""

    def __init__(self, cwd, *args, env, stdin=subprocess.DEVNULL, text=False):
        self.args, self.returncode = args, None
        self.scratch = tempfile.TemporaryDirectory()
        self.exit_path = Path(self.scratch.name, "exit")
        self.exit_path.write_text("")
        inputs = os.pipe() if stdin == subprocess.PIPE else (os.open(os.devnull, os.O_RDONLY), None)
        outputs, errors = os.pipe(), os.pipe()
        ends = [Passed(inputs[0]), Passed(outputs[1]), Passed(errors[1]), str(self.exit_path)]
        self.child = WARM.Process(target=warm_child, args=(str(cwd), args, env, ends))
        self.child.start()  # the forkserver has its own copies of the child's ends now
        for fd in (inputs[0], outputs[1], errors[1]):
            os.close(fd)
        self.stdin = open(inputs[1], "w" if text else "wb") if inputs[1] is not None else None
        self.stdout, self.stderr = (open(fd, "r" if text else "rb") for fd in (outputs[0], errors[0]))
        self.pid = self.child.pid

    def send_signal(self, number):
        if self.poll() is None and os.name != "nt":  # the tests that send one skip on Windows
            os.kill(self.pid, number)

    def kill(self):
        self.child.kill()

    def poll(self):
        if self.returncode is None and self.child.exitcode is not None:
            written = self.exit_path.read_text()  # empty: ended by a signal before it could write
            self.returncode = int(written) if written else self.child.exitcode
            self.scratch.cleanup()
        return self.returncode

    def wait(self, timeout=None):
        self.child.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout=None):
        """(stdout, stderr) once the process has ended and closed them, as Popen's communicate()."""
        if self.stdin:
            self.stdin.close()
        read = {}
        readers = [threading.Thread(target=lambda name=name: read.update({name: getattr(self, name).read()}),
                                    daemon=True) for name in ("stdout", "stderr")]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout)
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(timeout)
        self.stdout.close()
        self.stderr.close()
        return read["stdout"], read["stderr"]


class Passed:
    """A file descriptor of this process that the warm child gets as one of its own (the forkserver passes it)."""

    def __init__(self, fd):
        self.fd = fd

    def __reduce__(self):
        return received, (reduction.DupFd(self.fd),)


def received(passed):
    return passed.detach()


def warm_child(cwd, args, env, paths):
    """In the forked process: become `python ARGS...` run in cwd, then exit with its exit code, after its threads
    that are no daemons and its atexit functions, as Python does. paths: its standard input, output and error
    (files, or the descriptors Started passed), then the file its exit code goes to."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))  # as python reads it when it starts
    *paths, exit_path = paths
    for fd, path, mode in zip((0, 1, 2), paths, (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY)):
        opened = path if isinstance(path, int) else os.open(path, mode)
        os.dup2(opened, fd)
        if opened > 2:
            os.close(opened)
    sys.stdin, sys.stdout, sys.stderr = (open(0, closefd=False), open(1, "w", closefd=False, buffering=1),
                                         open(2, "w", closefd=False, buffering=1))
    sys.argv = list(args)
    script_folder = os.path.dirname(os.path.abspath(args[0]))  # as python puts it first on sys.path
    sys.path = [script_folder] + [path for path in sys.path if path not in (str(ROOT), str(ROOT / "tests"))]
    code = 0
    try:
        runpy.run_path(args[0], run_name="__main__")
    except SystemExit as error:
        code = error.code if isinstance(error.code, int) else 0 if error.code is None else 1
        if not isinstance(error.code, (int, type(None))):
            print(error.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    threading._shutdown()  # as Python ends: the threads that are no daemons first, then the atexit functions
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    Path(exit_path).write_text(str(code & 0xFF))  # as the operating system reports it: sys.exit(-1) is 255
    os._exit(code)
