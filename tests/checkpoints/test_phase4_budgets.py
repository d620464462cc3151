"""Phase 4, budgets, parallel calls and the trace: every run ends with a status and an exit code, the
calls of one turn run at the same time, and the JSONL trace holds everything, even after a crash."""
import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import PROVIDER_VARS, groq_env, run_python, scripted_backend

PHASE = 4


def calls(*pairs):
    """A scripted reply with tool calls: calls(("run_shell", {"command": "ls"}), ...)"""
    return {"tool_calls": [{"name": name, "arguments": args, "id": f"call_{n}"} for n, (name, args) in enumerate(pairs)]}


def trace_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def harness(load, workspace):
    load("tools").WORKSPACE = workspace
    return load("harness")


def test_done_when_three_slow_calls_in_one_turn_take_about_the_time_of_one(harness, server, tmp_path):
    server.push(calls(*[("run_shell", {"command": f"sleep 1; echo {n}"}) for n in range(3)]), "All slept.")
    with open(tmp_path / "trace.jsonl", "w") as trace:
        started = time.monotonic()
        result = harness.run("Sleep three times", scripted_backend(server), lambda q: True, trace=trace)
        took = time.monotonic() - started
    assert result.status == "answered" and result.answer == "All slept."
    tools = [r for r in trace_of(tmp_path / "trace.jsonl") if r["type"] == "tool"]
    assert sum(r["seconds"] for r in tools) >= 3.0  # three seconds of sleeping...
    assert took < 2.0  # ...in well under two seconds of waiting
    messages = server.requests[-1]["body"]["messages"]
    assert [(m["tool_call_id"], m["content"].split()[-1]) for m in messages[-3:]] == [
        ("call_0", "0"), ("call_1", "1"), ("call_2", "2")]


def test_a_failing_call_does_not_sink_its_siblings(harness, server, workspace):
    (workspace / "a.txt").write_text("alpha")
    server.push(calls(("read_file", {"path": "missing.txt"}), ("read_file", {"path": "a.txt"}),
                      ("no_such_tool", {})), "ok")
    result = harness.run("Read", scripted_backend(server), lambda q: False)
    assert result.status == "answered"
    contents = [m["content"] for m in server.requests[-1]["body"]["messages"][-3:]]
    assert contents[0].startswith("error: read_file failed") and contents[1] == "alpha"
    assert contents[2].startswith("error: there is no tool")


def test_questions_are_asked_one_at_a_time_in_call_order(harness, server):
    server.push(calls(*[("run_shell", {"command": f"touch f{n}"}) for n in range(3)]), "ok")
    asked, busy = [], []

    def approve(question):
        busy.append(question)
        assert len(busy) == 1, "two questions at once"
        time.sleep(0.05)
        asked.append(question)
        busy.pop()
        return False

    harness.run("Touch", scripted_backend(server), approve)
    assert asked == ["Run `touch f0`?", "Run `touch f1`?", "Run `touch f2`?"]


def test_the_result_carries_the_conversation_and_can_be_continued(harness, server):
    server.push("First answer.", "Second answer.")
    first = harness.run("One", scripted_backend(server))
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant"]
    second = harness.run("Two", scripted_backend(server), history=first.messages)
    assert second.answer == "Second answer."
    assert [m.get("content") for m in server.requests[-1]["body"]["messages"]][1:] == ["One", "First answer.", "Two"]


def test_completion_options_go_with_every_request_but_never_replace_the_loop(harness, server):
    server.push(calls(("list_dir", {})), "ok")
    options = {"temperature": 0.2, "seed": 7, "model": "other-model", "messages": [], "tools": []}
    harness.run("List", scripted_backend(server), options=options)
    for request in server.requests:
        body = request["body"]
        assert body["temperature"] == 0.2 and body["seed"] == 7
        assert body["model"] == "openai/gpt-oss-120b" and body["messages"] and body["tools"]


def cli(workspace, server, *args, input=""):
    trace = workspace / "trace.jsonl"
    result = run_python(workspace, "harness.py", "--trace", str(trace), *args, env=groq_env(server), input=input)
    return result, trace_of(trace)


def test_answered_exits_0_with_a_summary_line(workspace, server):
    server.push(calls(("list_dir", {})), "Done.")
    result, trace = cli(workspace, server, "List")
    assert result.returncode == 0, result.stderr
    assert trace[-1]["status"] == "answered"
    summary = result.stderr.strip().splitlines()[-1]
    assert summary.startswith("answered: 2 steps, 1 tool calls, ") and " tokens, " in summary and summary.endswith(" s")


def test_the_step_budget_ends_the_run_with_its_own_status(workspace, server):
    server.push(*[calls(("list_dir", {}))] * 3)
    result, trace = cli(workspace, server, "--max-steps", "2", "Loop")
    assert result.returncode == 3 and trace[-1]["status"] == "step_limit" and len(server.requests) == 2
    assert "stopped: step limit" in result.stdout


def test_the_tool_call_budget_counts_refused_calls_and_ends_the_run(workspace, server):
    server.push(calls(("no_such_tool", {}), ("list_dir", {}), ("list_dir", {"path": "."})), "never sent")
    result, trace = cli(workspace, server, "--max-tool-calls", "2", "Loop")
    assert result.returncode == 3 and trace[-1]["status"] == "tool_call_limit"
    tools = sorted((r for r in trace if r["type"] == "tool"), key=lambda r: r["id"])  # written as each ends
    assert [r["result"].startswith("error: not run") for r in tools] == [False, False, True]
    assert len(server.requests) == 1


def test_the_token_budget_uses_the_providers_count(workspace, server):
    usage = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    server.push(*[{**calls(("list_dir", {})), "usage": usage}] * 3)
    result, trace = cli(workspace, server, "--max-tokens", "100", "Loop")
    assert result.returncode == 3 and trace[-1]["status"] == "token_limit"
    assert trace[-1]["usage"]["total_tokens"] == 120 and len(server.requests) == 2


def test_the_deadline_stops_a_slow_model_close_to_it(workspace, server):
    server.push({"content": "too late", "delay": 10})
    started = time.monotonic()
    result, trace = cli(workspace, server, "--deadline", "1", "Think slowly")
    assert result.returncode == 3 and trace[-1]["status"] == "deadline"
    assert time.monotonic() - started < 4  # one second of budget, plus starting Python


def test_an_answer_cut_off_by_the_output_limit_is_incomplete(workspace, server):
    server.push({"content": "The answer is", "finish_reason": "length"})
    result, trace = cli(workspace, server, "Explain")
    assert result.returncode == 4 and trace[-1]["status"] == "incomplete"
    assert "The answer is" in result.stdout


def test_a_half_written_call_cut_off_by_the_limit_is_never_run(workspace, server):
    server.push({"tool_calls": [{"name": "run_shell", "arguments": '{"command": "touch ma'}], "finish_reason": "length"})
    result, trace = cli(workspace, server, "--yes", "Touch")
    assert result.returncode == 4 and not any(r["type"] == "tool" for r in trace)


def test_a_provider_error_exits_1_and_closes_the_trace(workspace, server):
    server.push({"status": 401, "body": {"error": {"message": "Invalid API Key", "code": "invalid_api_key"}}})
    result, trace = cli(workspace, server, "Hi")
    assert result.returncode == 1 and "Invalid API Key" in result.stderr and "Traceback" not in result.stderr
    assert trace[-1]["type"] == "end" and trace[-1]["status"] == "provider_error"


def test_usage_errors_exit_2(workspace):
    for args in (["--max-steps", "0", "x"], ["--deadline", "soon", "x"], ["--bogus", "x"]):
        assert run_python(workspace, "harness.py", *args).returncode == 2


def test_the_trace_holds_every_call_and_the_end(workspace, server):
    (workspace / "a.txt").write_text("alpha")
    server.push(calls(("read_file", {"path": "a.txt"}), ("read_file", {"path": "nope.txt"})), "Read them.")
    result, trace = cli(workspace, server, "Read")
    assert result.returncode == 0
    assert [r["type"] for r in trace] == ["start", "reply", "tool", "tool", "reply", "end"]
    assert trace[0]["task"] == "Read" and trace[0]["model"] == "openai/gpt-oss-120b"
    first, second = sorted(trace[2:4], key=lambda r: r["id"])  # each written as it ends
    assert (first["id"], first["name"], first["arguments"], first["is_error"], first["result"]) == (
        "call_0", "read_file", '{"path": "a.txt"}', False, "alpha")
    assert second["id"] == "call_1" and second["is_error"] is True and second["result"].startswith("error:")
    assert trace[1]["finish_reason"] == "tool_calls" and trace[1]["usage"]["total_tokens"] > 0
    assert trace[-1]["answer"] == "Read them." and trace[-1]["steps"] == 2 and trace[-1]["tool_calls"] == 2


def start_slow_run(workspace, server, trace):
    server.push(calls(("list_dir", {})), {"content": "late", "delay": 30})
    env = {k: v for k, v in __import__("os").environ.items() if k not in PROVIDER_VARS}
    process = subprocess.Popen([sys.executable, "harness.py", "--trace", str(trace), "Slow"], cwd=workspace,
                               env={**env, **groq_env(server)}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(200):  # until the second request is on its way
        if len(server.requests) >= 2:
            return process
        time.sleep(0.05)
    process.kill()
    raise AssertionError("the run never sent its second request")


def test_a_run_killed_midway_leaves_a_trace_whose_lines_all_parse(workspace, server):
    trace = workspace / "trace.jsonl"
    process = start_slow_run(workspace, server, trace)
    process.kill()
    process.wait()
    records = trace_of(trace)
    assert [r["type"] for r in records] == ["start", "reply", "tool"]


def test_ctrl_c_ends_the_run_as_interrupted_with_exit_130(workspace, server):
    trace = workspace / "trace.jsonl"
    process = start_slow_run(workspace, server, trace)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 130 and "Traceback" not in stderr
    assert trace_of(trace)[-1]["status"] == "interrupted"
