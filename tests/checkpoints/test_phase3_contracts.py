"""Phase 3, tool contracts: every call is checked against its schema before it runs, errors show the right shape,
the schemas and the functions agree, read_file pages, and write_file shows the change before it writes.
Checked through check_call(), the tools, the loop and what the offline model receives."""
import inspect
import json

import pytest
from helpers import answer_of, groq_env, run_python, scripted_backend

PHASE = 3
TOOLS_ONLY = ("guards.py", "shell.py", "tools.py")  # checks of tools.py alone run once per copy of it
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
                problems.append(f"{name}.{arg}: annotated {param.annotation}, "
                                f"schema says {properties[arg].get('type')}")
            if (param.default is inspect.Parameter.empty) != (arg in required):
                problems.append(f"{name}.{arg}: required in one and optional in the other")
            if param.default is not inspect.Parameter.empty and properties[arg].get("default") != param.default:
                problems.append(f"{name}.{arg}: default {param.default!r}, "
                                f"schema says {properties[arg].get('default')!r}")
    return problems


@pytest.mark.files(*TOOLS_ONLY)
def test_schemas_and_functions_agree(load):
    """Each schema in TOOLS lists its function's arguments with the same names, types, required and defaults."""
    tools = load("tools")
    assert drift(tools) == [], "\n".join(drift(tools))
    assert set(tools.REGISTRY) == {tool["function"]["name"] for tool in tools.TOOLS}


@pytest.mark.files(*TOOLS_ONLY)
@pytest.mark.parametrize("name, arguments, says", [
    ("read_file", "{}", ['missing', '"path"', 'Call it as {"path": "README.md"}']),
    ("read_file", '{"file": "a.txt"}', ['missing', '"path"']),
    ("read_file", '{"path": "a.txt", "mode": "r"}', ['unexpected', '"mode"']),
    ("read_file", '{"path": "a.txt", "offset": "10"}', ['"offset"', 'integer', 'string']),
    ("read_file", '{"path": "a.txt", "limit": true}', ['"limit"', 'integer', 'boolean']),
    ("read_file", '{"path": 7}', ['"path"', 'string', 'integer']),
    ("read_file", '["a.txt"]', ['object', 'array']),
    ("read_file", '{"path": ', ['not valid JSON']),
    ("web_search", '{"q": "x"}', ["web_search", "read_file", "list_dir", "run_shell", "write_file"]),
])
def test_a_bad_call_is_refused_with_what_is_wrong_and_the_right_shape(load, name, arguments, says):
    """check_call() raises BadCall naming the problem, and for a known tool the shape to call it with."""
    tools = load("tools")
    with pytest.raises(tools.BadCall) as caught:
        tools.check_call(name, arguments)
    missing = [word for word in says if word not in str(caught.value)]
    assert not missing, f"the error {str(caught.value)!r} should mention {missing}"
    if name in tools.REGISTRY:
        assert "Call it as {" in str(caught.value)


@pytest.mark.files(*TOOLS_ONLY)
def test_a_good_call_passes_as_a_dict(load):
    """check_call() returns a good call's arguments as a dict; "" means no arguments."""
    tools = load("tools")
    assert tools.check_call("read_file", '{"path": "a.txt", "offset": 3}') == {"path": "a.txt", "offset": 3}
    assert tools.check_call("list_dir", "") == {}


@pytest.mark.parametrize("bad", [{}, {"path": "notes.txt", "encoding": "utf-8"}, {"path": "notes.txt", "offset": "1"},
                                 '"notes.txt"'], ids=["missing", "extra", "wrong-type", "not-an-object"])
def test_done_when_a_malformed_call_gets_an_error_and_the_next_call_succeeds(workspace, server, bad):
    """A malformed call comes back as an error showing the right shape; the model's corrected call then works."""
    (workspace / "notes.txt").write_text("the notes\n")
    server.push({"tool_calls": [{"name": "read_file", "arguments": bad}]},
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                "The notes say: the notes.")
    result = run_python(workspace, "harness.py", "Read notes.txt", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    first, second = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert first.startswith("error: read_file:") and 'Call it as {"path": "README.md"}' in first, first
    assert second == "the notes\n" and result.stdout.splitlines()[-1] == "The notes say: the notes."


def test_done_when_the_demo_model_fixes_its_write_from_the_error(workspace):
    """Offline: the demo model's first write uses a wrong argument name, reads the error, and the second works."""
    result = run_python(workspace, "harness.py", 'Write "hello" to notes.txt', input="y\n", env={"BACKEND": "demo"})
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()[:2]
    assert first == '[1] write_file {"path": "notes.txt", "text": "hello\\n"}', first
    assert second == '[2] write_file {"path": "notes.txt", "content": "hello\\n"}', second
    assert (workspace / "notes.txt").read_text() == "hello\n"


@pytest.mark.files(*TOOLS_ONLY)
def test_read_file_pages_and_says_how_to_read_on(load, workspace):
    """read_file(path) gives PAGE_LINES lines and says where to read on; offset and limit pick any page."""
    tools = load("tools")
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))
    first = tools.read_file("big.txt")
    assert first.startswith("line 1\n") and "line 200\n" in first and "line 201" not in first, first[-200:]
    assert "offset=201" in first and "500" in first, f"say how to read on: {first[-150:]!r}"
    assert tools.read_file("big.txt", offset=401, limit=200).rstrip().endswith("line 500")


@pytest.mark.files(*TOOLS_ONLY)
def test_every_result_fits_in_max_chars(load, workspace):
    """Long lines and long files are cut so that a result, its note included, fits in MAX_CHARS."""
    tools = load("tools")
    (workspace / "wide.txt").write_text(("x" * 99 + "\n") * 100)
    (workspace / "one.txt").write_text("y" * (tools.MAX_CHARS * 3))
    for page in (tools.read_file("wide.txt"), tools.read_file("one.txt")):
        assert len(page) <= tools.MAX_CHARS and page.startswith(page[0] * 50), len(page)


def test_a_declined_write_leaves_the_file_byte_for_byte(load, workspace, server):
    """Before a write, the person sees the change as a diff; a no leaves the file exactly as it was."""
    original = b"line one\r\nline two\n\xff not utf-8\n"
    (workspace / "data.txt").write_bytes(original)
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "data.txt", "content": "new\n"}}]}, "ok")
    questions = []
    answer = answer_of(load("harness").run("Change it", backend=scripted_backend(server),
                                           approve=lambda q: questions.append(q)))
    assert answer == "ok" and (workspace / "data.txt").read_bytes() == original
    assert len(questions) == 1 and "data.txt" in questions[0] and "+new" in questions[0], questions
    told = server.requests[-1]["body"]["messages"][-1]["content"]
    assert told.startswith("error:") and "declined" in told, told


def test_an_approved_write_makes_exactly_the_change_shown(load, workspace, server):
    """A yes writes exactly the content the diff showed, byte for byte, no newline added."""
    (workspace / "data.txt").write_text("alpha\nbeta\ngamma\n")
    new = "alpha\nBETA\ngamma\ndelta"
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "data.txt", "content": new}}]}, "ok")
    shown = []
    load("harness").run("Change it", backend=scripted_backend(server), approve=lambda q: shown.append(q) or True)
    assert (workspace / "data.txt").read_bytes() == new.encode()
    assert "-beta" in shown[0] and "+BETA" in shown[0] and "+delta" in shown[0], shown[0]


@pytest.mark.parametrize("path, reason", [("../escape.txt", "outside the workspace"), (".env", "secret")])
def test_writes_obey_the_workspace_boundary_before_anyone_is_asked(load, workspace, server, path, reason):
    """A write outside the workspace or to a secret is refused before any question."""
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x"}}]}, "ok")
    asked = []
    load("harness").run("Write", backend=scripted_backend(server), approve=lambda q: asked.append(q) or True)
    assert asked == [] and not (workspace.parent / "escape.txt").exists() and not (workspace / ".env").exists()
    assert reason in server.requests[-1]["body"]["messages"][-1]["content"]


def test_broken_arguments_are_echoed_back_as_valid_json(workspace, server):
    """The assistant message sent back carries valid JSON arguments even when the model's were broken."""
    server.push({"tool_calls": [{"name": "read_file", "arguments": '{"path": '}]}, "ok")
    result = run_python(workspace, "harness.py", "Read", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    echoed = [m for m in server.requests[-1]["body"]["messages"] if m.get("tool_calls")][0]
    assert json.loads(echoed["tool_calls"][0]["function"]["arguments"]) == {}
