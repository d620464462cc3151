"""Phase 2 (learner's version): the agent loop, with one policy per run and a person asked before anything else.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      (--backend, --model, --base-url override the environment for one run; --workspace DIR, --yes)
The model asks for tools, we decide each call, run it and send the result back, until it answers or MAX_STEPS
replies pass. A call that is not plainly read-only asks on standard error: y or yes runs it.
Exit codes: 0 answered, 1 backend error, 2 usage, 3 step limit.
"""
import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import guards
from backend import BackendError, chat, choose
from guards import ToolError, shown
from tools import REGISTRY, TOOLS, plan

MAX_STEPS = 10
SCREEN_WIDTH = 200  # characters of a call's arguments shown on screen
SYSTEM = ("You are a coding agent working in the folder {workspace}, your workspace. Use the tools to look at "
          "files before you answer; paths are relative to the workspace. A call may be refused or declined: "
          "read why, and do not try it again. Answer briefly when done.")
DECLINED = "error: the user declined this call; do not try it again, find another way or answer"


def one_line(arguments):
    """The arguments as shown on screen: the first SCREEN_WIDTH characters, and how many more there were."""
    if len(arguments) <= SCREEN_WIDTH:
        return arguments
    return f"{arguments[:SCREEN_WIDTH]}... (+{len(arguments) - SCREEN_WIDTH} characters)"


def as_json_text(arguments):
    """The call's arguments as JSON text the server will accept back ("{}" if they are not JSON)."""
    try:
        json.loads(arguments)
        return arguments
    except (TypeError, ValueError):
        return "{}"


def ask_user(question):
    """Ask a person on standard error, the question fitted to the screen (? shows it whole); only y or yes is a yes."""
    size = os.get_terminal_size(2) if os.isatty(2) else shutil.get_terminal_size()  # the terminal it is asked on
    text = guards.fit(question, size.lines - 1, size.columns)
    while True:
        print(f"{text}? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline()
        if not answer:
            print("(end of input: no)", file=sys.stderr)
            return False
        if answer.strip() != "?":
            return answer.strip().lower() in ("y", "yes")
        text = question


def said_yes(approve, question):
    """Only a True from approve is a yes: an approver that fails, or answers anything else, says no."""
    try:
        return approve(question) is True
    except Exception:
        return False


def call_tool(name, arguments, policy, approve):
    """Decide one requested call, ask when it must, run it; every failure is an `error: ...` text for the model."""
    if name not in REGISTRY:
        return f"error: there is no tool named {name!r}; the tools are {', '.join(REGISTRY)}"
    try:
        args = json.loads(arguments or "{}")
    except ValueError as problem:
        return f"error: the arguments for {name} are not valid JSON ({problem}): {arguments!r}"
    if not isinstance(args, dict):
        return f"error: the arguments for {name} must be a JSON object, not {arguments!r}"
    tool = REGISTRY[name]
    try:
        action, question = plan(policy, tool, args)
        if question and tool["kind"] not in policy.unasked and not said_yes(approve, question):
            return DECLINED
        return str(action())
    except ToolError as problem:
        return f"error: {problem}"
    except Exception as problem:  # the model asked for it, so the model gets to read what went wrong
        return f"error: {name} failed: {type(problem).__name__}: {problem}"


class Conversation:
    """The messages sent to the model, kept in the shape the Chat Completions API accepts."""

    def __init__(self, task, workspace):
        self.messages = [{"role": "system", "content": SYSTEM.format(workspace=workspace)},
                         {"role": "user", "content": task}]

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


def run(task, backend=None, approve=ask_user, policy=None):
    """Loop until the model answers in words; return that answer, or None when MAX_STEPS is reached.
    policy (default: the current folder, asking) says what the tools may touch; approve(question) is asked."""
    backend = backend or choose()
    policy = policy or guards.policy()
    convo = Conversation(task, policy.workspace)
    step = 0
    while step < MAX_STEPS:
        step += 1
        message = chat(convo.messages, tools=TOOLS, backend=backend).choices[0].message
        convo.add_reply(message)
        calls = message.tool_calls or []
        if not calls:
            return message.content or ""
        for call in calls:  # one tool message per call, answering it by id
            print(shown(f"[{step}] {call.function.name} {one_line(call.function.arguments)}"), flush=True)
            convo.add_result(call, call_tool(call.function.name, call.function.arguments, policy, approve))
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description="Give the model a task and let it use the tools.")
    parser.add_argument("task", nargs="+", help="what to do, in words")
    parser.add_argument("--backend", help="groq, openai, ollama or demo (default: $BACKEND, else by key)")
    parser.add_argument("--model", help="model name (default: $MODEL, else the backend's)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the only folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="run every command without asking")
    options = parser.parse_args(argv)
    if not Path(options.workspace).is_dir():
        parser.error(f"--workspace {options.workspace}: no such folder")
    try:
        answer = run(" ".join(options.task), choose(options.backend, options.model, options.base_url),
                     policy=guards.policy(options.workspace, options.yes))
    except BackendError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {MAX_STEPS}) before the model answered")
        return 3
    print("\n".join(shown(line) for line in answer.split("\n")))  # its own line breaks, nothing else raw
    return 0


if __name__ == "__main__":
    sys.exit(main())
