"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      python harness.py --deadline 60 --trace run.jsonl "Run `make test` and tell me what failed"
The model proposes; plan() in tools.py decides what runs at once, what asks you first, and what never runs.
Every run ends with a status and an exit code: answered, or the budget that ran out first.
"""
import time

STARTED = time.monotonic()  # --deadline counts from here: the imports below take most of a second

import argparse
import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

import guards
from backend import BACKENDS, BackendError, chat, choose
from guards import ToolError, mask, shown
from tools import REGISTRY, TOOLS, check_call, plan, truncate

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
MAX_TOOL_CALLS = 30  # tool calls per task, refused ones included
SHOWN_CHARS = 200  # of a call's arguments printed on screen; the model gets them whole
CHARS_PER_TOKEN = 4  # to estimate tokens when a server does not count them
TRACE_CHARS = 20_000  # longest text kept in one field of the trace; the rest is counted, not written
EXIT_CODES = {"answered": 0, "provider_error": 1, "output_error": 1, "internal_error": 1, "step_limit": 3,
              "tool_call_limit": 3, "token_limit": 3, "deadline": 3, "interrupted": 130}
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


@dataclass
class Limits:
    """The budgets of one run; None means no limit."""
    max_steps: int = MAX_STEPS
    max_tool_calls: int = MAX_TOOL_CALLS
    max_tokens: int | None = None  # tokens as the server counts them (estimated when it sends no count)
    deadline: float | None = None  # seconds of wall-clock time, from the run's start


@dataclass
class Result:
    """How a run ended and what it used; messages is the whole conversation, ready to read or to continue."""
    status: str = "running"  # then one of EXIT_CODES
    answer: str = ""
    error: str = ""  # what went wrong, in words, when the status is not answered
    steps: int = 0
    tool_calls: int = 0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    seconds: float = 0.0
    messages: list = field(default_factory=list)


class Stop(Exception):
    """Ends the run with a status, e.g. Stop("step_limit") or Stop("output_error", "the trace file is full")."""

    def __init__(self, status, error=""):
        super().__init__(error or status)
        self.status, self.error = status, error


class Trace:
    """The JSONL trace: one JSON object a line, written whole and at once, so a crash loses nothing done; every
    text in it masked as tool results are."""

    def __init__(self, path=None, policy=None):
        self.run, self.file, self.policy = os.urandom(4).hex(), None, policy  # the run's id tells runs apart
        if path:
            self.file = open(trace_file(path, policy), "ab", buffering=0)

    def record(self, kind, **fields):
        if self.file:
            fields = {name: truncate(mask(self.policy, value), TRACE_CHARS) if isinstance(value, str) else value
                      for name, value in fields.items()}
            try:
                self.file.write((json.dumps({"run": self.run, "type": kind, **fields}) + "\n").encode())
            except OSError as error:
                self.file = None  # once is enough
                raise Stop("output_error", f"the trace could not be written: {error.strerror}") from None


def trace_file(path, policy):
    """The trace's file descriptor, opened so that nothing redirects it: a link at its path, or (in the workspace,
    where the model may have made one) on its way to it, or a file that is no regular file is an error."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):  # a link, a pipe, a folder
        raise Stop("output_error", f"the trace {path} is not a regular file")
    try:
        if Path(folder).resolve().is_relative_to(policy.workspace) and os.path.realpath(folder) != folder:
            raise OSError(0, "a link leads to its folder")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) |
                     getattr(os, "O_NONBLOCK", 0), 0o600)  # a link is refused, and a pipe nobody reads cannot block
    except OSError as error:
        raise Stop("output_error", f"the trace {path} cannot be opened: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Stop("output_error", f"the trace {path} is not a regular file")
    return fd


@dataclass
class Settings:
    """What a run was asked to do: who answers, who approves, what it may touch, its budgets, clock and trace."""
    backend: dict
    approve: object
    limits: Limits
    deadline: float | None  # a time.monotonic(): the moment the run's time is up, checked before each request
    policy: guards.Policy
    trace: Trace


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


def run(task, backend=None, approve=ask_user, limits=None, trace=None, started=None, history=None, policy=None):
    """Run one task until it ends, and return a Result whose status says how it ended. approve(question)
    decides the calls that need a person (only True means yes); limits is a Limits; trace a file name for the
    JSONL trace; started the time.monotonic() the deadline counts from (default: now); history an earlier
    result.messages to go on from; policy says what the run may touch (default: guards.policy())."""
    limits, started = limits or Limits(), started or time.monotonic()
    policy = policy or guards.policy(trace=trace)
    result = Result(messages=[*(history or [{"role": "system", "content": SYSTEM}]), {"role": "user", "content": task}])
    settings = Settings(backend, approve, limits, limits.deadline and started + limits.deadline, policy,
                        Trace(policy=policy))
    if not policy.sandbox and policy.why_none != "--sandbox off":
        print(f"note: no sandbox ({policy.why_none}): commands that are not plainly read-only ask you first, even "
              "with --yes; --sandbox off says you accept that.", file=sys.stderr)
    try:
        settings.trace = Trace(trace, policy)
        settings.backend = backend or choose()
        settings.trace.record("start", task=task, backend=settings.backend["name"], model=settings.backend["model"])
        loop(settings, result)
        result.status = "answered"
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    except Exception as error:  # a fault of ours, or of a library's: the run still ends with a status and a record
        result.status, result.error = "internal_error", f"{type(error).__name__}: {error}"
    result.seconds = round(time.monotonic() - started, 3)
    if result.status != "answered":  # an answered run has every call answered
        answer_every_call(settings, result)
    try:
        settings.trace.record("end", status=result.status, answer=result.answer, error=result.error,
                              steps=result.steps, tool_calls=result.tool_calls, usage=result.usage,
                              seconds=result.seconds)
    except Stop as stop:  # the trace itself failed: say so, and keep the run's own status
        result.error = result.error or stop.error
    return result


def loop(settings, result):
    """The phase 1 loop, its steps named: check the budgets, ask the model, keep its reply, run its calls."""
    while True:
        check_budgets(settings, result)
        message = ask(settings, result)
        result.messages.append(assistant_message(message))
        if not message.tool_calls:
            result.answer = message.content or ""
            return
        run_tools(settings, result, message.tool_calls)


def check_budgets(settings, result):
    """Every budget, decided in one place before each request: raises Stop naming the one that ran out."""
    limits = settings.limits
    if settings.deadline and time.monotonic() >= settings.deadline:
        raise Stop("deadline")
    if result.tool_calls > limits.max_tool_calls:
        raise Stop("tool_call_limit")
    if limits.max_tokens and result.usage["total_tokens"] >= limits.max_tokens:
        raise Stop("token_limit")
    if result.steps >= limits.max_steps:
        raise Stop("step_limit")


def ask(settings, result):
    """One model reply; its tokens counted (estimated when the server sends none) and its record traced."""
    result.steps += 1
    asked = time.monotonic()
    response = chat(result.messages, tools=TOOLS, backend=settings.backend)
    message = response.choices[0].message
    usage = {"prompt_tokens": len(json.dumps(result.messages)) // CHARS_PER_TOKEN,
             "completion_tokens": len(json.dumps(assistant_message(message))) // CHARS_PER_TOKEN}
    if response.usage and response.usage.total_tokens:  # the server's own count, when it sends one
        usage = {"prompt_tokens": response.usage.prompt_tokens, "completion_tokens": response.usage.completion_tokens}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    for name in result.usage:
        result.usage[name] += usage[name]
    settings.trace.record("reply", step=result.steps, finish_reason=response.choices[0].finish_reason,
                          content=message.content, calls=[call.id for call in message.tool_calls or []],
                          usage=usage, seconds=round(time.monotonic() - asked, 3))
    return message


def run_tools(settings, result, calls):
    """Run one reply's tool calls: each is decided first (its contract, plan(), a person where plan() says so),
    so that every question of the turn comes before anything runs; then they run in order. Every call gets a
    tool message and a trace record."""
    decided = [decide(settings, result, call) for call in calls]
    for call, action, _ in decided:
        began = time.monotonic()
        try:
            text, failed = (str(action()), False) if callable(action) else action  # nothing to run: its outcome
        except ToolError as error:
            text, failed = f"error: {error}", True
        except Exception as error:  # the tool boundary: the model caused it, so the model hears about it
            text, failed = f"error: {type(error).__name__}: {error}", True
        text = truncate(mask(settings.policy, text))  # masked before it is cut: a cut could split a secret
        result.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        settings.trace.record("tool", step=result.steps, id=call.id, name=call.function.name,
                              arguments=call.function.arguments, is_error=failed, result=text,
                              seconds=round(time.monotonic() - began, 3))


def decide(settings, result, call):
    """(call, what will run, whether a person was asked): what will run is a function returning the outcome, or
    the outcome (text, failed) that says why nothing will."""
    result.tool_calls += 1
    say(f"[{result.steps}] {shown(call.function.name, one_line=True)} {cut(call.function.arguments)}")
    if result.tool_calls > settings.limits.max_tool_calls:
        return call, ("error: not run: the run is out of tool calls (its tool-call budget)", True), False
    try:
        args = check_call(call.function.name, call.function.arguments)  # first: it knows no tool by that name
        tool = REGISTRY[call.function.name]
        action, question = plan(settings.policy, tool, args)
        asked = question and tool["kind"] not in settings.policy.unasked  # not approved in advance (--yes)
        if asked and settings.approve(question) is not True:  # only a yes is a yes: not 1, not "yes"
            return call, ("error: the user declined this call; do not try it again, find another way or answer",
                          True), True
        return call, action, bool(question)
    except ToolError as error:  # refused, or a broken call: the message says why
        return call, (truncate(f"error: {error}"), True), False


def answer_every_call(settings, result):
    """The conversation stays one the API accepts, whatever ended the run: a call without a result gets one."""
    last = next((m for m in reversed(result.messages) if m["role"] == "assistant"), {})
    answered = {m.get("tool_call_id") for m in result.messages}
    for call in last.get("tool_calls", []):
        if call["id"] not in answered:
            content = f"error: not run: the run ended first ({result.status})"
            result.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            settings.trace.record("tool", step=result.steps, id=call["id"], name=call["function"]["name"],
                                  arguments=call["function"]["arguments"], is_error=True, result=content)


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


def cut(text, limit=SHOWN_CHARS):
    """Text for one line of the screen, made safe to show: cut("x" * 300) -> 200 x's + " [... 100 more characters]" """
    more = f" [... {len(text) - limit} more characters]" if len(text) > limit else ""
    return shown(text[:limit], one_line=True) + more


def say(text):
    print(text, flush=True)


def arguments(argv=None):
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS, help="default: $BACKEND, else the first key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url", help="any OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="approve every call that would be asked about")
    parser.add_argument("--sandbox", choices=("workspace-write", "read-only", "off"), default="workspace-write",
                        help="what an approved command may change (Linux; default: the workspace)")
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS, help=f"default {MAX_STEPS}")
    parser.add_argument("--max-tool-calls", type=int, default=MAX_TOOL_CALLS, help=f"default {MAX_TOOL_CALLS}")
    parser.add_argument("--max-tokens", type=int, help="default: no limit")
    parser.add_argument("--deadline", type=float, metavar="SECONDS", help="wall-clock time for the run (default: none)")
    parser.add_argument("--trace", metavar="FILE", help="append a JSONL trace of the run to FILE")
    args = parser.parse_args(argv)
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    for name in ("max_steps", "max_tool_calls", "max_tokens", "deadline"):
        if getattr(args, name) is not None and not getattr(args, name) > 0:  # NaN is not above 0 either
            parser.error(f"--{name.replace('_', '-')} must be above 0, not {getattr(args, name)}")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    return args


def main(argv=None):
    args = arguments(argv)
    trace = args.trace and os.path.abspath(args.trace)
    policy = guards.policy(args.workspace, args.yes, args.sandbox, trace)
    os.chdir(policy.workspace)  # a relative path, even /proc/self/cwd/.., means the same to a check and a command
    try:
        backend = choose(args.backend, args.model, args.base_url)
    except BackendError as error:
        sys.exit(f"error: {shown(str(error))}")
    result = run(args.task, backend, trace=trace, policy=policy, started=STARTED,
                 limits=Limits(args.max_steps, args.max_tool_calls, args.max_tokens, args.deadline))
    report(result)
    sys.exit(EXIT_CODES[result.status])


def report(result):
    """Print how the run ended: the answer, why it stopped, and a one-line summary on standard error."""
    if result.status != "answered":
        say(f"stopped: {result.status.replace('_', ' ')}")
    if result.error:
        print(f"error: {shown(result.error)}", file=sys.stderr)
    if result.answer:
        say(shown(result.answer))
    print(f"{result.status}: {result.steps} steps, {result.tool_calls} tool calls, {result.usage['total_tokens']} "
          f"tokens, {result.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C before the run began: nothing to close
        sys.exit(130)
