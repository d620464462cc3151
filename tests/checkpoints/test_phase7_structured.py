"""Phase 7, forced choice and answers with a shape: tool_choice and parallel_tool_calls reach the model as the
lesson says, and run(task, output=Model) or --output-schema ends with an answer that fits, sent back with what
is wrong until it does. Checked through run(), the command line and what the offline model receives."""
import json

import pytest
from helpers import groq_env, run_python, scripted_backend
from pydantic import BaseModel

PHASE = 7


class Files(BaseModel):
    count: int
    names: list[str]




def final(arguments):
    return {"tool_calls": [{"name": "final_answer", "arguments": arguments}]}


def test_done_when_a_schema_shaped_answer_validates_offline(workspace):
    """Offline, `--output-schema FILE` prints the answer as JSON that fits the schema."""
    schema = {"type": "object", "properties": {"count": {"type": "integer"}, "names": {"type": "array",
              "items": {"type": "string"}}}, "required": ["count", "names"]}
    (workspace / "schema.json").write_text(json.dumps(schema))
    result = run_python(workspace, "harness.py", "--output-schema", "schema.json", "List the files here",
                        env={"BACKEND": "demo"})
    assert result.returncode == 0, result.stdout + result.stderr
    answer = json.loads(result.stdout.splitlines()[-1])
    assert isinstance(answer["count"], int) and all(isinstance(n, str) for n in answer["names"]), answer
    assert "harness.py" in answer["names"], answer


def test_the_answer_comes_back_as_the_model_object(harness, server):
    """run(task, output=Model): the final answer tool carries the model's schema, and result.output is a Model."""
    server.push(final({"count": 2, "names": ["a", "b"]}))
    result = harness.run("Count", backend=scripted_backend(server), output=Files)
    assert result.status == "answered" and result.output == Files(count=2, names=["a", "b"]), result
    offered = {t["function"]["name"]: t["function"] for t in server.requests[0]["body"]["tools"]}
    assert "final_answer" in offered and offered["final_answer"]["parameters"]["required"] == ["count", "names"]


def test_an_answer_that_does_not_fit_goes_back_with_what_is_wrong(harness, server):
    """An answer that does not fit is sent back with the validation errors; the model's next try is kept."""
    server.push(final({"count": "two", "names": "a"}), final({"count": 2, "names": ["a", "b"]}))
    result = harness.run("Count", backend=scripted_backend(server), output=Files)
    assert result.status == "answered" and result.output.count == 2, result
    told = server.requests[1]["body"]["messages"][-1]
    assert told["role"] == "tool" and told["content"].startswith("error:") and "count" in told["content"], told


def test_an_answer_in_words_forces_the_final_answer_tool(harness, server):
    """A model that answers in words instead is asked again with tool_choice naming final_answer."""
    server.push("There are two.", final({"count": 2, "names": ["a", "b"]}))
    result = harness.run("Count", backend=scripted_backend(server), output=Files)
    assert result.status == "answered", result
    assert server.requests[1]["body"]["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}


def test_a_model_that_never_fits_ends_invalid_output(workspace, server):
    """Answers that never fit end the run with status invalid_output, exit 4, not a traceback."""
    (workspace / "schema.json").write_text(json.dumps({"type": "object", "properties": {"count": {"type": "integer"}},
                                                       "required": ["count"]}))
    server.push(*[final({"count": "many"})] * 5)
    result = run_python(workspace, "harness.py", "--trace", "t.jsonl", "--output-schema", "schema.json", "Count",
                        env=groq_env(server))
    assert result.returncode == 4 and "Traceback" not in result.stderr, result.stderr
    assert json.loads((workspace / "t.jsonl").read_text().splitlines()[-1])["status"] == "invalid_output"


def test_with_a_backend_that_takes_a_schema_the_answer_is_asked_as_json(harness, server):
    """Where the backend takes response_format with tools (openai), the schema goes there and the text is checked."""
    server.push('{"count": 1, "names": ["a"]}')
    result = harness.run("Count", backend=scripted_backend(server, name="openai"), output=Files)
    assert result.status == "answered" and result.output.names == ["a"], result
    assert server.requests[0]["body"]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("choice, sent", [("required", "required"), ("none", "none"),
                                          ("list_dir", {"type": "function", "function": {"name": "list_dir"}})])
def test_tool_choice_steers_the_first_request_only(harness, server, choice, sent):
    """tool_choice goes with the first request only: forced for ever, the model could never answer in words."""
    server.push({"tool_calls": [{"name": "list_dir", "arguments": {}}]}, "Done.")
    harness.run("Look", backend=scripted_backend(server), tool_choice=choice)
    assert server.requests[0]["body"]["tool_choice"] == sent
    assert all("tool_choice" not in r["body"] for r in server.requests[1:])


def test_the_command_line_steers_the_choice_and_one_call_at_a_time(workspace, server):
    """--tool-choice NAME and --no-parallel-tool-calls reach the request; a tool that does not exist is a usage
    error."""
    server.push({"tool_calls": [{"name": "list_dir", "arguments": {}}]}, "Done.")
    result = run_python(workspace, "harness.py", "--tool-choice", "list_dir", "--no-parallel-tool-calls", "Look",
                        env=groq_env(server))
    assert result.returncode == 0, result.stderr
    body = server.requests[0]["body"]
    assert body["tool_choice"]["function"]["name"] == "list_dir" and body["parallel_tool_calls"] is False
    assert run_python(workspace, "harness.py", "--tool-choice", "fly", "Look").returncode == 2
