"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.
run(task) returns the answer and prints nothing; cli.py, the front door, shows what it does and asks
you.

Run:
    python harness.py "List the files here, then read backend.py and tell me which model it calls."
    python harness.py --workspace play "Run `rm notes.txt`"      (asks you first; --yes says yes)
The model proposes; plan() in tools.py decides what runs at once, what asks you first, and what
never runs; every command runs in the system's sandbox (shell.py), and no result carries a secret
the harness knows.
"""

import json

import guards
from backend import assistant_message, chat, choose
from guards import ToolError, mask
from tools import REGISTRY, TOOLS, plan, truncate

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


def ignore(*args):
    """A hook nobody gave: it shows nothing, and approves nothing (None is no yes)."""


def run(task, backend=None, approve=ignore, policy=None, on_call=ignore):
    """Run one task to the end; return the model's answer, or None when MAX_STEPS ran out first.
    approve(question) decides the calls that need a person: only True means yes (by default no one
    is asked, so none runs). policy says what the run may touch and what it asks (default:
    guards.policy(), the current folder). on_call(step, name, arguments) hears of each call before
    it runs: the command line prints it."""
    backend, policy = backend or choose(), policy or guards.policy()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for step in range(1, MAX_STEPS + 1):
        message = chat(messages, tools=TOOLS, backend=backend).choices[0].message
        messages.append(assistant_message(message))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:  # one tool message per call, carrying the call's id
            on_call(step, call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": run_tool(call, approve, policy)})
    return None


def run_tool(call, approve, policy):
    """Run one tool call as plan() decides, asking first where it says so; every failure becomes an
    'error: ...' result the model can read and act on."""
    name = call.function.name
    if name not in REGISTRY:
        return (truncate(f"error: there is no tool called {name!r}. The tools are: "
                         f"{', '.join(REGISTRY)}."))
    try:
        args = json.loads(call.function.arguments or "{}")  # some servers send "" for no arguments
    except json.JSONDecodeError as error:
        return (f"error: the arguments are not valid JSON ({error}). "
                "Send a JSON object, e.g. {\"path\": \"README.md\"}.")
    if not isinstance(args, dict):
        return "error: the arguments must be a JSON object, e.g. {\"path\": \"README.md\"}."
    try:
        action, question = plan(policy, REGISTRY[name], args)
        # not approved in advance (--yes)
        asked = question and REGISTRY[name]["kind"] not in policy.unasked
        if asked and approve(question) is not True:
            # only a yes is a yes: not 1, not "yes", not None
            return ("error: the user declined this call; do not try it again, find "
                    "another way or answer")
        # masked before it is cut: a cut could split a secret
        return truncate(mask(policy, str(action())))
    except ToolError as error:  # refused: the message says why
        return truncate(f"error: {error}")
    except Exception as error:
        # the tool boundary: the model caused it, so the model hears about it
        return f"error: {name} failed: {type(error).__name__}: {error}"


if __name__ == "__main__":  # the command line is the front door's: cli.py
    import cli
    cli.main()
