"""Phase 5, recovery: provider errors retried or explained, malformed model output survived, Ctrl-C, --stream,
and the scripted cases of tests/cases.py as the regression suite."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cases import CASES, run_case
from conftest import PROVIDER_VARS, constant, groq_env, run_python

PHASE = 5


@pytest.mark.parametrize("name", CASES)
def test_done_when_the_scripted_case_passes(code_dir, name):
    assert run_case(name, code_dir) == []


def cli(workspace, server, *args, input=""):
    trace = workspace / "trace.jsonl"
    result = run_python(workspace, "harness.py", "--trace", str(trace), *args, env=groq_env(server), input=input)
    return result, [json.loads(line) for line in trace.read_text().splitlines()]


def test_retry_after_is_honoured(workspace, server):
    server.push({"status": 429, "headers": {"retry-after": "2"}, "body": {"error": {"message": "slow down"}}}, "Hi.")
    started = time.monotonic()
    result, trace = cli(workspace, server, "Hi")
    assert result.returncode == 0 and trace[-1]["status"] == "answered"
    assert time.monotonic() - started >= 2
    assert "trying again in 2.0 s" in result.stderr


def test_retries_happen_once_not_inside_the_client_too(workspace, server):
    retries = constant(workspace / "backend.py", "RETRIES")
    server.push(*[{"status": 500, "headers": {"retry-after": "0.01"}}] * 20)
    result, trace = cli(workspace, server, "Hi")
    assert result.returncode == 1 and trace[-1]["status"] == "provider_error"
    assert len(server.requests) == retries + 1  # the openai client's own two retries would make it 3 x that
    assert result.stderr.count("trying again") == retries and "Traceback" not in result.stderr


def test_a_wait_longer_than_the_provider_should_ask_is_not_retried(workspace, server):
    server.push({"status": 429, "headers": {"retry-after": "3600"}, "body": {"error": {"message": "come back later"}}})
    result, _ = cli(workspace, server, "Hi")
    assert result.returncode == 1 and len(server.requests) == 1 and "rate limit" in result.stderr


def test_retries_stop_at_the_deadline(workspace, server):
    server.push({"status": 429, "headers": {"retry-after": "5"}, "body": {"error": {"message": "slow down"}}}, "Hi.")
    started = time.monotonic()
    result, trace = cli(workspace, server, "--deadline", "2", "Hi")
    assert result.returncode in (1, 3) and trace[-1]["status"] in ("provider_error", "deadline")
    assert time.monotonic() - started < 4 and len(server.requests) == 1


@pytest.mark.parametrize("status, fix", [(401, "GROQ_API_KEY"), (403, "permissions"), (404, "MODEL")])
def test_auth_and_not_found_are_not_retried_and_name_the_fix(workspace, server, status, fix):
    server.push({"status": status, "body": {"error": {"message": f"refused with {status}"}}})
    result, trace = cli(workspace, server, "Hi")
    assert result.returncode == 1 and len(server.requests) == 1
    message = result.stderr.strip().splitlines()
    assert any(line.startswith("error: ") and f"refused with {status}" in line and fix in line for line in message)


def test_stream_prints_the_text_once_as_it_arrives_and_counts_usage(workspace, server):
    server.push({"content": "one two three four five six seven eight nine ten"})
    result, trace = cli(workspace, server, "--stream", "Count")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("one two three four five six seven eight nine ten") == 1
    assert trace[-1]["usage"]["total_tokens"] > 0


def test_a_streamed_call_cut_off_by_the_length_limit_is_not_run(workspace, server):
    server.push({"tool_calls": [{"name": "run_shell", "arguments": '{"command": "touch made"}'}],
                 "split_arguments": 5, "finish_reason": "length"})
    result, trace = cli(workspace, server, "--stream", "--yes", "Touch")
    assert result.returncode == 4 and not (workspace / "made").exists()


@pytest.mark.parametrize("reply", [
    {"message": {"role": "assistant", "content": ["not", "a", "string"]}},
    {"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "x"}}}]}},
    {"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": None, "arguments": None}}]}},
    {"content": "Fine.", "finish_reason": "eos"},
    {"status": 200, "body": "not json at all"},
    {"status": 418, "body": {"error": "a string, not an object"}},
], ids=["content-list", "arguments-object", "nulls", "unknown-finish", "text-200", "odd-error"])
def test_no_reply_from_the_provider_produces_a_traceback(workspace, server, reply):
    server.push(reply, *["Done."] * 5)
    result = run_python(workspace, "harness.py", "Go", env=groq_env(server))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (0, 1, 3, 4)


def start(workspace, server, *args):
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    return subprocess.Popen([sys.executable, "harness.py", "--trace", "trace.jsonl", *args], cwd=workspace,
                            env={**env, **groq_env(server)}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_ctrl_c_during_a_command_stops_at_once_and_kills_it(workspace, server):
    from conftest import running_commands
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 63.75"}}]}, "never")
    process = start(workspace, server, "--yes", "Sleep")
    for _ in range(100):
        if running_commands("sleep 63.75"):
            break
        time.sleep(0.05)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=10)
    assert time.monotonic() - started < 2
    assert process.returncode == 130 and "Traceback" not in stderr
    time.sleep(0.2)
    assert running_commands("sleep 63.75") == []
    end = json.loads((workspace / "trace.jsonl").read_text().splitlines()[-1])
    assert end["type"] == "end" and end["status"] == "interrupted"


def test_ctrl_c_at_an_approval_prompt_stops_the_run(workspace, server):
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "touch made"}}]}, "never")
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    process = subprocess.Popen([sys.executable, "harness.py", "--trace", "trace.jsonl", "Touch"], cwd=workspace,
                               env={**env, **groq_env(server)}, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(100):  # until the question is on screen: the harness now waits for an answer
        if (workspace / "trace.jsonl").exists() and '"type": "reply"' in (workspace / "trace.jsonl").read_text():
            break
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 130 and "Traceback" not in stderr and "Run `touch made`? [y/N]" in stderr
    assert not (workspace / "made").exists()
    assert json.loads((workspace / "trace.jsonl").read_text().splitlines()[-1])["status"] == "interrupted"
