"""Phase 1 (learner's version): the agent loop.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      (the same as python cli.py "...": the command line, and all that is printed, live in cli.py)
The model asks for tools, we run them and send each result back, until it answers or MAX_STEPS replies pass.
run() prints nothing: it tells on_call(step, name, arguments) of each call, and returns the answer (None at
the step limit), so a program can call it with no terminal at all.
"""
import json

from backend import assistant_message, chat, choose
from tools import REGISTRY, TOOLS

MAX_STEPS = 10
SYSTEM = "You are a coding agent in the current folder. Look at the files with the tools before you answer."


def ignore(*args):
    """The hook that does nothing: what run() tells when nobody listens."""


def run_tool(name, arguments):
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
        self.messages.append(assistant_message(message))

    def add_result(self, call, text):
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})


def run(task, backend=None, on_call=ignore):
    """Loop until the model answers in words; return that answer, or None when MAX_STEPS is reached.
    on_call(step, name, arguments) hears of each call before it runs."""
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
            on_call(step, call.function.name, call.function.arguments)
            convo.add_result(call, run_tool(call.function.name, call.function.arguments))
    return None


if __name__ == "__main__":
    import cli
    cli.main()
