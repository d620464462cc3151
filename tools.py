"""The tools the model may call, and the guardrails around them: REGISTRY (name -> function), TOOLS (schemas).

Try one:  python -c "import tools; print(tools.read_file('tools.py', limit=5))"
Every call is checked against its schema before it runs (check_call), every path must stay inside WORKSPACE,
secret files are refused, and needs_approval() tells harness.py when to ask the user first: before any
command that is not plainly read-only, and before any write, showing the diff.
"""
import difflib
import fnmatch
import inspect
import json
import os
import re
import shlex
import signal
import subprocess
import threading
from pathlib import Path

MAX_CHARS = 4000  # longest result sent back to the model, note included; one file must not flood the conversation
NOTE_ROOM = 200  # characters kept free in a cut result for the note that says what was cut
PAGE_LINES = 200  # lines read_file returns by default; the model pages with offset
TIMEOUT = 10  # seconds a command may run before it and everything it started are killed
MAX_OUTPUT = 1_000_000  # bytes a command may print before it is stopped: `yes` must not fill memory
WORKSPACE = Path.cwd()  # the only folder the tools may touch; harness.py --workspace changes it
SECRET_FILES = (".env", ".env.*", "*.pem", "*.key", "id_rsa*")  # credentials: never shown to the model
NOT_SECRET = (".env.example",)  # a template with empty values
SAFE_PROGRAMS = ("ls", "cat", "head", "tail", "wc", "grep", "pwd", "echo")  # read-only, run without asking
SAFE_GIT = ("status", "log", "diff", "show")  # read-only git subcommands
SHELL_SYNTAX = set(";&|<>`$(){}[]*?~!\\\n")  # anything the shell would interpret needs a person to look
RECURSIVE = re.compile(r"-[^-]*[rR]|--(recursive|dereference-recursive|directories)")  # grep -r, -nR, ...
RUNNING = set()  # commands running now, so that Ctrl-C can end them too
SECRET_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
# Windows has no process groups as such: a new process group there lets taskkill /T end the whole tree.
NEW_GROUP = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt" else {"start_new_session": True}


class Refused(Exception):
    """A call the guardrails will not run, whoever approves it; the message tells the model why."""


class BadCall(Exception):
    """A call that breaks its tool's contract; the message names the problem and shows the right shape."""


JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}


def json_type(value):
    """Example: json_type(True) -> "a boolean";  json_type("10") -> "a string";  json_type([1]) -> "an array" """
    for name, kind in [("a boolean", bool), ("an integer", int), ("a number", float), ("a string", str),
                       ("an object", dict), ("an array", list)]:
        if isinstance(value, kind):
            return name
    return "null"


def check_call(name, arguments):
    """Parse a call's arguments and check them against the tool's schema and its function's signature.
    Returns them as a dict, or raises BadCall with a message the model can fix its next call from.

    Example: check_call("read_file", '{}') -> BadCall('read_file: missing required argument "path" (string).
             Call it as {"path": "README.md"}')
    """
    if name not in SCHEMAS:
        raise BadCall(f"there is no tool called {name!r}. The tools are: {', '.join(SCHEMAS)}.")
    schema, properties = SCHEMAS[name], SCHEMAS[name]["properties"]
    shape = "Call it as " + json.dumps({arg: p["examples"][0] for arg, p in properties.items() if "examples" in p})
    try:
        args = json.loads(arguments or "{}")  # some servers send "" for no arguments
    except json.JSONDecodeError as error:
        raise BadCall(f"{name}: the arguments are not valid JSON ({error}). {shape}") from None
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
                          f"({json.dumps(value)}). {shape}")
    inspect.signature(REGISTRY[name]).bind(**args)  # the function agrees too (a test keeps them in step)
    return args


def is_secret(path):
    """Example: is_secret("config/.env.local") -> True;  is_secret("notes.txt") -> False"""
    name = Path(path).name
    return name not in NOT_SECRET and any(fnmatch.fnmatch(name, pattern) for pattern in SECRET_FILES)


def inside_workspace(path):
    """The real location of a path the model gave; refused if it leaves WORKSPACE or is a secret file.

    Example (WORKSPACE is /work): "notes/a.txt" -> /work/notes/a.txt;  "../etc/passwd" -> Refused
    """
    full = (WORKSPACE / path).resolve()  # resolve() follows symlinks, so a link cannot lead out
    if not full.is_relative_to(WORKSPACE.resolve()):
        raise Refused(f"{path} is outside the workspace; use paths inside {WORKSPACE}")
    if is_secret(path) or is_secret(full):
        raise Refused(f"{path} is a secret file, and the model may not read credentials")
    return full


def read_file(path: str, offset: int = 1, limit: int = PAGE_LINES) -> str:
    """Return lines offset, offset+1, ... of a workspace file (the first line is 1): at most limit lines and
    MAX_CHARS characters, and when more is left, a last line saying how to read on."""
    if offset < 1 or limit < 1:
        raise ValueError("offset and limit start at 1")
    lines = inside_workspace(path).read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    text, end = "", offset - 1
    for line in lines[offset - 1:offset - 1 + limit]:
        if len(text) + len(line) > MAX_CHARS - NOTE_ROOM:
            if not text:  # one line longer than that: show its start rather than nothing
                text, end = line[:MAX_CHARS - NOTE_ROOM] + "\n", end + 1
            break
        text, end = text + line, end + 1
    if end < len(lines):
        text += f"\n[lines {offset}-{end} of {len(lines)}; call read_file with offset={end + 1} to read on]"
    return text


def write_file(path: str, content: str) -> str:
    """Replace a workspace file's text with content (creating it if needed). Runs only once the user
    approved the diff that needs_approval() showed."""
    target = inside_workspace(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content.encode("utf-8"))  # bytes: no newline translation, exactly the diff shown
    return f"wrote {len(content)} characters to {path}"


def diff(path, content):
    """The change write_file(path, content) would make, as a unified diff.

    Example: diff("a.txt", "new\\n") where a.txt holds "old\\n" -> "--- a/a.txt\\n+++ b/a.txt\\n@@ -1 +1 @@\\n-old\\n+new\\n"
    """
    target = inside_workspace(path)
    old = target.read_bytes().decode("utf-8", errors="replace") if target.exists() else ""
    lines = difflib.unified_diff(old.splitlines(keepends=True), content.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def list_dir(path: str = ".") -> str:
    """Return the names in a workspace directory, one per line; directories end with '/'."""
    names = [p.name + "/" if p.is_dir() else p.name for p in sorted(inside_workspace(path).iterdir())]
    return "\n".join(names) or "(empty directory)"


def refuse_secrets(command):
    """Refuse a command that names a secret file, e.g. `cat .env`, `grep KEY .env.local`, `cat .e""nv`
    (the shell joins the quotes away), `git show HEAD:.env`, or a link whose real file is a secret."""
    words = re.findall(r"[^\s;&|<>()`'\"=:]+", command)
    try:
        words += shlex.split(command)  # the words after the shell's quoting
    except ValueError:  # unbalanced quotes: the shell would refuse it too
        pass
    for word in words:
        if is_secret(word) or is_secret((WORKSPACE / word).resolve()):
            raise Refused(f"{word} is a secret file, and the model may not read credentials")


def plain_command(command):
    """The argument list of a command that may run without asking, else None. A plain command is a
    read-only program with no shell syntax and no path outside the workspace.

    Example: plain_command("grep -n def tools.py") -> ["grep", "-n", "def", "tools.py"];  plain_command("ls; rm x") -> None
    """
    if any(char in SHELL_SYNTAX for char in command):
        return None
    try:
        argv = shlex.split(command)
    except ValueError:  # unbalanced quotes
        return None
    if not argv or argv[0] not in (*SAFE_PROGRAMS, "git"):
        return None
    if argv[0] == "git" and (len(argv) < 2 or argv[1] not in SAFE_GIT or "--output" in command):
        return None
    if argv[0] == "grep" and any(RECURSIVE.match(arg) for arg in argv[1:]):
        return None  # grep -r reads every file below, whatever its name
    for arg in argv[1:]:
        value = arg.split("=", 1)[-1]  # --file=../x names a path too
        if not (WORKSPACE / value).resolve().is_relative_to(WORKSPACE.resolve()):
            return None
    return argv


def needs_approval(name, args):
    """The question to ask the user before this call runs, or None when it may run as it is.
    Raises Refused for what nobody may approve."""
    if name == "write_file":
        change = diff(args["path"], args["content"]) or "(no change)\n"
        return f"{change}Write {args['path']}?"  # the last line is the question itself
    if name != "run_shell":
        return None
    refuse_secrets(args["command"])
    return None if plain_command(args["command"]) else f"Run `{args['command']}`?"


def run_shell(command: str) -> str:
    """Run a command line in the workspace and return its exit code and output."""
    refuse_secrets(command)
    argv = plain_command(command)
    # A plain command runs without a shell, so nothing in it is interpreted; anything else needed
    # the user's approval (see needs_approval) and goes through the shell (cmd.exe on Windows).
    process = subprocess.Popen(argv or command, shell=argv is None, cwd=WORKSPACE, env=child_env(),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               **NEW_GROUP)
    RUNNING.add(process)
    kept, printed = bytearray(), 0

    def read_output():  # reads while the command runs, keeping only what fits in MAX_CHARS
        nonlocal printed
        for chunk in iter(lambda: process.stdout.read1(65536), b""):
            printed += len(chunk)
            kept.extend(chunk[:MAX_CHARS - NOTE_ROOM - len(kept)])
            if printed > MAX_OUTPUT:
                kill_group(process)
                return

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        process.wait(TIMEOUT)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    kill_group(process)  # also ends whatever it left running in the background, like `sleep 999 &`
    reader.join(1)  # the rest of the output, already in the pipe
    RUNNING.discard(process)
    status = f"exit code {process.wait()}"
    if timed_out:
        status = f"error: timed out after {TIMEOUT} s; the command and everything it started were killed"
    elif printed > MAX_OUTPUT:
        status = f"stopped after printing {MAX_OUTPUT} bytes"
    output = kept.decode("utf-8", errors="replace")
    cut = f"\n[... {printed - len(kept)} more bytes cut]" if printed > len(kept) else ""
    return f"{status}\n{output}{cut}"


def kill_group(process):
    """Kill a command and everything it started: its process group (on Windows, its process tree)."""
    if os.name == "nt":
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True)
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone


def kill_running():
    """End every command still running, and everything they started (for Ctrl-C)."""
    for process in list(RUNNING):
        kill_group(process)


def child_env():
    """The environment commands run with: API keys and other secret-looking variables removed."""
    return {name: value for name, value in os.environ.items() if not SECRET_VARIABLE.search(name)}


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
