"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      python harness.py --workspace ~/scratch --yes "Run `make test` and tell me what failed"
The tools stay inside the workspace, a command that is not plainly read-only runs only after you say yes, and
everything the model wrote is shown with its control characters spelled out.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import guards
import shell
from backend import BACKENDS, BackendError, chat, choose
from guards import ToolError, visible
from tools import MAX_CHARS, NOTE_ROOM, REGISTRY, TOOLS, plan

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


class Declined(ToolError):
    """The person said no to a call."""


def ask_user(question):
    """The default approval: ask on the terminal. Without a terminal, one line is read from standard input, and
    the end of input means no."""
    print(f"{visible(question)}? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():
        print(visible(answer.strip()) or "(end of input: no)", file=sys.stderr)  # show what was piped in
    return answer.strip().lower() in ("y", "yes")


def run(task, backend=None, approve=ask_user):
    """Run one task to the end; return the model's answer, or None when MAX_STEPS ran out first.
    approve(question) decides the calls that need a person: only True means yes."""
    backend = backend or choose()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for step in range(1, MAX_STEPS + 1):
        message = chat(messages, tools=TOOLS, backend=backend)
        messages.append(assistant_message(message))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:  # one tool message per call, carrying the call's id
            print(visible(f"[{step}] {call.function.name} {call.function.arguments}"))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call, approve)})
    return None


def assistant_message(message):
    """Rebuild the model's reply with only the fields the API accepts back (no 'reasoning' and such)."""
    reply = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        reply["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": valid_json(call.function.arguments)}}
            for call in message.tool_calls]
    return reply


def valid_json(text):
    """The arguments to send back: the model's own if they parse, else "{}" (servers reject broken JSON).

    Example: valid_json('{"path": "a"}') -> '{"path": "a"}';  valid_json('{"path": ') -> '{}'
    """
    try:
        json.loads(text)
        return text
    except (TypeError, ValueError):
        return "{}"


def approved(approve, question):
    """Ask the approver; anything but a plain True (an exception, None, no answer) means no."""
    try:
        return approve(question) is True
    except Exception:
        return False


def decide(call, approve):
    """Everything decided before a call runs: its arguments, the plan under the guardrails, and a person's yes
    when the plan needs one. Returns the action that runs it; raises ToolError."""
    name = call.function.name
    if name not in REGISTRY:
        raise ToolError(f"there is no tool called {name!r}. The tools are: {', '.join(REGISTRY)}.")
    try:
        args = json.loads(call.function.arguments or "{}")  # some servers send "" for no arguments
    except json.JSONDecodeError as error:
        raise ToolError(f"the arguments are not valid JSON ({error}). Send a JSON object.") from None
    if not isinstance(args, dict):
        raise ToolError(f"{name}: the arguments must be a JSON object.")
    try:
        action, question = plan(name, args)
    except KeyError as error:  # a required argument is missing (phase 3 checks every argument properly)
        raise ToolError(f"{name}: missing the argument {error}.") from None
    if question and not approved(approve, question):
        raise Declined(f"the user declined, so nothing was done ({question.splitlines()[-1]}). "
                       "Try another way, or say what you need.")
    return action


def run_tool(call, approve):
    """The tool boundary: what a call returns, or why it did not run or failed, as text the model can act on."""
    try:
        return capped(decide(call, approve)(), MAX_CHARS)  # no result is longer than a tool's own
    except Exception as error:  # the contract, the guardrails or the person said no, or the tool failed
        return error_result(call, error)


def error_result(call, error):
    """Why a call did not run, or failed, as text the model can act on: a ToolError says what was refused and
    why; any other error is one the model's arguments caused (a missing file, a name with a NUL in it), and the
    model hears of it rather than the harness stopping."""
    return capped(f"error: {error}" if isinstance(error, ToolError) else
                  f"error: {call.function.name} failed: {type(error).__name__}: {error}", MAX_CHARS)


def capped(value, limit):
    """A text any API takes, of at most limit characters: when longer, cut, with a note of how much was cut; a lone
    surrogate (from a file name that is not UTF-8) replaced."""
    if isinstance(value, str) and not value.isascii():
        value = value.encode("utf-8", errors="replace").decode("utf-8")
    if isinstance(value, str) and len(value) > limit:
        kept = limit - NOTE_ROOM
        return value[:kept] + f"[... {len(value) - kept} more characters cut]"
    return value


def main():
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS,
                        help="default: $BACKEND, else the first API key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url", help="any OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="approve every command that would be asked about")
    parser.add_argument("--sandbox", choices=("read-only", "workspace-write"),
                        help="run commands inside bubblewrap (Linux): no network, no home folder, secrets hidden")
    args = parser.parse_args()
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    guards.WORKSPACE = Path(args.workspace).resolve()
    os.chdir(guards.WORKSPACE)  # so a path means the same to the checks and to a command (/proc/self/cwd/..)
    if args.sandbox and (problem := shell.sandbox_problem()):
        sys.exit(f"error: {problem}")
    shell.SANDBOX = args.sandbox
    shell.hide_this_process()
    approve = (lambda question: True) if args.yes else ask_user
    try:
        answer = run(args.task, choose(args.backend, args.model, args.base_url), approve)
    except BackendError as error:
        sys.exit(f"error: {visible(str(error))}")
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        shell.stop_all()  # nothing a command started outlives the run
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {MAX_STEPS})")
        sys.exit(3)
    print(visible(answer))


if __name__ == "__main__":
    main()
