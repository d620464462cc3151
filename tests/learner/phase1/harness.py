"""Phase 1 (learner's version): the agent loop.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      (--backend, --model, --base-url override the environment for one run)
The model asks for tools, we run them and send each result back, until it answers or MAX_STEPS replies pass.
Exit codes: 0 answered, 1 backend error, 2 usage, 3 step limit.
"""
import argparse
import json
import sys

from backend import BackendError, chat, choose
from tools import REGISTRY, TOOLS

MAX_STEPS = 10
SCREEN_WIDTH = 200  # characters of a call's arguments shown on screen
SYSTEM = "You are a coding agent in the current folder. Look at the files with the tools before you answer."


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


def call_tool(name, arguments):
    """Run one requested tool; every failure is returned as an `error: ...` text for the model."""
    if name not in REGISTRY:
        return f"error: there is no tool named {name!r}; the tools are {', '.join(REGISTRY)}"
    try:
        args = json.loads(arguments or "{}")
    except ValueError as problem:
        return f"error: the arguments for {name} are not valid JSON ({problem}): {arguments!r}"
    if not isinstance(args, dict):
        return f"error: the arguments for {name} must be a JSON object, not {arguments!r}"
    try:
        return str(REGISTRY[name](**args))
    except Exception as problem:  # the model asked for it, so the model gets to read what went wrong
        return f"error: {name} failed: {type(problem).__name__}: {problem}"


class Conversation:
    """The messages sent to the model, kept in the shape the Chat Completions API accepts."""

    def __init__(self, task):
        self.messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]

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


def run(task, backend=None):
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
            print(f"[{step}] {call.function.name} {one_line(call.function.arguments)}", flush=True)
            convo.add_result(call, call_tool(call.function.name, call.function.arguments))
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description="Give the model a task and let it use the tools.")
    parser.add_argument("task", nargs="+", help="what to do, in words")
    parser.add_argument("--backend", help="groq, openai, ollama or demo (default: $BACKEND, else by key)")
    parser.add_argument("--model", help="model name (default: $MODEL, else the backend's)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    options = parser.parse_args(argv)
    try:
        answer = run(" ".join(options.task), choose(options.backend, options.model, options.base_url))
    except BackendError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {MAX_STEPS}) before the model answered")
        return 3
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
