"""The tools the model may call: REGISTRY holds each one as one entry (the function that runs it,
how a call of it is decided, and what the model is told), and TOOLS is what the model is sent.

Try one:  python -c "import guards, tools; print(tools.read_file(guards.policy(), 'tools.py',
limit=5))" check_call() holds a call's arguments to its tool's schema; plan() decides, once, what
the call will do and whether a person must approve it first; guards.py has the rules, shell.py runs
commands.
"""
import difflib
import io
import json
import os
from functools import partial
from stat import S_ISREG

import guards
import shell
import threading
import time
from guards import ToolError

# longest result sent back to the model; one huge file must not flood the conversation
MAX_CHARS = 4000
MAX_COMMAND = 10_000  # characters: a longer command is refused (a script belongs in a file)
PAGE_LINES = 200  # lines read_file returns by default; the model pages on with offset
# a longer file is not diffed before a write (a diff's cost grows faster than its length)
MAX_DIFF_LINES = 3000
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "object": dict, "array": list, "null": type(None)}


class BadCall(ToolError):
    """A call that breaks its tool's contract; the message names the problem and shows the right
    shape."""


def truncate(text, limit=MAX_CHARS):
    """Cut text to limit characters, the note saying how much was cut included.
    Example: truncate("a" * 5000, 100) -> 50 times "a", then "\\n[... 4950 more characters cut]" """
    if len(text) <= limit:
        return text
    kept = limit - 50  # room for the note
    return text[:kept] + f"\n[... {len(text) - kept} more characters cut]"


def check_call(name, arguments, tools=None):
    """The call's arguments, parsed, held to its tool's schema (in REGISTRY, or the tools given),
    the defaults filled in; else BadCall, with a message the model can fix its next call from.
    Example: check_call("read_file", '{}') -> BadCall('read_file: missing required argument "path"
    (string). Call it as {"path": "README.md"}')"""
    tools = tools or REGISTRY
    if name not in tools:
        raise BadCall(f"there is no tool called {name!r}. The tools are: {', '.join(tools)}.")
    schema = tools[name]["parameters"]
    try:  # a server's schema may have parts that are no schema: every use of it is in here
        properties = schema.get("properties", {})
        shape = ("Call it as " + json.dumps({arg: p["examples"][0] for arg, p in properties.items()
                                             if "examples" in p}))
        args = json.loads(arguments or "{}")  # some servers send "" for no arguments
        wrong = problem(args, schema)
        defaults = {arg: p["default"] for arg, p in properties.items() if "default" in p}
    except ValueError as error:  # json.loads: no JSON
        raise BadCall(f"{name}: the arguments are not valid JSON "
                      f"({str(error)[:100]}). {shape}") from None
    except RecursionError:  # JSON nested deeper than Python follows
        raise BadCall(f"{name}: the arguments are nested too deep to read. {shape}") from None
    except (TypeError, AttributeError, KeyError, IndexError) as error:
        raise BadCall(f"{name}: the inputSchema its server sent has parts that cannot "
                      f"be checked ({error})") from None
    if wrong:
        raise BadCall(f"{name}: {wrong}. {shape}")
    return {**defaults, **args}


def problem(value, schema, where=""):
    """What in a value breaks a JSON schema (its type or list of types, an enum, an object's keys,
    an array's items), or None. Example: problem({"path": 1}, read_file's schema) -> 'argument
    "path" must be of type string, not 1'"""
    name = f'argument "{where}"' if where else "the arguments"
    # "string", or a list
    kinds = [schema["type"]] if isinstance(schema.get("type"), str) else schema.get("type", [])
    if not set(kinds) <= JSON_TYPES.keys():
        raise TypeError(f"a type JSON schema does not have, in {kinds}")
    if kinds and not any(isinstance(value, JSON_TYPES[kind])
                         and isinstance(value, bool) == (kind == "boolean")
                         for kind in kinds):  # True is an int to Python, not to JSON
        wanted = f"of type {' or '.join(kinds)}" if where else "a JSON object"
        return f"{name} must be {wanted}, not {json.dumps(value)[:50]}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{name} must be one of {json.dumps(schema['enum'])}, not {json.dumps(value)[:50]}"
    inside = (f"{where}." if where else "")
    if isinstance(value, dict):
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
        for key in schema.get("required", []):
            if key not in value:
                return (f'missing required argument "{inside}{key}" '
                        f'({properties.get(key, {}).get("type")})')
        for key in value:
            if key not in properties and extra is False:
                # JSON schema takes more arguments unless it says not
                return (f'unexpected argument "{inside}{key}"; it takes '
                        f'{", ".join(properties) or "none"}')
        return next(filter(None, (problem(v, properties.get(k, extra if isinstance(extra, dict)
                                                            else {}), inside + k)
                                  for k, v in value.items())), None)
    if isinstance(value, list):
        return next(filter(None, (problem(item, schema.get("items", {}), f"{where}[{n}]")
                                  for n, item in enumerate(value))), None)
    return None


def plan(policy, tool, args, deadline=None):
    """Decide what a checked call of a tool will do: returns (action, question). action() runs
    exactly what was decided; question is what a person must approve first (unless the policy
    approved tool["kind"] in advance), or None. Raises guards.Refused for what nobody may approve. A
    tool that only reads runs as asked; the others say how they are decided (tool["decide"])."""
    if tool["decide"] is None:
        return partial(tool["function"], policy, **args), None
    return tool["decide"](policy, args, deadline)


def decide_command(policy, args, deadline=None):
    """A plain command runs as its words, with no shell and nothing it may change; any other asks,
    then runs in the shell, changing what the policy lets an approved command change. Both stop at
    the deadline."""
    command = args["command"]
    if len(command) > MAX_COMMAND:
        raise guards.Refused(f"the command is {len(command)} characters long; the "
                             f"most is {MAX_COMMAND}")
    guards.names_a_secret(policy, command)
    argv = guards.plain(policy, command)
    if argv:
        # it runs as this list of words, with no shell to read anything into them, and changes
        # nothing
        return partial(shell.run, argv, policy, deadline=deadline), None
    action = partial(shell.run, shell.shell_argv(command), policy, write=True, deadline=deadline)
    return action, guards.question(f"Run: {command}")


def decide_write(policy, args, deadline=None):
    """A write asks, showing its diff; it runs only on a file the model may change."""
    action = partial(write_file, policy, args["path"], args["content"])
    return action, write_question(policy, args["path"], args["content"])


def read_file(policy, path: str, offset: int = 1, limit: int = PAGE_LINES) -> str:
    """Return lines offset, offset+1, ... of a workspace file (the first line is 1): at most limit
    lines and MAX_CHARS characters, and when more is left, a last line saying how to read on. The
    file is opened once and read as guards.opened() judged it, no further than its first
    guards.MAX_READ bytes: a file may be 20 GB."""
    if offset < 1 or limit < 1:
        raise BadCall('read_file: "offset" and "limit" start at 1')
    with guards.opened(policy, path) as fd:
        if not isinstance(fd, int) or not S_ISREG(os.stat(fd).st_mode):
            raise ToolError(f"{path} is a folder; list_dir lists it")
        file, more = io.BytesIO(guards.read(fd)), os.stat(fd).st_size > guards.MAX_READ
    text, number, last = "", 0, offset - 1
    while line := file.readline(MAX_CHARS):
        number += 1
        if len(line) == MAX_CHARS and not line.endswith(b"\n"):
            # too long to show whole: its rest is skipped
            line = line[:MAX_CHARS - 300] + b" [... the rest of this line cut]\n"
            while (rest := file.readline(MAX_CHARS)) and not rest.endswith(b"\n"):
                pass
        if number < offset:
            continue
        if number >= offset + limit or len(text) + len(line) > MAX_CHARS - 200:  # room for the note
            break
        text, last = text + line.decode("utf-8", errors="replace"), number
    rest = file.read()
    total = number + rest.count(b"\n") + (not rest.endswith(b"\n") and rest != b"")
    counted = " or more" if more else ""
    if offset > max(total, 1):
        raise ToolError(f"offset {offset} is past the end: {path} has {total} lines" if not counted
                        else
                        f"line {offset} is past the first {guards.MAX_READ} bytes, which is as far "
                        "as read_file looks; use grep -n or tail")
    if last < total or counted:
        text += (
            f"\n[lines {offset}-{last} of {total}{counted}; call read_file with offset={last + 1}"
            " to read on]"
        )
    return text


def list_dir(policy, path: str = ".") -> str:
    """Return the names in a workspace directory, one per line; directories end with '/' (a link
    does not: it is listed, not followed)."""
    with guards.opened(policy, path) as folder, os.scandir(folder) as entries:
        names = sorted(e.name + "/" if e.is_dir(follow_symlinks=False) else e.name for e in entries)
    # a name in bytes that are no UTF-8 has lone surrogates,
    listing = "\n".join(names) or "(empty directory)"
    # which JSON cannot carry
    return truncate(listing.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def run_shell(policy, command: str) -> str:
    """Run a command line in the workspace and return its exit code and output. Called directly (not
    through the harness), it runs only what would run without asking."""
    action, question = decide_command(policy, {"command": command})
    if question:
        raise guards.Refused("this command needs a person's approval; the harness asks for it")
    return action()


def write_file(policy, path: str, content: str) -> str:
    """Replace a workspace file's text with content, creating the file (not its folder). The harness
    runs it only once a person approved the diff write_question() showed. The file is opened once,
    never through a link, and judged as opened (guards.opened()); only then is its old text cut and
    the new one written, through it."""
    with guards.opened(policy, path,
                       os.O_RDWR | os.O_CREAT) as fd, open(fd, "wb", closefd=False) as file:
        file.truncate()
        file.write(content.encode("utf-8", errors="replace"))  # bytes: exactly what the diff showed
    return f"wrote {len(content)} characters to {path}"


def write_question(policy, path, content):
    """What a person sees before a write: a summary line ("Write a.txt: +1 -1 lines"), the diff, and
    the summary again right above the answer. The file is opened as write_file() will open it, so
    what it may not change is refused here, before anyone is asked; a file that is not there yet is
    new."""
    name = os.path.normpath(path)
    try:
        with guards.opened(policy, path, os.O_RDWR) as fd:
            size, old = os.stat(fd).st_size, guards.read(fd)
    except FileNotFoundError:
        size, old = None, b""
    if size is not None and size > guards.MAX_READ:
        return (guards.question(f"Write {name}: {size} bytes replaced by {len(content)} "
                                "characters, too big to diff"))
    before, after = old.decode("utf-8", errors="replace").splitlines(
        keepends=True
    ), content.splitlines(keepends=True)
    if max(len(before), len(after)) > MAX_DIFF_LINES:
        return (guards.question(f"Write {name}: {len(before)} lines replaced by {len(after)}, too "
                                "many to show a diff"))
    diff = [line.rstrip("\n")
            for line in difflib.unified_diff(before, after, f"a/{name}", f"b/{name}")]
    summary = (f"Write {name}: +{sum(line[0] == '+' for line in diff[2:])} "
               f"-{sum(line[0] == '-' for line in diff[2:])} "
               "lines" + ("" if size is not None else " (a new file)"))
    return guards.question(summary, *diff)


def at_once(functions, deadline):
    """Run the functions side by side, each on a thread, and wait for them until the deadline (a
    time.monotonic(), or None). Returns a box for each, the dict its thread fills: {"value":
    returned, "seconds": taken}, {"error": raised, "seconds": taken}, or {} when not finished in
    time (a thread left behind may fill it later)."""
    boxes = [{} for _ in functions]

    def fill(box, function):
        began = time.monotonic()
        try:
            box["value"] = function()
        except BaseException as error:  # handed to the caller, who decides
            box["error"] = error
        box["seconds"] = round(time.monotonic() - began, 3)

    threads = [threading.Thread(target=fill, args=pair, daemon=True)
               for pair in zip(boxes, functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    return boxes


# name: the function that runs a call; how a call is decided (None: it only reads, and runs as
# asked); the kind of call a person approves (one of guards.KINDS; --yes approves them in advance);
# what the model reads
REGISTRY = {
    "read_file": {
        "function": read_file, "decide": None, "kind": None,
        "description": "Read a text file in the workspace, 200 lines at a time. When there is "
                       "more, the result ends with the offset to read on from. Use a path relative "
                       "to the workspace, such as README.md or src/app.py. Secret files such "
                       "as .env are refused.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file to read",
                         "examples": ["README.md"]},
                "offset": {"type": "integer", "description": "The first line to read; 1 is the top",
                           "default": 1},
                "limit": {"type": "integer", "description": "How many lines to read at most",
                          "default": 200},
            },
            "required": ["path"], "additionalProperties": False,
        },
    },
    "list_dir": {
        "function": list_dir, "decide": None, "kind": None,
        "description": "List the files and folders in a workspace directory (folders end with /). "
                       "Call this first to see what exists before you read anything.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string",
                                    "description": "The directory; '.' is the workspace",
                                    "default": ".", "examples": ["."]}},
            "required": [], "additionalProperties": False,
        },
    },
    "run_shell": {
        "function": run_shell, "decide": decide_command, "kind": "command",
        "description": "Run a command in the workspace and return its exit code and output. "
                       "Read-only commands (ls, cat, head, tail, wc, grep) run at once; anything "
                       "else waits for the user's approval and may be declined. Commands "
                       "time out after 10 s.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line to run",
                                       "examples": ["ls"]}},
            "required": ["command"], "additionalProperties": False,
        },
    },
    "write_file": {
        "function": write_file, "decide": decide_write, "kind": "write",
        "description": "Replace the whole text of a workspace file, or create it. The user sees "
                       "the diff and must approve it; if they decline, the file is left as it was.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file to write",
                         "examples": ["notes.txt"]},
                "content": {"type": "string", "description": "The complete new text of the file",
                            "examples": ["hello\n"]},
            },
            "required": ["path", "content"], "additionalProperties": False,
        },
    },
}
TOOLS = [{"type": "function", "function": {"name": name, "description": tool["description"],
                                            "parameters": tool["parameters"]}}
         for name, tool in REGISTRY.items()]
