"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.
run(task) returns a Result and prints nothing; cli.py, the front door, shows it and asks you.

Run:
    python harness.py "List the files here, then read backend.py and tell me which model it calls."
    python harness.py --deadline 60 --trace run.jsonl "Run `make test`; what failed?"
The model proposes; plan() in tools.py decides what runs at once, what asks you first, and what
never runs. Every run ends with a status: answered, or the budget that ran out first (cli.py makes
it an exit code).
"""

import time

STARTED = time.monotonic()  # --deadline counts from here: the imports below take most of a second

import json
from dataclasses import dataclass, field

import guards
from backend import BackendError, assistant_message, chat, choose
from guards import ToolError, mask
from tools import REGISTRY, TOOLS, check_call, plan, truncate

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
MAX_TOOL_CALLS = 30  # tool calls per task, refused ones included
CHARS_PER_TOKEN = 4  # to estimate tokens when a server does not count them
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


def ignore(*args, **fields):
    """A hook nobody gave: it shows nothing, records nothing, approves nothing (None is no yes)."""


@dataclass
class Limits:
    """The budgets of one run; None means no limit."""
    max_steps: int = MAX_STEPS
    max_tool_calls: int = MAX_TOOL_CALLS
    # tokens as the server counts them (estimated when it sends no count)
    max_tokens: int | None = None
    deadline: float | None = None  # seconds of wall-clock time, from the run's start


@dataclass
class Result:
    """One run: what it was given (who answers, what it may touch, its budgets, the hooks it calls)
    and what it did. run() fills it and returns it; messages can be read or continued."""
    backend: dict = None  # choose()'s: who answers
    policy: guards.Policy = None  # what it may touch, and what it asks about
    limits: Limits = field(default_factory=Limits)
    # a time.monotonic(): the moment its time is up, checked before each request
    deadline: float | None = None
    approve: object = ignore  # approve(question) -> True for yes; anything else is a no
    on_call: object = ignore  # on_call(step, name, arguments): a call, before it is decided
    record: object = ignore  # record(kind, **fields): each step, for a trace
    # then answered, or what ended it: step_limit, deadline, provider_error, ...
    status: str = "running"
    answer: str = ""
    error: str = ""  # what went wrong, in words, when the status is not answered
    steps: int = 0
    tool_calls: int = 0
    usage: dict = (field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0,
                                                  "total_tokens": 0}))
    seconds: float = 0.0
    messages: list = field(default_factory=list)


class Stop(Exception):
    """Ends the run with a status, e.g. Stop("step_limit"), Stop("output_error", "disk full")."""

    def __init__(self, status, error=""):
        super().__init__(error or status)
        self.status, self.error = status, error


def run(task, backend=None, approve=ignore, limits=None, started=None, history=None, policy=None,
        on_call=ignore, record=ignore):
    """Run one task until it ends, and return a Result whose status says how it ended.
    approve(question) decides the calls that need a person (only True means yes; by default none);
    limits is a Limits; started the time.monotonic() the deadline counts from (default: now);
    history an earlier result.messages to go on from; policy says what the run may touch (default:
    guards.policy()). on_call and record: see Result."""
    limits, started = limits or Limits(), started or time.monotonic()
    result = Result(backend, policy or guards.policy(), limits,
                    limits.deadline and started + limits.deadline, approve, on_call, record,
                    messages=[*(history or [{"role": "system", "content": SYSTEM}]),
                              {"role": "user", "content": task}])
    try:
        result.backend = backend or choose()
        record("start", task=task, backend=result.backend["name"], model=result.backend["model"])
        loop(result)
        result.status = "answered"
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    except Exception as error:  # a fault of ours or a library's: still a status and a record
        result.status, result.error = "internal_error", f"{type(error).__name__}: {error}"
    return finish(result, started)


def finish(result, started):
    """End a run, however it ended: every call answered, the end recorded. A record that fails says
    so in the error; the run keeps its own status."""
    result.seconds = round(time.monotonic() - started, 3)
    if result.status != "answered":  # an answered run has every call answered
        answer_every_call(result)
    try:
        result.record("end", status=result.status, answer=result.answer, error=result.error,
                      steps=result.steps, tool_calls=result.tool_calls, usage=result.usage,
                      seconds=result.seconds)
    except Stop as stop:  # the trace itself failed: say so, and keep the run's own status
        result.error = result.error or stop.error
    return result


def loop(result):
    """The phase 1 loop, its steps named: check the budgets, ask the model, keep its reply, run its
    calls."""
    while True:
        check_budgets(result)
        message = ask(result)
        result.messages.append(assistant_message(message))
        if not message.tool_calls:
            result.answer = message.content or ""
            return
        run_tools(result, message.tool_calls)


def check_budgets(result):
    """Every budget, decided in one place before each request: Stop names the one that ran out."""
    limits = result.limits
    if result.deadline and time.monotonic() >= result.deadline:
        raise Stop("deadline")
    if result.tool_calls > limits.max_tool_calls:
        raise Stop("tool_call_limit")
    if limits.max_tokens and result.usage["total_tokens"] >= limits.max_tokens:
        raise Stop("token_limit")
    if result.steps >= limits.max_steps:
        raise Stop("step_limit")


def ask(result):
    """One model reply; its tokens counted (estimated when the server sends none) and its record
    traced."""
    result.steps += 1
    asked = time.monotonic()
    response = chat(result.messages, tools=TOOLS, backend=result.backend)
    message = response.choices[0].message
    usage = {"prompt_tokens": len(json.dumps(result.messages)) // CHARS_PER_TOKEN,
             "completion_tokens": len(json.dumps(assistant_message(message))) // CHARS_PER_TOKEN}
    if response.usage and response.usage.total_tokens:  # the server's own count, when it sends one
        usage = {"prompt_tokens": response.usage.prompt_tokens,
                 "completion_tokens": response.usage.completion_tokens}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    for name in result.usage:
        result.usage[name] += usage[name]
    result.record("reply", step=result.steps, finish_reason=response.choices[0].finish_reason,
                  content=message.content,
                  calls=[call.id for call in message.tool_calls or []],
                  usage=usage, seconds=round(time.monotonic() - asked, 3))
    return message


def run_tools(result, calls):
    """Run one reply's tool calls: each is decided first (its contract, plan(), a person where
    plan() says so), so that every question of the turn comes before anything runs; then they run in
    order. Every call gets a tool message and a trace record."""
    decided = [decide(result, call) for call in calls]
    for call, action, _ in decided:
        began = time.monotonic()
        try:
            # nothing to run: its outcome
            text, failed = (str(action()), False) if callable(action) else action
        except ToolError as error:
            text, failed = f"error: {error}", True
        except Exception as error:
            # the tool boundary: the model caused it, so the model hears about it
            text, failed = f"error: {type(error).__name__}: {error}", True
        # masked before it is cut: a cut could split a secret
        text = truncate(mask(result.policy, text))
        result.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        result.record("tool", step=result.steps, id=call.id, name=call.function.name,
                      arguments=call.function.arguments, is_error=failed, result=text,
                      seconds=round(time.monotonic() - began, 3))


def decide(result, call):
    """(call, what will run, whether a person was asked): what will run is a function returning the
    outcome, or the outcome (text, failed) that says why nothing will."""
    result.tool_calls += 1
    result.on_call(result.steps, call.function.name, call.function.arguments)
    if result.tool_calls > result.limits.max_tool_calls:
        return call, ("error: not run: the run is out of tool calls (its tool-call budget)",
                      True), False
    try:
        # first: it knows no tool by that name
        args = check_call(call.function.name, call.function.arguments)
        tool = REGISTRY[call.function.name]
        action, question = plan(result.policy, tool, args)
        # not approved in advance (--yes)
        asked = question and tool["kind"] not in result.policy.unasked
        if asked and result.approve(question) is not True:  # only a yes is a yes: not 1, not "yes"
            return call, ("error: the user declined this call; do not try it again, find "
                          "another way or answer",
                          True), True
        return call, action, bool(question)
    except ToolError as error:  # refused, or a broken call: the message says why
        return call, (truncate(f"error: {error}"), True), False


def answer_every_call(result):
    """Whatever ended the run, every call gets a result, so the API takes the conversation."""
    last = next((m for m in reversed(result.messages) if m["role"] == "assistant"), {})
    answered = {m.get("tool_call_id") for m in result.messages}
    for call in last.get("tool_calls", []):
        if call["id"] not in answered:
            content = f"error: not run: the run ended first ({result.status})"
            result.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            result.record("tool", step=result.steps, id=call["id"], name=call["function"]["name"],
                          arguments=call["function"]["arguments"], is_error=True, result=content)


if __name__ == "__main__":  # the command line is the front door's: cli.py
    import cli
    cli.main(started=STARTED)
