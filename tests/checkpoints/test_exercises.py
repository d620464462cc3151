"""The lessons' exercises that have a behaviour to show, each checked by that behaviour:
`python -m pytest tests/checkpoints --phase N --exercise K` checks exercise K of lesson N on your code. Each test's
docstring is the lesson's "You succeeded when". Without --phase, each runs on its phase's checkpoint with the
reference solution applied (phases/NN-name/solutions/exercise-K.diff). An exercise whose success is something you
explain has no check here; its lesson says so."""
import json
import os
import shutil
import sys
import threading
import time

import pytest
from cases import TOOL_USE_FAILED, error
from helpers import (BUBBLEWRAP_MISSING, ROOT, demo_model, groq_env, needs_bubblewrap, run_python, scripted_backend,
                     tool_calls, trace_records)

exercise = pytest.mark.exercise  # exercise(phase, number)


def printed(result, command="python harness.py"):
    return f"\n--- {command} printed ---\n{result.stdout}{result.stderr}---"


def tool_results(request):
    """The tool messages a request sent back, in order."""
    return [m for m in request["body"]["messages"] if m.get("role") == "tool"]


@exercise(0, 1)
def test_backend_lists_the_models_the_server_offers(workspace, unused_port):
    """`python backend.py --models` prints the names of the models the server lists, one a line, exit 0; a server
    it cannot reach is one `error: ...` line, exit 1."""
    with demo_model.start(models=["alpha-1", "beta-2"]) as server:
        result = run_python(workspace, "backend.py", "--models", env={"BASE_URL": server.url})
        served = list(server.models)
    said = printed(result, "python backend.py --models")
    assert result.returncode == 0 and result.stdout.split() == served, (
        f"the server lists {', '.join(served)}: print them, one a line, exit 0.{said}")
    result = run_python(workspace, "backend.py", "--models", env={"BASE_URL": f"http://127.0.0.1:{unused_port}/v1"})
    said = printed(result, "python backend.py --models")
    assert result.returncode == 1 and "Traceback" not in result.stderr, f"nothing listens there: exit 1.{said}"
    assert result.stderr.strip().splitlines()[-1].startswith("error: "), f"one `error: ...` line.{said}"


@exercise(0, 3)
def test_a_base_url_pasted_with_chat_completions_still_answers(workspace, server):
    """With a BASE_URL that ends in `/chat/completions` (copied from a curl line), with or without a last `/`,
    `python backend.py` answers from that server, exit 0."""
    for pasted in (f"{server.url}/chat/completions", f"{server.url}/chat/completions/"):
        server.push("Hello from the pasted URL.")
        result = run_python(workspace, "backend.py", env={"BASE_URL": pasted})
        assert result.returncode == 0 and "Hello from the pasted URL." in result.stdout, (
            f"BASE_URL={pasted} should reach {server.url}/chat/completions.{printed(result, 'python backend.py')}")


@exercise(1, 1)
def test_the_system_message_comes_from_the_command_line(workspace, server):
    """`python harness.py --system "Answer in French." "Say hi"` sends that text first (the system message), then
    the task; a run without --system still sends SYSTEM."""
    server.push("Bonjour.", "Hello.")
    result = run_python(workspace, "harness.py", "--system", "Answer in French.", "Say hi", env=groq_env(server))
    assert result.returncode == 0 and "Bonjour." in result.stdout, printed(result)
    first = server.requests[0]["body"]["messages"][:2]
    assert first == [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Say hi"}], first
    run_python(workspace, "harness.py", "Say hi", env=groq_env(server))
    assert server.requests[1]["body"]["messages"][0]["content"] != "Answer in French.", "--system is for one run"


@exercise(1, 2)
def test_the_model_calls_count_lines(workspace):
    """`python harness.py "Use count_lines on lines.txt"` on the demo, with a file of 7 lines: it prints
    `[1] count_lines {"path": "lines.txt"}` and an answer saying `count_lines returned: 7`."""
    (workspace / "lines.txt").write_text("".join(f"line {n}\n" for n in range(1, 8)))
    result = run_python(workspace, "harness.py", "Use count_lines on lines.txt", env={"BACKEND": "demo"})
    assert '[1] count_lines {"path": "lines.txt"}' in result.stdout, (
        f"the demo calls a tool the task names, once TOOLS describes it and REGISTRY has it.{printed(result)}")
    assert "count_lines returned: 7" in result.stdout, f"count_lines should return the count, 7.{printed(result)}"


@exercise(2, 1)
@pytest.mark.skipif(os.name == "nt", reason="Windows' own sort (System32\\sort.exe) is not POSIX sort: it has no -n "
                    "or -o; on Windows this runs in WSL 2")
def test_sort_with_its_listed_options_runs_without_a_question(workspace, server):
    """`python harness.py --workspace play 'Run `sort -n notes.txt`'` runs without a question (the lines come back
    sorted), and `'Run `sort -o x notes.txt`'` still asks: nobody answers, so it does not run and writes no x."""
    (workspace / "play").mkdir()
    (workspace / "play" / "notes.txt").write_text("10\n9\n100\n")

    def run(command):
        """What harness.py printed when the model ran this command in play, and the call's result."""
        server.push(tool_calls(("run_shell", {"command": command})), "Done.")
        before = len(server.requests)
        result = run_python(workspace, "harness.py", "--workspace", "play", f"Run `{command}`", env=groq_env(server))
        sent = server.requests[before + 1:]  # the request after the call carries its result
        return result, "".join(m["content"] for m in tool_results(sent[0])) if sent else ""

    result, said = run("sort -n notes.txt")
    assert "? [y/N]" not in result.stderr, f"sort -n only reads: READ_ONLY should let it run unasked.{printed(result)}"
    assert "9\n10\n100" in said, f"sort -n should have run: {said!r}{printed(result)}"
    result, said = run("sort -o x notes.txt")
    assert "? [y/N]" in result.stderr and said.startswith("error:"), f"-o writes a file: it asks.{printed(result)}"
    assert not (workspace / "play" / "x").exists(), "sort -o x ran although nobody said yes"


@exercise(3, 1)
@needs_bubblewrap
def test_a_command_in_the_sandbox_sees_the_machine_named_sandbox(workspace, server):
    """`python harness.py --yes --workspace play 'Run `uname -n`'` prints `sandbox`, the name bubblewrap gives the
    machine (`--hostname sandbox`), not yours."""
    (workspace / "play").mkdir()
    server.push(tool_calls(("run_shell", {"command": "uname -n"})), "Named.")
    result = run_python(workspace, "harness.py", "--yes", "--workspace", "play", "Run `uname -n`", env=groq_env(server))
    results = tool_results(server.requests[-1]) if len(server.requests) > 1 else []
    assert results and "sandbox" in results[0]["content"].splitlines(), (
        f"uname -n printed {results[0]['content'] if results else 'nothing'!r}, not sandbox.{printed(result)}")


@exercise(3, 2)
def test_a_stripe_restricted_key_is_a_secret(workspace, server):
    """A file holding `rk_live_` and 24 letters and digits: reading it says `holds a secret (an API token)`,
    `cat pay.txt` is refused, and (with bubblewrap) an approved `cat pa*.txt` prints `Permission denied`, never the
    key."""
    play, key = workspace / "play", "rk_live_" + "51HqLyjWDarjtT1zdp7dc0Zx"
    play.mkdir()
    (play / "pay.txt").write_text(f"stripe {key}\n")
    server.push(tool_calls(("read_file", {"path": "pay.txt"}), ("run_shell", {"command": "cat pay.txt"}),
                           ("run_shell", {"command": "cat pa*.txt"})), "Done.")
    result = run_python(workspace, "harness.py", "--yes", "--workspace", "play", "Read pay.txt", env=groq_env(server))
    results = [m["content"] for m in tool_results(server.requests[-1])] if len(server.requests) > 1 else []
    assert len(results) == 3, f"three calls, three results: {results}{printed(result)}"
    assert "holds a secret (an API token)" in results[0] and key not in results[0], f"read_file gave {results[0]!r}"
    assert results[1].startswith("error:") and "secret" in results[1] and key not in results[1], (
        f"cat pay.txt names a file that holds a secret: it is refused, not run: {results[1]!r}")
    if not BUBBLEWRAP_MISSING:
        assert "Permission denied" in results[2] and key not in results[2], (
            f"the sandbox hides a file that holds a secret: cat pa*.txt gave {results[2]!r}")


@exercise(4, 1)
def test_a_misspelled_argument_is_named_with_the_one_meant(load):
    """`check_call("read_file", '{"path": "a", "ofset": 5}')` raises a BadCall that names "ofset" and says
    `did you mean "offset"?`; an argument like no other (`"zzz"`) gets no guess."""
    tools = load("tools")
    with pytest.raises(tools.BadCall) as caught:
        tools.check_call("read_file", '{"path": "a", "ofset": 5}')
    said = str(caught.value)
    assert '"ofset"' in said and 'did you mean "offset"?' in said, f"the message {said!r} should guess \"offset\""
    with pytest.raises(tools.BadCall) as caught:
        tools.check_call("read_file", '{"path": "notes.txt", "zzz": 1}')
    assert "did you mean" not in str(caught.value), f"nothing is close to zzz: {str(caught.value)!r}"


@exercise(4, 2)
def test_arguments_encoded_twice_are_read_once_more(load, workspace, server):
    """Arguments encoded twice, a JSON string holding the object: `check_call("read_file", that string)` gives what
    the object sent once gives, the call runs in the loop, and a JSON string holding no object is still a BadCall."""
    tools = load("tools")
    once = json.dumps({"path": "notes.txt"})
    assert tools.check_call("read_file", json.dumps(once)) == tools.check_call("read_file", once)
    with pytest.raises(tools.BadCall):
        tools.check_call("read_file", json.dumps(json.dumps([1, 2])))
    (workspace / "notes.txt").write_text("buy milk\n")
    server.push({"tool_calls": [{"name": "read_file", "arguments": json.dumps(once), "id": "call_0"}]}, "Read it.")
    result = run_python(workspace, "harness.py", "Read notes.txt", env=groq_env(server))
    results = tool_results(server.requests[-1]) if len(server.requests) > 1 else []
    assert results and "buy milk" in results[0]["content"], f"the read should run: {results}{printed(result)}"


@exercise(5, 2)
def test_a_budget_in_money_ends_the_run(workspace, server):
    """`python harness.py --max-cost 0.000001 TASK` ends the run before its second request, with the line
    `stopped: cost limit` and exit 3; with `--max-cost 5` the same task is answered, exit 0."""
    server.push(tool_calls(("list_dir", {"path": "."})), "Done.")
    result = run_python(workspace, "harness.py", "--max-cost", "0.000001", "Look around", env=groq_env(server))
    assert result.returncode == 3 and "stopped: cost limit" in result.stdout.splitlines(), (
        f"exit 3 and a line `stopped: cost limit`.{printed(result)}")
    assert len(server.requests) == 1, f"{len(server.requests)} requests: the budget is checked before each"
    server.push(tool_calls(("list_dir", {"path": "."})), "Done.")
    result = run_python(workspace, "harness.py", "--max-cost", "5", "Look around", env=groq_env(server))
    assert result.returncode == 0 and "Done." in result.stdout, f"5 dollars is plenty.{printed(result)}"


@exercise(6, 2)
def test_at_once_runs_at_most_max_at_once_functions_together(harness, monkeypatch):
    """With `MAX_AT_ONCE` at 2 (in tools.py, beside `at_once()`), `at_once()` of five functions never runs more
    than two at a time and all five finish; five that sleep 30 s still end at the deadline, their boxes empty."""
    home = sys.modules[harness.at_once.__module__]  # tools.py, or wherever your at_once() is
    monkeypatch.setattr(home, "MAX_AT_ONCE", 2, raising=False)
    lock, running, most = threading.Lock(), [0], [0]

    def busy():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return "done"

    boxes = harness.at_once([busy] * 5, None)
    assert [box.get("value") for box in boxes] == ["done"] * 5, boxes
    assert most[0] == 2, f"{most[0]} functions ran at the same time; MAX_AT_ONCE is 2"
    started = time.monotonic()
    boxes = harness.at_once([lambda: time.sleep(30)] * 5, time.monotonic() + 0.5)
    assert time.monotonic() - started < 5 and all("value" not in box for box in boxes), "the deadline holds"


@exercise(7, 1)
def test_a_busy_flex_tier_is_asked_again(workspace, server):
    """A 498 (Groq's flex tier is busy), then `Hi.`: `python harness.py "Say hi"` asks again and ends answered,
    exit 0, after 2 requests."""
    server.push({"status": 498, "body": error("The flex tier is at capacity right now; try again shortly.",
                                              code="flex_tier_capacity_exceeded")}, "Hi.")
    result = run_python(workspace, "harness.py", "Say hi", env=groq_env(server))
    assert result.returncode == 0 and "Hi." in result.stdout, f"ask again after a 498.{printed(result)}"
    assert len(server.requests) == 2, f"{len(server.requests)} requests: a 498, then the answer"


@exercise(7, 2)
def test_a_retry_leaves_a_retry_record_in_the_trace(workspace, server):
    """A `tool_use_failed` (a call Groq could not parse), then an answer, with `--trace t.jsonl`: the trace holds
    a record of type `retry`, before the `reply` record."""
    server.push(TOOL_USE_FAILED, "Hi.")
    trace = workspace / "t.jsonl"
    result = run_python(workspace, "harness.py", "--trace", str(trace), "Say hi", env=groq_env(server))
    kinds = [record["type"] for record in trace_records(trace)] if trace.exists() else []
    assert "retry" in kinds, f"the trace's records: {kinds}; give chat() an on_note that writes one{printed(result)}"
    assert kinds.index("retry") < kinds.index("reply"), kinds


@exercise(8, 2)
def test_the_reply_record_says_when_the_first_text_came(workspace, server):
    """`python harness.py --stream --trace t.jsonl TASK`, answered in words, leaves a `reply` record whose
    `first_text_seconds` is a number no larger than its `seconds`."""
    server.push({"content": "Hello there, this is streamed.", "delay": 0.1})
    trace = workspace / "t.jsonl"
    result = run_python(workspace, "harness.py", "--stream", "--trace", str(trace), "Say hi", env=groq_env(server))
    replies = [r for r in trace_records(trace) if r["type"] == "reply"] if trace.exists() else []
    assert replies, f"no reply record in the trace.{printed(result)}"
    first = replies[0].get("first_text_seconds")
    assert isinstance(first, (int, float)) and 0 <= first <= replies[0]["seconds"], replies[0]


@exercise(10, 2)
def test_minimum_is_checked_in_a_structured_answer(harness, load, server):
    """An output schema whose `count` has `"minimum": 0` is taken (`tools.unusable()` gives None), and a
    `final_answer` with a `count` of -1 is an `error:` result naming `count`; the next answer, 2, is the output."""
    tools = load("tools")
    schema = {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}}, "required": ["count"]}
    assert tools.unusable(schema) is None, f"unusable() says: {tools.unusable(schema)}"
    assert tools.problem({"count": 0}, schema) is None
    assert "count" in (tools.problem({"count": -1}, schema) or ""), "problem() should name count, below its minimum"
    server.push(tool_calls(("final_answer", {"count": -1})), tool_calls(("final_answer", {"count": 2})))
    result = harness.run("Count the files", backend=scripted_backend(server), output=schema)
    assert result.output == {"count": 2}, result
    said = tool_results(server.requests[1])[-1]["content"]
    assert said.startswith("error:") and "count" in said, said


@exercise(11, 1)
def test_the_client_calls_one_tool_from_the_command_line(workspace):
    """`python mcp_client.py --call get_ticket '{"ticket_id": "DEMO-42"}' python ticket_server.py` prints the
    tool's text (exit 0); a call whose result is an error (`isError`) prints it and exits 1."""
    shutil.copy(ROOT / "ticket_server.py", workspace / "ticket_server.py")
    command = "python mcp_client.py --call"
    done = run_python(workspace, "mcp_client.py", "--call", "get_ticket", '{"ticket_id": "DEMO-42"}', "python",
                      "ticket_server.py")
    assert done.returncode == 0 and '"DEMO-42"' in done.stdout, f"the ticket, exit 0.{printed(done, command)}"
    assert "MCP 2026-07-28" not in done.stdout, f"with --call, the tool's text, not the list.{printed(done, command)}"
    done = run_python(workspace, "mcp_client.py", "--call", "propose_label",
                      '{"ticket_id": "DEMO-42", "label": "billing", "expected_version": 2}', "python",
                      "ticket_server.py")
    assert done.returncode == 1 and "version" in done.stdout + done.stderr, (
        f"a tool's error: its text, exit 1.{printed(done, command)}")


@exercise(12, 1)
def test_mcp_trust_can_name_one_tool(workspace, server):
    """With `--mcp-trust tickets__get_ticket` and nobody answering, `get_ticket` runs unasked and `propose_label`
    asks (`Call propose_label on the MCP server tickets`), then is declined."""
    shutil.copy(ROOT / "ticket_server.py", workspace / "ticket_server.py")
    server.push(tool_calls(("tickets__get_ticket", {"ticket_id": "DEMO-42"}), (
        "tickets__propose_label", {"ticket_id": "DEMO-42", "label": "billing", "expected_version": 3})), "Done.")
    result = run_python(workspace, "harness.py", "--mcp", "python ticket_server.py", "--mcp-trust",
                        "tickets__get_ticket", "Propose the billing label for DEMO-42", env=groq_env(server))
    results = [m["content"] for m in tool_results(server.requests[-1])] if len(server.requests) > 1 else []
    assert "Call get_ticket" not in result.stderr and "Call propose_label on the MCP server tickets" in \
        result.stderr, f"only get_ticket is trusted: propose_label asks.{printed(result)}"
    assert len(results) == 2 and "DEMO-42" in results[0] and not results[0].startswith("error:"), results
    assert results[1].startswith("error:") and "declined" in results[1], results


@exercise(13, 1)
def test_each_compaction_is_told_in_a_note(workspace):
    """The `Run it` task prints `note: compacted the conversation: N -> M tokens` for each `compact` record, N and M
    its `tokens_before` and `tokens_after`; with `--context-tokens 0`, none."""
    (workspace / "play").mkdir()
    (workspace / "play" / "notes.txt").write_text("buy milk\n")
    task = "Read play/notes.txt, then read backend.py, then read tools.py, then read guards.py"
    result = run_python(workspace, "harness.py", "--context-tokens", "3000", "--trace", "run.jsonl", task,
                        env={"BACKEND": "demo"})
    records = [r for r in trace_records(workspace / "run.jsonl") if r["type"] == "compact"]
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: compacted")]
    assert records, f"the run should have compacted (a compact record in the trace).{printed(result)}"
    assert notes == [f"note: compacted the conversation: {r['tokens_before']} -> {r['tokens_after']} tokens"
                     for r in records], f"one note a compaction, with its numbers: {records}{printed(result)}"
    result = run_python(workspace, "harness.py", "--context-tokens", "0", task, env={"BACKEND": "demo"})
    assert "note: compacted" not in result.stderr, f"--context-tokens 0 never compacts.{printed(result)}"
