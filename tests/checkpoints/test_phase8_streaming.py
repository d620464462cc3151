"""Phase 8, streaming: --stream prints the text as it arrives and runs a call only once the stream has finished;
SIGINT, SIGTERM and SIGHUP end a run as Ctrl-C does; standard output that is closed, full or not read cannot end a
run with a traceback or hold it past its deadline. Checked through the scripted cases of tests/cases.py marked
phase 8, chat(), the command line, real signals and the trace."""
import inspect
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cases import CASES, POOL, start_cases
from helpers import (clean_env, copy_code, demo_model, ended, groq_env, needs_dev_full, needs_signals, own_seconds,
                     posix_redirections, run_python, running_commands, scripted_backend, since_first_request,
                     start_python, still_running, tool_calls, trace_records, wait_for)

PHASE = 8
FILES = ("backend.py", "guards.py", "tools.py", "shell.py", "harness.py", "cli.py")
MINE = [name for name, case in CASES.items() if case["phase"] == PHASE]
STARTED = {}  # folder -> {case: future}: every folder's cases, started with this module's first test
EARLY = {}  # a test's name, with its parameters -> a future of the run it judges (ALONE, below)
pytestmark = pytest.mark.xdist_group("test_phase8_streaming")  # one worker: the first test starts every case
GRACE = 1  # the lesson's GRACE: seconds past the deadline the report may take


@pytest.fixture(autouse=True, scope="module")
def cases_started(request):
    """The scripted cases of this phase, and the runs below that start a Python of their own, for every folder whose
    tests were chosen, start with the module's first test and run side by side with the tests that follow; the
    tests that judge them wait for them."""
    chosen = [item for item in request.session.items
              if item.module.__name__ == __name__ and not skipped(item)]
    for item in chosen:
        if item.originalname in ALONE:  # its run takes the test's own parameters
            run = ALONE[item.originalname]
            params = {name: item.callspec.params[name] for name in inspect.signature(run).parameters}
            EARLY[item.name] = POOL.submit(run, **params)
    folders = {item.callspec.params["code_dir"] for item in chosen
               if item.originalname == "test_done_when_the_scripted_case_passes"}
    STARTED.update({folder: start_cases(MINE, folder) for folder in sorted(folders)})


def skipped(item):
    return any(mark.args and mark.args[0] for mark in item.iter_markers("skipif"))


def alone(code_dir, replies, command, wait=None):
    """command in a copy of code_dir, against a server of its own that sends replies: (how it ended, the server's
    requests, the trace's records). A string is a shell's command line, run in a new Python as a learner's shell
    starts it; a list is the harness's arguments, run forked from the warm process, and wait(process, server)
    judges it as it runs."""
    with tempfile.TemporaryDirectory() as scratch, demo_model.start(script=list(replies)) as server:
        work = copy_code(code_dir, Path(scratch) / "work")
        if wait:
            ending = wait(start_python(work, "harness.py", *command, env=groq_env(server)), server)
        else:
            ending = subprocess.run(command, shell=isinstance(command, str), cwd=work, capture_output=True,
                                    env=clean_env(**groq_env(server)), timeout=60)
        trace = work / "t.jsonl"
        return ending, server.requests, trace_records(trace) if trace.exists() else []


def test_chat_streams_the_text_to_on_text(load, server):
    """chat(messages, backend=..., on_text=f) asks for a stream and calls f with the pieces of the text as they
    come; they join to the reply's content."""
    server.push("one two three four five six seven eight nine ten")
    pieces = []
    response = load("backend").chat([{"role": "user", "content": "Count"}], backend=scripted_backend(server),
                                    on_text=pieces.append)
    assert server.requests[-1]["body"].get("stream") is True, "step 1: with on_text, the request asks for a stream"
    assert len(pieces) > 1, f"step 2: each chunk's text goes to on_text as it comes, not all at the end: {pieces}"
    assert "".join(pieces) == response.choices[0].message.content == "one two three four five six seven eight nine ten"


def test_stream_prints_the_text_once_and_counts_usage(workspace, server):
    """--stream prints the answer once (not again at the end), and the trace still counts its tokens."""
    server.push({"content": "one two three four five six seven eight nine ten"})
    result = run_python(workspace, "harness.py", "--trace", "t.jsonl", "--stream", "Count", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("one two three four five six seven eight nine ten") == 1, \
        f"step 1: report() does not print a streamed answer again:\n{result.stdout}"
    end = trace_records(workspace / "t.jsonl")[-1]
    assert (end.get("usage") or {}).get("total_tokens", 0) > 0, f"the end record's usage counts the tokens: {end}"


def start(workspace, server, *args, stdin=subprocess.DEVNULL):
    """python harness.py --trace t.jsonl ARGS..., running against the scripted server, its output in pipes."""
    return start_python(workspace, "harness.py", "--trace", "t.jsonl", *args, env=groq_env(server), stdin=stdin)


def traced(workspace, kind):
    """True once the trace holds a record of this type (a line still being written is not read yet)."""
    try:
        return kind in [json.loads(line).get("type") for line in (workspace / "t.jsonl").read_text().split("\n")[:-1]]
    except (OSError, ValueError, AttributeError):
        return False


@needs_signals
@pytest.mark.parametrize("code", [130, 143, 129], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_a_command_runs_ends_the_run_at_once(workspace, server, code):
    """SIGINT, SIGTERM or SIGHUP while an approved command runs: exit 130, 143 or 129 at once (long before the
    command's own 10 s timeout), the command killed, the trace's end record interrupted, the call answered."""
    signal_number = code - 128  # a shell's exit code for a signal: 2 SIGINT, 15 SIGTERM, 1 SIGHUP
    command = f"sleep {own_seconds(62)}"  # this test's own: others may run beside it
    server.push(tool_calls(("run_shell", {"command": command})), "never asked")
    process = start(workspace, server, "--yes", "--sandbox", "off", "Sleep")
    assert wait_for(lambda: running_commands(command), process), "the command should be running" + ended(process)
    began = time.monotonic()
    process.send_signal(signal_number)
    stdout, stderr = process.communicate(timeout=30)
    seconds = time.monotonic() - began
    assert process.returncode == code, f"step 6: exit {code} for this signal, not {process.returncode}: {stderr}"
    assert seconds < 5, f"step 6: the run ends at once, not at the command's timeout (it took {seconds:.1f} s, over 5)"
    assert b"Traceback" not in stderr, stderr.decode()
    assert still_running(command) == [], "the command must be killed with the run"
    records = trace_records(workspace / "t.jsonl")
    assert records[-1].get("type") == "end" and records[-1].get("status") == "interrupted", records[-1]
    assert [r.get("type") for r in records].count("tool") == 1, "the call is answered in the trace"


@needs_signals
def test_a_signal_at_a_question_ends_the_run_and_runs_nothing(workspace, server):
    """SIGTERM while the approval question waits for an answer: exit 143, nothing run, the trace closed."""
    server.push(tool_calls(("run_shell", {"command": "touch made"})), "never asked")
    process = start(workspace, server, "Touch", stdin=subprocess.PIPE)
    assert wait_for(lambda: traced(workspace, "reply"), process), "the model's reply should come" + ended(process)
    time.sleep(0.5)  # the question is on screen now, waiting for an answer
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 143 and b"Traceback" not in stderr, stderr.decode()
    assert not (workspace / "made").exists(), "nothing runs without a yes"
    assert trace_records(workspace / "t.jsonl")[-1].get("status") == "interrupted", "the trace's end record"


@needs_signals
def test_a_signal_after_the_run_ended_changes_nothing(workspace, server):
    """SIGTERM after the trace's end record, while the answer is still being printed: ignored, exit 0."""
    server.push("x" * 300_000)  # more than a pipe holds: printing it waits for the reader
    process = start(workspace, server, "Say")
    assert wait_for(lambda: traced(workspace, "end"), process), "the run should end" + ended(process)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, f"step 6: a signal after run() returned is ignored, yet exit {process.returncode}"
    assert stdout.count(b"x") == 300_000 and trace_records(workspace / "t.jsonl")[-1].get("status") == "answered"


@posix_redirections
@pytest.mark.parametrize("redirect, code", [
    (">&-", 1), pytest.param(">/dev/full", 1, marks=needs_dev_full),
    ("2>&-", 0), pytest.param("2>/dev/full", 0, marks=needs_dev_full)])
def test_output_that_cannot_be_written_ends_in_a_status(request, code_dir, redirect, code):
    """Standard output closed or full: exit 1, `standard output` named on stderr, the trace's end written. Standard
    error closed or full: the run goes on without it, and answers (exit 0)."""
    done, _, records = EARLY[request.node.name].result()
    stdout, stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    assert done.returncode == code and "Traceback" not in stderr + stdout, stderr
    assert records[-1:] and records[-1].get("type") == "end", "the trace's end record is written"
    if code:
        assert "standard output" in stderr, f"step 7: say which output failed: {stderr}"
    else:
        assert "Listed." in stdout, "step 7: notes are not worth ending a run for"


def unwritable_output(code_dir, redirect):
    return alone(code_dir, [tool_calls(("list_dir", {"path": "."})), "Listed."],
                 f'"{sys.executable}" harness.py --trace t.jsonl "List" {redirect}')


def test_a_stream_nobody_reads_still_meets_the_deadline(request, code_dir):
    """--stream whose text fills a pipe nobody reads, under --deadline 2: exit 3, status deadline, well before three
    times the deadline and its grace."""
    (code, seconds), _, records = EARLY[request.node.name].result()
    assert code == 3, f"step 7: a write that waits past the deadline ends the run: {code}"
    assert seconds < 3 * (2 + GRACE), f"step 7: it took {seconds:.1f} s, more than {3 * (2 + GRACE)} s"
    assert records[-1:] and records[-1].get("status") == "deadline", "the trace's end record"


def unread_stream(code_dir):
    def wait(process, server):  # nobody reads its output
        began = time.monotonic()
        process.wait(60)
        return process.returncode, since_first_request(server, began)  # the harness's time, without its start-up
    return alone(code_dir, [{"content": "word " * 100_000}], ["--trace", "t.jsonl", "--stream", "--deadline", "2",
                                                               "Say"], wait)


@pytest.mark.skipif(sys.platform == "win32", reason="arguments there are always text")
def test_a_task_in_bytes_that_are_not_utf8_is_sent(request, code_dir):
    """A task typed in another encoding (a byte that is not UTF-8): sent with the byte replaced, and answered."""
    done, requests, _ = EARLY[request.node.name].result()
    assert done.returncode == 0 and len(requests) == 1, done.stderr.decode(errors="replace")
    task = json.dumps(requests[0]["body"]["messages"][-1]["content"])
    assert all(word in task for word in WORDS), f"the task should be sent, its other words whole: {task}"


def task_in_bytes(code_dir):
    return alone(code_dir, ["Hi."], [sys.executable, "harness.py", b" \xff ".join(w.encode() for w in WORDS)])


WORDS = ("Say", "hi")
ALONE = {"test_output_that_cannot_be_written_ends_in_a_status": unwritable_output,  # test: its run, begun early
         "test_a_stream_nobody_reads_still_meets_the_deadline": unread_stream,
         "test_a_task_in_bytes_that_are_not_utf8_is_sent": task_in_bytes}


@pytest.mark.parametrize("name", MINE)  # last: the cases ran beside the tests above
def test_done_when_the_scripted_case_passes(code_dir, name):
    """The scripted case runs as tests/cases.py describes it (`python tests/cases.py -v NAME` shows it run)."""
    found = STARTED[code_dir][name].result()
    assert found == [], f"case {name}: " + "; ".join(found)
