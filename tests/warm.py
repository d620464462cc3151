"""A process that imported openai once, and forks a child for each run: the same run as `python SCRIPT ...`, less
the half second of importing openai again. The scripted cases use it: they run the harness 150 times.

This module imports nothing but the standard library, because each child imports it to find warm_child(): a child
that imported helpers (pytest, demo_model, and a bubblewrap probe that runs a process) spent a quarter of a CPU
second on it before the harness began, more than the harness's own run.
"""
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
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


def warm_child(cwd, args, env, paths):
    """In the forked process: become `python ARGS...` run in cwd, then exit with its exit code."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))  # as python reads it when it starts
    *paths, exit_path = paths
    for fd, path, mode in zip((0, 1, 2), paths, (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY)):
        os.dup2(os.open(path, mode), fd)
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
    sys.stdout.flush()
    sys.stderr.flush()
    Path(exit_path).write_text(str(code & 0xFF))  # as the operating system reports it: sys.exit(-1) is 255
    os._exit(code)
