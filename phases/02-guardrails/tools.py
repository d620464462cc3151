"""The tools the model may call: plain functions, REGISTRY (name -> function) and TOOLS (their JSON schemas).

Try one:  python -c "import tools; print(tools.list_dir('.'))"
Before a call runs, plan() decides, once, what will run and whether a person must approve it first: guards.py
says what is allowed, shell.py runs commands.
"""
import heapq
import os
from functools import partial

import guards
import shell
from guards import Refused, exact

MAX_CHARS = 4000  # longest result sent back to the model, note included; one file must not flood the conversation
NOTE_ROOM = 200  # characters kept free in a cut result for the note that says what was cut


def plan(name, args, deadline=None):
    """Decide, once, what a call will do: returns (action, question). action() runs exactly what was checked;
    question is what a person must approve first, or None. Raises Refused for what nobody may approve.
    deadline (a time.monotonic()) stops a command that is still running then."""
    if name == "run_shell":
        argv = guards.plain_command(args["command"], deadline)  # refuses a command that names a secret file
        if argv:  # judged plain: it runs as this argument list, and is checked again just before it runs
            return partial(run_plain, args["command"], argv, deadline), None
        return partial(run_argv, shell.shell_argv(args["command"], guards.search_path()), deadline), \
            f"Run in a shell: {exact(args['command'])}"
    return partial(REGISTRY[name], **args), None


def read_file(path):
    """Return the text of a workspace file, at most MAX_CHARS of it."""
    with guards.open_file(path) as file:  # a regular file inside the workspace, and no secret
        data = file.read(MAX_CHARS * 4)  # never more than that: a 1 GB file is not loaded whole
        more = len(file.read(1)) > 0
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_CHARS - NOTE_ROOM or more:
        return text[:MAX_CHARS - NOTE_ROOM] + "\n[... the file goes on; it was cut here]"
    return text


def list_dir(path="."):
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


def run_shell(command):
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


REGISTRY = {"read_file": read_file, "list_dir": list_dir, "run_shell": run_shell}

TOOLS = [
    {"type": "function", "function": {
        "name": "read_file",
        "description": "Read a text file in the workspace and return its contents. Long files are cut after 4000 "
                       "characters. Use a path relative to the workspace, such as README.md or src/app.py. "
                       "Secret files such as .env are refused.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file to read, e.g. README.md"}},
            "required": ["path"],
        },
    }},
    {"type": "function", "function": {
        "name": "list_dir",
        "description": "List the files and folders in a workspace directory (folders end with /). "
                       "Call this first to see what exists before you read anything.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The directory; '.' is the workspace"}},
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
            "properties": {"command": {"type": "string", "description": "The command line to run"}},
            "required": ["command"],
        },
    }},
]
