"""Phase 3 (learner's version): the agent loop, with one policy per run and a person asked before anything else.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      (the same as python cli.py "...": the command line, and all that is printed or asked, live in cli.py)
The model asks for tools, we decide each call, run it and send the result back, until it answers or MAX_STEPS
replies pass. A call that is not plainly read-only needs approve(question) to say True.
"""
import json

import guards
from backend import assistant_message, chat, choose
from guards import ToolError
from tools import REGISTRY, TOOLS, plan

MAX_STEPS = 10
SYSTEM = ("You are a coding agent working in your workspace folder. Use the tools to look at files before you "
          "answer; paths are relative to the workspace. A call may be refused or declined: read why, and do not "
          "try it again. Answer briefly when done.")
DECLINED = "error: the user declined this call; do not try it again, find another way or answer"


def ignore(*args):
    """The hook that does nothing: what run() tells when nobody listens (and None approves nothing)."""


def said_yes(approve, question):
    """Only a True from approve is a yes: an approver that fails, or answers anything else, says no."""
    try:
        return approve(question) is True
    except Exception:
        return False


def run_tool(name, arguments, policy, approve):
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
        return guards.mask(policy, str(action()))
    except ToolError as problem:
        return f"error: {problem}"
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


def run(task, backend=None, approve=ignore, policy=None, on_call=ignore):
    """Loop until the model answers in words; return that answer, or None when MAX_STEPS is reached.
    policy (default: the current folder) says what the tools may touch; approve(question) decides the calls
    that need a person (nobody by default, so none runs); on_call(step, name, arguments) hears of each call."""
    backend = backend or choose()
    policy = policy or guards.policy()
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
            convo.add_result(call, run_tool(call.function.name, call.function.arguments, policy, approve))
    return None


if __name__ == "__main__":
    import cli
    cli.main()
