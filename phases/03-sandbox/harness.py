"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      python harness.py --workspace play "Run `rm notes.txt`"      (asks you first; --yes says yes)
The model proposes; plan() in tools.py decides what runs at once, what asks you first, and what never runs;
on Linux every command runs in a sandbox (shell.py), and no result or question carries a secret the harness knows.
"""
import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import guards
from backend import BACKENDS, BackendError, chat, choose
from guards import ToolError, mask, shown
from tools import REGISTRY, TOOLS, plan, truncate

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
SHOWN_CHARS = 200  # of a call's arguments printed on screen; the model gets them whole
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


def ask_user(question, whole=False):
    """The default approval: ask on the terminal, the question fitted to it unless whole (an answer ? shows it
    whole); only y or yes is a yes. The question is safe to show already: guards.question() built it."""
    size = os.get_terminal_size(2) if os.isatty(2) else shutil.get_terminal_size()  # the terminal it is asked on
    print(f"{question if whole else guards.fit(question, size.lines - 2, size.columns)}? [y/N] ", end="",
          file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():  # show what was piped in, as a terminal would have
        print(shown(answer.strip(), one_line=True) or "(end of input: no)", file=sys.stderr)
    if answer.strip() == "?" and not whole:
        return ask_user(question, whole=True)
    return answer.strip().lower() in ("y", "yes")


def run(task, backend=None, approve=ask_user, policy=None):
    """Run one task to the end; return the model's answer, or None when MAX_STEPS ran out first.
    approve(question) decides the calls that need a person: only True means yes. policy says what the run may
    touch and what it asks (default: guards.policy(), the current folder, asking as the command line does)."""
    backend, policy = backend or choose(), policy or guards.policy()
    if not policy.sandbox and policy.why_none != "--sandbox off":
        print(f"note: no sandbox ({policy.why_none}): commands that are not plainly read-only ask you first, even "
              "with --yes; --sandbox off says you accept that.", file=sys.stderr)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for step in range(1, MAX_STEPS + 1):
        message = chat(messages, tools=TOOLS, backend=backend).choices[0].message
        messages.append(assistant_message(message))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:  # one tool message per call, carrying the call's id
            print(f"[{step}] {shown(call.function.name, one_line=True)} {cut(call.function.arguments)}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call, approve, policy)})
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


def run_tool(call, approve, policy):
    """Run one tool call as plan() decides, asking first where it says so; every failure becomes an
    'error: ...' result the model can read and act on."""
    name = call.function.name
    if name not in REGISTRY:
        return truncate(f"error: there is no tool called {name!r}. The tools are: {', '.join(REGISTRY)}.")
    try:
        args = json.loads(call.function.arguments or "{}")  # some servers send "" for no arguments
    except json.JSONDecodeError as error:
        return (f"error: the arguments are not valid JSON ({error}). "
                "Send a JSON object, e.g. {\"path\": \"README.md\"}.")
    if not isinstance(args, dict):
        return "error: the arguments must be a JSON object, e.g. {\"path\": \"README.md\"}."
    try:
        action, question = plan(policy, REGISTRY[name], args)
        asked = question and REGISTRY[name]["kind"] not in policy.unasked  # not approved in advance (--yes)
        if asked and approve(question) is not True:  # only a yes is a yes: not 1, not "yes", not None
            return "error: the user declined this call; do not try it again, find another way or answer"
        return truncate(mask(policy, str(action())))  # masked before it is cut: a cut could split a secret
    except ToolError as error:  # refused: the message says why
        return truncate(f"error: {error}")
    except Exception as error:  # the tool boundary: the model caused it, so the model hears about it
        return f"error: {name} failed: {type(error).__name__}: {error}"


def cut(text, limit=SHOWN_CHARS):
    """Text for one line of the screen, made safe to show: cut("x" * 300) -> 200 x's + " [... 100 more characters]" """
    more = f" [... {len(text) - limit} more characters]" if len(text) > limit else ""
    return shown(text[:limit], one_line=True) + more


def main():
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS, help="default: $BACKEND, else the first key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url", help="any OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="approve every call that would be asked about")
    parser.add_argument("--sandbox", choices=("workspace-write", "read-only", "off"), default="workspace-write",
                        help="what an approved command may change (Linux; default: the workspace)")
    args = parser.parse_args()
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    policy = guards.policy(args.workspace, args.yes, args.sandbox)
    os.chdir(policy.workspace)  # a relative path, even /proc/self/cwd/.., means the same to a check and a command
    try:
        answer = run(args.task, choose(args.backend, args.model, args.base_url), policy=policy)
    except BackendError as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {MAX_STEPS})")
        sys.exit(3)
    print(shown(answer))


if __name__ == "__main__":
    main()
