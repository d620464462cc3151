"""Phase 12 (learner's version): the tools the model may call, the contract every call is held to, and how each
call is decided.

Each tool is a plain function registered with @tool, which files it in REGISTRY (name -> its function, how a call
is decided, what kind of call a person approves, its schema) and its schema in TOOLS (what the model is told).
The schema is built from the function's signature (its annotations and defaults), so the two always agree.
check_call() holds every call to its schema before anything runs. Try one:
    python -c "import tools; tools.check_call('read_file', '{\"path\": \"big.txt\", \"limit\": true}')"
"""
import difflib
import inspect
import json
import os
import threading
import time
from functools import partial

import guards
import shell
from guards import Refused, ToolError

REGISTRY = {}
TOOLS = []
MAX_CHARS = 4000  # characters of one result the model gets, the note about the rest included
MAX_COMMAND = 10_000  # characters of a command a person can still be asked to read
PAGE_LINES = 200  # lines read_file returns when the model does not say
MAX_LINE = 1000  # characters of one line read_file shows; a longer one is cut
MAX_DIFF_LINES = 3000  # lines of a file past which a write is shown without a diff (difflib's cost grows faster)
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list,
              "object": dict, "null": type(None)}  # JSON's names for Python's types
SCHEMA_WORDS = {"type": str, "properties": dict, "required": list, "items": dict, "enum": list,
                "additionalProperties": bool, "description": str, "title": str, "default": object,
                "examples": list}  # what problem() checks, or may ignore, in an output schema: each in its shape
SCHEMA_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}  # an annotation's JSON name


class BadCall(ToolError):
    """A call that breaks its tool's schema; the message ends with the right shape."""


def truncate(text):
    """text, or its start and a note of how much was left out, within MAX_CHARS characters."""
    if len(text) <= MAX_CHARS:
        return text
    keep = MAX_CHARS - 60
    return f"{text[:keep]}\n[{len(text) - keep} more characters left out]"


def at_once(functions, deadline):
    """Run the functions side by side, each on a daemon thread, until all are done or the deadline (a
    time.monotonic(), or None: no limit). A box for each, in order: {"value": ...}, {"error": ...} or, when it had
    not finished, {}; each finished one also holds its "seconds". A thread left behind is never killed."""
    boxes = [{} for _ in functions]

    def fill(box, function):
        began = time.monotonic()
        try:
            box["value"] = function()
        except BaseException as error:  # whatever it raised is handed back: the caller decides
            box["error"] = error
        box["seconds"] = time.monotonic() - began

    if deadline is None and len(functions) == 1:  # nothing to wait for side by side: a thread would only cost
        fill(boxes[0], functions[0])
        if isinstance(boxes[0].get("error"), KeyboardInterrupt):  # Ctrl-C, here in the main thread, ends the run
            raise boxes[0]["error"]
        return boxes
    threads = [threading.Thread(target=fill, args=pair, daemon=True) for pair in zip(boxes, functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    return boxes


def tool(description, decide=None, kind=None, **params):
    """Register a function as a tool; params maps each argument to (its description, an example or None).
    Its type and default come from the function's signature. decide(policy, args, deadline) returns (action,
    question), deadline being the run's (a time.monotonic(), or None);
    None: the tool only reads and runs as asked."""
    def register(function):
        properties, required = {}, []
        for arg, spec in list(inspect.signature(function).parameters.items())[1:]:  # after policy
            text, example = params[arg]
            properties[arg] = {"type": SCHEMA_TYPES[spec.annotation], "description": text}
            if example is not None:
                properties[arg]["examples"] = [example]
            if spec.default is inspect.Parameter.empty:
                required.append(arg)
            else:
                properties[arg]["default"] = spec.default
        parameters = {"type": "object", "properties": properties, "required": required,
                      "additionalProperties": False}
        REGISTRY[function.__name__] = {"function": function, "decide": decide, "kind": kind,
                                       "description": description, "parameters": parameters}
        TOOLS.append({"type": "function", "function": {"name": function.__name__, "description": description,
                                                       "parameters": parameters}})
        return function
    return register


def problem(value, schema, where="the arguments"):
    """None when value fits the JSON schema, else a sentence naming the key at fault."""
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds and not any(isinstance(value, JSON_TYPES[kind]) and isinstance(value, bool) == (kind == "boolean")
                         for kind in kinds):  # True is an int to Python, not to JSON
        return f"{where} must be {' or '.join(kinds)}, not {json.dumps(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {json.dumps(schema['enum'])}, not {json.dumps(value)}"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                kind = properties.get(key, {}).get("type")
                return f'missing required argument "{key}"' + (f" ({' or '.join(kind)})" if isinstance(kind, list)
                                                               else f" ({kind})" if kind else "")
        for key, item in value.items():
            if key not in properties and schema.get("additionalProperties") is False:
                return f'unexpected argument "{key}"; it takes {", ".join(properties) or "no arguments"}'
            wrong = problem(item, properties[key], f'"{key}"') if key in properties else None
            if wrong:
                return wrong
    if isinstance(value, list) and "items" in schema:
        for at, item in enumerate(value):
            wrong = problem(item, schema["items"], f"{where}[{at}]")
            if wrong:
                return wrong
    return None


def check_call(name, arguments, tools=None):
    """The call's arguments as a dict with the schema's defaults filled in, once they fit the tool's parameters
    (in REGISTRY, or in tools: name -> {"parameters": ...}); else a BadCall that ends with the right shape."""
    tools = REGISTRY if tools is None else tools
    if name not in tools:
        raise BadCall(f"there is no tool named {json.dumps(name)}; the tools are {', '.join(tools)}")
    try:  # a server's schema may have parts that are no schema: every use of it is in here
        schema = tools[name].get("parameters") or {"type": "object"}
        properties = schema.get("properties", {})
        shape = "Call it as " + json.dumps({arg: p["examples"][0] for arg, p in properties.items() if "examples" in p})
        defaults = {arg: p["default"] for arg, p in properties.items() if "default" in p}
        try:
            args = json.loads(arguments or "{}") if isinstance(arguments, (str, bytes, type(None))) else arguments
            wrong = problem(args, schema)
        except ValueError as error:
            wrong = f"the arguments are not valid JSON ({error}): {str(arguments)[:200]}"
    except (AttributeError, TypeError, KeyError, IndexError) as error:
        raise BadCall(f"{name}: its schema is broken, so no call can be checked ({type(error).__name__}: {error})")
    if wrong:
        raise BadCall(f"{name}: {wrong}. {shape}")
    return {**defaults, **args}


def plan(policy, tool, args, deadline=None):
    """(action, question): the call as decided, ready to run, and what a person must approve first (or None).
    deadline goes to the tool's decide, so that a command it runs stops at the run's deadline. The arguments stay
    one dict: an MCP server's tool may call one of them `policy`."""
    if tool["decide"] is None:
        return partial(tool["function"], policy, **args), None
    return tool["decide"](policy, args, deadline)


@tool("List the entries of a folder in the workspace, one per line; folders end with '/'.",
      path=("The folder to list, relative to the workspace.", None))
def list_dir(policy, path: str = "."):
    with os.scandir(guards.inside_workspace(policy, path)) as found:  # a DirEntry tells a link from a folder
        entries = sorted(found, key=lambda entry: entry.name)
    return "\n".join(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "") for entry in entries)


@tool(f"Read a UTF-8 text file in the workspace, {PAGE_LINES} lines at a time; the last line says how to read on.",
      path=("The file to read, relative to the workspace.", "README.md"),
      offset=("The first line to read; 1 is the top.", None),
      limit=("How many lines to read.", None))
def read_file(policy, path: str, offset: int = 1, limit: int = PAGE_LINES):
    if offset < 1 or limit < 1:
        raise BadCall(f'read_file: "offset" and "limit" must be 1 or more, not {offset} and {limit}. '
                      f'Call it as {{"path": {json.dumps(path)}, "offset": 1}}')
    full = guards.inside_workspace(policy, path)
    if not full.is_file():  # a pipe or a device would block the read for ever
        raise ToolError(f"{path} is not a regular file")
    page, total, size = [], 0, 0
    with open(full, "rb") as file:
        for line in iter(lambda: file.readline(guards.MAX_READ - size), b""):  # never past MAX_READ bytes
            size, total = size + len(line), total + 1
            if offset <= total < offset + limit:
                text = line.decode("utf-8", errors="replace")
                page.append(text if len(text) <= MAX_LINE else f"{text[:MAX_LINE]}[... line cut]\n")
        counted = " or more" if size >= guards.MAX_READ and file.read(1) else ""
    if offset > max(total, 1):
        raise ToolError(f"{path} has {total}{counted} lines; offset={offset} is past the end")
    text, last, sent = "", offset - 1, 0
    for line in page:
        sent += len(json.dumps(line)) - 2  # as the model gets it: a line feed or a quote is sent as two characters
        if sent > MAX_CHARS - 120:  # room for the last line
            break
        text, last = text + line, last + 1
    if last < total or counted:
        text += f"\n[lines {offset}-{last} of {total}{counted}; call read_file with offset={last + 1} to read on]"
    return text


def decide_command(policy, args, deadline):
    """A command naming a secret is refused; a plainly read-only one runs as its words, with no shell and nothing
    writable; anything else runs in the shell, able to write the workspace, after a yes."""
    command = args["command"]
    if len(command) > MAX_COMMAND:
        raise Refused(f"the command is {len(command)} characters long, more than anyone can check "
                      f"(MAX_COMMAND = {MAX_COMMAND}); split it into smaller ones")
    guards.names_a_secret(policy, command)
    argv = guards.plain(policy, command)
    if argv:  # it runs as this list of words, with no shell to read anything into them
        return lambda: truncate(shell.run(argv, policy, deadline=deadline)), None
    return (lambda: truncate(shell.run(shell.shell_argv(command), policy, write=True, deadline=deadline)),
            guards.question(f"Run: {command}"))


@tool("Run a shell command in the workspace; returns its exit code, then stdout and stderr. Commands that only "
      "read files in the workspace run at once; anything else waits for the user's yes.",
      decide=decide_command, kind="command",
      command=("The command line, as you would type it in a terminal.", "ls -l"))
def run_shell(policy, command: str):
    return truncate(shell.run(shell.shell_argv(command), policy, write=True))


def lines(text):
    """text's lines, split at line feeds only: a carriage return stays in its line, to be shown spelled out."""
    return text.removesuffix("\n").split("\n") if text else []


def write_question(policy, path, content):
    """The question before a write: a summary, the unified diff, each line made safe, and the summary again."""
    full = guards.writable(policy, path)
    old = ""
    if full.is_file():
        if full.stat().st_size > guards.MAX_READ:
            return guards.question(f"Write {path}: replaces a file of {full.stat().st_size} bytes, too big to "
                                   f"show a diff (guards.MAX_READ = {guards.MAX_READ})")
        old = full.read_text(encoding="utf-8", errors="replace")
    before, after = lines(old), lines(content)
    if max(len(before), len(after)) > MAX_DIFF_LINES or len(content) > guards.MAX_READ:
        summary = f"Write {path}: +{len(after)} -{len(before)} lines"
        return guards.question(summary, f"(no diff: more than MAX_DIFF_LINES = {MAX_DIFF_LINES} lines)", summary)
    diff = list(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}", lineterm=""))
    added = sum(line.startswith("+") for line in diff[2:])
    removed = sum(line.startswith("-") for line in diff[2:])
    summary = f"Write {path}: +{added} -{removed} lines"
    return guards.question(summary, *diff, summary)


def decide_write(policy, args, deadline):
    """A write always asks, its diff shown; outside the workspace or in the harness's own places it is refused."""
    path, content = args["path"], args["content"]
    return partial(write_file, policy, path, content), write_question(policy, path, content)


@tool("Write a UTF-8 text file in the workspace, replacing what it held; the user sees the diff and says yes first.",
      decide=decide_write, kind="write",
      path=("The file to write, relative to the workspace.", "notes.txt"),
      content=("The whole new content of the file.", "hello\n"))
def write_file(policy, path: str, content: str):
    full = guards.writable(policy, path)
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(content.encode("utf-8"))  # exactly what the diff showed: no newline translation
    return f"wrote {len(content)} characters to {path}"


def unusable(schema, where="the schema"):
    """Why answers could not be checked against this schema (check_call()'s problem() checks only SCHEMA_WORDS),
    or None. It must describe an object at the top."""
    if not isinstance(schema, dict):
        return f"{where} is not a JSON object"
    if where == "the schema" and schema.get("type") != "object":
        return f'{where} must describe an object ("type": "object")'
    for word, value in schema.items():
        if word not in SCHEMA_WORDS:
            return f"{where} uses {word}, which is not checked here"
        if not isinstance(value, SCHEMA_WORDS[word]):
            return f"{where} has a {word} that is no {SCHEMA_WORDS[word].__name__}"
    if "type" in schema and schema["type"] not in JSON_TYPES:
        return f"{where} has a type {schema['type']!r} that JSON does not have"
    if not all(isinstance(name, str) for name in schema.get("required", [])):
        return f"{where} has a required that is not a list of names"
    for name, part in schema.get("properties", {}).items():
        why = unusable(part, f"{where}.{name}")
        if why:
            return why
    return unusable(schema["items"], f"{where}[]") if "items" in schema else None


def served(server, trusted, deadline=None):
    """A started MCP server's tools as entries of REGISTRY's shape, each named SERVER__TOOL (no clash with ours or
    another server's; at most 64 characters), its calls decided by decide_mcp()."""
    return {f"{server.name}__{tool['name']}"[:64]: {
        "function": None, "kind": "mcp", "parameters": tool["inputSchema"],
        "description": f"From the MCP server {server.name}: {tool['description']}",
        "decide": partial(decide_mcp, server, tool["name"], server.name in trusted)}
        for tool in server.tools(deadline)}


def decide_mcp(server, tool, trusted, policy, args, deadline=None):
    """A call of a server's tool asks, naming the tool and the server, unless the server is trusted (or --yes):
    its code and its words are someone else's."""
    question = guards.question(f"Call {tool} on the MCP server {server.name}: {json.dumps(args)}")
    return partial(mcp_call, server, tool, args, deadline), None if trusted else question


def mcp_call(server, tool, args, deadline=None):
    """The tool's text; a result that says isError is a ToolError, which the model reads as `error: ...`."""
    text, is_error = server.call(tool, args, deadline)
    if is_error:
        raise ToolError(text)
    return text
