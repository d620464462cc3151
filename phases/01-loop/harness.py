"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      python harness.py --backend groq --model openai/gpt-oss-20b "What does README.md say?"
"""
import argparse
import json
import sys

from backend import BACKENDS, BackendError, chat, choose
from tools import REGISTRY, TOOLS

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
SHOWN_CHARS = 200  # of a call's arguments printed on screen; the model gets them whole
SYSTEM = ("You are a careful assistant working in the user's current directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


def run(task, backend=None):
    """Run one task to the end; return the model's answer, or None when MAX_STEPS ran out first."""
    backend = backend or choose()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for step in range(1, MAX_STEPS + 1):
        message = chat(messages, tools=TOOLS, backend=backend).choices[0].message
        messages.append(assistant_message(message))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:  # one tool message per call, carrying the call's id
            print(f"[{step}] {call.function.name} {cut(call.function.arguments)}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call)})
    return None


def assistant_message(message):
    """Rebuild the model's reply with only the fields every server accepts back (no 'reasoning' and such)."""
    reply = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        reply["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": valid_json(call.function.arguments)}}
            for call in message.tool_calls]
    return reply


def valid_json(text):
    """The arguments to send back: the model's own if they parse, else "{}" (servers reject broken JSON)."""
    try:
        json.loads(text)
        return text
    except (TypeError, ValueError):
        return "{}"


def run_tool(call):
    """Run one tool call; every failure becomes an 'error: ...' result the model can read and act on."""
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
    except Exception as error:  # the tool boundary: the model caused it, so the model hears about it
        return f"error: {name} failed: {type(error).__name__}: {error}"


def cut(text, limit=SHOWN_CHARS):
    """Text for one line of the screen. Example: cut("x" * 300) -> 200 x's, then " [... 100 more characters]" """
    return text if len(text) <= limit else f"{text[:limit]} [... {len(text) - limit} more characters]"


def main():
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS, help="default: $BACKEND, else the first key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url", help="any OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    args = parser.parse_args()
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    try:
        answer = run(args.task, choose(args.backend, args.model, args.base_url))
    except BackendError as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {MAX_STEPS})")
        sys.exit(3)
    print(answer)


if __name__ == "__main__":
    main()
