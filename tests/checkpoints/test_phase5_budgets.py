"""Phase 5, budgets: run() returns a Result whose status says how the run ended; steps, tool calls, tokens and the
deadline are each a budget with its own status, decided before each request; the conversation in result.messages
can always be continued; the JSONL trace holds every reply, every call and the end; the command line prints a
summary and exits 0, 1, 2 or 3. Checked through run(), Limits, the command line, the trace and the scripted cases
of tests/cases.py marked phase 5."""
import json
import os
import signal
import time

import pytest
from cases import CASES, start_cases
from helpers import (ended, groq_env, needs_fifos, needs_signals, run_python, scripted_backend, start_python,
                     tool_calls, trace_records, wait_for)

PHASE = 5
FILES = ("backend.py", "guards.py", "tools.py", "shell.py", "harness.py", "cli.py")
MINE = [name for name, case in CASES.items() if case["phase"] == PHASE]
STARTED = {}  # folder -> {case: future}: every folder's cases, started with this module's first test
pytestmark = pytest.mark.xdist_group("test_phase5_budgets")  # one worker: the first test starts every case


@pytest.fixture(autouse=True, scope="module")
def cases_started(request):
    """The scripted cases of this phase, for every folder whose case tests were chosen, start with the module's
    first test and run side by side with the tests that follow; the last tests wait for them."""
    folders = {item.callspec.params["code_dir"] for item in request.session.items
               if item.originalname == "test_done_when_the_scripted_case_passes" and item.module.PHASE == PHASE}
    STARTED.update({folder: start_cases(MINE, folder) for folder in sorted(folders)})


def test_run_returns_a_result_and_its_messages_continue(harness, server):
    """run() returns a Result (status, answer, error, steps, tool_calls, usage, seconds, messages);
    run(task, history=result.messages) goes on with the same conversation."""
    server.push(tool_calls(("list_dir", {})), "First answer.", "Second answer.")
    first = harness.run("One", backend=scripted_backend(server))
    assert (first.status, first.answer, first.steps, first.tool_calls) == ("answered", "First answer.", 2, 1), first
    assert not first.error, f"no error when answered: {first.error!r}"
    assert first.seconds >= 0 and first.usage.get("total_tokens", 0) > 0, f"usage should count total_tokens: {first}"
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant", "tool", "assistant"]
    second = harness.run("Two", backend=scripted_backend(server), history=first.messages)
    assert second.status == "answered" and second.answer == "Second answer.", second
    sent = server.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"] and \
        sent[-1]["content"] == "Two", "history= must go on from the first run's messages, then the new task"


def test_every_budget_ends_the_run_with_its_own_status(harness, server):
    """Limits(max_steps=..., max_tool_calls=..., max_tokens=...) each end the run with their status, checked
    before each request; a call past the tool-call budget gets an error result and does not run."""
    usage = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    server.push(*[{**tool_calls(("list_dir", {})), "usage": usage}] * 2)
    steps = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_steps=2))
    assert (steps.status, steps.steps, len(server.requests)) == ("step_limit", 2, 2), steps
    server.requests.clear()
    server.push(*[{**tool_calls(("list_dir", {})), "usage": usage}] * 2)
    tokens = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_tokens=100))
    assert (tokens.status, tokens.usage.get("total_tokens"), len(server.requests)) == ("token_limit", 120, 2), \
        f"the server counted 60 tokens a reply: the third request must not be sent ({tokens})"
    server.requests.clear()
    server.push(tool_calls(("list_dir", {}), ("list_dir", {"path": "."}), ("list_dir", {"path": "sub"})))
    calls = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_tool_calls=2))
    assert calls.status == "tool_call_limit" and len(server.requests) == 1, calls
    assert calls.messages[-1]["content"].startswith("error:"), "the third call is not run, and the model is told"


def test_usage_is_the_servers_count_or_an_estimate(harness, server):
    """usage adds up the server's counts; a server that sends none gets an estimate, so max_tokens holds."""
    server.push({"content": "Counted.", "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})
    counted = harness.run("Hi", backend=scripted_backend(server))
    assert {name: counted.usage.get(name) for name in ("prompt_tokens", "completion_tokens", "total_tokens")} == {
        "prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}, f"the server counted 7 + 3: {counted.usage}"
    server.push({"content": "Not counted.", "usage": False})
    estimated = harness.run("Hi", backend=scripted_backend(server))
    prompt, completion = (estimated.usage.get(name) or 0 for name in ("prompt_tokens", "completion_tokens"))
    assert prompt > 0 and completion > 0, f"a server that counts nothing: estimate it: {estimated.usage}"
    assert estimated.usage.get("total_tokens") == prompt + completion, f"total_tokens is the sum: {estimated.usage}"


def test_the_deadline_counts_from_started_and_is_checked_before_each_request(harness, server):
    """Limits(deadline=SECONDS) counts from run(started=...): a run whose time is up sends nothing; a reply that
    comes back after the deadline is the last one."""
    late = harness.run("Hi", backend=scripted_backend(server), limits=harness.Limits(deadline=5),
                       started=time.monotonic() - 10)
    assert late.status == "deadline" and server.requests == [] and late.seconds >= 10, (
        f"a run started 10 s ago with a 5 s deadline sends nothing and ends deadline, its seconds counted from "
        f"started (10 or more): {late.status!r}, {len(server.requests)} requests, {late.seconds} s")
    server.push({**tool_calls(("list_dir", {})), "delay": 1.5}, "never asked")
    slow = harness.run("Hi", backend=scripted_backend(server), limits=harness.Limits(deadline=0.5))
    assert slow.status == "deadline" and len(server.requests) <= 1, f"no request after the deadline: {slow}"


def test_every_call_is_answered_whatever_ends_the_run(harness, server):
    """Ctrl-C at a question (the approver raises KeyboardInterrupt): status interrupted, and every call of the turn
    has a tool message in result.messages, so run(..., history=result.messages) is accepted by the server."""
    server.push(tool_calls(("run_shell", {"command": "touch a"}), ("run_shell", {"command": "touch b"})))

    def ctrl_c(question):
        raise KeyboardInterrupt

    result = harness.run("Touch", backend=scripted_backend(server), approve=ctrl_c)
    assert result.status == "interrupted", result
    answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert answered == ["call_0", "call_1"], f"each call needs a tool message, in order: {answered}"
    server.push("Going on.")
    again = harness.run("Go on", backend=scripted_backend(server), history=result.messages, approve=ctrl_c)
    assert again.status == "answered" and again.answer == "Going on.", again


def cli(workspace, server, *args, input=""):
    trace = workspace / "trace.jsonl"
    result = run_python(workspace, "harness.py", "--trace", str(trace), *args, env=groq_env(server), input=input)
    return result, trace_records(trace) if trace.exists() else []


def test_the_command_line_prints_a_summary_and_exits_with_the_status_code(workspace, server):
    """Answered: exit 0, the last line on stderr `answered: 2 steps, 1 tool calls, N tokens, N.N s`. A budget:
    `stopped: step limit` on stdout, exit 3. A flag that is not above 0, or no number: exit 2."""
    server.push(tool_calls(("list_dir", {})), "Done.")
    result, _ = cli(workspace, server, "List")
    summary = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "Done.", result.stdout + result.stderr
    assert summary.startswith("answered: 2 steps, 1 tool calls, ") and summary.endswith(" s"), (
        f"the last line on stderr should be `answered: 2 steps, 1 tool calls, N tokens, N.N s`: {summary!r}")
    server.push(*[tool_calls(("list_dir", {}))] * 3)
    result, _ = cli(workspace, server, "--max-steps", "2", "Loop")
    assert result.returncode == 3 and "stopped: step limit" in result.stdout.splitlines(), (
        f"exit 3 (it was {result.returncode}) and a line `stopped: step limit`: {result.stdout!r}")
    assert result.stderr.strip().splitlines()[-1].startswith("step_limit" + ": 2 steps"), (
        f"the summary starts with the status, `step_limit: 2 steps, ...`: {result.stderr!r}")
    server.push(*[tool_calls(("list_dir", {}))] * 3)
    result, _ = cli(workspace, server, "--max-tool-calls", "1", "Loop")
    assert result.returncode == 3 and "stopped: " + "tool call limit" in result.stdout.splitlines(), (
        f"exit 3 (it was {result.returncode}) and a line `stopped: tool call limit`: {result.stdout!r}")
    for args in (["--max-steps", "0", "x"], ["--max-tokens", "-5", "x"], ["--deadline", "soon", "x"],
                 ["--deadline", "nan", "x"], ["--max-tool-calls", "1.5", "x"]):
        assert run_python(workspace, "harness.py", *args).returncode == 2, f"{args}: a usage error, exit 2"


def test_the_trace_holds_every_reply_every_call_and_the_end(workspace, server):
    """--trace FILE appends one JSON object a line: start (task, backend, model), a reply per model reply (step,
    finish_reason, calls: their ids, usage), a tool per call (id, name, arguments, is_error, result, seconds), and
    end (status, answer, steps, tool_calls, usage, seconds); every record carries the run's id."""
    (workspace / "a.txt").write_text("alpha")
    server.push(tool_calls(("read_file", {"path": "a.txt"}), ("read_file", {"path": "nope.txt"})), "Read them.")
    result, trace = cli(workspace, server, "Read")
    assert result.returncode == 0, result.stderr
    kinds = [r.get("type") for r in trace]
    assert kinds == ["start", "reply", "tool", "tool", "reply", "end"], f"the trace's records were {kinds}"
    assert len({str(r.get("run")) for r in trace}) == 1 and "run" in trace[0], "one run id on every record"
    start, reply, end = trace[0], trace[1], trace[-1]
    first, second = sorted(trace[2:4], key=lambda r: str(r.get("id")))
    wrong = [f"the {where} record's {problem}" for where, record, wanted in [
        ("start", start, {"task": "Read", "backend": "groq", "model": "openai/gpt-oss-120b"}),
        ("first reply", reply, {"step": 1, "finish_reason": "tool_calls", "calls": ["call_0", "call_1"]}),
        ("first tool", first, {"id": "call_0", "name": "read_file", "arguments": json.dumps({"path": "a.txt"}),
                               "is_error": False, "result": "alpha"}),
        ("end", end, {"status": "answered", "answer": "Read them.", "steps": 2, "tool_calls": 2})]
        for problem in differs(record, wanted)]
    assert not wrong, "; ".join(wrong)
    assert (reply.get("usage") or {}).get("total_tokens"), f"the reply record's usage, as Result.usage: {reply}"
    assert second.get("is_error") is True and str(second.get("result")).startswith("error:"), (
        f"the second tool record: is_error true, a result starting `error:`: {second}")
    assert isinstance(second.get("seconds"), (int, float)), f"a tool record's seconds: {second}"
    assert (end.get("usage") or {}).get("total_tokens", 0) > 0 and end.get("seconds", -1) >= 0, (
        f"the end record's usage (as Result.usage) and seconds: {end}")
    server.push("Again.")
    _, trace = cli(workspace, server, "Again")
    assert [r.get("type") for r in trace][-3:] == ["start", "reply", "end"], "--trace appends"
    assert len({str(r.get("run")) for r in trace}) == 2, "two runs in one file, told apart by their run ids"


def differs(record, wanted):
    """What in a trace record differs from the fields wanted: ["calls is [...], not ['call_0', 'call_1']", ...]."""
    return [f"{name} is {record.get(name)!r}, not {value!r}" for name, value in wanted.items()
            if record.get(name) != value]


def test_a_long_text_is_cut_in_the_trace(harness, load, server, workspace):
    """A field longer than cli.TRACE_CHARS is cut in the trace that cli.Trace(path, policy).record writes, given
    to run() as record (the run itself keeps it whole)."""
    cli = load("cli")
    server.push("ok")
    task = "x" * (cli.TRACE_CHARS * 3)
    trace = cli.Trace(str(workspace / "t.jsonl"), load("guards").policy())
    result = harness.run(task, backend=scripted_backend(server), record=trace.record)
    start = trace_records(workspace / "t.jsonl")[0]
    assert result.status == "answered" and result.messages[1]["content"] == task
    cut = len(str(start.get("task")))
    assert cli.TRACE_CHARS // 2 < cut <= cli.TRACE_CHARS + 100, (
        f"a task of {len(task)} characters should be cut to about TRACE_CHARS ({cli.TRACE_CHARS}); the start "
        f"record's task has {cut}")


@needs_fifos
def test_a_trace_that_is_no_regular_file_ends_the_run_at_once(workspace, server):
    """--trace naming a pipe (or a folder) is an output_error before any request: exit 1, a message about the
    trace on stderr, and no wait for a reader that never comes."""
    os.mkfifo(workspace / "pipe")
    server.push("never asked")
    result = run_python(workspace, "harness.py", "--trace", "pipe", "Hi", env=groq_env(server), timeout=30)
    assert result.returncode == 1 and "trace" in result.stderr and server.requests == [], result.stderr


def start_slow_run(workspace, server, trace):
    server.push(tool_calls(("list_dir", {})), {"content": "late", "delay": 30})
    process = start_python(workspace, "harness.py", "--trace", str(trace), "Slow", env=groq_env(server), text=True)
    if wait_for(lambda: len(server.requests) >= 2, process, seconds=20):  # the second request is on its way
        return process
    why = ended(process)
    process.kill()
    raise AssertionError("the run never sent its second request" + why)


def test_a_run_killed_midway_leaves_a_trace_whose_lines_all_parse(workspace, server):
    """kill -9 in the middle of a run: every record written so far is a whole line of JSON."""
    trace = workspace / "trace.jsonl"
    process = start_slow_run(workspace, server, trace)
    process.kill()
    process.wait()
    kinds = [r.get("type") for r in trace_records(trace)]
    assert kinds == ["start", "reply", "tool"], f"the records written before the kill: {kinds}"


@needs_signals
def test_ctrl_c_ends_the_run_as_interrupted_with_exit_130(workspace, server):
    """Ctrl-C while waiting for the model: `interrupted` in the trace's end record, exit 130, no traceback."""
    trace = workspace / "trace.jsonl"
    process = start_slow_run(workspace, server, trace)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert trace_records(trace)[-1].get("status") == "interrupted", trace_records(trace)[-1]


@pytest.mark.parametrize("name", MINE)  # last: the cases ran beside the tests above
def test_done_when_the_scripted_case_passes(code_dir, name):
    """The scripted case runs as tests/cases.py describes it (`python tests/cases.py -v NAME` shows it run)."""
    found = STARTED[code_dir][name].result()
    assert found == [], f"case {name}: " + "; ".join(found)
