"""Phase 2 (learner's version): the agent loop, with every call decided before it runs.

Run:  python harness.py --workspace play "Read ../README.md"
      (--backend, --model, --base-url override the environment for one run; --yes approves every question)
The model asks for tools; tools.plan() decides each call, a person approves what is not plainly safe, and the
result goes back, until the model answers or MAX_STEPS replies pass.
Exit codes: 0 answered, 1 backend error, 2 usage, 3 step limit.
"""
import argparse
import json
import sys
from pathlib import Path

import guards
from backend import BackendError, chat, choose
from guards import ToolError, cut, shown
from tools import TOOLS, plan

MAX_STEPS = 10
SCREEN_WIDTH = 200  # characters of a call's arguments shown on screen
DECLINED = "error: the user declined this call; do not try it again, find another way or answer"


def as_json_text(arguments):
    """The call's arguments as JSON text the server will accept back ("{}" if they are not JSON)."""
    try:
        json.loads(arguments)
        return arguments
    except (TypeError, ValueError):
        return "{}"


def ask_user(question):
    """Ask on standard error; only `y` or `yes` is a yes, and the end of input is a no."""
    print(f"{question}? [y/N] ", end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        print("(end of input: no)", file=sys.stderr)
        return False
    return line.strip().lower() in ("y", "yes")


def run_tool(name, arguments, approve):
    """Run one requested tool as plan() decided, after approve(question) when there is one; every failure is
    returned as an `error: ...` text for the model."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError as problem:
        return f"error: the arguments for {name} are not valid JSON ({problem}): {arguments!r}"
    if not isinstance(args, dict):
        return f"error: the arguments for {name} must be a JSON object, not {arguments!r}"
    try:
        action, question = plan(name, args)
        if question is not None and approve(question) is not True:  # "no" is a true string: only True is a yes
            return DECLINED
        return str(action())
    except ToolError as problem:
        return f"error: {problem}"
    except Exception as problem:  # the model asked for it, so the model gets to read what went wrong
        return f"error: {name} failed: {type(problem).__name__}: {problem}"


class Conversation:
    """The messages sent to the model, kept in the shape the Chat Completions API accepts."""

    def __init__(self, task):
        self.messages = [{"role": "user", "content": task}]

    def add_reply(self, message):
        """Store the model's reply rebuilt by hand: SDK extras such as `reasoning` are refused by Groq."""
        plain = {"role": "assistant", "content": message.content or ""}
        if message.tool_calls:
            plain["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.function.name, "arguments": as_json_text(c.function.arguments)}}
                for c in message.tool_calls]
        self.messages.append(plain)

    def add_result(self, call, text):
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})


def run(task, backend=None, approve=ask_user):
    """Loop until the model answers in words; return that answer, or None when MAX_STEPS is reached."""
    backend = backend or choose()
    convo = Conversation(task)
    step = 0
    while step < MAX_STEPS:
        step += 1
        message = chat(convo.messages, tools=TOOLS, backend=backend).choices[0].message
        convo.add_reply(message)
        calls = message.tool_calls or []
        if not calls:
            return message.content or ""
        for call in calls:  # one tool message per call, answering it by id
            name, arguments = call.function.name, call.function.arguments
            print(f"[{step}] {shown(name, one_line=True)} {cut(arguments, SCREEN_WIDTH)}", flush=True)
            convo.add_result(call, run_tool(name, arguments, approve))
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description="Give the model a task and let it use the tools.")
    parser.add_argument("task", nargs="+", help="what to do, in words")
    parser.add_argument("--backend", help="groq, openai, ollama or demo (default: $BACKEND, else by key)")
    parser.add_argument("--model", help="model name (default: $MODEL, else the backend's)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the only folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="approve every command without asking")
    options = parser.parse_args(argv)
    if not Path(options.workspace).is_dir():
        parser.error(f"--workspace {options.workspace}: no such folder")  # exit 2
    guards.WORKSPACE = Path(options.workspace).resolve()
    approve = (lambda question: True) if options.yes else ask_user
    try:
        answer = run(" ".join(options.task), choose(options.backend, options.model, options.base_url), approve)
    except BackendError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {MAX_STEPS}) before the model answered")
        return 3
    print(shown(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
