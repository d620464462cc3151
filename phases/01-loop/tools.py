"""The tools the model may call: REGISTRY holds each one as one entry (the function that runs it,
and what the model is told), and TOOLS is what the model is sent.

Try one:  python -c "import tools; print(tools.list_dir('.'))"
The schemas are written by hand, for the model: it reads the descriptions to decide what to call.
"""
import subprocess
from pathlib import Path

# longest result sent back to the model; one huge file must not flood the conversation
MAX_CHARS = 4000


def truncate(text, limit=MAX_CHARS):
    """Cut text to limit characters, the note saying how much was cut included.
    Example: truncate("a" * 5000, 100) -> 50 times "a", then "\\n[... 4950 more characters cut]" """
    if len(text) <= limit:
        return text
    kept = limit - 50  # room for the note
    return text[:kept] + f"\n[... {len(text) - kept} more characters cut]"


def read_file(path):
    """Return the text of a file."""
    return truncate(Path(path).read_text(encoding="utf-8", errors="replace"))


def list_dir(path="."):
    """Return the names in a directory, one per line; directories end with '/'."""
    names = [p.name + "/" if p.is_dir() else p.name for p in sorted(Path(path).iterdir())]
    return "\n".join(names) or "(empty directory)"


def run_shell(command):
    """Run a command line in the shell and return its exit code and everything it printed."""
    # Anything the model asks, with your permissions, for as long as it likes: the lesson shows why
    # that is a bad idea, and phase 2 adds the guardrails.
    result = subprocess.run(command, shell=True, capture_output=True, text=True, errors="replace")
    return truncate(f"exit code {result.returncode}\n{result.stdout}{result.stderr}")


# every tool, by the name the model calls it: the function that runs a call, and what the model
# reads
REGISTRY = {
    "read_file": {
        "function": read_file,
        "description": "Read a text file and return its contents. Long files are cut after 4000 "
                       "characters. Use a path relative to the current directory, such as "
                       "README.md or src/app.py.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string",
                                    "description": "The file to read, e.g. README.md"}},
            "required": ["path"],
        },
    },
    "list_dir": {
        "function": list_dir,
        "description": "List the files and folders in a directory (folders end with /). "
                       "Call this first to see what exists before you read anything.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string",
                                    "description": "The directory; '.' is the current one"}},
            "required": [],
        },
    },
    "run_shell": {
        "function": run_shell,
        "description": "Run a shell command in the current directory and return its exit code and "
                       "output. Use it for what the other tools cannot do, e.g. `git log -3` or "
                       "`python --version`.",
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
