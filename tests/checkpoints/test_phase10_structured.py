"""Phase 10, structured: options reach the model as the lesson says (tool_choice with the first request only,
parallel_tool_calls false with --no-parallel-tool-calls, nothing that is no JSON), and run(task, output=SCHEMA) or
--output-schema FILE ends with an answer that fits the schema: given as a call of final_answer, checked like every
tool call, sent back while it does not fit, and after OUTPUT_TRIES such answers the run ends as invalid_output
(exit 4). Checked through run(), chat(), the command line and what the offline model receives."""
import json

import pytest
from helpers import groq_env, run_python, scripted_backend, trace_records
from pydantic import BaseModel

PHASE = 10
FILES = ("backend.py", "guards.py", "tools.py", "shell.py", "harness.py", "cli.py")
SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"},
                                           "names": {"type": "array", "items": {"type": "string"}}},
          "required": ["count", "names"]}
FORCED = {"type": "function", "function": {"name": "final_answer"}}


class Files(BaseModel):
    count: int
    names: list[str]


def final(arguments, id="f1"):
    """A scripted reply that calls final_answer with these arguments."""
    return {"tool_calls": [{"name": "final_answer", "arguments": arguments, "id": id}]}


def tool_results(request):
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


def test_done_when_a_schema_shaped_answer_comes_back_offline(workspace):
    """Offline, `--output-schema FILE` ends with the answer printed as JSON, on the last line, fitting the schema."""
    (workspace / "schema.json").write_text(json.dumps(SCHEMA))
    result = run_python(workspace, "harness.py", "--output-schema", "schema.json", "List the files here",
                        env={"BACKEND": "demo"})
    assert result.returncode == 0, result.stdout + result.stderr
    last = (result.stdout.splitlines() or [""])[-1]
    try:
        answer = json.loads(last)
    except ValueError:
        raise AssertionError(f"the last line of standard output should be the answer as JSON: {last!r}") from None
    assert isinstance(answer["count"], int) and all(isinstance(name, str) for name in answer["names"]), answer
    assert "harness.py" in answer["names"], answer


def test_the_answer_is_a_call_of_final_answer_and_comes_back_as_json(harness, server):
    """run(task, output=SCHEMA) offers final_answer with SCHEMA as its parameters, besides the tools; the call's
    arguments, once they fit, are result.output (and a Pydantic model's schema works the same way)."""
    server.push(final({"count": 2, "names": ["a", "b"]}))
    result = harness.run("Count", backend=scripted_backend(server), output=Files.model_json_schema())
    assert result.status == "answered" and result.output == {"count": 2, "names": ["a", "b"]}, result
    assert Files.model_validate(result.output) == Files(count=2, names=["a", "b"])
    offered = {tool["function"]["name"]: tool["function"] for tool in server.requests[0]["body"]["tools"]}
    assert offered["final_answer"]["parameters"] == Files.model_json_schema() and "read_file" in offered, offered


def test_a_pydantic_model_class_is_a_shape_too(harness, server):
    """run(task, output=Files), Files a Pydantic model class: final_answer is offered with the class's own JSON
    schema, and result.output is an instance of the class."""
    server.push(final({"count": 2, "names": ["a.txt", "b.txt"]}))
    result = harness.run("Count the files", backend=scripted_backend(server), output=Files)
    assert isinstance(result.output, Files) and result.output.count == 2, f"result.output is {result.output!r}"
    offered = {tool["function"]["name"]: tool["function"] for tool in server.requests[0]["body"]["tools"]}
    assert offered["final_answer"]["parameters"] == Files.model_json_schema(), offered.get("final_answer")


class Named(BaseModel):
    text: str


class Listing(BaseModel):
    count: int | None
    names: list[Named]


def test_an_answer_the_model_refuses_goes_back_though_the_schema_passed_it(harness, server):
    """With output=Model, the model's own validation holds too (a nested model, which the schema check alone does
    not hold): such an answer goes back as an error: result, and the next answer is taken, a Model."""
    server.push(final({"count": 2, "names": ["a", "b"]}), final({"count": None, "names": [{"text": "a"}]}, id="f2"))
    result = harness.run("Count", backend=scripted_backend(server), output=Listing)
    assert result.status == "answered" and result.output == Listing(count=None, names=[Named(text="a")]), result
    told = tool_results(server.requests[1])[-1]
    assert told.startswith("error:") and "names" in told, f"the model should hear what does not fit: {told!r}"


def test_an_answer_that_does_not_fit_goes_back_with_what_is_wrong(harness, server):
    """An answer that does not fit comes back as the call's result, starting with error: and naming what is wrong,
    and the model's next try is taken."""
    server.push(final({"count": "two", "names": ["a"]}), final({"count": 1, "names": ["a"]}, id="f2"))
    result = harness.run("Count", backend=scripted_backend(server), output=SCHEMA)
    assert result.status == "answered" and result.output == {"count": 1, "names": ["a"]}, result
    told = tool_results(server.requests[1])[-1]
    assert told.startswith("error:") and "count" in told, f"the model should hear what does not fit: {told!r}"


def test_an_answer_in_words_is_sent_back_with_final_answer_forced(harness, server):
    """A model that answers in words, where a shape was asked for, is asked again with tool_choice naming
    final_answer."""
    server.push("There are two.", final({"count": 2, "names": ["a", "b"]}))
    result = harness.run("Count", backend=scripted_backend(server), output=SCHEMA)
    assert result.status == "answered" and result.output == {"count": 2, "names": ["a", "b"]}, result
    assert server.requests[1]["body"].get("tool_choice") == FORCED, server.requests[1]["body"].get("tool_choice")


def test_answers_that_never_fit_end_the_run_as_invalid_output(workspace, server):
    """OUTPUT_TRIES (3) answers that do not fit, the same one three times too, end the run: status invalid_output,
    exit 4, no traceback."""
    (workspace / "schema.json").write_text(json.dumps(SCHEMA))
    server.push(*[final({"count": "many", "names": []}, id=f"f{n}") for n in range(6)])  # the same wrong answer
    result = run_python(workspace, "harness.py", "--trace", "t.jsonl", "--output-schema", "schema.json", "Count",
                        env=groq_env(server))
    assert result.returncode == 4 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert trace_records(workspace / "t.jsonl")[-1].get("status") == "invalid_output", "the trace's end record"
    assert len(server.requests) == 3, f"{len(server.requests)} requests: the run ends after OUTPUT_TRIES answers"


@pytest.mark.parametrize("choice", ["required", "none", {"type": "function", "function": {"name": "list_dir"}}])
def test_tool_choice_goes_with_the_first_request_only(harness, server, choice):
    """options={"tool_choice": ...} goes into the first request only: forced for ever, the model could never
    answer in words."""
    server.push({"tool_calls": [{"name": "list_dir", "arguments": {}, "id": "c1"}]}, "Done.")
    result = harness.run("Look", backend=scripted_backend(server), options={"tool_choice": choice})
    assert result.status == "answered", result
    assert server.requests[0]["body"].get("tool_choice") == choice
    assert "tool_choice" not in server.requests[1]["body"], "a forced choice, held on, never lets the model answer"


def test_options_go_into_every_request_but_cannot_replace_it(load, server):
    """chat(messages, options=...) sends the options with the request, but they never replace its model, messages
    or tools, nor turn streaming on."""
    backend = load("backend")
    server.push("hi")
    backend.chat([{"role": "user", "content": "hi"}], backend=scripted_backend(server),
                 options={"temperature": 0.5, "seed": 7, "model": "other", "stream": True})
    body = server.requests[0]["body"]
    assert body["temperature"] == 0.5 and body["seed"] == 7, body
    assert body["model"] == "openai/gpt-oss-120b" and "stream" not in body, body


def test_options_that_are_no_json_are_refused_before_sending(load, server):
    """NaN is Python's, not JSON's: chat() raises BackendError for such options, and nothing is sent; run() ends
    as provider_error."""
    backend, harness = load("backend"), load("harness")
    with pytest.raises(backend.BackendError):
        backend.chat([{"role": "user", "content": "hi"}], backend=scripted_backend(server),
                     options={"temperature": float("nan")})
    result = harness.run("Look", backend=scripted_backend(server), options={"temperature": float("nan")})
    assert result.status == "provider_error" and server.requests == [], result


def test_the_command_line_sets_the_choice_and_one_call_a_turn(workspace, server):
    """--tool-choice required goes into the first request, --no-parallel-tool-calls sends parallel_tool_calls
    false with every request; --tool-choice takes auto, none or required, anything else is a usage error."""
    server.push({"tool_calls": [{"name": "list_dir", "arguments": {}, "id": "c1"}]}, "Done.")
    result = run_python(workspace, "harness.py", "--tool-choice", "required", "--no-parallel-tool-calls", "Look",
                        env=groq_env(server))
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 2, f"a call, then the answer: two requests, not {len(server.requests)}"
    first, second = (request["body"] for request in server.requests)
    assert first["tool_choice"] == "required" and "tool_choice" not in second, (first, second)
    assert first["parallel_tool_calls"] is False and second["parallel_tool_calls"] is False
    assert run_python(workspace, "harness.py", "--tool-choice", "fly", "Look").returncode == 2


@pytest.mark.parametrize("text", [
    '{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}',
    '{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}}',
    '{"type": "object", "properties": {"a": {"type": ["string", "null"]}}}',
    '{"type": "object", "properties": {"a": {"type": "number", "default": NaN}}}',
    '{"type": "array", "items": {"type": "string"}}', '[1, 2]', 'not json'],
    ids=["anyOf", "ref", "list-of-types", "NaN", "array", "list", "not-json"])
def test_an_output_schema_the_harness_cannot_check_is_a_usage_error(workspace, text):
    """--output-schema FILE refuses, as a usage error (exit 2) naming the option, a schema the harness could not
    check answers against: a word it does not check ($ref, anyOf, a list of types), NaN, anything but an object."""
    (workspace / "schema.json").write_text(text)
    result = run_python(workspace, "harness.py", "--output-schema", "schema.json", "Count", env={"BACKEND": "demo"})
    assert result.returncode == 2 and "--output-schema" in result.stderr, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
