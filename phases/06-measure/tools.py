"""The tools the model may call: REGISTRY (name -> function) and TOOLS (their hand-written schemas).

Try one:  python -c "import tools; print(tools.read_file('tools.py', limit=5))"
Before a call runs, check_call() holds its arguments to the tool's schema, and plan() decides, once, what will
run and what a person must approve first (guards.py says what is allowed, shell.py runs commands).
"""
import difflib
import heapq
import json
import os
import re
from functools import partial

import guards
import shell
from guards import Refused, ToolError, exact, visible

MAX_CHARS = 4000  # longest result sent back to the model, note included; one file must not flood the conversation
NOTE_ROOM = 200  # characters kept free in a cut result for the note that says what was cut
PAGE_LINES = 200  # lines read_file returns by default; the model pages with offset
MAX_SCAN = 100_000_000  # bytes read_file reads at most in one call: a 20 GB file still answers within a second
MAX_DIFF_BYTES = 1_000_000  # a file larger than this is not diffed before a write: the question says so instead
MAX_DIFF_LINES = 3000  # nor one of more lines, before or after: a diff's cost grows faster than its length
DIFF_LINES = 100  # lines of a diff shown in the question; the summary line counts them all
LINE = re.compile(r"[^\n]*\n|[^\n]+$")  # a line ends at \n only: a \r inside one is shown, not obeyed
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}


class BadCall(ToolError):
    """A call that breaks its tool's contract; the message names the problem and shows the right shape."""


def json_type(value):
    """Example: json_type(True) -> "a boolean";  json_type("10") -> "a string";  json_type([1]) -> "an array" """
    for name, kind in [("a boolean", bool), ("an integer", int), ("a number", float), ("a string", str),
                       ("an object", dict), ("an array", list)]:
        if isinstance(value, kind):
            return name
    return "null"


def check_call(name, arguments):
    """Parse a call's arguments and check them against the tool's schema (a test holds each schema to its function's
    signature). Returns them as a dict, or raises BadCall with a message the model can fix its next call from.

    Example: check_call("read_file", '{}') -> BadCall('read_file: missing required argument "path" (string).
             Call it as {"path": "README.md"}')
    """
    if name not in SCHEMAS:
        raise BadCall(f"there is no tool called {name!r}. The tools are: {', '.join(SCHEMAS)}.")
    schema, properties = SCHEMAS[name], SCHEMAS[name]["properties"]
    shape = "Call it as " + json.dumps({arg: p["examples"][0] for arg, p in properties.items() if "examples" in p})
    try:
        args = json.loads(arguments or "{}")  # some servers send "" for no arguments
    except (ValueError, RecursionError) as error:
        raise BadCall(f"{name}: the arguments are not valid JSON ({str(error)[:100]}). {shape}") from None
    if not isinstance(args, dict):
        raise BadCall(f"{name}: the arguments must be a JSON object, not {json_type(args)}. {shape}")
    for arg in schema.get("required", []):
        if arg not in args:
            raise BadCall(f'{name}: missing required argument "{arg}" ({properties[arg]["type"]}). {shape}')
    for arg, value in args.items():
        if arg not in properties:
            takes = ", ".join(f"{a} ({p['type']})" for a, p in properties.items())
            raise BadCall(f'{name}: unexpected argument "{arg}"; it takes {takes}. {shape}')
        expected = properties[arg]["type"]
        # a bool is an int to Python, but not to JSON Schema: true is not a line number
        if not isinstance(value, JSON_TYPES[expected]) or (isinstance(value, bool) and expected != "boolean"):
            raise BadCall(f'{name}: argument "{arg}" must be of type {expected}, not {json_type(value)} '
                          f"({json.dumps(value)[:100]}). {shape}")
    return args


def plan(name, args, deadline=None):
    """Decide, once, what a checked call will do: returns (action, question). action() runs exactly what was
    checked; question is what a person must approve first, or None. Raises Refused for what nobody may approve.
    deadline (a time.monotonic()) stops a command that is still running then."""
    if name == "run_shell":
        argv = guards.plain_command(args["command"], deadline)  # refuses a command that names a secret file
        if argv:  # judged plain: it runs as this argument list, and is checked again just before it runs
            return partial(run_plain, args["command"], argv, deadline), None
        return partial(run_argv, shell.shell_argv(args["command"], guards.search_path()), deadline), \
            f"Run in a shell: {exact(args['command'])}"
    if name == "write_file":
        return partial(write_file, **args), write_question(args["path"], args["content"])
    return partial(REGISTRY[name], **args), None


def read_file(path: str, offset: int = 1, limit: int = PAGE_LINES) -> str:
    """Return lines offset, offset+1, ... of a workspace file (the first line is 1): at most limit lines and
    MAX_CHARS characters, and when more is left, a last line saying how to read on."""
    if offset < 1 or limit < 1:
        raise ValueError("offset and limit start at 1")
    text, end = "", offset - 1
    with guards.open_file(path) as file:
        number = skip_lines(file, offset - 1)  # a megabyte at a time: a far offset costs no loop over lines
        for number, line in enumerate(lines_of(file), number + 1):  # a 1 GB file is never loaded whole
            room = MAX_CHARS - NOTE_ROOM - len(text)
            if number >= offset + limit or (len(line) > room and text):
                break  # this line is not shown: the page is full
            text, end = text + (line if len(line) <= room else line[:room] + "\n"), number  # a long line is cut
        left = lines_left(file)
    if number < offset and (left is None or offset > 1):
        raise ValueError(f"offset {offset} is past the end: {path} has {number} lines" if left is not None else
                         f"line {offset} is not in the first {MAX_SCAN} bytes, which is as far as read_file reads; "
                         "look further with grep -n or tail")
    if left is None or end < number + left:
        total = "a file too long to count" if left is None else number + left
        text += f"\n[lines {offset}-{end} of {total}; call read_file with offset={end + 1} to read on]"
    return text


def skip_lines(file, count):
    """Move past the first count lines of a binary file, within its first MAX_SCAN bytes, reading a megabyte at a
    time and finding the line's start by counting (both in C); returns how many lines were passed."""
    passed, last = 0, b"\n"
    while passed < count and file.tell() < MAX_SCAN and (block := file.read(1 << 20)):
        if passed + block.count(b"\n") < count:
            passed, last = passed + block.count(b"\n"), block[-1:]
            continue
        low, high = 0, len(block)  # the shortest start of block holding the lines still to pass
        while low < high:
            middle = (low + high) // 2
            low, high = (middle + 1, high) if passed + block.count(b"\n", 0, middle) < count else (low, middle)
        file.seek(file.tell() - len(block) + low)
        return count
    return passed + (last != b"\n")  # a last line with no line break is a line too


def lines_of(file):
    """A binary file's lines as text, read a piece at a time, within its first MAX_SCAN bytes; a line longer
    than MAX_CHARS is cut to that."""
    while file.tell() < MAX_SCAN and (piece := file.readline(MAX_CHARS * 4)):
        if not piece.endswith(b"\n"):  # an overlong line: skip its rest rather than keep it
            while file.tell() < MAX_SCAN and (rest := file.readline(65536)) and not rest.endswith(b"\n"):
                pass
        yield piece.decode("utf-8", errors="replace")[:MAX_CHARS]


def lines_left(file):
    """How many lines remain after the file's position, counted a megabyte at a time; None when the count
    would read past MAX_SCAN bytes."""
    count, last = 0, b"\n"
    while block := file.read(1 << 20):
        if file.tell() > MAX_SCAN:
            return None
        count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


def list_dir(path: str = ".") -> str:
    """Return the names in a workspace directory, one per line; directories end with '/'."""
    count = 0

    def names(entries):
        nonlocal count
        for count, entry in enumerate(entries, 1):
            yield entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")  # a link's target stays unsaid

    with os.scandir(guards.inside_workspace(path)) as entries:
        first = heapq.nsmallest(MAX_CHARS // 2, names(entries))  # in order, without keeping 200,000 names
    text = ""
    for shown, name in enumerate(first):
        if len(text) + len(name) + 1 > MAX_CHARS - NOTE_ROOM:
            return text + f"[... {count - shown} more entries; list a folder inside to see fewer]"
        text += name + "\n"
    return text.rstrip("\n") or "(empty directory)"


def run_shell(command: str) -> str:
    """Run a command line in the workspace and return its exit code and output. Here a plain command runs at
    once; the harness runs anything else through plan(), after a person approved it."""
    action, question = plan("run_shell", {"command": command})
    if question:
        raise Refused("this command needs a person's approval; the harness asks for it")
    return action()


def run_plain(command, argv, deadline=None):
    """Run a command judged plain, if it is still exactly as plain as when it was judged: another call of the
    same turn may have changed the files it names (a link swapped in) since."""
    if guards.plain_command(command, deadline) != argv:
        raise Refused(f"`{command}` changed between the check and the run (a file it names changed); not run")
    return run_argv(argv, deadline)


def run_argv(argv, deadline=None):
    hide = guards.hidden_files() if shell.SANDBOX else ()  # the sandbox keeps these from the command
    return shell.run(argv, cwd=guards.WORKSPACE, env=guards.command_env(argv), keep=MAX_CHARS - NOTE_ROOM,
                     deadline=deadline, hide=hide)


def write_file(path: str, content: str) -> str:
    """Replace a workspace file's text with content (creating it if needed). Runs only once the user
    approved the change that plan() showed."""
    with guards.open_for_writing(path) as file:  # a link swapped in since the check is not followed
        file.write(content.encode("utf-8", errors="replace"))  # bytes: no newline translation, exactly as shown
    return f"wrote {len(content)} characters to {path}"


def write_question(path, content):
    """What a person sees before a write: the summary, the diff (its first DIFF_LINES lines), the summary again
    right above the answer, so the last line read is what the answer is about. The file's name is shown on one
    line, its line breaks spelled out; only the diff keeps its own.

    Example: write_question("a.txt", "new\\n") where a.txt holds "old\\n" ->
             "Write a.txt: +1 -1 lines\\n--- a/a.txt\\n+++ b/a.txt\\n@@ -1 +1 @@\\n-old\\n+new\\n"
             "Write a.txt: +1 -1 lines"
    """
    target = guards.inside_workspace(path)
    name = exact(str(target.relative_to(guards.real_root())))  # one line: a name cannot forge another
    if target.exists() and target.stat().st_size > MAX_DIFF_BYTES:
        return (f"Write {name}: {target.stat().st_size} bytes, too big to show a diff, replaced by "
                f"{content.count(chr(10)) + 1} lines")
    old = ""
    if target.exists():
        with guards.open_file(path) as file:
            old = file.read().decode("utf-8", errors="replace")
    before, after = LINE.findall(old), LINE.findall(content)
    if max(len(before), len(after)) > MAX_DIFF_LINES:
        return f"Write {name}: {len(before)} lines replaced by {len(after)}, too many to show a diff"
    lines = list(difflib.unified_diff(before, after, f"a/{name}", f"b/{name}"))
    added = sum(line.startswith("+") for line in lines[2:])
    removed = sum(line.startswith("-") for line in lines[2:])
    shown = [visible(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
             for line in lines[:DIFF_LINES]]
    more = f"[... {len(lines) - DIFF_LINES} more lines of diff]\n" if len(lines) > DIFF_LINES else ""
    summary = f"Write {name}: +{added} -{removed} lines" + ("" if target.exists() else " (a new file)")
    return f"{summary}\n{''.join(shown)}{more}{summary}"


REGISTRY = {"read_file": read_file, "list_dir": list_dir, "run_shell": run_shell, "write_file": write_file}

TOOLS = [
    {"type": "function", "function": {
        "name": "read_file",
        "description": "Read a text file in the workspace, 200 lines at a time. When there is more, the result "
                       "ends with the offset to read on from. Use a path relative to the workspace, such as "
                       "README.md or src/app.py. Secret files such as .env are refused.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file to read", "examples": ["README.md"]},
                "offset": {"type": "integer", "description": "The first line to read; 1 is the top", "default": 1},
                "limit": {"type": "integer", "description": "How many lines to read at most", "default": 200},
            },
            "required": ["path"],
        },
    }},
    {"type": "function", "function": {
        "name": "list_dir",
        "description": "List the files and folders in a workspace directory (folders end with /). "
                       "Call this first to see what exists before you read anything.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The directory; '.' is the workspace",
                                    "default": ".", "examples": ["."]}},
            "required": [],
        },
    }},
    {"type": "function", "function": {
        "name": "run_shell",
        "description": "Run a command in the workspace and return its exit code and output. Read-only commands "
                       "(ls, cat, head, tail, wc, grep, git status/log/diff/show) run at once; anything else waits "
                       "for the user's approval and may be declined. Commands time out after 10 s.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line to run",
                                       "examples": ["ls"]}},
            "required": ["command"],
        },
    }},
    {"type": "function", "function": {
        "name": "write_file",
        "description": "Replace the whole text of a workspace file, or create it. The user sees the diff and "
                       "must approve it; if they decline, the file is left as it was.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file to write", "examples": ["notes.txt"]},
                "content": {"type": "string", "description": "The complete new text of the file",
                            "examples": ["hello\n"]},
            },
            "required": ["path", "content"],
        },
    }},
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
