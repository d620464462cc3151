"""Phase 5 (learner's version): the agent loop, with budgets, and a Result that says how the run ended.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      (the same as python cli.py "...": the command line, the trace and all that is printed live in cli.py)
The model asks for tools, we decide every call of a turn (asking approve() where we must), run them and send
the results back, until it answers or a budget runs out. run() returns a Result, the run's settings and its
outcome; it tells on_call() of each call and record() of each step.
"""
import time

STARTED = time.monotonic()  # taken before the imports (most of a second), so --deadline counts from Enter

import json  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import guards  # noqa: E402
from backend import BackendError, assistant_message, chat, choose  # noqa: E402
from guards import ToolError  # noqa: E402
from tools import REGISTRY, TOOLS, truncate, check_call, plan  # noqa: E402

MAX_STEPS = 10  # requests to the model in one run
MAX_TOOL_CALLS = 30  # tool calls in one run; a call past it gets an error and does not run
CHARS_PER_TOKEN = 4  # the estimate of tokens when a server sends no usage
SYSTEM = ("You are a coding agent working in your workspace folder. Use the tools to look at files before you "
          "answer; paths are relative to the workspace. A call may be refused or declined: read why, and do not "
          "try it again. Answer briefly when done.")
DECLINED = "error: the user declined this call; do not try it again, find another way or answer"


def ignore(*args, **fields):
    """The hook that does nothing: what run() tells when nobody listens (and None approves nothing)."""


class Stop(Exception):
    """Ends a run with a status (step_limit, deadline, output_error, ...) and, when there is more to say, an
    error in words."""

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
    """One run: what it was given (set by run()) and what it did (filled in as it goes)."""
    backend: dict = None
    policy: guards.Policy = None
    limits: Limits = field(default_factory=Limits)
    deadline: float = None  # a time.monotonic() when the time is up, or None
    approve: object = ignore  # approve(question): only True is a yes
    on_call: object = ignore  # on_call(step, name, arguments), before the call is decided
    record: object = ignore  # record(kind, **fields), for each step of the run
    status: str = None  # answered, or what ended the run
    answer: str = None  # the model's answer, when it gave one
    error: str = ""  # what went wrong, in words
    steps: int = 0
    tool_calls: int = 0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    seconds: float = 0.0
    messages: list = field(default_factory=list)  # the whole conversation, as the API takes it


def said_yes(approve, question):
    """Only a True from approve is a yes: an approver that fails, or answers anything else, says no."""
    try:
        return approve(question) is True
    except Exception:
        return False


def check_budgets(result):
    """Before each request: Stop when a budget has run out, so that no turn is cut in half."""
    limits = result.limits
    if result.deadline and time.monotonic() >= result.deadline:
        raise Stop("deadline")
    if result.steps >= limits.max_steps:
        raise Stop("step_limit")
    if result.tool_calls > limits.max_tool_calls:
        raise Stop("tool_call_limit")
    if limits.max_tokens and result.usage["total_tokens"] >= limits.max_tokens:
        raise Stop("token_limit")


def ask(result):
    """One request; its usage (the server's, or an estimate) is added to the result, and the reply recorded."""
    result.steps += 1
    response = chat(result.messages, tools=TOOLS, backend=result.backend)
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
    result.record("reply", step=result.steps, finish_reason=choice.finish_reason,
                  calls=[call.id for call in choice.message.tool_calls or []], usage=usage)
    return choice.message


def decide(result, call):
    """What one call will do: an action to run, or its outcome (text, failed) when nothing is to run."""
    name, arguments = call.function.name, call.function.arguments
    result.on_call(result.steps, name, arguments or "")
    result.tool_calls += 1
    if result.tool_calls > result.limits.max_tool_calls:
        return (f"error: not run: past the budget of {result.limits.max_tool_calls} tool calls a run", True)
    try:
        args = check_call(name, arguments)
        tool = REGISTRY[name]
        action, question = plan(result.policy, tool, args)
        if question and tool["kind"] not in result.policy.unasked and not said_yes(result.approve, question):
            return (DECLINED, True)
        return action
    except ToolError as error:
        return (f"error: {error}", True)
    except Exception as error:  # the model asked for it, so the model gets to read what went wrong
        return (f"error: {name} failed: {type(error).__name__}: {error}", True)


def answer(result, call, text, failed, seconds=None):
    """The call's tool message, and its record."""
    result.messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    timing = {} if seconds is None else {"seconds": round(seconds, 3)}
    result.record("tool", id=call["id"], name=call["function"]["name"], arguments=call["function"]["arguments"],
                  is_error=failed, result=text, **timing)


def run_tools(result, calls):
    """Decide every call of the turn (every question asked first), then run each in order."""
    actions = [decide(result, call) for call in calls]
    for call, action in zip(result.messages[-1]["tool_calls"], actions):
        began = time.monotonic()
        try:
            text, failed = (str(action()), False) if callable(action) else action  # nothing to run: its outcome
        except ToolError as error:
            text, failed = f"error: {error}", True
        except Exception as error:
            text, failed = f"error: {call['function']['name']} failed: {type(error).__name__}: {error}", True
        answer(result, call, truncate(guards.mask(result.policy, text)), failed,
               time.monotonic() - began if callable(action) else None)


def answer_every_call(result):
    """Give each call left without a tool message an error, so the conversation is one an API accepts."""
    answered = {message["tool_call_id"] for message in result.messages if message["role"] == "tool"}
    for message in list(result.messages):
        for call in message.get("tool_calls") or []:
            if call["id"] not in answered:
                answer(result, call, f"error: not run: the run ended first ({result.status})", True)


def loop(result):
    """Phase 1's loop, each step named: check the budgets, ask, answer or run the tools."""
    while True:
        check_budgets(result)
        message = ask(result)
        result.messages.append(assistant_message(message))
        if not message.tool_calls:
            result.answer = message.content or ""
            return
        run_tools(result, message.tool_calls)


def finish(result, started):
    """However the run ended: every call answered, the time taken, the end recorded."""
    result.seconds = time.monotonic() - started
    try:
        if result.status != "answered":
            answer_every_call(result)
        result.record("end", status=result.status, answer=result.answer, steps=result.steps,
                      tool_calls=result.tool_calls, usage=result.usage, seconds=round(result.seconds, 3))
    except Stop as stop:  # the trace failed at the end: say so
        result.status, result.error = stop.status, stop.error
    return result


def run(task, backend=None, approve=ignore, limits=None, started=None, history=None, policy=None,
        on_call=ignore, record=ignore):
    """Run one task to its end and return a Result: status, answer, error, counts, the whole conversation.
    history (an earlier result's messages) goes on from there; started (a time.monotonic()) starts the deadline."""
    started = started or time.monotonic()
    limits = limits or Limits()
    result = Result(backend, policy, limits, started + limits.deadline if limits.deadline else None,
                    approve, on_call, record, messages=list(history or []))
    try:
        result.policy = result.policy or guards.policy()
        result.backend = result.backend or choose()
        if not result.messages:
            result.messages.append({"role": "system", "content": SYSTEM})
        result.messages.append({"role": "user", "content": task})
        record("start", task=task, backend=result.backend["name"], model=result.backend["model"])
        loop(result)
        result.status = "answered"
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    except Exception as error:  # a fault of ours or of a library: a status, not a traceback
        result.status, result.error = "internal_error", f"{type(error).__name__}: {error}"
    return finish(result, started)


if __name__ == "__main__":
    import cli
    cli.main(started=STARTED)
