"""The tools the model may call: REGISTRY holds each one as one entry (the function that runs it,
how a call of it is decided, and what the model is told), and TOOLS is what the model is sent.

Try one:  python -c "import guards, tools; print(tools.list_dir(guards.policy(), '.'))" plan()
decides, once, what a call will do and whether a person must approve it first; guards.py has the
rules, shell.py runs commands.
"""
from functools import partial

import guards
import shell

# longest result sent back to the model; one huge file must not flood the conversation
MAX_CHARS = 4000
MAX_COMMAND = 10_000  # characters: a longer command is refused (a script belongs in a file)


def truncate(text, limit=MAX_CHARS):
    """Cut text to limit characters, the note saying how much was cut included.
    Example: truncate("a" * 5000, 100) -> 50 times "a", then "\\n[... 4950 more characters cut]" """
    if len(text) <= limit:
        return text
    kept = limit - 50  # room for the note
    return text[:kept] + f"\n[... {len(text) - kept} more characters cut]"


def plan(policy, tool, args):
    """Decide what a checked call of a tool will do: returns (action, question). action() runs
    exactly what was decided; question is what a person must approve first (unless the policy
    approved tool["kind"] in advance), or None. Raises guards.Refused for what nobody may approve. A
    tool that only reads runs as asked; the others say how they are decided (tool["decide"])."""
    if tool["decide"] is None:
        return partial(tool["function"], policy, **args), None
    return tool["decide"](policy, args)


def decide_command(policy, args):
    """A plain command runs as its words, with no shell and nothing it may change; any other asks,
    then runs in the shell, changing what the policy lets an approved command change."""
    command = args["command"]
    if len(command) > MAX_COMMAND:
        raise guards.Refused(f"the command is {len(command)} characters long; the "
                             f"most is {MAX_COMMAND}")
    guards.names_a_secret(policy, command)
    argv = guards.plain(policy, command)
    if argv:
        # it runs as this list of words, with no shell to read anything into them, and changes
        # nothing
        return partial(shell.run, argv, policy), None
    action = partial(shell.run, shell.shell_argv(command), policy, write=True)
    return action, guards.question(f"Run: {command}")


def read_file(policy, path):
    """Return the text of a workspace file."""
    with open(guards.inside_workspace(policy, path), encoding="utf-8", errors="replace") as file:
        return truncate(file.read(MAX_CHARS + 1000))  # a 20 GB file is never read whole


def list_dir(policy, path="."):
    """Return the names in a workspace directory, one per line; directories end with '/'."""
    entries = sorted(guards.inside_workspace(policy, path).iterdir())
    return truncate("\n".join(p.name + "/" if p.is_dir() else p.name for p in entries)
                    or "(empty directory)")


def run_shell(policy, command):
    """Run a command line in the workspace and return its exit code and output. Called directly (not
    through the harness), it runs only what would run without asking."""
    action, question = decide_command(policy, {"command": command})
    if question:
        raise guards.Refused("this command needs a person's approval; the harness asks for it")
    return action()


REGISTRY = {
    "read_file": {
        "function": read_file, "decide": None, "kind": None,
        "description": "Read a text file in the workspace and return its contents. Long files are "
                       "cut after 4000 characters. Use a path relative to the workspace, such as "
                       "README.md or src/app.py. Secret files such as .env are refused.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string",
                                    "description": "The file to read, e.g. README.md"}},
            "required": ["path"],
        },
    },
    "list_dir": {
        "function": list_dir, "decide": None, "kind": None,
        "description": "List the files and folders in a workspace directory (folders end with /). "
                       "Call this first to see what exists before you read anything.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string",
                                    "description": "The directory; '.' is the workspace"}},
            "required": [],
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
            "properties": {"command": {"type": "string", "description": "The command line to run"}},
            "required": ["command"],
        },
    },
}
TOOLS = [{"type": "function", "function": {"name": name, "description": tool["description"],
                                            "parameters": tool["parameters"]}}
         for name, tool in REGISTRY.items()]
