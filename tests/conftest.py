"""Fixtures, and the learner's check.

`python -m pytest tests/checkpoints --phase N [--code DIR]` checks the code in DIR (default: the repository root)
against phase N's "Done when", by behaviour only, and says what to fix in the lesson's words; `--exercise K` checks
exercise K of that lesson instead (tests/checkpoints/test_exercises.py). Without --phase, every test module runs
against the checkpoint of its PHASE (the phase that introduced what it checks) and the last checkpoint (the
top-level code), once when their FILES are the same; an exercise's check runs on its phase's checkpoint with the
reference solution applied (phases/NN-name/solutions/exercise-K.diff). The checkpoints in between share that code:
tests/test_course.py holds every definition a phase changes to be named in its lesson, so a fix that missed a
copy fails there (unless that phase's lesson names what the fix changed).
"""
import atexit
import importlib
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path

import helpers
import pytest
from helpers import ROOT, apply_solution, checkpoints, copy_code, demo_model, fingerprint


def pytest_addoption(parser):
    parser.addoption("--phase", type=int, metavar="N", action="append",
                     help="check your code against phase N's 'Done when' (give it again for more phases)")
    parser.addoption("--exercise", metavar="K", action="append",
                     help="with --phase: check exercise K of the lesson instead ('all': each one that has a check)")
    parser.addoption("--code", type=Path, metavar="DIR", help="with --phase: the folder to check (default: here)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """The suite runs on 4 workers (pytest.ini: most of it waits on clocks); a learner's check runs in one process."""
    phase, code = config.getoption("--phase"), config.getoption("--code")
    if threading.current_thread() is threading.main_thread():  # (a shell that runs us in the background ignores
        signal.signal(signal.SIGINT, pressed)  # Ctrl-C, and every child would: the tests press it)
    # a sandboxed MCP server's cache (mcp_client.cache()) goes to a folder of this run's, not your ~/.cache
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="harness-cache-")
    atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)
    if phase is not None and hasattr(config.option, "tx"):
        config.option.dist, config.option.tx = "no", []
    for number in phase or []:
        if number not in range(len(checkpoints())):
            raise pytest.UsageError(f"--phase {number}: the phases are 0 to {len(checkpoints()) - 1}")
    if code is not None and (phase is None or not code.is_dir()):
        raise pytest.UsageError(f"--code {code}: give a folder that exists, and --phase with it")
    exercises = config.getoption("--exercise") or []
    if exercises and (phase is None or not all(k == "all" or k.isdigit() for k in exercises)):
        raise pytest.UsageError(f"--exercise {' '.join(exercises)}: give an exercise's number (or all), and --phase")


def pytest_sessionfinish(session):
    """The scripted cases and early runs that no test came to judge (the report stops a check at its first failure)
    are dropped, not run to the end while the process waits to exit: only those already running finish."""
    cases = sys.modules.get("cases")  # imported by the checks that start cases
    if cases is not None:
        cases.POOL.shutdown(wait=False, cancel_futures=True)


GROUPED = re.compile(r'^pytestmark = pytest\.mark\.xdist_group\("([^"]+)"\)', re.M)


def groups():
    """{a test module's path, as a node id starts: its xdist_group}, from each module's pytestmark line."""
    found = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        marked = GROUPED.search(path.read_text(encoding="utf-8"))
        if marked and "learner" not in path.relative_to(ROOT).parts:
            found[path.relative_to(ROOT).as_posix()] = marked.group(1)
    return found


@pytest.hookimpl(optionalhook=True)  # without xdist (a check alone) the hook is not there
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup that keeps a marked module's tests on one worker with pytest 9 too: there xdist (3.8) no
    longer adds the group to the tests' ids (it sets an attribute pytest 9 does not read), so each worker that got
    one of the module's tests did its module-wide work again (every lesson, every scripted case, a clone)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ByGroup(LoadGroupScheduling):
        marked = groups()

        def _split_scope(self, nodeid):
            group = self.marked.get(nodeid.split("::")[0])
            return group if group and "@" not in nodeid else super()._split_scope(nodeid)

    return ByGroup(config, log)


def check_of(item):
    """(phase, exercise) of a checkpoint test: (4, None) for phase 4's check, (4, 2) for its exercise 2's."""
    exercise = item.get_closest_marker("exercise")  # @pytest.mark.exercise(4, 2), in test_exercises.py
    return tuple(exercise.args) if exercise else (getattr(item.module, "PHASE", None), None)


def pytest_collection_modifyitems(config, items):
    phases, exercises = config.getoption("--phase"), config.getoption("--exercise")
    if phases is None:
        return
    wanted = {None} if not exercises else {"all"} if "all" in exercises else {int(k) for k in exercises}
    chosen = [item for item in items if "checkpoints" in item.path.parts and check_of(item)[0] in phases and
              (check_of(item)[1] in wanted or (wanted == {"all"} and check_of(item)[1] is not None))]
    if exercises and not chosen:
        have = sorted({check_of(item)[1] for item in items if item.get_closest_marker("exercise") and
                       check_of(item)[0] in phases})
        raise pytest.UsageError(f"phase {', '.join(map(str, phases))} has no exercise {' '.join(exercises)} with a "
                                f"check; {'those with one: ' + ', '.join(map(str, have)) if have else 'none has one'} "
                                "(the lesson says why an exercise has none)")
    config.hook.pytest_deselected(items=[item for item in items if item not in chosen])
    items[:] = chosen


def pytest_ignore_collect(collection_path, config):
    """With --phase, a test module of another phase is not even imported (its PHASE line says whose it is), nor
    the course's own tests, nor test_exercises.py without --exercise: a check collects only what it may run."""
    phases = config.getoption("--phase")
    if phases is None or not collection_path.name.startswith("test_") or collection_path.suffix != ".py":
        return None
    if "checkpoints" not in collection_path.parts:
        return True
    declared = re.search(r"^PHASE = (\d+)$", collection_path.read_text(encoding="utf-8"), re.M)
    if declared:
        return int(declared.group(1)) not in phases or None
    return not config.getoption("--exercise") or None


def pytest_generate_tests(metafunc):
    """code_dir: your folder with --phase; else the checkpoint of the module's PHASE, and the last one."""
    if "code_dir" not in metafunc.fixturenames:
        return
    if metafunc.config.getoption("--phase") is not None:
        code = metafunc.config.getoption("--code") or ROOT
        metafunc.parametrize("code_dir", [code.resolve()], ids=["your-code"])
        return
    exercise = metafunc.definition.get_closest_marker("exercise")
    if exercise:  # the reference solution, applied to its phase's checkpoint by the workspace fixture
        checkpoint = checkpoints()[exercise.args[0]]
        metafunc.parametrize("code_dir", [checkpoint], ids=[f"{checkpoint.name}+exercise-{exercise.args[1]}"])
        return
    marker = metafunc.definition.get_closest_marker("files")  # @pytest.mark.files("harness.py", ...), or all
    files, seen, dirs = marker.args if marker else getattr(metafunc.module, "FILES", None), set(), []
    phase = metafunc.definition.get_closest_marker("phase")  # @pytest.mark.phase(5): from a later phase than PHASE
    later = checkpoints()[phase.args[0] if phase else metafunc.module.PHASE:]
    for checkpoint in (later[0], later[-1]):
        if fingerprint(checkpoint, files) not in seen:
            seen.add(fingerprint(checkpoint, files))
            dirs.append(checkpoint)
    metafunc.parametrize("code_dir", dirs, ids=[d.name for d in dirs])


PRESSED = []  # a SIGINT for each time the person pressed Ctrl-C (the signal to this process)


def pressed(signum, frame):
    """Ctrl-C: noted, then the KeyboardInterrupt Python raises for it. A KeyboardInterrupt that comes without this
    note was raised by code (your run() let one out): that is one test's failure, not the end of the session. A
    test that presses Ctrl-C itself (helpers.press_ctrl_c()) is no person pressing it."""
    if not helpers.PRESSED_BY_A_TEST:
        PRESSED.append(signum)
    helpers.PRESSED_BY_A_TEST.clear()
    signal.default_int_handler(signum, frame)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except KeyboardInterrupt as error:
        if PRESSED:
            raise
        raise AssertionError(f"a KeyboardInterrupt got out of your code{where(item, error.__traceback__)}: Ctrl-C "
                             "must end a run with a status, not the program that called run()") from error
    finally:
        if PRESSED:  # the person pressed Ctrl-C during this test, whatever the code under test made of it: stop
            raise KeyboardInterrupt


def where(item, traceback):
    """' (harness.py, line 120)': the last place in the code under test that the traceback passes through."""
    places = [Path(item.funcargs[name]) for name in ("workspace", "code_dir") if name in item.funcargs]
    found = ""
    while traceback:
        path = Path(traceback.tb_frame.f_code.co_filename)
        if any(path.is_relative_to(place) for place in places) and not path.is_relative_to(ROOT / "tests"):
            found = f" ({path.name}, line {traceback.tb_lineno})"
        traceback = traceback.tb_next
    return found


def check_line(call):
    """', in test_phase5_budgets.py, line 150': where in the course's tests the failure was found."""
    lines = [entry for entry in call.excinfo.traceback if Path(str(entry.path)).is_relative_to(ROOT / "tests")]
    return f", in {lines[-1].path.name}, line {lines[-1].lineno + 1}" if lines else ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With --phase, a failure reads as what the lesson expected and what to do, not as pytest's internals."""
    report = (yield).get_result()
    if report.failed and call.excinfo and item.config.getoption("--phase") is not None:
        error = call.excinfo.value
        place = where(item, call.excinfo.tb)
        said = str(error).split("\nassert ")[0] if isinstance(error, AssertionError) else \
            f"your code raised {type(error).__name__}: {error}{place}" if place else \
            f"the check could not read what your code gave back ({type(error).__name__}: {error}{check_line(call)}):" \
            " it lacks something the lesson's box says it holds"
        wanted = (item.function.__doc__ or item.name).strip()
        report.longrepr = f"expected: {wanted}\n{said}"


@pytest.fixture
def workspace(tmp_path, code_dir, request):
    """A scratch directory holding a copy of the code under test, where the tools can do no harm; for an exercise's
    check without --phase, the checkpoint with the exercise's reference solution applied."""
    work = copy_code(code_dir, tmp_path / "work")
    exercise = request.node.get_closest_marker("exercise")
    if exercise and request.config.getoption("--phase") is None:
        apply_solution(work, *exercise.args)
    return work


@pytest.fixture
def server():
    """The offline model, scripted: push replies, then read server.requests."""
    with demo_model.start() as running:
        yield running


@pytest.fixture
def unused_port():
    """A port on 127.0.0.1 that nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def harness(load):
    """harness.py of the code under test, imported in this process: run(task, backend=..., ...)."""
    return load("harness")


@pytest.fixture
def load(workspace, monkeypatch):
    """Import modules of the code under test (tools, harness, ...) fresh from the workspace, run there: their
    WORKSPACE is the current directory, as when you run them. Only from there: a module your code lacks is
    missing, never the repository's own copy (the top-level code, which --code DIR must not stand in for)."""
    code = {p.stem for p in workspace.glob("*.py")} | {p.stem for c in checkpoints() for p in c.glob("*.py")}

    def forget():
        for name in code:
            sys.modules.pop(name, None)

    forget()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != ROOT])
    monkeypatch.syspath_prepend(str(workspace))
    monkeypatch.chdir(workspace)
    yield importlib.import_module
    forget()
