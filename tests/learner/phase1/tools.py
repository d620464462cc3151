"""Phase 1 (learner's version): the tools the model may call.

Each tool is a plain function registered with @tool, which files it in REGISTRY (name -> function) and
its hand-written schema in TOOLS (what the model is told). Try one: python -c "import tools; print(tools.list_dir())"
"""
import subprocess
from pathlib import Path

REGISTRY = {}
TOOLS = []
MAX_CHARS = 4000  # characters of one result the model gets, the note about the rest included


def truncate(text):
    """text, or its start and a note of how much was left out, within MAX_CHARS characters."""
    if len(text) <= MAX_CHARS:
        return text
    keep = MAX_CHARS - 60
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
      path=("string", "The directory to list, relative to the working directory. Default '.'.", False))
def list_dir(path="."):
    entries = sorted(Path(path).iterdir(), key=lambda entry: entry.name)
    return "\n".join(entry.name + ("/" if entry.is_dir() else "") for entry in entries)


@tool("Read a UTF-8 text file and return its content (at most 4000 characters).",
      path=("string", "The file to read, relative to the working directory.", True))
def read_file(path):
    return truncate(Path(path).read_text(encoding="utf-8", errors="replace"))


@tool("Run a shell command in the working directory; returns its exit code, then stdout and stderr.",
      command=("string", "The command line, as you would type it in a terminal.", True))
def run_shell(command):
    done = subprocess.run(command, shell=True, capture_output=True, text=True)  # no limits yet: phase 2
    return truncate(f"exit code {done.returncode}\n{done.stdout}{done.stderr}")
