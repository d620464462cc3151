"""Phase 3, tool contracts: every call is checked against its schema before it runs, errors show the right
shape, schemas and functions cannot drift apart, read_file pages, and write_file shows a diff first."""
import difflib
import inspect
import json

import pytest
from conftest import groq_env, run_python, scripted_backend

PHASE = 3
PYTHON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def drift(tools):
    """Every way a hand-written schema disagrees with its function: names, required, types, defaults."""
    problems = []
    for tool in tools.TOOLS:
        name, schema = tool["function"]["name"], tool["function"]["parameters"]
        params = inspect.signature(tools.REGISTRY[name]).parameters
        properties, required = schema["properties"], set(schema.get("required", []))
        if set(params) != set(properties):
            problems.append(f"{name}: function takes {sorted(params)}, schema lists {sorted(properties)}")
            continue
        for arg, param in params.items():
            if PYTHON_TYPES.get(param.annotation) != properties[arg].get("type"):
                problems.append(f"{name}.{arg}: annotated {param.annotation}, schema says {properties[arg].get('type')}")
            if (param.default is inspect.Parameter.empty) != (arg in required):
                problems.append(f"{name}.{arg}: required in one and optional in the other")
            if param.default is not inspect.Parameter.empty and properties[arg].get("default") != param.default:
                problems.append(f"{name}.{arg}: default {param.default!r}, schema says {properties[arg].get('default')!r}")
    return problems


def test_schemas_and_functions_agree(load):
    tools = load("tools")
    assert drift(tools) == []
    assert set(tools.REGISTRY) == {tool["function"]["name"] for tool in tools.TOOLS}


@pytest.mark.parametrize("old, new, complaint", [
    ("def read_file(path: str, offset: int = 1, limit: int = PAGE_LINES)",
     "def read_file(path: str, start: int = 1, limit: int = PAGE_LINES)", "read_file: function takes"),
    ("def read_file(path: str, offset: int = 1, limit: int = PAGE_LINES)",
     "def read_file(path: str, offset: int = 1, limit: int = 50)", "read_file.limit: default 50"),
    ("def write_file(path: str, content: str)", "def write_file(path: str, content: bytes)", "write_file.content"),
    ('def list_dir(path: str = ".")', "def list_dir(path: str)", "list_dir.path: required"),
])
def test_the_drift_test_fails_on_a_drifted_copy(load, workspace, old, new, complaint):
    source = (workspace / "tools.py").read_text()
    assert old in source
    (workspace / "tools.py").write_text(source.replace(old, new))
    problems = drift(load("tools"))
    assert any(p.startswith(complaint) for p in problems), problems


@pytest.mark.parametrize("name, arguments, expected", [
    ("read_file", "{}", 'read_file: missing required argument "path" (string). Call it as {"path": "README.md"}'),
    ("read_file", '{"file": "a.txt"}', 'read_file: missing required argument "path"'),
    ("read_file", '{"path": "a.txt", "mode": "r"}', 'read_file: unexpected argument "mode"; it takes path (string)'),
    ("read_file", '{"path": "a.txt", "offset": "10"}', 'read_file: argument "offset" must be of type integer, not a string ("10")'),
    ("read_file", '{"path": "a.txt", "limit": true}', 'read_file: argument "limit" must be of type integer, not a boolean (true)'),
    ("read_file", '{"path": 7}', 'read_file: argument "path" must be of type string, not an integer (7)'),
    ("read_file", '["a.txt"]', "read_file: the arguments must be a JSON object, not an array"),
    ("read_file", '{"path": ', "read_file: the arguments are not valid JSON"),
    ("web_search", '{"q": "x"}', "there is no tool called 'web_search'. The tools are: read_file, list_dir"),
])
def test_a_bad_call_is_refused_with_the_right_shape(load, name, arguments, expected):
    tools = load("tools")
    with pytest.raises(tools.BadCall) as caught:
        tools.check_call(name, arguments)
    assert str(caught.value).startswith(expected)
    if name in tools.REGISTRY:
        assert "Call it as {" in str(caught.value)


def test_a_good_call_passes_as_a_dict(load):
    tools = load("tools")
    assert tools.check_call("read_file", '{"path": "a.txt", "offset": 3}') == {"path": "a.txt", "offset": 3}
    assert tools.check_call("list_dir", "") == {}


BAD_THEN_GOOD = {
    "missing": ({}, {"path": "notes.txt"}),
    "extra": ({"path": "notes.txt", "encoding": "utf-8"}, {"path": "notes.txt"}),
    "wrong type": ({"path": "notes.txt", "offset": "1"}, {"path": "notes.txt", "offset": 1}),
    "not an object": ('"notes.txt"', {"path": "notes.txt"}),
}


@pytest.mark.parametrize("kind", BAD_THEN_GOOD)
def test_done_when_a_malformed_call_gets_an_error_and_the_next_call_succeeds(workspace, server, kind):
    (workspace / "notes.txt").write_text("the notes\n")
    bad, good = BAD_THEN_GOOD[kind]
    server.push({"tool_calls": [{"name": "read_file", "arguments": bad}]},
                {"tool_calls": [{"name": "read_file", "arguments": good}]}, "The notes say: the notes.")
    result = run_python(workspace, "harness.py", "Read notes.txt", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    first, second = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert first.startswith("error: read_file:") and 'Call it as {"path": "README.md"}' in first
    assert second == "the notes\n"
    assert result.stdout.splitlines()[-1] == "The notes say: the notes."


def test_an_unknown_tool_gets_the_list_of_tools_and_the_run_answers(workspace, server):
    server.push({"tool_calls": [{"name": "cat", "arguments": {"file": "x"}}]},
                {"tool_calls": [{"name": "list_dir", "arguments": {}}]}, "Listed.")
    result = run_python(workspace, "harness.py", "Look", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    first, second = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert first.startswith("error: there is no tool called 'cat'") and "write_file" in first
    assert "harness.py" in second


def test_done_when_the_demo_model_fixes_its_write_from_the_error(workspace):
    result = run_python(workspace, "harness.py", 'Write "hello" to notes.txt', input="y\n", env={"BACKEND": "demo"})
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()[:2]
    assert first == '[1] write_file {"path": "notes.txt", "text": "hello\\n"}'
    assert second == '[2] write_file {"path": "notes.txt", "content": "hello\\n"}'
    assert 'missing required argument "content"' in result.stdout
    assert (workspace / "notes.txt").read_text() == "hello\n"


def test_read_file_pages_and_says_how_to_read_on(tools, workspace):
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))
    first = tools.read_file("big.txt")
    assert first.startswith("line 1\n") and "line 200\n" in first and "line 201" not in first
    assert first.endswith("[lines 1-200 of 500; call read_file with offset=201 to read on]")
    last = tools.read_file("big.txt", offset=401, limit=200)
    assert last.startswith("line 401\n") and last.endswith("line 500\n")


def test_read_file_keeps_within_max_chars_and_still_says_how_to_read_on(tools, workspace):
    (workspace / "wide.txt").write_text(("x" * 99 + "\n") * 100)  # 100 lines of 100 characters
    page = tools.read_file("wide.txt")
    shown = tools.MAX_CHARS // 100
    assert page.count("\n") == shown + 1 and page.endswith(f"offset={shown + 1} to read on]")
    (workspace / "one.txt").write_text("y" * (tools.MAX_CHARS * 3))
    assert tools.read_file("one.txt").startswith("y" * tools.MAX_CHARS + "\n")


def test_a_declined_write_leaves_the_file_byte_for_byte(load, workspace, server):
    tools, harness = load("tools"), load("harness")
    tools.WORKSPACE = workspace
    original = b"line one\r\nline two\n\xff not utf-8\n"
    (workspace / "data.txt").write_bytes(original)
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "data.txt", "content": "new\n"}}]}, "ok")
    questions = []
    assert harness.run("Change it", scripted_backend(server), lambda q: questions.append(q)) == "ok"
    assert (workspace / "data.txt").read_bytes() == original
    assert questions[0].endswith("Write data.txt?") and "+new\n" in questions[0]
    told = server.requests[-1]["body"]["messages"][-1]["content"]
    assert told.startswith("error: the user declined, so nothing was done: Write data.txt?")


def test_an_approved_write_makes_exactly_the_change_shown(load, workspace, server):
    tools, harness = load("tools"), load("harness")
    tools.WORKSPACE = workspace
    old = "alpha\nbeta\ngamma\n"
    new = "alpha\nBETA\ngamma\ndelta"
    (workspace / "data.txt").write_text(old)
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "data.txt", "content": new}}]}, "ok")
    shown = []
    harness.run("Change it", scripted_backend(server), lambda q: shown.append(q) or True)
    written = (workspace / "data.txt").read_bytes().decode()
    assert written == new
    expected = difflib.unified_diff(old.splitlines(True), written.splitlines(True), "a/data.txt", "b/data.txt")
    diff = shown[0].rsplit("Write data.txt?", 1)[0]
    assert diff.replace("\n\\ No newline at end of file", "") == "".join(expected) + "\n"
    assert server.requests[-1]["body"]["messages"][-1]["content"] == f"wrote {len(new)} characters to data.txt"


def test_a_new_file_is_shown_as_all_added_lines(tools):
    question = tools.needs_approval("write_file", {"path": "sub/new.txt", "content": "one\ntwo\n"})
    assert question == "--- a/sub/new.txt\n+++ b/sub/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\nWrite sub/new.txt?"


@pytest.mark.parametrize("path, reason", [("../escape.txt", "outside the workspace"), (".env", "secret file")])
def test_writes_obey_the_workspace_boundary_before_anyone_is_asked(load, workspace, server, path, reason):
    load("tools").WORKSPACE = workspace
    harness = load("harness")
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x"}}]}, "ok")
    asked = []
    harness.run("Write", scripted_backend(server), lambda q: asked.append(q) or True)
    assert asked == [] and not (workspace.parent / "escape.txt").exists() and not (workspace / ".env").exists()
    assert reason in server.requests[-1]["body"]["messages"][-1]["content"]


def test_broken_arguments_are_echoed_back_as_valid_json(workspace, server):
    # the echoed assistant message carries valid JSON arguments even when the model's were broken
    server.push({"tool_calls": [{"name": "read_file", "arguments": '{"path": '}]}, "ok")
    result = run_python(workspace, "harness.py", "Read", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    echoed = server.requests[-1]["body"]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(echoed) == {}
