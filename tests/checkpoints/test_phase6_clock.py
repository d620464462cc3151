"""Phase 6, the clock: one clock for every wait. at_once() runs functions side by side and waits for them until
the deadline, within() waits for one; the model's reply, a person's answer and the tools are all waited for until
the deadline; a command is stopped at the deadline and nothing it started outlives the run; the calls nobody was
asked about run side by side, then the approved ones. Checked through at_once(), within(), run(), the command
line, the trace, live processes and the scripted cases of tests/cases.py marked phase 6."""
import signal
import threading
import time

import pytest
from cases import CASES, start_cases
from helpers import (ended, groq_env, needs_a_subreaper, needs_plain_programs, needs_signals, own_seconds,
                     posix_shell, run_python, returns_within, running_commands, scripted_backend, start_python,
                     still_running, tool_calls, wait_for)

PHASE = 6
FILES = ("backend.py", "guards.py", "tools.py", "shell.py", "harness.py", "cli.py")
MINE = [name for name, case in CASES.items() if case["phase"] == PHASE]
STARTED = {}  # folder -> {case: future}: every folder's cases, started with this module's first test
pytestmark = pytest.mark.xdist_group("test_phase6_clock")  # one worker: the first test starts every case
OFF = ("--yes", "--sandbox", "off")  # approved at once; off, so that the harness alone must end what it started
LATE = 10  # seconds: a run with a deadline of 1 or 3 s that has not ended by then keeps none; it fails then


@pytest.fixture(autouse=True, scope="module")
def cases_started(request):
    """The scripted cases of this phase, for every folder whose case tests were chosen, start with the module's
    first test and run side by side with the tests that follow; the last tests wait for them."""
    folders = {item.callspec.params["code_dir"] for item in request.session.items
               if item.originalname == "test_done_when_the_scripted_case_passes" and item.module.PHASE == PHASE}
    STARTED.update({folder: start_cases(MINE, folder) for folder in sorted(folders)})


def test_at_once_runs_functions_side_by_side_until_the_deadline(harness):
    """at_once(functions, deadline) runs them at the same time and returns a box for each: {"value": ...},
    {"error": the exception}, or {} when it had not finished by the deadline (a time.monotonic(), or None)."""
    together = threading.Barrier(3, timeout=5)  # passed only when all three wait at the same time

    def meet():
        together.wait()
        return "met"

    boxes = harness.at_once([meet, meet, meet], None)
    assert [box.get("value") for box in boxes] == ["met"] * 3, f"the three must run side by side: {boxes}"

    def fail():
        raise ValueError("broken")

    started = time.monotonic()
    ok, failed, slow = harness.at_once([lambda: 42, fail, lambda: time.sleep(30)], time.monotonic() + 0.5)
    waited = time.monotonic() - started
    assert waited < 5, f"at_once must stop waiting at the deadline (0.5 s); it waited {waited:.1f} s, over 5 s"
    assert ok.get("value") == 42 and isinstance(failed.get("error"), ValueError), (ok, failed)
    assert "value" not in slow and "error" not in slow, f"a function still running has an empty box: {slow}"


def test_within_waits_for_one_function_until_the_deadline(harness):
    """within(deadline, what, function) returns what it returns, raises what it raises, and raises
    Stop("deadline") when the time is up first; with no deadline it simply calls it."""
    assert harness.within(None, "the test", lambda: "now") == "now"
    assert harness.within(time.monotonic() + 5, "the test", lambda: "soon") == "soon"
    with pytest.raises(KeyError):
        harness.within(time.monotonic() + 5, "the test", lambda: {}["missing"])
    started = time.monotonic()
    with pytest.raises(harness.Stop) as stopped:
        harness.within(time.monotonic() + 0.3, "the test", lambda: time.sleep(30))
    waited = time.monotonic() - started
    assert stopped.value.status == "deadline" and waited < 5, (
        f"Stop with status deadline after 0.3 s: got status {stopped.value.status!r} after {waited:.1f} s (over 5 s?)")


def test_a_slow_model_is_waited_for_until_the_deadline(harness, server):
    """A model that takes 30 s to answer, a deadline of 1 s: the run ends as deadline in about a second."""
    server.push({"content": "too late", "delay": 30})
    started = time.monotonic()
    result = returns_within(LATE, lambda: harness.run("Think", backend=scripted_backend(server),
                                                     limits=harness.Limits(deadline=1)))
    waited = time.monotonic() - started
    assert result.status == "deadline" and waited < LATE, (
        f"status deadline within {LATE} s of a 1 s deadline: got {result.status!r} after {waited:.1f} s")


def test_a_persons_answer_is_waited_for_until_the_deadline(harness, server):
    """A question nobody answers: the run ends as deadline, and every call of the turn still gets its answer. A
    machine too busy to ask before the 3 s deadline ran out tries once more with 9 s, as the scripted cases do."""
    for deadline in (3, 9):
        server.push(tool_calls(("run_shell", {"command": "touch a"}), ("run_shell", {"command": "touch b"})))
        nobody, asked, late = threading.Event(), [], LATE + deadline - 3
        started = time.monotonic()
        try:
            result = returns_within(late, lambda: harness.run(
                "Touch", backend=scripted_backend(server), limits=harness.Limits(deadline=deadline),
                approve=lambda question: asked.append(question) or nobody.wait(30)))
        finally:
            nobody.set()
        waited = time.monotonic() - started
        assert result.status == "deadline" and waited < late, (
            f"status deadline within {late} s of a {deadline} s deadline: got {result.status!r} after {waited:.1f} s")
        if asked:
            break
    assert asked, "the question was never asked"
    answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert answered == ["call_0", "call_1"], f"each call needs a tool message: {answered}"


@posix_shell
def test_done_when_three_slow_calls_in_one_turn_take_about_the_time_of_one(workspace, server):
    """Three approved commands of one turn run side by side: each waits until all three have started (alone, it
    gives up after 5 s), so only a turn that runs them at the same time gets three "together"."""
    wait = ("touch started{n}; i=0; while [ $i -lt 100 ]; do [ -e started0 ] && [ -e started1 ] && [ -e started2 ]"
            " && echo together && exit 0; sleep 0.05; i=$((i+1)); done; echo alone")
    server.push(tool_calls(*[("run_shell", {"command": wait.format(n=n)}) for n in range(3)]), "Done.")
    result = run_python(workspace, "harness.py", *OFF, "Wait for each other", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    results = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert all("together" in r for r in results) and len(results) == 3, f"run them side by side: {results}"


@needs_plain_programs
def test_the_approved_calls_run_after_the_unasked_ones(workspace, server):
    """The calls nobody was asked about run first (side by side), then the approved ones: an approved `touch`
    listed first still runs after a plain `ls`, and the results go back in call order."""
    server.push(tool_calls(("run_shell", {"command": "touch made"}), ("run_shell", {"command": "ls"})), "Done.")
    result = run_python(workspace, "harness.py", *OFF, "Touch, then list", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    results = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert len(results) == 2, f"two calls, two results; the model got {results}"
    touched, listed = results
    assert (workspace / "made").exists(), f"the approved touch should run: {touched}"
    assert "harness.py" in listed and "made" not in listed, f"ls ran beside or after the approved touch: {listed}"


@needs_signals
def test_ctrl_c_leaves_no_command_running(workspace, server):
    """Ctrl-C while an approved command runs: exit 130, and the command is gone (run() stops every command in
    shell.RUNNING)."""
    command = f"sleep {own_seconds(62)}"  # this test's own: others may run beside it
    server.push(tool_calls(("run_shell", {"command": command})), "never asked")
    process = start_python(workspace, "harness.py", *OFF, "Sleep", env=groq_env(server), text=True)
    if not wait_for(lambda: running_commands(command), process, seconds=20):
        why = ended(process)
        process.kill()
        raise AssertionError("the command never started" + why)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert still_running(command) == [], "the command outlived the run"


@needs_signals
@needs_a_subreaper
def test_ctrl_c_leaves_nothing_that_left_the_command_s_group(workspace, server):
    """--sandbox off, Ctrl-C while an approved command runs that put a process in a session of its own
    (setsid): exit 130, and that process is gone too: finish() reaps what left a group since the run began."""
    left, command = own_seconds(63), f"sleep {own_seconds(64)}"
    server.push(tool_calls(("run_shell", {"command": f"setsid sleep {left} > /dev/null 2>&1 & {command}"})),
                "never asked")
    process = start_python(workspace, "harness.py", *OFF, "Leave it and wait", env=groq_env(server), text=True)
    if not wait_for(lambda: running_commands(command) and running_commands(f"sleep {left}"), process, seconds=20):
        why = ended(process)
        process.kill()
        raise AssertionError("the command never started" + why)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert still_running(f"sleep {left}") == [], "a process that left the command's group outlived the Ctrl-C"


@needs_a_subreaper
def test_what_left_the_command_s_group_ends_with_it(workspace, server):
    """--sandbox off, where no sandbox's own process numbers end them: processes the command left behind in a
    session of their own (setsid, a double fork) are gone when it returns (Linux: the harness is their
    subreaper, and shell.run() ends what came back to it)."""
    seconds = own_seconds(60)  # this test's own: others may run beside it
    command = f"setsid sleep {seconds} > /dev/null 2>&1 & (setsid sh -c 'sleep {seconds} &' &)"
    server.push(tool_calls(("run_shell", {"command": command})), "Done.")
    result = run_python(workspace, "harness.py", *OFF, "Leave something behind", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    assert still_running(f"sleep {seconds}") == [], \
        "a process that left the command's group outlived it"


@pytest.mark.parametrize("name", MINE)  # last: the cases ran beside the tests above
def test_done_when_the_scripted_case_passes(code_dir, name):
    """The scripted case runs as tests/cases.py describes it (`python tests/cases.py -v NAME` shows it run)."""
    found = STARTED[code_dir][name].result()
    assert found == [], f"case {name}: " + "; ".join(found)
