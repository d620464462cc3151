"""Phase 1, the loop: the model chains tool calls without help and answers; failures become tool results."""
import json

from conftest import constant, groq_env, run_python

PHASE = 1
TASK = "List the files here, then read backend.py and tell me which model it calls."


def call(name, arguments, id=None):
    """A scripted tool call; arguments given as a dict are sent as JSON, a string is sent as it is."""
    return {"name": name, "arguments": arguments, **({"id": id} if id is not None else {})}


def tool_results(request):
    """The tool messages of a recorded request, as {tool_call_id: content}."""
    return {m["tool_call_id"]: m["content"] for m in request["body"]["messages"] if m["role"] == "tool"}


def test_done_when_the_demo_model_chains_two_tools_and_names_the_model(workspace):
    result = run_python(workspace, "harness.py", TASK)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[1] list_dir") and lines[1].startswith("[2] read_file")
    assert "backend.py" in lines[1]
    default_model = constant(workspace / "backend.py", "BACKENDS")["groq"]["model"]
    assert default_model in "\n".join(lines[2:])


def test_probe_prints_one_raw_tool_call(workspace):
    result = run_python(workspace, "probe.py")
    assert result.returncode == 0, result.stderr
    content, tool_calls = result.stdout.splitlines()[:2]
    assert content.startswith("content: ")
    assert tool_calls.startswith("tool_calls: [") and "list_dir" in tool_calls and "arguments=" in tool_calls


def test_loop_completes_against_groq_and_never_echoes_reasoning(workspace, server):
    # the server rejects any 'reasoning' sent back, so finishing proves the loop strips it
    server.push({"tool_calls": [call("list_dir", {"path": "."})], "reasoning": "Look first."},
                {"tool_calls": [call("read_file", {"path": "backend.py"})], "reasoning": "Now read it."},
                {"content": "It calls openai/gpt-oss-120b.", "reasoning": "Done."})
    result = run_python(workspace, "harness.py", TASK, env=groq_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "It calls openai/gpt-oss-120b."
    assert len(server.requests) == 3
    last = server.requests[-1]["body"]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert all("reasoning" not in m for m in last)
    assert "def chat" in last[-1]["content"] or "BACKENDS" in last[-1]["content"]


def test_parallel_calls_each_get_a_tool_message_with_their_id(workspace, server):
    (workspace / "a.txt").write_text("alpha")
    (workspace / "b.txt").write_text("beta")
    server.push({"tool_calls": [call("read_file", {"path": "a.txt"}, id="c1"),
                                call("read_file", {"path": "b.txt"}, id="c2")]}, "done")
    result = run_python(workspace, "harness.py", "Read a.txt and b.txt", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    messages = server.requests[1]["body"]["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[-2:]] == [("c1", "alpha"), ("c2", "beta")]
    assert result.stdout.splitlines()[:2] == ['[1] read_file {"path": "a.txt"}', '[1] read_file {"path": "b.txt"}']


def test_tool_failures_come_back_as_error_results_and_the_run_goes_on(workspace, server):
    server.push({"tool_calls": [call("web_search", {"query": "x"}, id="unknown"),
                                call("read_file", '{"path": ', id="not_json"),
                                call("read_file", "[1, 2]", id="not_object"),
                                call("read_file", {"path": "missing.txt"}, id="raises"),
                                call("read_file", {"file": "a.txt"}, id="wrong_name")]},
                "I could not do it.")
    result = run_python(workspace, "harness.py", "Try things", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    results = tool_results(server.requests[1])
    assert sorted(results) == ["not_json", "not_object", "raises", "unknown", "wrong_name"]
    for id, content in results.items():
        assert content.startswith("error:"), (id, content)
    assert "web_search" in results["unknown"] and "read_file" in results["unknown"]
    assert "JSON" in results["not_json"]
    assert "missing.txt" in results["raises"]
    assert result.stdout.splitlines()[-1] == "I could not do it."


def test_broken_arguments_are_sent_back_as_valid_json(workspace, server):
    server.push({"tool_calls": [call("list_dir", "")]}, {"tool_calls": [call("list_dir", "{oops")]}, "ok")
    result = run_python(workspace, "harness.py", "List", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    echoed = [m for m in server.requests[2]["body"]["messages"] if m["role"] == "assistant"]
    for message in echoed:
        json.loads(message["tool_calls"][0]["function"]["arguments"])


def test_the_step_limit_stops_a_model_that_never_answers(workspace, server):
    max_steps = constant(workspace / "harness.py", "MAX_STEPS")
    server.push(*[{"tool_calls": [call("list_dir", {"path": "."})]} for _ in range(max_steps + 1)])
    result = run_python(workspace, "harness.py", "Loop forever", env=groq_env(server))
    assert result.returncode == 3
    assert result.stdout.splitlines()[-1].startswith("stopped: hit the step limit")
    assert len(server.requests) == max_steps


def test_backend_flag_wins_over_the_variable(workspace):
    result = run_python(workspace, "harness.py", "--backend", "demo", TASK, env={"BACKEND": "groq"})
    assert result.returncode == 0, result.stderr


def test_a_missing_task_is_a_usage_error(workspace):
    result = run_python(workspace, "harness.py")
    assert result.returncode == 2
    assert result.stderr.startswith("usage:") and "task" in result.stderr


def test_provider_problems_end_with_one_message_and_exit_1(workspace, unused_port):
    no_key = run_python(workspace, "harness.py", TASK, env={"BACKEND": "groq"})
    unreachable = run_python(workspace, "harness.py", "--base-url", f"http://127.0.0.1:{unused_port}/v1", TASK,
                             env={"BACKEND": "groq", "GROQ_API_KEY": "gsk_x"})
    for result in (no_key, unreachable):
        assert result.returncode == 1
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert "GROQ_API_KEY" in no_key.stderr and "Could not reach" in unreachable.stderr
