"""Phase 12 (learner's version): the agent loop, with budgets, a Result that says how the run ended, one clock
for every wait, and recovery: a reply cut short, filtered or refused ends the run, an empty answer gets one
nudge, a call made again and again is not run; with on_text, the model's text streams to it as it comes.
options steer how the model calls tools (tool_choice for the first request only); output (a JSON schema or a
Pydantic model class) asks for an answer with that shape, given through the tool final_answer and checked like
any call. mcp, commands of MCP servers, offers the model their tools too, as SERVER__TOOL, each call asked about
unless the server is trusted (or --yes).

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      (the same as python cli.py "...": the command line, the trace and all that is printed live in cli.py)
The model asks for tools, we decide every call of a turn (asking approve() where we must), run them and send
the results back, until it answers or a budget runs out. run() returns a Result, the run's settings and its
outcome; it tells on_call() of each call and record() of each step.
"""
import time

STARTED = time.monotonic()  # taken before the imports (most of a second), so --deadline counts from Enter

import json  # noqa: E402
import os  # noqa: E402
import uuid  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from functools import partial  # noqa: E402

import guards  # noqa: E402
import shell  # noqa: E402
from backend import BackendError, assistant_message, chat, choose  # noqa: E402
from guards import ToolError  # noqa: E402
import mcp_client  # noqa: E402
from mcp_client import McpError  # noqa: E402
from tools import MAX_COMMAND, REGISTRY, BadCall, at_once, truncate, check_call, plan, served  # noqa: E402

MAX_STEPS = 10  # requests to the model in one run
MAX_TOOL_CALLS = 30  # tool calls in one run; a call past it gets an error and does not run
CHARS_PER_TOKEN = 4  # the estimate of tokens when a server sends no usage
SAME_CALL_LIMIT = 3  # turns in a row one call may be made in; then it is not run, and once more ends the run
GRACE = 1  # seconds the tools are waited for past the deadline: a command stopped by it still reports so
SYSTEM = ("You are a coding agent working in your workspace folder. Use the tools to look at files before you "
          "answer; paths are relative to the workspace. A call may be refused or declined: read why, and do not "
          "try it again. Answer briefly when done.")
DECLINED = "error: the user declined this call; do not try it again, find another way or answer"
EMPTY_ANSWER = "Your last reply was empty. Answer the task in words, or call a tool."  # the one nudge
FINAL_TOOL = "final_answer"  # the tool whose arguments are an answer with a shape
OUTPUT_TRIES = 3  # answers that do not fit the shape (words, or a call that breaks it) before the run ends
ENDINGS = {"length": "incomplete", "content_filter": "content_filter"}  # finish reasons that end a run


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
    on_note: object = ignore  # on_note(text): something the person should know, such as a retry
    on_text: object = None  # on_text(piece): the model's text as it streams; None: no streaming
    options: dict = field(default_factory=dict)  # what goes into every request (tool_choice: the first only)
    schema: dict = None  # the JSON schema an answer must fit; None: an answer in words
    model: object = None  # the Pydantic model class it came from, if any
    tools: dict = field(default_factory=lambda: dict(REGISTRY))  # ours, and each MCP server's as SERVER__TOOL
    servers: list = field(default_factory=list)  # the MCP servers started for it
    status: str = None  # answered, or what ended the run
    answer: str = None  # the model's answer, when it gave one
    error: str = ""  # what went wrong, in words
    steps: int = 0
    tool_calls: int = 0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    seconds: float = 0.0
    messages: list = field(default_factory=list)  # the whole conversation, as the API takes it
    recent: list = field(default_factory=list)  # what the calls of the last turns would do, a set a turn
    used_ids: set = field(default_factory=set)  # every tool call id so far: a repeated one is replaced
    output: object = None  # the answer that fits the schema: a dict, or an instance of the model class
    bad_answers: int = 0  # answers that did not fit it


def said_yes(approve, question):
    """Only a True from approve is a yes: an approver that fails, or answers anything else, says no."""
    try:
        return approve(question) is True
    except Exception:
        return False


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
    if result.bad_answers >= OUTPUT_TRIES:
        raise Stop("invalid_output", f"{result.bad_answers} answers did not fit the output schema")


def tools_for(result):
    """The tools of a request: ours, the servers', and FINAL_TOOL when an answer has a shape."""
    tools = [{"type": "function", "function": {"name": name, "description": tool["description"],
                                               "parameters": tool["parameters"]}}
             for name, tool in result.tools.items()]
    if result.schema is not None:
        tools.append({"type": "function", "function": {"name": FINAL_TOOL, "parameters": result.schema,
                                                       "description": "Give your final answer, in this shape."}})
    return tools


def ask(result):
    """One request; its usage (the server's, or an estimate) is added to the result, and the reply recorded."""
    result.steps += 1
    tools, options = tools_for(result), dict(result.options)
    if result.steps > 1 or result.bad_answers:  # a forced tool choice, held on, would never let it answer
        options.pop("tool_choice", None)
    if result.schema is not None:
        if result.bad_answers:
            options["tool_choice"] = {"type": "function", "function": {"name": FINAL_TOOL}}
    response = within(result.deadline, "the model", partial(chat, result.messages, tools=tools,
                                                            backend=result.backend, on_note=result.on_note,
                                                            on_text=result.on_text, options=options))
    choice = response.choices[0]
    message = choice.message
    for call in message.tool_calls or []:  # the API pairs calls and results by id: each needs its own
        if not call.id or call.id in result.used_ids:
            call.id = f"call_{uuid.uuid4().hex[:16]}"
        result.used_ids.add(call.id)
    ending = ENDINGS.get(choice.finish_reason) or ("refused" if message.refusal else None)
    counted = response.usage
    if counted and counted.total_tokens:
        usage = {"prompt_tokens": counted.prompt_tokens or 0, "completion_tokens": counted.completion_tokens or 0,
                 "total_tokens": counted.total_tokens}
    else:  # the server sent none: the conversation's length in characters over CHARS_PER_TOKEN
        sent = len(json.dumps(result.messages)) + len(json.dumps(tools))
        made = len(json.dumps(assistant_message(choice.message)))
        usage = {"prompt_tokens": sent // CHARS_PER_TOKEN, "completion_tokens": made // CHARS_PER_TOKEN}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    for name in result.usage:
        result.usage[name] += usage[name]
    result.record("reply", step=result.steps, finish_reason=choice.finish_reason, usage=usage,
                  calls=[] if ending else [call.id for call in message.tool_calls or []])
    if ending:  # nothing in it runs (its calls may be half written); its text is the answer
        result.answer = message.content or message.refusal or ""
        result.messages.append({"role": "assistant", "content": result.answer})
        raise Stop(ending, {"incomplete": "the reply was cut short (finish_reason length), its calls not run",
                            "content_filter": "the provider's content filter stopped the reply",
                            "refused": "the model refused the task"}[ending])
    return message


def decide(result, call, args):
    """What one call will do, its arguments as check_call() gave them (or its BadCall), and whether it needed a
    yes: (an action to run, or its outcome (text, failed) when nothing is to run, asked). Deciding and the
    person's answer are both on the run's clock."""
    name, arguments = call.function.name, call.function.arguments
    final = name == FINAL_TOOL and result.schema is not None
    if not final:  # the answer is shown as the answer, not as a call
        result.on_call(result.steps, name, arguments or "")
    result.tool_calls += 1
    if result.tool_calls > result.limits.max_tool_calls:
        return (f"error: not run: past the budget of {result.limits.max_tool_calls} tool calls a run", True), False
    if final:
        return final_answer(result, args), False
    try:
        if isinstance(args, BadCall):
            raise args
        tool = result.tools[name]
        action, question = within(result.deadline, "the harness to decide the call", partial(
            plan, result.policy, tool, args, result.deadline))
        if not question or tool["kind"] in result.policy.unasked:  # approved in advance (--yes) is approved
            return action, bool(question)
        if not within(result.deadline, "your answer", partial(said_yes, result.approve, question)):
            return (DECLINED, True), True
        return action, True
    except Stop:
        raise
    except ToolError as error:
        return (f"error: {error}", True), False
    except Exception as error:  # the model asked for it, so the model gets to read what went wrong
        return (f"error: {name} failed: {type(error).__name__}: {error}", True), False


def final_answer(result, args):
    """(text, failed) for a call of FINAL_TOOL: its checked arguments become result.output when they fit (and the
    model class validates them); else the model reads what is wrong, and it counts in result.bad_answers."""
    try:
        if isinstance(args, BadCall):
            raise args
        result.output = result.model.model_validate(args) if result.model else args
    except (BadCall, ValueError) as error:  # ValueError: pydantic's ValidationError, for what a schema cannot say
        result.bad_answers += 1
        return f"error: {error}. Call {FINAL_TOOL} again with an answer that fits.", True
    result.answer = json.dumps(args)
    return "accepted: that is the final answer", False


def answer(result, call, text, failed, seconds=None):
    """The call's tool message, and its record."""
    result.messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    timing = {} if seconds is None else {"seconds": round(seconds, 3)}
    result.record("tool", id=call["id"], name=call["function"]["name"], arguments=call["function"]["arguments"],
                  is_error=failed, result=text, **timing)


def outcome(call, box):
    """(text, failed) from a call's box: its value, the error it raised, or nothing by the deadline."""
    if "value" in box:
        return str(box["value"]), False
    error = box.get("error")
    if error is None:
        return "error: not finished by the deadline", True
    if isinstance(error, (ToolError, McpError)):
        return f"error: {error}", True
    return f"error: {call['function']['name']} failed: {type(error).__name__}: {error}", True


def meaning(name, args):
    """What a call would do, comparable: its name and checked arguments, a path normalised, a command as the
    words its shell would see; a broken call, as sent."""
    if isinstance(args, BadCall):
        return name, str(args)
    args = dict(args)
    if isinstance(args.get("path"), str):
        args["path"] = os.path.normpath(args["path"])
    if isinstance(args.get("command"), str) and len(args["command"]) <= MAX_COMMAND:
        args["command"] = guards.words(args["command"])
    return name, json.dumps(args, sort_keys=True)


def repeated(result, calls, checked):
    """{call id: why it is not run} for each call made in SAME_CALL_LIMIT turns in a row; Stop("repeated") for
    one made once more. Each turn's calls join result.recent."""
    meanings = {call.id: meaning(call.function.name, checked[call.id]) for call in calls
                if call.function.name != FINAL_TOOL}  # answers count in OUTPUT_TRIES instead
    told = {}
    for id, what in meanings.items():
        turns = 1
        while turns <= len(result.recent) and what in result.recent[-turns]:
            turns += 1
        if turns > SAME_CALL_LIMIT:
            raise Stop("repeated", f"the model made the same call in {turns} turns in a row")
        if turns == SAME_CALL_LIMIT:
            told[id] = (f"error: not run: you made this exact call in {SAME_CALL_LIMIT} turns in a row, and its "
                        "result is above. Do something else, or answer with what you have.")
    turn = set(meanings.values())
    result.recent = [*result.recent, turn][-SAME_CALL_LIMIT - 1:]
    return told


def run_tools(result, calls):
    """Check each call once, hold back one made again and again, decide every other (every question asked
    first), then run side by side the calls nobody was asked about, then the approved ones: nothing a person
    agreed to runs beside a checked call."""
    checked = {}
    tools = {**result.tools, **({FINAL_TOOL: {"parameters": result.schema}} if result.schema else {})}
    for call in calls:  # each call held to its schema once; one that breaks it keeps the BadCall that says how
        try:
            checked[call.id] = check_call(call.function.name, call.function.arguments, tools)
        except BadCall as error:
            checked[call.id] = error
    told = repeated(result, calls, checked)
    decided = [((told[call.id], True), False) if call.id in told else decide(result, call, checked[call.id])
               for call in calls]
    boxes = {}
    until = result.deadline and result.deadline + GRACE
    for asked in (False, True):
        batch = [(at, action) for at, (action, was_asked) in enumerate(decided)
                 if callable(action) and was_asked == asked]
        for (at, _), box in zip(batch, at_once([action for _, action in batch], until)):
            boxes[at] = box
    for at, call in enumerate(result.messages[-1]["tool_calls"]):
        action = decided[at][0]
        text, failed = outcome(call, boxes[at]) if callable(action) else action  # nothing to run: its outcome
        answer(result, call, truncate(guards.mask(result.policy, text)), failed,
               boxes[at].get("seconds", 0) if callable(action) else None)
    if result.deadline and time.monotonic() >= result.deadline:
        raise Stop("deadline", "the deadline passed while tools were running")


def answer_every_call(result):
    """Give each call left without a tool message an error, so the conversation is one an API accepts."""
    answered = {message["tool_call_id"] for message in result.messages if message["role"] == "tool"}
    for message in list(result.messages):
        for call in message.get("tool_calls") or []:
            if call["id"] not in answered:
                answer(result, call, f"error: not run: the run ended first ({result.status})", True)


def loop(result):
    """Phase 1's loop, each step named: check the budgets, ask, answer or run the tools; an empty answer gets
    one nudge, a second ends the run. With an output schema, the answer is a call of FINAL_TOOL: words are sent
    back."""
    nudged = False
    while True:
        check_budgets(result)
        message = ask(result)
        result.messages.append(assistant_message(message))
        if message.tool_calls:
            run_tools(result, message.tool_calls)
            if result.output is not None:
                return
        elif result.schema is not None:  # words, where a shape was asked for
            result.bad_answers += 1
            result.messages.append({"role": "user", "content": f"Give your final answer by calling {FINAL_TOOL}."})
        elif (message.content or "").strip():
            result.answer = message.content
            return
        elif nudged:
            raise Stop("incomplete", "the model answered with nothing, twice")
        else:  # one nudge
            result.messages.append({"role": "user", "content": EMPTY_ANSWER})
            nudged = True


def finish(result, started, since=None):
    """However the run ended: every command stopped, every call answered, the time taken, the end recorded.
    since (shell.ticks() at the start) is when to reap from, with no sandbox, what left a command's group."""
    for process in list(shell.RUNNING):  # nothing a command started outlives the run
        shell.stop(process)
    try:
        mcp_client.stop_all(result.servers, result.record)  # nor a server; its stderr goes to the trace
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    if not (result.policy and result.policy.sandbox):  # nor what left its group (setsid), even after a Ctrl-C
        shell.reap(since)
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
        on_call=ignore, record=ignore, on_note=ignore, on_text=None, options=None, output=None,
        mcp=(), trusted=()):
    """Run one task to its end and return a Result: status, answer, error, counts, the whole conversation.
    history (an earlier result's messages) goes on from there; started (a time.monotonic()) starts the deadline;
    options go into the requests (tool_choice into the first only); output, a JSON schema (a dict) or a Pydantic
    model class, is the shape result.output must fit; mcp, the commands of MCP servers whose tools the model gets
    too (those named in trusted run unasked)."""
    started, since = started or time.monotonic(), shell.ticks()
    limits = limits or Limits()
    result = Result(backend, policy, limits, started + limits.deadline if limits.deadline else None,
                    approve, on_call, record, on_note, on_text, dict(options or {}), messages=list(history or []))
    if hasattr(output, "model_json_schema"):  # a Pydantic model class: its schema, and its own rules
        result.schema, result.model = output.model_json_schema(), output
    else:
        result.schema = output
    result.used_ids.update(m["tool_call_id"] for m in result.messages if m.get("tool_call_id"))  # history's
    try:
        result.policy = result.policy or guards.policy()
        result.backend = result.backend or choose()
        if not result.messages:
            result.messages.append({"role": "system", "content": SYSTEM})
        result.messages.append({"role": "user", "content": task})
        record("start", task=task, backend=result.backend["name"], model=result.backend["model"])
        mcp_client.start_all(mcp, result.policy, result.deadline, result.servers)
        for server in result.servers:  # its tools are the model's tools
            result.tools.update(served(server, set(trusted), result.deadline))
        loop(result)
        result.status = "answered"
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except McpError as error:
        result.status, result.error = "mcp_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    except Exception as error:  # a fault of ours or of a library: a status, not a traceback
        result.status, result.error = "internal_error", f"{type(error).__name__}: {error}"
    return finish(result, started, since)


if __name__ == "__main__":
    import cli
    cli.main(started=STARTED)
