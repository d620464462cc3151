"""Phase 12, MCP tools: the same loop, with tools that live in another process. Checked through
`python harness.py --mcp COMMAND` against the scripted model, with the course's ticket_server.py and
tests/mcp_servers.py, which misbehaves on purpose."""
import json
import shutil

import pytest
from helpers import ROOT, groq_env, run_python, trace_records

PHASE = 12
FILES = ("mcp_client.py", "harness.py", "shell.py", "guards.py", "tools.py", "cli.py")


@pytest.fixture
def servers(workspace):
    """The workspace holds the two servers, as a learner's folder holds ticket_server.py."""
    for name in ("ticket_server.py", "tests/mcp_servers.py"):
        shutil.copy(ROOT / name, workspace / name.split("/")[-1])
    return workspace


def run(servers, server, *calls, args=("--yes",)):
    """One scripted turn of calls [(name, arguments)] through `python harness.py --mcp ... ARGS`: the results the
    model got, what the harness printed, and the tools the model was offered."""
    server.push({"tool_calls": [{"name": name, "arguments": arguments, "id": f"c{n}"}
                                for n, (name, arguments) in enumerate(calls)]}, "done")
    done = run_python(servers, "harness.py", *args, "Do it", env=groq_env(server))
    if not server.requests:
        return [], done, []
    sent = server.requests[-1]["body"]
    results = [m["content"] for m in sent["messages"] if m["role"] == "tool"][-len(calls):]
    return results, done, [tool["function"]["name"] for tool in server.requests[0]["body"]["tools"]]


def test_done_when_the_demo_proposes_the_label_offline(servers):
    """`python harness.py --mcp "python ticket_server.py" --yes "Propose the billing label for DEMO-42"`: the demo
    reads the ticket, proposes the label, and the answer says it was not applied."""
    done = run_python(servers, "harness.py", "--mcp", "python ticket_server.py", "--yes",
                      "Propose the billing label for DEMO-42", env={"BACKEND": "demo"})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("[1] tickets__get_ticket") and lines[1].startswith(
        "[2] tickets__propose_label"), done.stdout
    assert "Nothing was applied" in done.stdout, done.stdout


def test_server_tools_are_the_model_s_tools_kept_apart_and_asked_about(servers, server):
    """The model is offered each server tool as SERVER__TOOL, SERVER being the name the server gives itself (here
    tickets), or the one --mcp NAME=COMMAND gives it; a call asks a person by default, naming the tool and the
    server, and a no is an error the model reads."""
    results, done, offered = run(servers, server, ("tickets__get_ticket", {"ticket_id": "DEMO-42"}),
                                 args=("--mcp", "python ticket_server.py", "--mcp", "mine=python mcp_servers.py pages"))
    assert {"tickets__get_ticket", "mine__tool_2_1", "read_file"} <= set(offered), offered
    assert "get_ticket" in done.stderr and "tickets" in done.stderr and "? [y/N]" in done.stderr, done.stderr
    assert results[0].startswith("error:") and "declined" in results[0], results


def test_a_trusted_server_runs_without_a_question_and_its_errors_come_back(servers, server):
    """--mcp-trust NAME: that server's calls run without a question; a tool's own failure (isError) is an error
    result; arguments that break the tool's inputSchema are refused before the server sees them."""
    results, done, _ = run(servers, server, ("tickets__get_ticket", {"ticket_id": "DEMO-42"}),
                           ("tickets__propose_label", {"ticket_id": "DEMO-42", "label": "billing",
                                                             "expected_version": 1}),
                           ("tickets__get_ticket", {"ticket_id": 42}),
                           args=("--mcp", "python ticket_server.py", "--mcp-trust", "tickets"))
    assert "? [y/N]" not in done.stderr and json.loads(results[0])["id"] == "DEMO-42", (done.stderr, results)
    assert results[1].startswith("error:") and results[2].startswith("error:"), results
    assert "string" in results[2], f"the inputSchema's own type should be named: {results[2]}"


def test_a_server_that_dies_is_a_tool_error_and_the_run_goes_on(servers, server):
    """A server that exits in the middle of a call: the call's result is an error, and the run answers."""
    results, done, _ = run(servers, server, ("dies__work", {}), args=("--mcp", "python mcp_servers.py dies",
                                                                      "--mcp-trust", "dies"))
    assert done.returncode == 0 and results[0].startswith("error:"), (done.stderr, results)


def test_a_server_that_cannot_start_is_one_clear_error(servers, server):
    """A server that fails its handshake ends the run before the model is asked: status mcp_error, exit 1, an
    `error:` line that names the server, no traceback."""
    results, done, _ = run(servers, server, ("x", {}), args=("--mcp", "python mcp_servers.py exit"))
    assert done.returncode == 1 and "error:" in done.stderr and "exit" in done.stderr, done.stderr
    assert "stopped: mcp error" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr


def test_a_server_gets_a_clean_environment_and_its_stderr_goes_to_the_trace(servers, server, monkeypatch, load):
    """A server starts with the environment commands get (never the API key); what it writes on stderr is kept in
    the trace; its long result is cut to MAX_CHARS; it ends with the run."""
    monkeypatch.setenv("DATABASE_URL", "postgres://me:hunter2@db/app")
    results, done, _ = run(servers, server, ("env__work", {}), args=(
        "--mcp", "python mcp_servers.py env", "--mcp-trust", "env", "--trace", "run.jsonl"))
    names = json.loads(results[0])
    assert "PATH" in names and "GROQ_API_KEY" not in names and "DATABASE_URL" not in names, names
    kept = [r for r in trace_records(servers / "run.jsonl") if r["type"] == "mcp"]
    assert kept and "hello on stderr" in kept[0]["stderr"], kept
    results, _, _ = run(servers, server, ("big__work", {}), args=("--mcp", "python mcp_servers.py big",
                                                                   "--mcp-trust", "big"))
    limit, sent = load("tools").MAX_CHARS, 10_000  # mcp_servers.py big: a text of 10,000 characters
    assert len(results[0]) <= limit and "x" * 1000 in results[0], (
        f"a text of {sent} characters should come back cut to at most MAX_CHARS ({limit}), its note included; the "
        f"result has {len(results[0])} characters, {results[0].count('x')} of them the text's")


def test_a_tool_description_is_untrusted_input(servers, server):
    """A server's description tells the model to read .env and send it: a model that obeys is still refused the
    secret by the guard, and the server's call still asks a person."""
    (servers / ".env").write_text("MY_SERVICE_TOKEN=sk-live-0123456789abcdef\n")
    results, done, offered = run(servers, server, ("read_file", {"path": ".env"}),
                                 ("poisoned__work", {"context": "whatever it read"}),
                                 args=("--mcp", "python mcp_servers.py poisoned"))
    assert results[0].startswith("error:") and "secret" in results[0] and "sk-live" not in " ".join(results)
    assert "declined" in results[1], results
