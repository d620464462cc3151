"""Phase 2 (learner's version): the tools the model may call, and how each call is decided.

Each tool is a plain function registered with @tool, which files it in REGISTRY (name -> its function, how a call
is decided, what kind of call a person approves, its schema) and its schema in TOOLS (what the model is told).
Every tool takes the run's policy first. Try one:
    python -c "import guards, tools; print(tools.list_dir(guards.policy()))"
"""
import subprocess
from functools import partial

import guards
from guards import Refused

REGISTRY = {}
TOOLS = []
MAX_CHARS = 4000  # characters of one result the model gets, the note about the rest included
MAX_COMMAND = 10_000  # characters of a command a person can still be asked to read
TIMEOUT = 30  # seconds a command may run before it is stopped


def truncate(text):
    """text, or its start and a note of how much was left out, within MAX_CHARS characters."""
    if len(text) <= MAX_CHARS:
        return text
    keep = MAX_CHARS - 60
    return f"{text[:keep]}\n[{len(text) - keep} more characters left out]"


def tool(description, decide=None, kind=None, **params):
    """Register a function as a tool; params maps each argument to (json type, description, required?).
    decide(policy, **args) returns (action, question); None: the tool only reads and runs as asked."""
    def register(function):
        schema = {"name": function.__name__, "description": description, "parameters": {
            "type": "object",
            "properties": {arg: {"type": type_, "description": text} for arg, (type_, text, _) in params.items()},
            "required": [arg for arg, (_, _, needed) in params.items() if needed],
        }}
        REGISTRY[function.__name__] = {"function": function, "decide": decide, "kind": kind, "schema": schema}
        TOOLS.append({"type": "function", "function": schema})
        return function
    return register


def plan(policy, tool, args):
    """(action, question): the call as decided, ready to run, and what a person must approve first (or None)."""
    if tool["decide"] is None:
        return partial(tool["function"], policy, **args), None
    return tool["decide"](policy, **args)


@tool("List the entries of a folder in the workspace, one per line; folders end with '/'.",
      path=("string", "The folder to list, relative to the workspace. Default '.'.", False))
def list_dir(policy, path="."):
    entries = sorted(guards.inside_workspace(policy, path).iterdir(), key=lambda entry: entry.name)
    return "\n".join(entry.name + ("/" if entry.is_dir() else "") for entry in entries)


@tool("Read a UTF-8 text file in the workspace and return its content (at most 4000 characters).",
      path=("string", "The file to read, relative to the workspace.", True))
def read_file(policy, path):
    return truncate(guards.inside_workspace(policy, path).read_text(encoding="utf-8", errors="replace"))


def decide_command(policy, command):
    """A plainly read-only command runs as its words, with no shell; anything else runs in the shell after a yes."""
    if len(command) > MAX_COMMAND:
        raise Refused(f"the command is {len(command)} characters long, more than anyone can check "
                      f"(MAX_COMMAND = {MAX_COMMAND}); split it into smaller ones")
    argv = guards.plain(policy, command)
    if argv:  # it runs as this list of words, with no shell to read anything into them
        return partial(run_shell, policy, argv, shell=False), None
    return partial(run_shell, policy, command), guards.question(f"Run: {command}")


@tool("Run a shell command in the workspace; returns its exit code, then stdout and stderr. Commands that only "
      "read files in the workspace run at once; anything else waits for the user's yes.",
      decide=decide_command, kind="command",
      command=("string", "The command line, as you would type it in a terminal.", True))
def run_shell(policy, command, shell=True):
    try:
        done = subprocess.run(command, shell=shell, cwd=policy.workspace, stdin=subprocess.DEVNULL,
                              capture_output=True, encoding="utf-8", errors="replace", timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"error: the command was stopped after TIMEOUT = {TIMEOUT} seconds"
    return truncate(f"exit code {done.returncode}\n{done.stdout}{done.stderr}")
