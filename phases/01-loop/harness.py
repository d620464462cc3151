"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.
run(task) returns the answer and prints nothing; cli.py, the front door, shows what it does.

Run:
    python harness.py "List the files here, then read backend.py and tell me which model it calls."
    python harness.py --backend groq --model openai/gpt-oss-20b "What does README.md say?"
"""

import json

from backend import assistant_message, chat, choose
from tools import REGISTRY, TOOLS

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
SYSTEM = ("You are a careful assistant working in the user's current directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


def ignore(*args):
    """A hook nobody gave: nothing to show."""


def run(task, backend=None, on_call=ignore):
    """Run one task to the end; return the model's answer, or None when MAX_STEPS ran out first.
    on_call(step, name, arguments) hears of each call before it runs: the command line prints it."""
    backend = backend or choose()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for step in range(1, MAX_STEPS + 1):
        message = chat(messages, tools=TOOLS, backend=backend).choices[0].message
        messages.append(assistant_message(message))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:  # one tool message per call, carrying the call's id
            on_call(step, call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call)})
    return None


def run_tool(call):
    """Run one tool call; every failure becomes an 'error: ...' result the model can read and act
    on."""
    name = call.function.name
    if name not in REGISTRY:
        return f"error: there is no tool called {name!r}. The tools are: {', '.join(REGISTRY)}."
    try:
        args = json.loads(call.function.arguments or "{}")  # some servers send "" for no arguments
    except json.JSONDecodeError as error:
        return (f"error: the arguments are not valid JSON ({error}). "
                "Send a JSON object, e.g. {\"path\": \"README.md\"}.")
    if not isinstance(args, dict):
        return "error: the arguments must be a JSON object, e.g. {\"path\": \"README.md\"}."
    try:
        return REGISTRY[name]["function"](**args)
    except Exception as error:
        # the tool boundary: the model caused it, so the model hears about it
        return f"error: {name} failed: {type(error).__name__}: {error}"


if __name__ == "__main__":  # the command line is the front door's: cli.py
    import cli
    cli.main()
