"""Phase 1, the loop: the model chains tool calls without help and answers; each failure becomes a tool result;
what goes back to the server is built by hand. Checked through the command line, chat(), run(), and what the
offline model receives."""
import json

import pytest
from helpers import answer_of, groq_env, run_python, scripted_backend

PHASE = 1
FILES = ("backend.py", "tools.py", "probe.py", "harness.py", "cli.py")
SENT_BACK = {"role", "content", "tool_calls"}  # the fields of an assistant message the lesson sends back
TASK = "List the files here, then read backend.py and tell me which model it calls."


def call(name, arguments, id=None):
    """A scripted tool call; arguments given as a dict are sent as JSON, a string is sent as it is."""
    return {"name": name, "arguments": arguments, **({"id": id} if id is not None else {})}


def tool_results(request):
    """The tool messages of a recorded request, as {tool_call_id: content}."""
    return {m["tool_call_id"]: m["content"] for m in request["body"]["messages"] if m["role"] == "tool"}


def shown(result):
    return (f"\n--- python harness.py printed, on standard output ---\n{result.stdout}"
            f"--- and on standard error ---\n{result.stderr}---")


def harness(workspace, *args, env=None, input=""):
    return run_python(workspace, "harness.py", *args, env=env, input=input)


@pytest.fixture
def loop(load):
    """harness.py of the code under test: run(task, backend=...) in this process."""
    return load("harness")


def test_done_when_the_demo_model_chains_two_tools_and_names_the_model(workspace, load):
    """Offline, the demo model lists the files, then reads backend.py, and the answer names groq's model."""
    result = harness(workspace, TASK)
    assert result.returncode == 0, f"it should exit 0.{shown(result)}"
    lines = result.stdout.splitlines()
    assert len(lines) > 2 and lines[0].startswith("[1] list_dir") and lines[1].startswith("[2] read_file"), (
        f"print `[step] name arguments` for each call, then the answer (step 7).{shown(result)}")
    assert load("backend").BACKENDS["groq"]["model"] in "\n".join(lines[2:]), f"the answer names it.{shown(result)}"


def test_probe_prints_one_raw_tool_call(workspace):
    """`python probe.py` prints the reply's content, then its tool_calls: one list_dir call, raw."""
    result = run_python(workspace, "probe.py")
    assert result.returncode == 0, shown(result)
    lines = result.stdout.splitlines()
    assert len(lines) >= 2 and lines[0].startswith("content: ") and lines[1].startswith("tool_calls: ["), (
        f"print `content: ...` then `tool_calls: [...]` (step 3).{shown(result)}")
    assert "list_dir" in lines[1] and "arguments=" in lines[1], f"the raw call, with its arguments.{shown(result)}"


def test_chat_returns_a_reply_that_carries_the_tool_calls(load, server):
    """chat(messages, tools=TOOLS, backend=...) sends the tools as they are and returns the whole response: the
    reply, response.choices[0].message, carries the tool calls."""
    backend, tools = load("backend"), load("tools")
    server.push({"tool_calls": [call("list_dir", {"path": "."}, id="c1")]})
    response = backend.chat([{"role": "user", "content": "List"}], tools=tools.TOOLS,
                            backend=scripted_backend(server))
    assert hasattr(response, "choices"), f"return the whole response, not {type(response).__name__} (step 1)"
    message = response.choices[0].message
    assert message.tool_calls[0].id == "c1" and message.tool_calls[0].function.name == "list_dir"
    assert server.requests[-1]["body"]["tools"] == tools.TOOLS, "the request carries TOOLS as they are"


def test_each_reply_goes_back_rebuilt_with_role_content_and_tool_calls_only(loop, server, workspace):
    """A three-step run whose replies carry `reasoning`: each goes back as an assistant message of `role`,
    `content` and `tool_calls` only (each call: `id`, `type`, `function` with `name` and `arguments`), followed by
    its tool message; the tools go with every request."""
    server.push({"tool_calls": [call("list_dir", {"path": "."})], "reasoning": "Look first."},
                {"tool_calls": [call("read_file", {"path": "backend.py"})], "reasoning": "Now read it."},
                {"content": "It calls openai/gpt-oss-120b.", "reasoning": "Done."})
    answer = answer_of(loop.run(TASK, backend=scripted_backend(server)))
    assert answer == "It calls openai/gpt-oss-120b.", (
        f"run() ended with {answer!r}: the server said no? Rebuild the assistant message (step 5).")
    assert all(request["body"].get("tools") for request in server.requests), "send the tools with every request"
    last = server.requests[-1]["body"]["messages"]
    roles = [m.get("role") for m in last]
    assert roles[-4:] == ["assistant", "tool", "assistant", "tool"], f"the last request's messages were {roles}"
    first = [{"role": "system", "content": getattr(loop, "SYSTEM", None)}, {"role": "user", "content": TASK}]
    assert last[:2] == first, f"step 4: run() starts with SYSTEM as the system message, then the task: {last[:2]}"
    start = (workspace / "backend.py").read_text()[:200]
    assert last[-1].get("content", "").startswith(start), f"the result of read_file should be the file: {last[-1]}"
    for sent in (m for m in last if m["role"] == "assistant"):
        extra = set(sent) - SENT_BACK
        calls = [(set(c) - {"id", "type", "function"}) | (set(c["function"]) - {"name", "arguments"})
                 for c in sent.get("tool_calls") or []]
        assert not extra and not any(calls), (
            f"step 5: build the assistant message by hand; it went back with {sorted(extra) or calls} as well: {sent}")


def test_parallel_calls_each_get_a_tool_message_with_their_id(loop, workspace, server):
    """Two calls in one reply: two tool messages, in call order, each with its call's id."""
    (workspace / "a.txt").write_text("alpha")
    (workspace / "b.txt").write_text("beta")
    server.push({"tool_calls": [call("read_file", {"path": "a.txt"}, id="c1"),
                                call("read_file", {"path": "b.txt"}, id="c2")]}, "done")
    assert answer_of(loop.run("Read a.txt and b.txt", backend=scripted_backend(server))) == "done"
    messages = server.requests[1]["body"]["messages"]
    got = [(m.get("tool_call_id"), m["content"]) for m in messages[-2:]]
    assert got == [("c1", "alpha"), ("c2", "beta")], f"the model received {got}"


def test_tool_failures_come_back_as_error_results_and_the_run_goes_on(loop, server):
    """An unknown tool, arguments that are not JSON or not an object, a tool that raises: each an `error: ...`
    result the model reads, and the run goes on to the model's answer."""
    server.push({"tool_calls": [call("web_search", {"query": "x"}, id="unknown"),
                                call("read_file", '{"path": ', id="not_json"),
                                call("read_file", "[1, 2]", id="not_object"),
                                call("read_file", {"path": "missing.txt"}, id="raises")]},
                "I could not do it.")
    answer = answer_of(loop.run("Try things", backend=scripted_backend(server)))
    assert answer == "I could not do it.", f"a bad call must not end the loop (step 6); it ended with {answer!r}"
    results = tool_results(server.requests[1])
    assert sorted(results) == ["not_json", "not_object", "raises", "unknown"], f"the model received {results}"
    bad = {id: text for id, text in results.items() if not text.startswith("error:")}
    assert not bad, f"each failure should come back as `error: ...`, not {bad}"
    assert "web_search" in results["unknown"] and "missing.txt" in results["raises"]


def test_long_arguments_are_cut_on_screen_and_sent_back_whole(workspace, server):
    """A call whose arguments are 512 characters: on the command line its `[1] read_file ...` line shows the first
    200 (SHOWN_CHARS) and says how many more there were (312); the model gets them whole."""
    arguments = json.dumps({"path": "a" * 500})
    server.push({"tool_calls": [call("read_file", arguments)]}, "done")
    result = harness(workspace, "Read it", env=groq_env(server))
    line = next((line for line in result.stdout.splitlines() if line.startswith("[1] " + "read_file")), "")
    assert arguments[:200] in line and arguments not in line and str(len(arguments) - 200) in line, (
        f"step 7: print the arguments cut to 200 characters, then how many more (312); it printed {line!r}")
    sent = [c for m in server.requests[1]["body"]["messages"] for c in m.get("tool_calls") or []]
    assert sent[0]["function"]["arguments"] == arguments, "the arguments go back to the model whole"


def test_broken_arguments_are_sent_back_as_valid_json(loop, server):
    """Arguments that are "" or broken JSON go back to the server as valid JSON (it rejects anything else)."""
    server.push({"tool_calls": [call("list_dir", "")]}, {"tool_calls": [call("list_dir", "{oops")]}, "ok")
    answer = answer_of(loop.run("List", backend=scripted_backend(server)))
    assert answer == "ok", f"send valid_json(arguments) back (step 5); the run ended with {answer!r}"
    for message in server.requests[2]["body"]["messages"]:
        for sent in message.get("tool_calls") or []:
            json.loads(sent["function"]["arguments"])


def test_the_step_limit_stops_a_model_that_never_answers(workspace, server, load):
    """A model that only ever calls tools gets MAX_STEPS requests, then the run stops: a line on standard output
    that starts with `stopped:` and mentions the step limit, exit 3."""
    max_steps = load("harness").MAX_STEPS
    server.push(*[{"tool_calls": [call("read_file", {"path": "backend.py", "limit": n + 1})]}
                  for n in range(max_steps + 1)])
    result = harness(workspace, "Loop forever", env=groq_env(server))
    assert len(server.requests) == max_steps, f"{len(server.requests)} requests for MAX_STEPS = {max_steps}"
    stopped = [line for line in result.stdout.splitlines() if line.startswith("stopped:") and "step limit" in line]
    assert result.returncode == 3 and stopped, (
        "exit 3, and a line such as `stopped: hit the step limit (MAX_STEPS = 10)` on standard output (print(), "
        f"not stderr) (step 7).{shown(result)}")


def test_the_command_line_needs_a_task_and_a_usable_backend(workspace):
    """No task at all is a usage error (exit 2); --backend groq with no key is one `error: ...` line naming
    GROQ_API_KEY (exit 1, no traceback)."""
    missing = harness(workspace)
    assert missing.returncode == 2 and missing.stderr.startswith("usage:"), shown(missing)
    no_key = harness(workspace, "--backend", "groq", TASK)
    # a later phase may say first that there is no sandbox: a note, then the error
    said = [line for line in no_key.stderr.splitlines() if not line.startswith("note: ")]
    assert no_key.returncode == 1 and len(said) == 1 and said[0].startswith("error: ") and \
        "GROQ_API_KEY" in said[0], shown(no_key)
    assert "Traceback" not in no_key.stderr
