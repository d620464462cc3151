"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.
run(task) returns a Result and prints nothing; cli.py, the front door, shows it and asks you.

Run:
    python harness.py "List the files here, then read backend.py and tell me which model it calls."
    python harness.py --stream --deadline 60 --trace run.jsonl "Run `make test`; what failed?"
    python harness.py --output-schema answer.json "How many files are here? Answer as JSON."
    python harness.py --mcp "python ticket_server.py" "Propose the billing label for DEMO-42"
The model proposes; plan() in tools.py decides what runs at once, what asks you first, and what
never runs. Every run ends with a status: answered, the budget that ran out first, or what went
wrong (cli.py makes it an exit code).
"""

import time

STARTED = time.monotonic()  # --deadline counts from here: the imports below take most of a second

import json
import os
from dataclasses import dataclass, field
from functools import partial

import guards
import shell
from backend import BackendError, assistant_message, chat, choose
from guards import ToolError, mask
from mcp_client import McpError, start_all, stop_all
from tools import MAX_COMMAND, REGISTRY, BadCall, at_once, check_call, plan, served, truncate

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
MAX_TOOL_CALLS = 30  # tool calls per task, refused ones included
CHARS_PER_TOKEN = 4  # to estimate tokens when a server does not count them
GRACE = 1  # seconds past the deadline a command stopped by it has to finish
OUTPUT_TRIES = 3  # answers that do not fit the output schema before the run ends as invalid_output
FINAL_TOOL = "final_answer"  # the tool a model gives an answer with a shape to
SAME_CALL_LIMIT = 3  # the same call this many turns in a row: the model is told; once more, stop
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")
EMPTY_ANSWER = "Your reply was empty. Answer the task in words, or call a tool."


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
    deadline: float | None = None  # a time.monotonic(): the moment its time is up
    approve: object = ignore  # approve(question) -> True for yes; anything else is a no
    on_call: object = ignore  # on_call(step, name, arguments): a call, before it is decided
    on_text: object = None  # on_text(piece): streamed text as it arrives (None: no streaming)
    on_note: object = ignore  # on_note(text): a retry, a fallback
    record: object = ignore  # record(kind, **fields): each step, for a trace
    # tool_choice, parallel_tool_calls, temperature, ...
    options: dict = field(default_factory=dict)
    schema: dict = None  # the JSON schema the answer must fit, if one
    model: type = None  # the Pydantic model the schema came from, if one: output is its instance
    # ours, and the MCP servers' (NAME__TOOL)
    tools: dict = field(default_factory=lambda: dict(REGISTRY))
    servers: list = field(default_factory=list)  # the MCP servers started for it
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
    # the answer, checked against the schema (an instance of its model, if one)
    output: object = None
    bad_answers: int = 0  # answers that did not fit the schema
    # every tool call id so far: a repeated one is replaced
    used_ids: set = field(default_factory=set)
    # each turn's calls, by meaning, to see a model going round
    recent: list = field(default_factory=list)


class Stop(Exception):
    """Ends the run with a status, e.g. Stop("step_limit"), Stop("output_error", "disk full")."""

    def __init__(self, status, error=""):
        super().__init__(error or status)
        self.status, self.error = status, error


def run(task, backend=None, approve=ignore, limits=None, started=None, history=None, options=None,
        output=None, mcp=(), trusted=(), policy=None, on_call=ignore, on_text=None, on_note=ignore,
        record=ignore):
    """Run one task until it ends; the Result's status says how. started: the time.monotonic() the
    deadline counts from; history: an earlier result.messages to go on from; output: the shape the
    answer must have, a JSON schema or a Pydantic model class; mcp: commands that start MCP servers
    (trusted: the ones asked nothing); policy: default guards.policy(). The rest: see Result."""
    limits, started, since = limits or Limits(), started or time.monotonic(), shell.ticks()
    model = output if isinstance(output, type) else None  # a Pydantic model gives its own schema
    result = Result(backend, policy or guards.policy(), limits,
                    limits.deadline and started + limits.deadline, approve, on_call, on_text,
                    on_note, record, options or {}, model.model_json_schema() if model else output,
                    model, messages=[*(history or [{"role": "system", "content": SYSTEM}]),
                                     {"role": "user", "content": task}])
    result.used_ids.update(m["tool_call_id"] for m in result.messages if m.get("tool_call_id"))
    try:
        result.backend = backend or choose()
        record("start", task=task, backend=result.backend["name"], model=result.backend["model"])
        if mcp:  # MCP servers, each in its own sandbox: their tools join ours
            start_all(mcp, result.policy, result.deadline, result.servers)
            for server in result.servers:
                result.tools.update(served(server, server.name in trusted, result.deadline))
        loop(result)
        result.status = "answered"
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except McpError as error:  # a server that would not start: the task's tools are missing
        result.status, result.error = "mcp_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    except Exception as error:  # a fault of ours or a library's: still a status and a record
        result.status, result.error = "internal_error", f"{type(error).__name__}: {error}"
    return finish(result, started, since)


def finish(result, started, since):
    """End a run, however it ended: every command and server stopped, and without a sandbox what
    left their groups since the run began (since: shell.ticks()); every call answered; the end
    recorded."""
    for process in list(shell.RUNNING):  # nothing a command started outlives the run
        shell.stop(process)
    result.seconds = round(time.monotonic() - started, 3)
    if result.status != "answered":  # an answered run has every call answered
        answer_every_call(result)
    try:
        stop_all(result.servers, result.record)
        # and what left a command's or a server's group (adopt() brings it back)
        if not result.policy.sandbox and shell.ADOPTED:
            shell.reap(since)
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
        if not message.tool_calls and (message.content or "").strip() and result.schema is None:
            result.answer = message.content
            return
        if not message.tool_calls and result.schema is not None:  # words, not the shape asked
            result.bad_answers += 1
            result.messages.append({"role": "user",
                                    "content": f"Give your final answer by calling {FINAL_TOOL}."})
            continue
        if not message.tool_calls:  # an empty answer gets one nudge; a second one ends the run
            if EMPTY_ANSWER in (m["content"] for m in result.messages if m["role"] == "user"):
                raise Stop("incomplete", "the model gave an empty answer twice")
            result.messages.append({"role": "user", "content": EMPTY_ANSWER})
            continue
        run_tools(result, message.tool_calls)
        if result.output is not None:  # FINAL_TOOL took an answer that fits
            return


def check_budgets(result):
    """Every budget, decided in one place before each request: Stop names the one that ran out."""
    limits = result.limits
    if result.deadline and time.monotonic() >= result.deadline:
        raise Stop("deadline")
    if result.tool_calls > limits.max_tool_calls:
        raise Stop("tool_call_limit")
    if limits.max_tokens and result.usage["total_tokens"] >= limits.max_tokens:
        raise Stop("token_limit")
    if result.bad_answers >= OUTPUT_TRIES:
        raise Stop("invalid_output", f"the answer did not fit the schema {OUTPUT_TRIES} times")
    if result.steps >= limits.max_steps:
        raise Stop("step_limit")


def ask(result):
    """One model reply, waited for until the deadline, its tokens counted, its call ids unique. A
    reply cut short, filtered or refused ends the run with that status; nothing in it runs."""
    result.steps += 1
    asked = time.monotonic()
    options = dict(result.options)
    if result.steps > 1 or result.bad_answers:  # a forced tool choice, kept, would never answer
        options.pop("tool_choice", None)
    if result.schema is not None and result.bad_answers:
        options["tool_choice"] = {"type": "function", "function": {"name": FINAL_TOOL}}
    response = within(result.deadline, "the model", partial(
        chat, result.messages, tools_for(result), result.backend, result.on_note, result.on_text,
        options))
    message, finish = response.choices[0].message, response.choices[0].finish_reason
    for call in message.tool_calls or []:  # an empty or used id would break the API's pairing
        if not call.id or call.id in result.used_ids:
            call.id = f"call_{os.urandom(8).hex()}"
        result.used_ids.add(call.id)
    if response.usage and response.usage.total_tokens:  # the server's own count, when it sends one
        usage = {"prompt_tokens": response.usage.prompt_tokens,
                 "completion_tokens": response.usage.completion_tokens}
    else:  # an estimate: the whole conversation measured again, so only when there is no count
        usage = {
            "prompt_tokens": len(json.dumps(result.messages)) // CHARS_PER_TOKEN,
            "completion_tokens": len(json.dumps(assistant_message(message))) // CHARS_PER_TOKEN,
        }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    for name in result.usage:
        result.usage[name] += usage[name]
    ending = ("refused" if message.refusal
              else {"length": "incomplete", "content_filter": "content_filter"}.get(finish))
    calls = [] if ending else [call.id for call in message.tool_calls or []]
    result.record("reply", step=result.steps, finish_reason=finish, content=message.content,
                  refusal=message.refusal, calls=calls, usage=usage,
                  seconds=round(time.monotonic() - asked, 3))
    if ending:  # kept without its half-written calls
        result.messages.append({"role": "assistant", "content": message.content or ""})
        result.answer = message.content or message.refusal or ""
        raise Stop(ending, f"the model refused: {message.refusal}" if message.refusal else
                   f"the reply ended with finish_reason {finish!r}, so nothing in it was run")
    return message


def tools_for(result):
    """The tools of every request: ours, the MCP servers', and FINAL_TOOL for an answer's shape."""
    tools = {**result.tools, **({FINAL_TOOL: {"parameters": result.schema, "description":
                                              "Give your final answer, in this shape."}}
                                if result.schema is not None else {})}
    return [{"type": "function", "function": {"name": name, "description": tool["description"],
                                              "parameters": tool["parameters"]}}
            for name, tool in tools.items()]


def run_tools(result, calls):
    """Run one reply's tool calls: each checked and decided once; then the unasked ones run side by
    side, then the approved ones, so nothing a person agreed to changes what the others were
    checked against. Each gets a tool message, and a record saying whether it failed."""
    tools = {**result.tools, **({FINAL_TOOL: {"parameters": result.schema}}
                                if result.schema else {})}
    checked = {}
    for call in calls:  # held to its schema once; a call that breaks it keeps the BadCall
        try:
            checked[call.id] = check_call(call.function.name, call.function.arguments, tools)
        except BadCall as error:
            checked[call.id] = error
    told = repeated(result, calls, checked, result.schema is not None)
    decided = [(call, told[call.id], False) if call.id in told
               else decide(result, call, checked[call.id]) for call in calls]
    outcomes = {}
    for asked in (False, True):
        batch = [(call, action) for call, action, was_asked in decided
                 if callable(action) and was_asked == asked]
        until = result.deadline and result.deadline + GRACE
        for (call, action), box in zip(batch, at_once([action for _, action in batch], until)):
            outcomes[call.id] = box
    for call, action, _ in decided:
        box = outcomes.get(call.id, {})
        if not callable(action):  # nothing ran: its outcome was decided, (text, failed)
            text, failed = action
        elif "value" in box:
            text, failed = str(box["value"]), False
        else:  # it raised, or did not finish in time: the model hears why
            error, failed = box.get("error"), True
            text = (f"error: {error}" if isinstance(error, (ToolError, McpError)) else
                    f"error: {type(error).__name__}: {error}" if error else
                    "error: not finished by the deadline")
        text = truncate(mask(result.policy, text))  # masked first: a cut could split a secret
        result.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        result.record("tool", step=result.steps, id=call.id, name=call.function.name,
                      arguments=call.function.arguments, is_error=failed, result=text,
                      seconds=box.get("seconds", 0))
    if result.deadline and time.monotonic() >= result.deadline:
        raise Stop("deadline", "the deadline passed while tools were running")


def repeated(result, calls, checked, shaped):
    """The calls the model made, by meaning, in each of the last SAME_CALL_LIMIT turns: {id: the
    outcome telling it so}; they do not run again. Stop("repeated") when it goes on past that. A
    call's meaning is what it would do: its checked arguments, a path and a command normalized, so
    spacing, key order and ./ do not count. shaped: an answer to FINAL_TOOL is no call to repeat."""
    meanings = {}
    for call in calls:
        args = checked[call.id]
        if isinstance(args, BadCall):  # a call that broke its schema is compared as it was sent
            meanings[call.id] = call.function.name, call.function.arguments
            continue
        if isinstance(args.get("path"), str):
            args = {**args, "path": os.path.normpath(args["path"])}
        if isinstance(args.get("command"), str) and len(args["command"]) <= MAX_COMMAND:
            args = {**args, "command": guards.words(args["command"])}  # longer: refused unread
        meanings[call.id] = call.function.name, json.dumps(args, sort_keys=True)
    turn = {meanings[call.id] for call in calls
            if not (shaped and call.function.name == FINAL_TOOL)}
    result.recent = [*result.recent, turn][-SAME_CALL_LIMIT - 1:]
    if len(result.recent) > SAME_CALL_LIMIT and set.intersection(*result.recent):
        raise Stop("repeated",
                   f"the model made the same call in {SAME_CALL_LIMIT + 1} turns in a row")
    told = set.intersection(*result.recent) if len(result.recent) == SAME_CALL_LIMIT else set()
    return {call.id: (f"error: not run: you made this exact call in {SAME_CALL_LIMIT} turns in a "
                      "row; its result will not change, so use what you have or try something "
                      "else", True) for call in calls if meanings[call.id] in told}


def decide(result, call, args):
    """(call, what will run, whether a person was asked): what will run is a function returning the
    outcome, or the outcome (text, failed) saying why nothing will. Deciding is on the clock, a
    person's answer too."""
    result.tool_calls += 1
    if call.function.name == FINAL_TOOL and result.schema is not None:
        return call, final_answer(result, args), False
    result.on_call(result.steps, call.function.name, call.function.arguments)
    if result.tool_calls > result.limits.max_tool_calls:
        return call, ("error: not run: the run is out of tool calls (its tool-call budget)",
                      True), False
    try:
        if isinstance(args, BadCall):
            raise args
        tool = result.tools[call.function.name]
        action, question = within(result.deadline, "the harness to decide the call", partial(
            plan, result.policy, tool, args, result.deadline))
        asked = question and tool["kind"] not in result.policy.unasked  # not approved by --yes
        if asked and within(result.deadline, "your answer",
                            partial(result.approve, question)) is not True:
            return call, ("error: the user declined this call; do not try it again, find another "
                          "way or answer", True), True
        return call, action, bool(question)
    except ToolError as error:  # refused, or a broken call: the message says why
        return call, (truncate(f"error: {error}"), True), False


def final_answer(result, args):
    """Take the answer given to FINAL_TOOL when it fits the output schema (and its model, if one);
    else say what does not fit."""
    try:
        if isinstance(args, BadCall):
            raise args
        result.output = result.model.model_validate(args) if result.model else args
    except (BadCall, ValueError) as error:  # ValueError: pydantic's, for what a schema cannot say
        result.bad_answers += 1
        return f"error: {error}. Call {FINAL_TOOL} again with an answer that fits.", True
    result.answer = json.dumps(args)
    return "accepted: that is the final answer", False


def within(deadline, what, function):
    """function(), waited for until the deadline; Stop("deadline") if the time is up first."""
    if deadline is None:
        return function()
    box = at_once([function], deadline)[0]
    if "error" in box:
        raise box["error"]
    if "value" not in box:
        raise Stop("deadline", f"the deadline passed while waiting for {what}")
    return box["value"]


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
