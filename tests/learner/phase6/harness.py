"""Phase 6 (learner's version): the agent loop, with budgets, a Result, a JSONL trace, and one clock
for every wait: the model, a person, the tools; the calls of a turn run side by side.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      (--backend, --model, --base-url override the environment for one run; --workspace DIR, --yes,
       --sandbox workspace-write|read-only|off; budgets: --max-steps, --max-tool-calls, --max-tokens,
       --deadline SECONDS; --trace FILE appends one JSON object a line)
The model asks for tools, we decide every call of a turn (asking a person where we must), run them and send the
results back, until it answers or a budget runs out. run() returns a Result; its status gives the exit code:
0 answered, 1 provider, output or internal error, 2 usage, 3 a budget, 130 Ctrl-C.
"""
import time

STARTED = time.monotonic()  # taken before the imports (most of a second), so --deadline counts from Enter

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import uuid  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import guards  # noqa: E402
import shell  # noqa: E402
from backend import BackendError, chat, choose  # noqa: E402
from guards import ToolError, shown  # noqa: E402
from tools import REGISTRY, TOOLS, capped, check_call, plan  # noqa: E402

MAX_STEPS = 10  # requests to the model in one run
MAX_TOOL_CALLS = 30  # tool calls in one run; a call past it gets an error and does not run
CHARS_PER_TOKEN = 4  # the estimate of tokens when a server sends no usage
TRACE_CHARS = 10_000  # characters of one text the trace keeps
GRACE = 1  # seconds the tools are waited for past the deadline: a command stopped by it still reports so
SCREEN_WIDTH = 200  # characters of a call's arguments shown on screen
SYSTEM = ("You are a coding agent working in the folder {workspace}, your workspace. Use the tools to look at "
          "files before you answer; paths are relative to the workspace. A call may be refused or declined: "
          "read why, and do not try it again. Answer briefly when done.")
DECLINED = "error: the user declined this call; do not try it again, find another way or answer"
EXIT_CODES = {"answered": 0, "provider_error": 1, "output_error": 1, "internal_error": 1, "step_limit": 3,
              "tool_call_limit": 3, "token_limit": 3, "deadline": 3, "interrupted": 130}


class Stop(Exception):
    """Ends a run with a status (one of EXIT_CODES) and, when there is more to say, an error in words."""

    def __init__(self, status, error=""):
        super().__init__(error or status)
        self.status, self.error = status, error


@dataclass
class Limits:
    max_steps: int = MAX_STEPS
    max_tool_calls: int = MAX_TOOL_CALLS
    max_tokens: int = None  # no limit
    deadline: float = None  # seconds from the start; no limit


@dataclass
class Result:
    status: str = None  # one of EXIT_CODES
    answer: str = None  # the model's answer, when it gave one
    error: str = ""  # what went wrong, in words
    steps: int = 0
    tool_calls: int = 0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    seconds: float = 0.0
    messages: list = field(default_factory=list)  # the whole conversation, as the API takes it


class Trace:
    """One JSON object a line, each tagged with the run's id; texts masked and cut. No path: records nothing."""

    def __init__(self, path, policy):
        self.policy, self.run = policy, uuid.uuid4().hex[:12]
        self.fd = trace_file(path, policy) if path else None

    def record(self, kind, **fields):
        if self.fd is None:
            return
        fields = {name: cut(guards.mask(self.policy, value)) if isinstance(value, str) else value
                  for name, value in fields.items()}
        line = json.dumps({"run": self.run, "type": kind, **fields}) + "\n"
        try:
            os.write(self.fd, line.encode("utf-8"))  # one unbuffered write: a crash leaves only whole lines
        except OSError as error:
            self.fd = None  # the end of the run will not be written either
            raise Stop("output_error", f"could not write the trace: {error}") from None


@dataclass
class Settings:
    """What the run was asked to do, set once."""
    backend: dict
    approve: object
    limits: Limits
    deadline: float  # a time.monotonic(), or None
    policy: guards.Policy
    trace: Trace


def cut(text):
    return text if len(text) <= TRACE_CHARS else f"{text[:TRACE_CHARS]}[... {len(text) - TRACE_CHARS} more]"


def trace_file(path, policy):
    """An open file descriptor to append the trace to; Stop("output_error") for a link, at the path or (in the
    workspace) on the way to it, or for anything that is not a regular file."""
    full = Path(os.path.abspath(path))
    if full.is_relative_to(policy.workspace):
        for folder in full.relative_to(policy.workspace).parents:
            if (policy.workspace / folder).is_symlink():
                raise Stop("output_error", f"the trace {path} is reached through a link ({folder}), refused")
    try:
        fd = os.open(full, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) |
                     getattr(os, "O_NONBLOCK", 0), 0o600)  # a link is refused, and a pipe nobody reads cannot block
    except OSError as error:
        raise Stop("output_error", f"cannot open the trace {path}: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Stop("output_error", f"the trace {path} is not a regular file (a pipe or a device), refused")
    return fd


def say(*text, file=sys.stdout):
    """Print and flush at once: a [step] line shows before the wait that follows it."""
    print(*text, file=file, flush=True)


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
        if not sys.stdin.isatty():  # a piped answer is not echoed by a terminal: show it, so the screen reads right
            print(answer.strip(), file=sys.stderr)
        if answer.strip() != "?":
            return answer.strip().lower() in ("y", "yes")
        text = question


def said_yes(approve, question):
    """Only a True from approve is a yes: an approver that fails, or answers anything else, says no."""
    try:
        return approve(question) is True
    except Exception:
        return False


def assistant_message(message):
    """The model's reply rebuilt by hand: SDK extras such as `reasoning` are refused by Groq."""
    plain = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        plain["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.function.name, "arguments": as_json_text(c.function.arguments)}} for c in message.tool_calls]
    return plain


def at_once(functions, deadline):
    """Run the functions side by side, each on a daemon thread, until all are done or the deadline (a
    time.monotonic(), or None: no limit). A box for each, in order: {"value": ...}, {"error": ...} or, when it had
    not finished, neither; each finished one also holds its "seconds". A thread left behind is never killed."""
    boxes = [{} for _ in functions]

    def fill(box, function):
        began = time.monotonic()
        try:
            box["value"] = function()
        except BaseException as error:  # whatever it raised is handed back: the caller decides
            box["error"] = error
        box["seconds"] = time.monotonic() - began

    threads = [threading.Thread(target=fill, args=pair, daemon=True) for pair in zip(boxes, functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    return boxes


def within(deadline, what, function):
    """function's value, or its exception raised again, or Stop("deadline") when the deadline comes first."""
    if deadline is None:
        return function()
    box = at_once([function], deadline)[0]
    if "error" in box:
        raise box["error"]
    if "value" not in box:
        raise Stop("deadline", f"the deadline passed while waiting for {what}")
    return box["value"]


def check_budgets(settings, result):
    """Before each request: Stop when a budget has run out, so that no turn is cut in half."""
    limits = settings.limits
    if settings.deadline and time.monotonic() >= settings.deadline:
        raise Stop("deadline")
    if result.steps >= limits.max_steps:
        raise Stop("step_limit")
    if result.tool_calls > limits.max_tool_calls:
        raise Stop("tool_call_limit")
    if limits.max_tokens and result.usage["total_tokens"] >= limits.max_tokens:
        raise Stop("token_limit")


def ask(settings, result):
    """One request; its usage (the server's, or an estimate) is added to the result, and the reply traced."""
    result.steps += 1
    response = within(settings.deadline, "the model", partial(chat, result.messages, tools=TOOLS,
                                                              backend=settings.backend))
    choice = response.choices[0]
    counted = response.usage
    if counted and counted.total_tokens:
        usage = {"prompt_tokens": counted.prompt_tokens or 0, "completion_tokens": counted.completion_tokens or 0,
                 "total_tokens": counted.total_tokens}
    else:  # the server sent none: the conversation's length in characters over CHARS_PER_TOKEN
        sent = len(json.dumps(result.messages)) + len(json.dumps(TOOLS))
        made = len(json.dumps(assistant_message(choice.message)))
        usage = {"prompt_tokens": sent // CHARS_PER_TOKEN, "completion_tokens": made // CHARS_PER_TOKEN}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    for name in result.usage:
        result.usage[name] += usage[name]
    settings.trace.record("reply", step=result.steps, finish_reason=choice.finish_reason,
                          calls=[call.id for call in choice.message.tool_calls or []], usage=usage)
    return choice.message


def decide(settings, result, call):
    """What one call will do, and whether it needed a yes: (an action to run, or its outcome (text, failed)
    when nothing is to run, approved). Deciding and the person's answer are both on the run's clock."""
    name, arguments = call.function.name, call.function.arguments
    say(shown(f"[{result.steps}] {name} {one_line(arguments or '')}"))
    result.tool_calls += 1
    if result.tool_calls > settings.limits.max_tool_calls:
        return (f"error: not run: past the budget of {settings.limits.max_tool_calls} tool calls a run", True), False
    try:
        args = check_call(name, arguments)
        tool = REGISTRY[name]
        action, question = within(settings.deadline, "the harness to decide the call", partial(
            plan, settings.policy, tool, args, settings.deadline))
        if not question or tool["kind"] in settings.policy.unasked:  # approved in advance (--yes) is approved
            return action, bool(question)
        if not within(settings.deadline, "your answer", partial(said_yes, settings.approve, question)):
            return (DECLINED, True), True
        return action, True
    except Stop:
        raise
    except ToolError as error:
        return (f"error: {error}", True), False
    except Exception as error:  # the model asked for it, so the model gets to read what went wrong
        return (f"error: {name} failed: {type(error).__name__}: {error}", True), False


def answer(settings, result, call, text, failed, seconds=None):
    """The call's tool message, and its trace record."""
    result.messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    timing = {} if seconds is None else {"seconds": round(seconds, 3)}
    settings.trace.record("tool", id=call["id"], name=call["function"]["name"],
                          arguments=call["function"]["arguments"], is_error=failed, result=text, **timing)


def outcome(call, box):
    """(text, failed) from a call's box: its value, the error it raised, or nothing by the deadline."""
    if "value" in box:
        return str(box["value"]), False
    error = box.get("error")
    if error is None:
        return "error: not finished by the deadline", True
    if isinstance(error, ToolError):
        return f"error: {error}", True
    return f"error: {call['function']['name']} failed: {type(error).__name__}: {error}", True


def run_tools(settings, result, calls):
    """Decide every call of the turn (every question asked first), then run side by side the calls nobody was
    asked about, then the approved ones: nothing a person agreed to runs beside a checked call."""
    decided = [decide(settings, result, call) for call in calls]
    boxes = {}
    until = settings.deadline and settings.deadline + GRACE
    for asked in (False, True):
        batch = [(at, action) for at, (action, was_asked) in enumerate(decided)
                 if callable(action) and was_asked == asked]
        for (at, _), box in zip(batch, at_once([action for _, action in batch], until)):
            boxes[at] = box
    for at, call in enumerate(result.messages[-1]["tool_calls"]):
        action = decided[at][0]
        text, failed = outcome(call, boxes[at]) if callable(action) else action  # nothing to run: its outcome
        answer(settings, result, call, capped(guards.mask(settings.policy, text)), failed,
               boxes[at].get("seconds") if callable(action) else None)
    if settings.deadline and time.monotonic() >= settings.deadline:
        raise Stop("deadline", "the deadline passed while tools were running")


def answer_every_call(settings, result):
    """Give each call left without a tool message an error, so the conversation is one an API accepts."""
    answered = {message["tool_call_id"] for message in result.messages if message["role"] == "tool"}
    for message in list(result.messages):
        for call in message.get("tool_calls") or []:
            if call["id"] not in answered:
                answer(settings, result, call, f"error: not run: the run ended first ({result.status})", True)


def loop(settings, result):
    """Phase 1's loop, each step named: check the budgets, ask, answer or run the tools."""
    while True:
        check_budgets(settings, result)
        message = ask(settings, result)
        result.messages.append(assistant_message(message))
        if not message.tool_calls:
            result.answer = message.content or ""
            return
        run_tools(settings, result, message.tool_calls)


def run(task, backend=None, approve=ask_user, limits=None, trace=None, started=None, history=None, policy=None):
    """Run one task to its end and return a Result: status, answer, error, counts, the whole conversation.
    history (an earlier result's messages) goes on from there; started (a time.monotonic()) starts the deadline."""
    started = started or time.monotonic()
    limits = limits or Limits()
    result = Result(messages=list(history or []))
    settings = Settings(backend, approve, limits, started + limits.deadline if limits.deadline else None,
                        policy, Trace(None, None))
    try:
        settings.policy = policy = policy or guards.policy()
        settings.trace = Trace(trace, policy)
        settings.backend = backend = backend or choose()
        if policy.why_none:
            say(f"note: no sandbox ({policy.why_none}), so every command that is not plainly read-only asks, "
                "even under --yes; --sandbox off says you accept that", file=sys.stderr)
        if not result.messages:
            result.messages.append({"role": "system", "content": SYSTEM.format(workspace=policy.workspace)})
        result.messages.append({"role": "user", "content": task})
        settings.trace.record("start", task=task, backend=backend["name"], model=backend["model"])
        loop(settings, result)
        result.status = "answered"
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    except Exception as error:  # a fault of ours or of a library: a status, not a traceback
        result.status, result.error = "internal_error", f"{type(error).__name__}: {error}"
    for process in list(shell.RUNNING):  # nothing a command started outlives the run
        shell.stop(process)
    result.seconds = time.monotonic() - started
    try:
        if result.status != "answered":
            answer_every_call(settings, result)
        settings.trace.record("end", status=result.status, answer=result.answer, steps=result.steps,
                              tool_calls=result.tool_calls, usage=result.usage, seconds=round(result.seconds, 3))
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    return result


def report(result):
    """The answer (or `stopped: ...`) on stdout; the error and a one-line summary on stderr."""
    if result.status == "answered":
        say("\n".join(shown(line) for line in result.answer.split("\n")))  # its own line breaks, nothing else raw
    else:
        say(f"stopped: {result.status.replace('_', ' ')}")
    if result.error:
        say(f"error: {result.error}", file=sys.stderr)
    say(f"{result.status}: {result.steps} steps, {result.tool_calls} tool calls, {result.usage['total_tokens']} "
        f"tokens, {result.seconds:.1f} s", file=sys.stderr)


def above_zero(kind):
    """An argparse type: a number of this kind above 0 (NaN is not)."""
    def parse(text):
        try:
            number = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if math.isnan(number) or not number > 0:
            raise argparse.ArgumentTypeError(f"{text} is not above 0")
        return number
    return parse


def arguments(argv=None):
    parser = argparse.ArgumentParser(description="Give the model a task and let it use the tools.")
    parser.add_argument("task", nargs="+", help="what to do, in words")
    parser.add_argument("--backend", help="groq, openai, ollama or demo (default: $BACKEND, else by key)")
    parser.add_argument("--model", help="model name (default: $MODEL, else the backend's)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the only folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="run every command without asking, in the sandbox")
    parser.add_argument("--sandbox", choices=("workspace-write", "read-only", "off"), default="workspace-write",
                        help="what an approved command may write (default: the workspace); off: no bubblewrap")
    parser.add_argument("--max-steps", type=above_zero(int), default=MAX_STEPS, help="requests to the model")
    parser.add_argument("--max-tool-calls", type=above_zero(int), default=MAX_TOOL_CALLS, help="tool calls")
    parser.add_argument("--max-tokens", type=above_zero(int), help="tokens, sent and received (default: no limit)")
    parser.add_argument("--deadline", type=above_zero(float), help="seconds for the whole run (default: none)")
    parser.add_argument("--trace", help="append a JSON line for every reply, call and the end to this file")
    args = parser.parse_args(argv)
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such folder")
    return args


def main(argv=None):
    try:
        args = arguments(argv)
        try:
            backend = choose(args.backend, args.model, args.base_url)
        except BackendError as error:
            say(f"error: {error}", file=sys.stderr)
            return 1
        result = run(" ".join(args.task), backend, started=STARTED, trace=args.trace,
                     limits=Limits(args.max_steps, args.max_tool_calls, args.max_tokens, args.deadline),
                     policy=guards.policy(args.workspace, args.yes, args.sandbox, args.trace))
    except KeyboardInterrupt:  # before the run began
        return 130
    report(result)
    return EXIT_CODES[result.status]


if __name__ == "__main__":
    sys.exit(main())
