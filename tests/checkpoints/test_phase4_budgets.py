"""Phase 4, budgets, parallel calls and the trace: run() returns a Result whose status names how the run ended,
every budget ends the run with its own status and exit code, the calls of one turn run at the same time, and the
JSONL trace holds everything, even after a crash. Checked through run(), Limits, the command line and the trace."""
import signal
import subprocess
import sys
import time

from helpers import clean_env, groq_env, run_python, scripted_backend, tool_calls, trace_records

PHASE = 4








def test_done_when_three_slow_calls_in_one_turn_take_about_the_time_of_one(harness, server, tmp_path):
    """Three commands that each sleep a second, in one turn, take well under two seconds together."""
    server.push(tool_calls(*[("run_shell", {"command": f"sleep 1; echo {n}"}) for n in range(3)]), "All slept.")
    started = time.monotonic()
    result = harness.run("Sleep three times", backend=scripted_backend(server), approve=lambda q: True,
                         trace=tmp_path / "trace.jsonl")
    took = time.monotonic() - started
    assert result.status == "answered" and result.answer == "All slept.", result
    tools = [r for r in trace_records(tmp_path / "trace.jsonl") if r["type"] == "tool"]
    assert sum(r["seconds"] for r in tools) >= 3.0 and took < 2.5, f"{took:.1f} s for three 1 s sleeps"
    messages = server.requests[-1]["body"]["messages"]
    assert [(m["tool_call_id"], m["content"].split()[-1]) for m in messages[-3:]] == [
        ("call_0", "0"), ("call_1", "1"), ("call_2", "2")], "results go back in call order, each with its id"


def test_a_failing_call_does_not_sink_its_siblings(harness, server, workspace):
    """One call of a turn failing leaves the others' results alone."""
    (workspace / "a.txt").write_text("alpha")
    server.push(tool_calls(("read_file", {"path": "missing.txt"}), ("read_file", {"path": "a.txt"}),
                      ("no_such_tool", {})), "ok")
    result = harness.run("Read", backend=scripted_backend(server), approve=lambda q: False)
    assert result.status == "answered"
    contents = [m["content"] for m in server.requests[-1]["body"]["messages"][-3:]]
    assert contents[0].startswith("error:") and contents[1] == "alpha" and contents[2].startswith("error:")


def test_questions_are_asked_one_at_a_time_in_call_order(harness, server):
    """Approvals come first, one at a time, in the order of the calls."""
    server.push(tool_calls(*[("run_shell", {"command": f"touch f{n}"}) for n in range(3)]), "ok")
    asked, busy = [], []

    def approve(question):
        busy.append(question)
        assert len(busy) == 1, "two questions at once"
        time.sleep(0.05)
        asked.append(question)
        busy.pop()
        return False

    harness.run("Touch", backend=scripted_backend(server), approve=approve)
    assert [next(f for f in ("f0", "f1", "f2") if f in q) for q in asked] == ["f0", "f1", "f2"], asked


def test_the_result_carries_the_conversation_and_can_be_continued(harness, server):
    """result.messages is the conversation; run(..., history=result.messages) continues it."""
    server.push("First answer.", "Second answer.")
    first = harness.run("One", backend=scripted_backend(server))
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant"]
    second = harness.run("Two", backend=scripted_backend(server), history=first.messages)
    assert second.answer == "Second answer."
    assert [m.get("content") for m in server.requests[-1]["body"]["messages"]][1:] == ["One", "First answer.", "Two"]


def test_completion_options_go_with_every_request_but_never_replace_the_loop(harness, server):
    """options= reach every request; they never replace the loop's model, messages or tools."""
    server.push(tool_calls(("list_dir", {})), "ok")
    options = {"temperature": 0.2, "seed": 7, "model": "other-model", "messages": [], "tools": []}
    harness.run("List", backend=scripted_backend(server), options=options)
    for request in server.requests:
        body = request["body"]
        assert body["temperature"] == 0.2 and body["seed"] == 7
        assert body["model"] == "openai/gpt-oss-120b" and body["messages"] and body["tools"]


def test_every_budget_ends_the_run_with_its_own_status(harness, server):
    """Limits(max_steps=..., max_tool_calls=..., max_tokens=...) each end the run with their status."""
    usage = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    server.push(*[{**tool_calls(("list_dir", {})), "usage": usage}] * 2)
    steps = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_steps=2))
    assert (steps.status, steps.steps, len(server.requests)) == ("step_limit", 2, 2), steps
    server.requests.clear()
    server.push(*[{**tool_calls(("list_dir", {})), "usage": usage}] * 2)
    tokens = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_tokens=100))
    assert (tokens.status, tokens.usage["total_tokens"]) == ("token_limit", 120), tokens
    server.requests.clear()
    server.push(tool_calls(("no_such_tool", {}), ("list_dir", {}), ("list_dir", {"path": "sub"})))
    calls = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_tool_calls=2))
    assert calls.status == "tool_call_limit" and len(server.requests) == 1, calls
    assert calls.messages[-1]["content"].startswith("error: not run"), "the third call is not run"


def cli(workspace, server, *args, input=""):
    trace = workspace / "trace.jsonl"
    result = run_python(workspace, "harness.py", "--trace", str(trace), *args, env=groq_env(server), input=input)
    return result, trace_records(trace) if trace.exists() else []


def test_the_command_line_exits_with_the_status_code_and_a_summary(workspace, server):
    """Exit 0 and a summary line when answered; 3 for a budget, with `stopped:`; 2 for a bad flag."""
    server.push(tool_calls(("list_dir", {})), "Done.")
    result, trace = cli(workspace, server, "List")
    assert result.returncode == 0 and trace[-1]["status"] == "answered", result.stderr
    summary = result.stderr.strip().splitlines()[-1]
    assert summary.startswith("answered: 2 steps, 1 tool calls, ") and " tokens, " in summary, summary
    server.push(*[tool_calls(("list_dir", {}))] * 3)
    result, trace = cli(workspace, server, "--max-steps", "2", "Loop")
    assert result.returncode == 3 and trace[-1]["status"] == "step_limit" and "stopped: step limit" in result.stdout
    for args in (["--max-steps", "0", "x"], ["--deadline", "soon", "x"], ["--bogus", "x"]):
        assert run_python(workspace, "harness.py", *args).returncode == 2, args


def test_the_deadline_stops_a_slow_model_close_to_it(workspace, server):
    """--deadline 1 against a model that takes 10 s: status deadline, exit 3, in about a second."""
    server.push({"content": "too late", "delay": 10})
    started = time.monotonic()
    result, trace = cli(workspace, server, "--deadline", "1", "Think slowly")
    assert result.returncode == 3 and trace[-1]["status"] == "deadline", result.stderr
    assert time.monotonic() - started < 4


def test_an_answer_cut_off_by_the_output_limit_is_incomplete_and_runs_nothing(workspace, server):
    """finish_reason "length": status incomplete, exit 4, the partial text shown, and no half-written call run."""
    server.push({"content": "The answer is", "finish_reason": "length"})
    result, trace = cli(workspace, server, "Explain")
    assert result.returncode == 4 and trace[-1]["status"] == "incomplete" and "The answer is" in result.stdout
    server.push({"tool_calls": [{"name": "run_shell", "arguments": '{"command": "touch ma'}],
                 "finish_reason": "length"})
    result, trace = cli(workspace, server, "--yes", "Touch")
    assert result.returncode == 4 and not any(r["type"] == "tool" and r.get("run") == trace[-1].get("run")
                                              for r in trace)


def test_the_trace_holds_every_call_and_the_end(workspace, server):
    """The trace: a start record, a reply record per model reply, a tool record per call, and an end record."""
    (workspace / "a.txt").write_text("alpha")
    server.push(tool_calls(("read_file", {"path": "a.txt"}), ("read_file", {"path": "nope.txt"})), "Read them.")
    result, trace = cli(workspace, server, "Read")
    assert result.returncode == 0
    assert [r["type"] for r in trace] == ["start", "reply", "tool", "tool", "reply", "end"]
    assert trace[0]["task"] == "Read" and trace[0]["model"] == "openai/gpt-oss-120b"
    first, second = sorted(trace[2:4], key=lambda r: r["id"])
    assert (first["id"], first["name"], first["arguments"], first["is_error"], first["result"]) == (
        "call_0", "read_file", '{"path": "a.txt"}', False, "alpha")
    assert second["id"] == "call_1" and second["is_error"] is True and second["result"].startswith("error:")
    assert trace[1]["finish_reason"] == "tool_calls" and trace[1]["usage"]["total_tokens"] > 0
    assert trace[-1]["answer"] == "Read them." and trace[-1]["steps"] == 2 and trace[-1]["tool_calls"] == 2


def start_slow_run(workspace, server, trace):
    server.push(tool_calls(("list_dir", {})), {"content": "late", "delay": 30})
    process = subprocess.Popen([sys.executable, "harness.py", "--trace", str(trace), "Slow"], cwd=workspace,
                               env=clean_env(**groq_env(server)), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(200):  # until the second request is on its way
        if len(server.requests) >= 2:
            return process
        time.sleep(0.05)
    process.kill()
    raise AssertionError("the run never sent its second request")


def test_a_run_killed_midway_leaves_a_trace_whose_lines_all_parse(workspace, server):
    """kill -9 in the middle of a run: every line written so far is whole JSON."""
    trace = workspace / "trace.jsonl"
    process = start_slow_run(workspace, server, trace)
    process.kill()
    process.wait()
    assert [r["type"] for r in trace_records(trace)] == ["start", "reply", "tool"]


def test_ctrl_c_ends_the_run_as_interrupted_with_exit_130(workspace, server):
    """Ctrl-C while waiting for the model: status interrupted in the trace, exit 130, no traceback."""
    trace = workspace / "trace.jsonl"
    process = start_slow_run(workspace, server, trace)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert trace_records(trace)[-1]["status"] == "interrupted"
