"""Phase 4, contracts: every call is held to its tool's schema before anything runs, and a call that breaks it
gets an error that shows the right shape; the schemas and the functions agree; read_file pages and says how to
read on; write_file writes only what a person approved as a diff, and never the harness's own files. Checked
through check_call(), problem(), the tools (called with a guards.policy()), the loop and what the offline model
receives."""
import inspect
import json

import pytest
from helpers import answer_of, groq_env, run_python, scripted_backend

PHASE = 4
FILES = ("guards.py", "shell.py", "tools.py", "harness.py", "cli.py")
TOOLS_ONLY = ("guards.py", "shell.py", "tools.py")  # the tests of tools.py alone run once per copy of it
PYTHON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


@pytest.fixture
def project(tmp_path):
    """A workspace apart from the harness's own folder, where writes may happen."""
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


def drift(tools):
    """Every way a hand-written schema disagrees with its function: names, required, types, defaults."""
    problems = []
    for tool in tools.TOOLS:
        name, schema = tool["function"]["name"], tool["function"]["parameters"]
        params = dict(inspect.signature(tools.REGISTRY[name]["function"]).parameters)
        params.pop("policy", None)  # the run's policy comes first; the rest is the model's
        properties, required = schema.get("properties", {}), set(schema.get("required", []))
        if set(params) != set(properties):
            problems.append(f"{name}: the function takes {sorted(params)}, the schema lists {sorted(properties)}")
            continue
        for arg, param in params.items():
            if PYTHON_TYPES.get(param.annotation) != properties[arg].get("type"):
                problems.append(f"{name}.{arg}: annotated {param.annotation}, the schema says "
                                f"{properties[arg].get('type')}")
            if (param.default is inspect.Parameter.empty) != (arg in required):
                problems.append(f"{name}.{arg}: required in one and optional in the other")
            if param.default is not inspect.Parameter.empty and properties[arg].get("default") != param.default:
                problems.append(f"{name}.{arg}: default {param.default!r}, the schema says "
                                f"{properties[arg].get('default')!r}")
    return problems


@pytest.mark.files(*TOOLS_ONLY)
def test_schemas_and_functions_agree(load):
    """Each schema in TOOLS lists its function's arguments (after policy) with the same names, types (the
    annotations), required ones and defaults; REGISTRY and TOOLS name the same four tools."""
    tools = load("tools")
    assert drift(tools) == [], "\n".join(drift(tools))
    assert set(tools.REGISTRY) == {tool["function"]["name"] for tool in tools.TOOLS} == {
        "read_file", "list_dir", "run_shell", "write_file"}


@pytest.mark.files(*TOOLS_ONLY)
@pytest.mark.parametrize("name, arguments, says", [
    ("read_file", "{}", ["missing", '"path"']),
    ("read_file", '{"file": "a.txt"}', ["missing", '"path"']),
    ("read_file", '{"path": "a.txt", "mode": "r"}', ["unexpected", '"mode"']),
    ("read_file", '{"path": "a.txt", "offset": "10"}', ['"offset"', "integer", '"10"']),
    ("read_file", '{"path": "a.txt", "limit": true}', ['"limit"', "integer", "true"]),
    ("read_file", '{"path": 7}', ['"path"', "string", "7"]),
    ("read_file", '["a.txt"]', ["object"]),
    ("read_file", '{"path": ', ["not valid JSON"]),
    ("write_file", '{"path": "notes.txt", "text": "hi"}', ["missing", '"content"']),
    ("web_search", '{"q": "x"}', ["web_search", "read_file", "list_dir", "run_shell", "write_file"]),
])
def test_a_bad_call_is_refused_with_what_is_wrong_and_the_right_shape(load, name, arguments, says):
    """check_call() raises BadCall naming the problem (the argument, the type it must be, the value sent), and
    for a known tool it ends with "Call it as" and the right shape as JSON, built from the schema's examples."""
    tools = load("tools")
    with pytest.raises(tools.BadCall) as caught:
        tools.check_call(name, arguments)
    message = str(caught.value)
    missing = [word for word in says if word not in message]
    assert not missing, f"the error {message!r} should mention {missing}"
    if name in tools.REGISTRY:
        assert "Call it as " in message, f"end the error with `Call it as ` and the right shape: {message!r}"
        try:
            shape = json.loads(message.split("Call it as ", 1)[1])
        except ValueError:
            raise AssertionError(f"after `Call it as ` should come a JSON object, the right shape: {message!r}")
        schema = tools.REGISTRY[name]["parameters"]
        assert set(schema.get("required", [])) <= set(shape), f"the shape should show every required argument: {shape}"
        assert tools.problem(shape, schema) is None, f"the shape itself should be a good call: {shape}"


@pytest.mark.files(*TOOLS_ONLY)
def test_a_good_call_passes_with_the_defaults_filled_in(load):
    """check_call() returns a good call's arguments as a dict, the schema's defaults filled in; "" means none."""
    tools = load("tools")
    assert tools.check_call("read_file", '{"path": "a.txt", "offset": 3}') == {
        "path": "a.txt", "offset": 3, "limit": tools.PAGE_LINES}
    assert tools.check_call("list_dir", "") == {"path": "."}
    assert tools.check_call("run_shell", '{"command": "ls"}') == {"command": "ls"}, "return the arguments as a dict"


@pytest.mark.files(*TOOLS_ONLY)
def test_problem_checks_any_schema_and_a_bool_is_no_integer(load):
    """problem(value, schema) is None for a value that fits, else a sentence: types (a bool is no integer, an
    integer is a number, a list of types, null), enum, required keys, unexpected keys where additionalProperties
    is false (JSON schema takes them otherwise), and array items, at any depth."""
    problem = load("tools").problem
    person = {"type": "object", "required": ["name"], "additionalProperties": False, "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "mood": {"type": "string", "enum": ["ok", "bad"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "home": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}
    good = {"name": "Ada", "age": 36, "mood": "ok", "tags": ["a", "b"], "home": {"city": "London"}}
    assert problem(good, person) is None, f"a value that fits has no problem, but: {problem(good, person)}"
    assert problem(1.5, {"type": "number"}) is None and problem(2, {"type": "number"}) is None, "2 is a number"
    for value, schema in [(True, {"type": "integer"}), (1, {"type": "boolean"}), ("1", {"type": "integer"}),
                          (1, {"type": "string"}), ({}, {"type": "array"})]:
        assert isinstance(problem(value, schema), str), f"{value!r} does not fit {schema}"
    for bad, word in [({**good, "age": True}, "age"), ({**good, "mood": "meh"}, "mood"),
                      ({**good, "tags": ["a", 2]}, "tags"), ({**good, "home": {}}, "city"),
                      ({**good, "extra": 1}, "extra"), ({"age": 1}, "name")]:
        said = problem(bad, person)
        assert isinstance(said, str) and word in said, f"problem({bad}) should name {word!r}, said {said!r}"
    open_person = {key: value for key, value in person.items() if key != "additionalProperties"}
    assert problem({**good, "extra": 1}, open_person) is None, "without additionalProperties: false, extras are fine"
    assert problem(None, {"type": ["string", "null"]}) is None and problem("a", {"type": ["string", "null"]}) is None
    assert isinstance(problem(1, {"type": ["string", "null"]}), str), "1 is neither a string nor null"


@pytest.mark.parametrize("bad", [{}, {"path": "notes.txt", "encoding": "utf-8"}, {"path": "notes.txt", "offset": "1"},
                                 '"notes.txt"', '{"path": '],
                         ids=["missing", "unexpected", "wrong-type", "not-an-object", "not-json"])
def test_done_when_a_malformed_call_gets_an_error_and_the_next_call_succeeds(workspace, server, bad):
    """A malformed call comes back to the model as "error: read_file: ..." with the right shape; nothing ran;
    the model's corrected call then works, and the run answers."""
    (workspace / "notes.txt").write_text("the notes\n")
    server.push({"tool_calls": [{"name": "read_file", "arguments": bad}]},
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                "The notes say: the notes.")
    result = run_python(workspace, "harness.py", "Read notes.txt", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    results = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert len(results) == 2, f"two calls, two results; the model got {results}"
    first, second = results
    assert first.startswith("error: read_file:") and "Call it as " in first, (
        f"the model should get `error: read_file: ...` ending with `Call it as ` and the right shape: {first!r}")
    assert "the notes" not in first, "a call that breaks its contract must not run"
    assert second.startswith("the notes\n"), f"the corrected call should read the file, but got {second!r}"
    assert result.stdout.splitlines()[-1] == "The notes say: the notes.", result.stdout


def test_done_when_the_demo_model_fixes_its_write_from_the_error(workspace, project):
    """Offline: `python harness.py --workspace DIR 'Write "hello" to notes.txt'`: the demo model's first write says
    "text" instead of "content", reads the error, and its second call writes the file once you say y."""
    result = run_python(workspace, "harness.py", "--workspace", str(project), 'Write "hello" to notes.txt',
                        input="y\n", env={"BACKEND": "demo"})
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) >= 2, f"two `[step] write_file` lines: {result.stdout!r}"
    first, second = result.stdout.splitlines()[:2]
    assert first.startswith("[1] write_file") and '"text"' in first, first
    assert second.startswith("[2] write_file") and '"content"' in second, second
    assert (project / "notes.txt").read_text() == "hello\n", "the approved write should make notes.txt"


@pytest.mark.files(*TOOLS_ONLY)
def test_read_file_pages_and_says_how_to_read_on(load, workspace):
    """read_file(path) gives PAGE_LINES lines, then the line "[lines 1-200 of 500; call read_file with
    offset=201 to read on]"; offset and limit pick any page; the last page has no such line."""
    tools, policy = load("tools"), load("guards").policy()
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))
    first = tools.read_file(policy, "big.txt")
    assert first.startswith("line 1\n") and "line 200\n" in first and "line 201" not in first, first[-200:]
    assert first.splitlines()[-1] == "[lines 1-200 of 500; call read_file with offset=201 to read on]", \
        f"the last line should say how to read on: {first.splitlines()[-1]!r}"
    offset, limit = 11, 2
    page = [line for line in tools.read_file(policy, "big.txt", offset=offset, limit=limit).splitlines() if line]
    assert page == [f"line {offset}", f"line {offset + 1}", f"[lines {offset}-{offset + limit - 1} of 500; call "
                    f"read_file with offset={offset + limit} to read on]"], f"read_file(offset=11, limit=2) gave {page}"
    last = tools.read_file(policy, "big.txt", offset=401)
    assert last.rstrip("\n").endswith("line 500"), "the last page ends the file"


@pytest.mark.files(*TOOLS_ONLY)
def test_an_offset_out_of_range_is_an_error(load, workspace):
    """offset or limit below 1 is a BadCall; an offset past the end is a ToolError saying how many lines there are."""
    tools, policy = load("tools"), load("guards").policy()
    (workspace / "small.txt").write_text("one\ntwo\nthree\n")
    for bad in ({"offset": 0}, {"limit": 0}):
        with pytest.raises(tools.BadCall):
            tools.read_file(policy, "small.txt", **bad)
    with pytest.raises(load("guards").ToolError) as caught:
        tools.read_file(policy, "small.txt", offset=9)
    assert "3" in str(caught.value), f"say how many lines the file has: {caught.value}"


@pytest.mark.files(*TOOLS_ONLY)
def test_every_page_fits_in_max_chars(load, workspace):
    """Long lines and long files are cut so that a page, its last line included, fits in MAX_CHARS."""
    tools, policy = load("tools"), load("guards").policy()
    (workspace / "wide.txt").write_text(("x" * 99 + "\n") * 100)
    (workspace / "one.txt").write_text("y" * (tools.MAX_CHARS * 3))
    for page in (tools.read_file(policy, "wide.txt"), tools.read_file(policy, "one.txt")):
        assert len(page) <= tools.MAX_CHARS and page.startswith(page[0] * 50), len(page)
    last_line = tools.read_file(policy, "wide.txt").splitlines()[-1]
    assert "offset=" in last_line, "a page cut by MAX_CHARS says how to read on"


@pytest.mark.files(*TOOLS_ONLY)
def test_a_huge_file_is_scanned_no_further_than_max_scan(load, workspace):
    """A file longer than guards.MAX_READ bytes is not read to its end: its line count says "or more"."""
    tools, policy = load("tools"), load("guards").policy()
    with open(workspace / "huge.txt", "w") as file:
        file.write(("z" * 99 + "\n") * (load("guards").MAX_READ // 100 + 5000))
    page = tools.read_file(policy, "huge.txt", limit=1)
    assert page.startswith("z" * 99 + "\n") and "or more" in page.splitlines()[-1], page[-200:]


def test_a_declined_write_leaves_the_file_byte_for_byte(load, project, server):
    """Before a write, the person sees the change: a summary line, the diff, and the summary again; a no leaves
    the file exactly as it was and comes back to the model as an error saying it was declined."""
    original = b"line one\r\nline two\n\xff not utf-8\n"
    (project / "data.txt").write_bytes(original)
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "data.txt", "content": "new\n"}}]}, "ok")
    questions = []
    answer = answer_of(load("harness").run("Change it", backend=scripted_backend(server), approve=questions.append,
                                           policy=load("guards").policy(project)))
    assert answer == "ok" and (project / "data.txt").read_bytes() == original, "a no must leave the file as it was"
    assert len(questions) == 1, questions
    lines = questions[0].splitlines()
    assert lines[0] == lines[-1] and lines[0].startswith("Write data.txt: ") and "+" + "new" in lines, questions[0]
    told = server.requests[-1]["body"]["messages"][-1]["content"]
    assert told.startswith("error:") and "declined" in told, told


def test_an_approved_write_makes_exactly_the_change_shown(load, project, server):
    """A yes writes exactly the content the diff showed, byte for byte, no newline added."""
    (project / "data.txt").write_text("alpha\nbeta\ngamma\n")
    new = "alpha\nBETA\ngamma\ndelta"
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "data.txt", "content": new}}]}, "ok")
    shown = []
    load("harness").run("Change it", backend=scripted_backend(server), approve=lambda q: shown.append(q) or True,
                        policy=load("guards").policy(project))
    assert (project / "data.txt").read_bytes() == new.encode(), "write exactly the content, no newline added"
    assert shown, "a write should ask first, showing the diff"
    assert all(line in shown[0] for line in ("-" + "beta", "+" + "BETA", "+" + "delta")), shown[0]


@pytest.mark.files(*TOOLS_ONLY)
def test_the_question_is_made_safe_and_a_long_diff_is_cut(load, project):
    """write_question(policy, path, content) is built by guards.question(): every line spelled out (an escape or a
    carriage return shown as \\x1b, \\r), the summary first and last, counting every line; guards.fit() cuts it to
    the screen, head and tail, saying how many lines it hid; a file of more than MAX_DIFF_LINES lines gets no diff."""
    tools, guards = load("tools"), load("guards")
    policy = guards.policy(project)
    question = tools.write_question(policy, "trap.txt", "ok\x1b[2J\rgone\n")
    assert "\x1b" not in question and "\r" not in question and "\\x1b" in question, repr(question)
    changed = 300
    (project / "long.txt").write_text("".join(f"old {n}\n" for n in range(changed)))
    question = tools.write_question(policy, "long.txt", "".join(f"new {n}\n" for n in range(changed)))
    lines = question.splitlines()
    assert lines[0] == lines[-1] and f"+{changed}" in lines[0] and f"-{changed}" in lines[0], lines[0]
    rows = 24
    screen = guards.fit(question, rows, 80).splitlines()
    assert len(screen) <= rows and screen[0] == lines[0] and screen[-1] == lines[-1], screen
    assert any(str(len(lines) - rows + 1) in line for line in screen), f"say how many lines were hidden: {screen}"
    huge = tools.write_question(policy, "long.txt", "x\n" * (tools.MAX_DIFF_LINES + 1))
    assert "@@" not in huge and "long.txt" in huge, huge[:300]


@pytest.mark.parametrize("path, reason", [("../escape.txt", "outside the workspace"), (".env", "secret")])
def test_writes_obey_the_workspace_boundary_before_anyone_is_asked(load, project, server, path, reason):
    """A write outside the workspace or to a secret file is refused before any question."""
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x"}}]}, "ok")
    asked = []
    load("harness").run("Write", backend=scripted_backend(server), approve=lambda q: asked.append(q) or True,
                        policy=load("guards").policy(project))
    assert asked == [], f"refuse before asking anyone; asked {asked}"
    assert not (project.parent / "escape.txt").exists() and not (project / ".env").exists()
    told = server.requests[-1]["body"]["messages"][-1]["content"]
    assert told.startswith("error:") and reason in told, told


@pytest.mark.parametrize("path", ["harness.py", "json.py", "notes.txt"])
def test_the_harness_never_writes_its_own_folder(workspace, server, path):
    """The workspace is the harness's own folder: an approved write is refused there, to its code, a new module it
    would import (json.py), or any other file (writable() refuses the whole of guards.HOME); nothing changes."""
    before = sorted(p.name for p in workspace.iterdir()), (workspace / "harness.py").read_bytes()
    server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x = 1\n"}}]}, "ok")
    result = run_python(workspace, "harness.py", "--yes", "Write it", env=groq_env(server), input="y\n")
    assert result.returncode == 0, result.stderr
    assert (sorted(p.name for p in workspace.iterdir()), (workspace / "harness.py").read_bytes()) == before
    told = server.requests[-1]["body"]["messages"][-1]["content"]
    assert told.startswith("error:") and "harness" in told, told
