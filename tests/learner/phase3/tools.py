"""Phase 3 (learner's version): the tools the model may call, and plan(), which decides what a call will do.

Each tool is a plain function registered with @tool, which files it in REGISTRY (name -> function) and
its hand-written schema in TOOLS (what the model is told). Every path goes through guards.inside_workspace();
a command runs as its words when guards.plain() allows it, else through a shell after a person says yes; either
way in shell.run()'s sandbox. Every result is masked (guards.mask) before it is cut.
Try one: python -c "import tools; print(tools.list_dir())"
"""
from functools import partial

import guards
import shell
from guards import Refused, ToolError

REGISTRY = {}
TOOLS = []
RESULT_LIMIT = 4000  # characters of one result the model gets, the note about the rest included
MAX_COMMAND = 10_000  # characters: a longer command is more than a person can check before saying yes


def capped(text):
    """text, or its start and a note of how much was left out, within RESULT_LIMIT characters."""
    text = guards.mask(text)  # before the cut, which could split a secret
    if len(text) <= RESULT_LIMIT:
        return text
    keep = RESULT_LIMIT - 60
    return f"{text[:keep]}\n[{len(text) - keep} more characters left out]"


def tool(description, **params):
    """Register a function as a tool; params maps each argument to (json type, description, required?)."""
    def register(function):
        REGISTRY[function.__name__] = function
        TOOLS.append({"type": "function", "function": {
            "name": function.__name__,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": kind, "description": text} for arg, (kind, text, _) in params.items()},
                "required": [arg for arg, (_, _, needed) in params.items() if needed],
            }}})
        return function
    return register


@tool("List the entries of a directory, one per line; directories end with '/'.",
      path=("string", "The directory to list, relative to the workspace. Default '.'.", False))
def list_dir(path="."):
    entries = sorted(guards.inside_workspace(path).iterdir(), key=lambda entry: entry.name)
    return "\n".join(entry.name + ("/" if entry.is_dir() else "") for entry in entries)


@tool("Read a UTF-8 text file and return its content (at most 4000 characters).",
      path=("string", "The file to read, relative to the workspace.", True))
def read_file(path):
    return capped(guards.inside_workspace(path).read_text(encoding="utf-8", errors="replace"))


@tool("Run a shell command in the workspace; returns its exit code, then stdout and stderr. "
      "Commands that only read (ls, cat, head, tail, wc, grep) run at once; anything else asks the user first.",
      command=("string", "The command line, as you would type it in a terminal.", True))
def run_shell(command):
    action, question = plan("run_shell", {"command": command})
    if question:  # only the harness can ask a person
        raise ToolError(f"this command needs a person's yes ({question}); it runs only from the harness")
    return action()


def run_command(argv, write=False):
    """Run a list of words in WORKSPACE, in the sandbox (writable only when write), on a PATH without the
    workspace's folders."""
    workspace = guards.WORKSPACE
    return capped(shell.run(argv, workspace, write=write, path=shell.search_path(workspace)))


def plan(name, args):
    """Decide once what a call will do: (action, question). The action runs exactly what was decided; the
    question is what a person must approve first, or None. Raises ToolError (or Refused) for a call that will
    not run at all."""
    if name not in REGISTRY:
        raise ToolError(f"there is no tool named {name!r}; the tools are {', '.join(REGISTRY)}")
    if name != "run_shell":
        for path in args.values():  # refused here, before anything runs
            if isinstance(path, str):
                guards.inside_workspace(path)
        return partial(REGISTRY[name], **args), None
    command = args.get("command")
    if not isinstance(command, str) or set(args) != {"command"}:
        raise ToolError('run_shell takes one argument, "command", a string')
    if len(command) > MAX_COMMAND:
        raise Refused(f"the command has {len(command)} characters, more than {MAX_COMMAND}; "
                      "split it into shorter ones")
    if guards.names_a_secret(command):
        raise Refused(f"{command[:100]} names a secret file; no one may approve a command that reads credentials")
    argv = guards.plain(command)
    if argv:  # it runs as this list of words, with no shell to read anything into them, and changes nothing
        return partial(run_command, argv, write=False), None
    write = shell.SANDBOX == "workspace-write"
    return partial(run_command, shell.shell_argv(command), write=write), f"Run: {guards.shown(command, one_line=True)}"
