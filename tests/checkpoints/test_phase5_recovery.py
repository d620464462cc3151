"""Phase 5, recovery: provider failures retried or explained, what the model gets wrong put right or stopped,
Ctrl-C and signals, --stream; and the scripted cases of tests/cases.py, which are this phase's "Done when".
Checked through the command line, real processes and what the offline model receives."""
import json
import signal
import subprocess
import sys
import time

import pytest
from cases import CASES, start_cases
from helpers import clean_env, groq_env, run_python, running_commands

PHASE = 5
STARTED = {}  # folder -> {case: future}: a folder's cases all start at its first case, and run side by side


@pytest.mark.parametrize("name", CASES)
def test_done_when_the_scripted_case_passes(code_dir, name, request):
    """The scripted case runs as tests/cases.py describes it (run `python tests/cases.py -v NAME` to watch it)."""
    if not STARTED:  # every folder's cases start now, side by side: most of a case is waiting
        folders = {item.callspec.params["code_dir"] for item in request.session.items
                   if item.originalname == "test_done_when_the_scripted_case_passes"}
        STARTED.update({folder: start_cases(CASES, folder) for folder in sorted(folders)})
    found = STARTED[code_dir][name].result()
    assert found == [], f"case {name}: " + "; ".join(found)


def cli(workspace, server, *args):
    trace = workspace / "trace.jsonl"
    result = run_python(workspace, "harness.py", "--trace", str(trace), *args, env=groq_env(server))
    return result, [json.loads(line) for line in trace.read_text().splitlines()]


def test_retries_happen_once_not_inside_the_client_too(workspace, server, load):
    """Retries are chat()'s alone: RETRIES + 1 requests in all, each retry said on stderr, then one error."""
    retries = load("backend").RETRIES
    server.push(*[{"status": 500, "headers": {"retry-after": "0.01"}}] * 20)
    result, trace = cli(workspace, server, "Hi")
    assert result.returncode == 1 and trace[-1]["status"] == "provider_error", result.stderr
    assert len(server.requests) == retries + 1, "the openai client's own retries must be off (max_retries=0)"
    assert result.stderr.count("trying again") == retries and "Traceback" not in result.stderr


@pytest.mark.parametrize("status, fix", [(401, "GROQ_API_KEY"), (403, "permissions"), (404, "MODEL")])
def test_auth_and_not_found_are_not_retried_and_name_the_fix(workspace, server, status, fix):
    """401, 403 and 404 are not retried: one request, one message with the provider's words and the fix."""
    server.push({"status": status, "body": {"error": {"message": f"refused with {status}"}}})
    result, trace = cli(workspace, server, "Hi")
    assert result.returncode == 1 and len(server.requests) == 1
    assert any(line.startswith("error: ") and f"refused with {status}" in line and fix in line
               for line in result.stderr.splitlines()), result.stderr


def test_stream_prints_the_text_once_as_it_arrives_and_counts_usage(workspace, server):
    """--stream prints the text as it comes, once, and the usage still adds up."""
    server.push({"content": "one two three four five six seven eight nine ten"})
    result, trace = cli(workspace, server, "--stream", "Count")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("one two three four five six seven eight nine ten") == 1
    assert trace[-1]["usage"]["total_tokens"] > 0


def start(workspace, server, *args, stdin=subprocess.DEVNULL):
    return subprocess.Popen([sys.executable, "harness.py", "--trace", "trace.jsonl", *args], cwd=workspace,
                            env=clean_env(**groq_env(server)), stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signal_number, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_during_a_command_stops_at_once_and_kills_it(workspace, server, signal_number, code):
    """Ctrl-C, SIGTERM or SIGHUP while a command runs: the run ends interrupted, at once, with exit 128 + the
    signal's number, the command killed, the trace closed, and the call answered."""
    command = f"sleep 63.{signal_number}"
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]}, "never")
    process = start(workspace, server, "--yes", "Sleep")
    for _ in range(100):
        if running_commands(command):
            break
        time.sleep(0.05)
    started = time.monotonic()
    process.send_signal(signal_number)
    stdout, stderr = process.communicate(timeout=10)
    assert time.monotonic() - started < 2 and process.returncode == code and "Traceback" not in stderr, stderr
    time.sleep(0.2)
    assert running_commands(command) == []
    records = [json.loads(line) for line in (workspace / "trace.jsonl").read_text().splitlines()]
    assert records[-1]["type"] == "end" and records[-1]["status"] == "interrupted"
    assert [r["result"] for r in records if r["type"] == "tool"] == ["error: interrupted before it finished"]


def test_ctrl_c_at_an_approval_prompt_stops_the_run(workspace, server):
    """Ctrl-C while the question waits for an answer: interrupted, exit 130, nothing run."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "touch made"}}]}, "never")
    process = start(workspace, server, "Touch", stdin=subprocess.PIPE)
    for _ in range(100):  # until the question is on screen: the harness now waits for an answer
        if (workspace / "trace.jsonl").exists() and '"type": "reply"' in (workspace / "trace.jsonl").read_text():
            break
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 130 and "Traceback" not in stderr and "touch made" in stderr, stderr
    assert not (workspace / "made").exists()
    assert json.loads((workspace / "trace.jsonl").read_text().splitlines()[-1])["status"] == "interrupted"
