"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      python harness.py --stream --deadline 60 --trace run.jsonl "Run `make test` and tell me what failed"
      python harness.py --output-schema answer.json "How many files are here? Answer as JSON."
The model proposes; plan() in tools.py decides what runs at once, what asks you first, and what never runs.
Every run ends with a status and an exit code: answered, the budget that ran out first, or what went wrong.
"""
import time

STARTED = time.monotonic()  # --deadline counts from here: the imports below take most of a second

import argparse
import json
import logging
import os
import shutil
import signal
import stat
import sys
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import guards
import shell
from backend import BACKENDS, BackendError, chat, choose
from guards import ToolError, mask, shown
from tools import JSON_TYPES, MAX_COMMAND, REGISTRY, TOOLS, BadCall, check_call, plan, truncate

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
MAX_TOOL_CALLS = 30  # tool calls per task, refused ones included
SHOWN_CHARS = 200  # of a call's arguments printed on screen; the model gets them whole
CHARS_PER_TOKEN = 4  # to estimate tokens when a server does not count them
TRACE_CHARS = 20_000  # longest text kept in one field of the trace; the rest is counted, not written
GRACE = 1  # seconds past the deadline that a command stopped by it (or the run's report) has to finish
OUTPUT_TRIES = 3  # answers that do not fit the output schema before the run ends as invalid_output
FINAL_TOOL = "final_answer"  # the tool a model gives an answer with a shape to
# the words of an output schema that problem() checks, or that change nothing, each in its shape; others are refused
SCHEMA_WORDS = {"type": str, "properties": dict, "required": list, "items": dict, "enum": list, "description": str,
                "title": str, "default": object, "examples": list, "additionalProperties": bool}
SAME_CALL_LIMIT = 3  # the same call in this many turns in a row: the model is told; once more and the run stops
EXIT_CODES = {"answered": 0, "provider_error": 1, "output_error": 1, "internal_error": 1, "step_limit": 3,
              "tool_call_limit": 3, "token_limit": 3, "deadline": 3, "repeated": 3, "incomplete": 4,
              "content_filter": 4, "refused": 4, "invalid_output": 4, "interrupted": 130}
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")
EMPTY_ANSWER = "Your reply was empty. Answer the task in words, or call a tool."
SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}  # SIGTERM and SIGHUP end a run as Ctrl-C does
BLOCKED = []  # writes to standard output given up on: a thread still waits in one, holding its lock


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
    output: object = None  # the answer, checked against the output schema (an instance of its model, if one)
    bad_answers: int = 0  # answers that did not fit the output schema
    used_ids: set = field(default_factory=set)  # every tool call id so far: a repeated one is replaced
    recent: list = field(default_factory=list)  # each turn's calls, by meaning, to see a model going round


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
    deadline: float | None  # a time.monotonic(): the moment the run's time is up
    policy: guards.Policy
    trace: Trace
    on_text: object = None  # streamed text, as it arrives
    options: dict = field(default_factory=dict)  # tool_choice, parallel_tool_calls, temperature, ...
    output: dict = None  # a JSON schema the answer must fit
    model: type = None  # the Pydantic model it came from, if it did: the answer becomes its instance


def ask_user(question, whole=False):
    """The default approval: ask on the terminal, the question fitted to it unless whole (an answer ? shows it
    whole); only y or yes is a yes. The question is safe to show already: guards.question() built it."""
    size = os.get_terminal_size(2) if os.isatty(2) else shutil.get_terminal_size()  # the terminal it is asked on
    tell(f"{question if whole else guards.fit(question, size.lines - 2, size.columns)}? [y/N] ", end="")
    answer = sys.stdin.readline() if sys.stdin else ""
    if not (sys.stdin and sys.stdin.isatty()):  # show what was piped in, as a terminal would have
        tell(shown(answer.strip(), one_line=True) or "(end of input: no)")
    if answer.strip() == "?" and not whole:
        return ask_user(question, whole=True)
    return answer.strip().lower() in ("y", "yes")


def run(task, backend=None, approve=ask_user, limits=None, trace=None, started=None, history=None, on_text=None,
        options=None, output=None, policy=None):
    """Run one task until it ends; the Result's status says how. approve(question) is True for yes; trace is a JSONL
    file name; started is the time.monotonic() the deadline counts from; history an earlier result.messages to go
    on from; options go into every request; output is the shape the answer, given to FINAL_TOOL, must have: a JSON
    schema (a dict), or a Pydantic model class, whose instance result.output then is;
    policy says what the run may touch (default: guards.policy(), the current folder, asking as the command line)."""
    limits, started = limits or Limits(), started or time.monotonic()
    policy = policy or guards.policy(trace=trace)
    result = Result(messages=[*(history or [{"role": "system", "content": SYSTEM}]), {"role": "user", "content": task}])
    model = output if isinstance(output, type) else None  # a Pydantic model class gives its own schema
    settings = Settings(backend, approve, limits, limits.deadline and started + limits.deadline, policy,
                        Trace(policy=policy), on_text, options or {},
                        model.model_json_schema() if model else output, model)
    result.used_ids.update(m["tool_call_id"] for m in result.messages if m.get("tool_call_id"))  # history's
    if not policy.sandbox and policy.why_none != "--sandbox off":
        note(f"no sandbox ({policy.why_none}): commands that are not plainly read-only ask you first, even with "
             "--yes; --sandbox off says you accept that.")
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
    for process in list(shell.RUNNING):  # nothing a command started outlives the run
        shell.stop(process)
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
        if not message.tool_calls and (message.content or "").strip() and settings.output is None:
            result.answer = message.content
            return
        if not message.tool_calls and settings.output is not None:  # words, where a shape was asked for
            result.bad_answers += 1
            result.messages.append({"role": "user", "content": f"Give your final answer by calling {FINAL_TOOL}."})
            continue
        if not message.tool_calls:  # an empty answer gets one nudge; a second one ends the run
            if EMPTY_ANSWER in (m["content"] for m in result.messages if m["role"] == "user"):
                raise Stop("incomplete", "the model gave an empty answer twice")
            result.messages.append({"role": "user", "content": EMPTY_ANSWER})
            continue
        run_tools(settings, result, message.tool_calls)
        if result.output is not None:  # FINAL_TOOL took an answer that fits
            return


def check_budgets(settings, result):
    """Every budget, decided in one place before each request: raises Stop naming the one that ran out."""
    limits = settings.limits
    if settings.deadline and time.monotonic() >= settings.deadline:
        raise Stop("deadline")
    if result.tool_calls > limits.max_tool_calls:
        raise Stop("tool_call_limit")
    if limits.max_tokens and result.usage["total_tokens"] >= limits.max_tokens:
        raise Stop("token_limit")
    if result.bad_answers >= OUTPUT_TRIES:
        raise Stop("invalid_output", f"the answer did not fit the schema {OUTPUT_TRIES} times")
    if result.steps >= limits.max_steps:
        raise Stop("step_limit")


def ask(settings, result):
    """One model reply, waited for until the deadline; its tokens counted, its call ids made unique, its record
    traced. A reply cut short, filtered or refused ends the run with that status, and nothing in it runs."""
    result.steps += 1
    asked = time.monotonic()
    tools, options = TOOLS, dict(settings.options)
    if result.steps > 1 or result.bad_answers:  # a forced tool choice, held on, would never let it answer
        options.pop("tool_choice", None)
    if settings.output is not None:
        tools = [*TOOLS, {"type": "function", "function": {"name": FINAL_TOOL, "parameters": settings.output,
                                                           "description": "Give your final answer, in this shape."}}]
        if result.bad_answers:
            options["tool_choice"] = {"type": "function", "function": {"name": FINAL_TOOL}}
    response = within(settings.deadline, "the model", partial(chat, result.messages, tools, settings.backend, note,
                                                               settings.on_text, options))
    message, finish = response.choices[0].message, response.choices[0].finish_reason
    for call in message.tool_calls or []:  # a server may send an empty id, or one used before: the next
        if not call.id or call.id in result.used_ids:  # request would then break the API's pairing rules
            call.id = f"call_{os.urandom(8).hex()}"
        result.used_ids.add(call.id)
    if response.usage and response.usage.total_tokens:  # the server's own count, when it sends one
        usage = {"prompt_tokens": response.usage.prompt_tokens, "completion_tokens": response.usage.completion_tokens}
    else:  # an estimate: reading the whole conversation again costs a little more each step, so only then
        usage = {"prompt_tokens": len(json.dumps(result.messages)) // CHARS_PER_TOKEN,
                 "completion_tokens": len(json.dumps(assistant_message(message))) // CHARS_PER_TOKEN}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    for name in result.usage:
        result.usage[name] += usage[name]
    ending = "refused" if message.refusal else {"length": "incomplete", "content_filter": "content_filter"}.get(finish)
    calls = [] if ending else [call.id for call in message.tool_calls or []]  # an ending reply's calls never run
    settings.trace.record("reply", step=result.steps, finish_reason=finish, content=message.content,
                          refusal=message.refusal, calls=calls, usage=usage, seconds=round(time.monotonic() - asked, 3))
    if ending:
        result.messages.append({"role": "assistant", "content": message.content or ""})  # no half-written calls
        result.answer = message.content or message.refusal or ""
        raise Stop(ending, f"the model refused: {message.refusal}" if message.refusal else
                   f"the reply ended with finish_reason {finish!r}, so nothing in it was run")
    return message


def run_tools(settings, result, calls):
    """Run one reply's tool calls: each checked and decided once; then the unasked ones run side by side, then the
    approved ones, so nothing a person agreed to changes what the others were checked against. Each gets a tool
    message, and a record saying whether it failed."""
    tools = {**REGISTRY, **({FINAL_TOOL: {"parameters": settings.output}} if settings.output else {})}
    checked = {}
    for call in calls:  # each call held to its schema once; one that breaks it keeps the BadCall that says how
        try:
            checked[call.id] = check_call(call.function.name, call.function.arguments, tools)
        except BadCall as error:
            checked[call.id] = error
    told = repeated(result, calls, checked, settings.output is not None)
    decided = [(call, told[call.id], False) if call.id in told else decide(settings, result, call, checked[call.id])
               for call in calls]
    outcomes = {}
    for asked in (False, True):
        batch = [(call, action) for call, action, was_asked in decided if callable(action) and was_asked == asked]
        until = settings.deadline and settings.deadline + GRACE
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
            text = (f"error: {error}" if isinstance(error, ToolError) else
                    f"error: {type(error).__name__}: {error}" if error else "error: not finished by the deadline")
        text = truncate(mask(settings.policy, text))  # masked before it is cut: a cut could split a secret
        result.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        settings.trace.record("tool", step=result.steps, id=call.id, name=call.function.name,
                              arguments=call.function.arguments, is_error=failed, result=text,
                              seconds=box.get("seconds", 0))
    if settings.deadline and time.monotonic() >= settings.deadline:
        raise Stop("deadline", "the deadline passed while tools were running")


def repeated(result, calls, checked, shaped):
    """The calls the model made, by meaning, in each of the last SAME_CALL_LIMIT turns: {id: the outcome telling
    it so}; they do not run again. Raises Stop("repeated") when it goes on past that. A call's meaning is what it
    would do: its checked arguments, defaults filled in, a path and a command normalized, so spacing, key order and
    ./ do not count: read_file '{"path": "./a"}' and '{ "path":"a", "offset": 1 }' match. shaped: an answer given
    to FINAL_TOOL is no call to repeat (OUTPUT_TRIES counts the ones that do not fit)."""
    meanings = {}
    for call in calls:
        args = checked[call.id]
        if isinstance(args, BadCall):  # a call that broke its schema is compared as it was sent
            meanings[call.id] = call.function.name, call.function.arguments
            continue
        if isinstance(args.get("path"), str):
            args = {**args, "path": os.path.normpath(args["path"])}
        if isinstance(args.get("command"), str) and len(args["command"]) <= MAX_COMMAND:  # longer: refused unread
            args = {**args, "command": guards.words(args["command"])}
        meanings[call.id] = call.function.name, json.dumps(args, sort_keys=True)
    turn = {meanings[call.id] for call in calls if not (shaped and call.function.name == FINAL_TOOL)}
    result.recent = [*result.recent, turn][-SAME_CALL_LIMIT - 1:]
    again = set.intersection(*result.recent) if len(result.recent) > SAME_CALL_LIMIT else set()
    if again:
        raise Stop("repeated", f"the model made the same call in {SAME_CALL_LIMIT + 1} turns in a row")
    told = set.intersection(*result.recent) if len(result.recent) == SAME_CALL_LIMIT else set()
    return {call.id: (f"error: not run: you made this exact call in {SAME_CALL_LIMIT} turns in a row; its result "
                      "will not change, so use what you have or try something else", True) for call in calls
            if meanings[call.id] in told}


def decide(settings, result, call, args):
    """(call, what will run, whether a person was asked): what will run is a function returning the outcome, or
    the outcome (text, failed) that says why nothing will. Deciding is on the clock, a person's answer too."""
    result.tool_calls += 1
    if call.function.name == FINAL_TOOL and settings.output is not None:
        return call, final_answer(settings, result, args), False
    say(f"[{result.steps}] {shown(call.function.name, one_line=True)} {cut(call.function.arguments)}",
        settings.deadline)
    if result.tool_calls > settings.limits.max_tool_calls:
        return call, ("error: not run: the run is out of tool calls (its tool-call budget)", True), False
    try:
        if isinstance(args, BadCall):
            raise args
        tool = REGISTRY[call.function.name]
        action, question = within(settings.deadline, "the harness to decide the call", partial(
            plan, settings.policy, tool, args, settings.deadline))
        asked = question and tool["kind"] not in settings.policy.unasked  # not approved in advance (--yes)
        if asked and within(settings.deadline, "your answer", partial(settings.approve, question)) is not True:
            return call, ("error: the user declined this call; do not try it again, find another way or answer",
                          True), True
        return call, action, bool(question)
    except ToolError as error:  # refused, or a broken call: the message says why
        return call, (truncate(f"error: {error}"), True), False


def final_answer(settings, result, args):
    """Take the answer given to FINAL_TOOL when it fits the output schema (and its model, if there is one); else
    say what does not fit."""
    try:
        if isinstance(args, BadCall):
            raise args
        result.output = settings.model.model_validate(args) if settings.model else args
    except (BadCall, ValueError) as error:  # ValueError: pydantic's ValidationError, for what a schema cannot say
        result.bad_answers += 1
        return f"error: {error}. Call {FINAL_TOOL} again with an answer that fits.", True
    result.answer = json.dumps(args)
    return "accepted: that is the final answer", False


def at_once(functions, deadline):
    """Run the functions side by side, each on a thread, and wait for them until the deadline (a time.monotonic(),
    or None). Returns a box for each: {"value": returned}, {"error": raised}, or {} when not finished in time."""
    boxes = [{} for _ in functions]

    def fill(box, function):
        began = time.monotonic()
        try:
            box["value"] = function()
        except BaseException as error:  # handed to the caller, who decides
            box["error"] = error
        box["seconds"] = round(time.monotonic() - began, 3)

    if deadline is None and len(functions) == 1:  # nothing to wait for side by side: a thread would only cost
        fill(boxes[0], functions[0])
        if isinstance(boxes[0].get("error"), KeyboardInterrupt):  # Ctrl-C, here in the main thread, ends the run
            raise boxes[0]["error"]
        return boxes
    threads = [threading.Thread(target=fill, args=pair, daemon=True) for pair in zip(boxes, functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    return boxes


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


def note(text):
    tell(f"note: {shown(text)}")


def cut(text, limit=SHOWN_CHARS):
    """Text for one line of the screen, made safe to show: cut("x" * 300) -> 200 x's + " [... 100 more characters]" """
    more = f" [... {len(text) - limit} more characters]" if len(text) > limit else ""
    return shown(text[:limit], one_line=True) + more


def say(text, deadline=None, end="\n"):
    """Print to standard output, waited for until the deadline; output that cannot be written (its reader gone,
    as in `| head -c 1`; a full disk) ends the run as output_error."""
    try:
        if sys.stdout is None:  # the run began with standard output closed: print() would write nothing, silently
            raise OSError("no standard output")
        within(deadline, "the terminal", partial(print, text, end=end, flush=True))
    except Stop:
        BLOCKED.append(text)
        raise
    except OSError:
        if sys.stdout:  # from now on it writes nowhere, Python's own last flush too
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise Stop("output_error", "standard output could not be written: its reader went away, or the disk is full")


def tell(text, end="\n"):
    """Print to standard error, if it can be written: notes and questions are not worth ending a run for."""
    try:
        print(text, end=end, file=sys.stderr, flush=True)
    except AttributeError:  # the run began with standard error closed
        pass
    except OSError:  # from now on it writes nowhere, as say() does: Python's own last flush would fail, exit 120
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())


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
    parser.add_argument("--stream", action="store_true", help="print the model's text as it arrives")
    parser.add_argument("--tool-choice", choices=("auto", "none", "required"), help="for the first request")
    parser.add_argument("--no-parallel-tool-calls", action="store_true", help="ask for one tool call a turn")
    parser.add_argument("--output-schema", metavar="FILE", help="a JSON schema the answer must fit; printed as JSON")
    args = parser.parse_args(argv)
    try:
        args.output = json.loads(Path(args.output_schema).read_text()) if args.output_schema else None
        json.dumps(args.output, allow_nan=False)  # NaN is Python's, not JSON's: no server would take the tool
        if args.output is not None and (wrong := unusable(args.output)):
            raise ValueError(wrong)
    except (OSError, ValueError, RecursionError) as error:
        parser.error(f"--output-schema {args.output_schema}: {error}")
    args.task = args.task.encode("utf-8", "surrogateescape").decode("utf-8", "replace")  # bytes that are no UTF-8
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    for name in ("max_steps", "max_tool_calls", "max_tokens", "deadline"):
        if getattr(args, name) is not None and not getattr(args, name) > 0:  # NaN is not above 0 either
            parser.error(f"--{name.replace('_', '-')} must be above 0, not {getattr(args, name)}")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    return args


def unusable(schema, where="the schema"):
    """Why answers cannot be checked against a schema, or None: it must describe an object, with only SCHEMA_WORDS
    in their shapes: unusable({"type": "object", "anyOf": []}) -> "the schema uses anyOf, which is not checked here" """
    if where == "the schema" and not (isinstance(schema, dict) and schema.get("type") == "object"):
        return "the schema must describe an object, with properties"
    if not isinstance(schema, dict) or schema.keys() - SCHEMA_WORDS:
        extra = ", ".join(sorted(schema.keys() - SCHEMA_WORDS)) if isinstance(schema, dict) else json.dumps(schema)
        return f"{where} uses {extra}, which is not checked here"
    word = next((w for w, shape in SCHEMA_WORDS.items() if w in schema and not isinstance(schema[w], shape)), None)
    if word or schema.get("type", "object") not in JSON_TYPES:  # a list of types would crash problem()
        word = word or "type"
        return f"{where} has {word} {json.dumps(schema[word])[:50]}, which is not checked here"
    parts = [*(schema.get("properties") or {}).items(), *([("items", schema["items"])] if "items" in schema else [])]
    return next(filter(None, (unusable(part, f"{where}.{name}") for name, part in parts)), None)


def main(argv=None):
    args = arguments(argv)
    trace = args.trace and os.path.abspath(args.trace)
    policy = guards.policy(args.workspace, args.yes, args.sandbox, trace)
    os.chdir(policy.workspace)  # a relative path, even /proc/self/cwd/.., means the same to a check and a command
    logging.getLogger("openai._base_client").setLevel(logging.INFO)  # it logs its retries: send() makes them a note
    try:
        backend = choose(args.backend, args.model, args.base_url)
    except BackendError as error:
        sys.exit(f"error: {shown(str(error))}")
    received = []

    def interrupted(number, frame):  # the first signal ends the run; one while it closes is only noted
        received.append(number)
        if len(received) == 1:
            raise KeyboardInterrupt

    on_signals(interrupted)
    options = {"tool_choice": args.tool_choice} if args.tool_choice else {}
    if args.no_parallel_tool_calls:
        options["parallel_tool_calls"] = False
    result = run(args.task, backend, trace=trace, policy=policy, started=STARTED,
                 limits=Limits(args.max_steps, args.max_tool_calls, args.max_tokens, args.deadline),
                 on_text=partial(stream_text, STARTED + args.deadline if args.deadline else None) if args.stream
                 else None, options=options, output=args.output)
    on_signals(signal.SIG_IGN)  # the run is over: a late signal changes nothing
    code = SIGNAL_EXIT[signal.Signals(received[0]).name] if received else EXIT_CODES[result.status]
    try:  # after a signal, the report gets GRACE seconds too: the terminal may be what the run was stuck in
        report(result, args.stream, time.monotonic() + GRACE if received else
               STARTED + args.deadline + GRACE if args.deadline else None)
    except Stop as stop:  # what could not be written is lost; the status stands, but an unseen answer is no success
        tell(f"error: {stop.error}")
        code = code or EXIT_CODES[stop.status]
    if BLOCKED:  # Python's own last flush would wait for that thread for ever: leave without it
        os._exit(code)
    sys.exit(code)


def stream_text(deadline, piece):
    """Print a piece of a streamed reply as it comes; a run already out of time prints no more."""
    if deadline is None or time.monotonic() < deadline:
        say(shown(piece), end="")


def on_signals(handler):
    for name in SIGNAL_EXIT:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), handler)


def report(result, streamed=False, deadline=None):
    """Print the answer (unless streamed), why the run stopped, and a one-line summary on standard error."""
    if streamed and result.answer and result.output is None:
        say("", deadline)  # the answer is on screen already: end its line
    if result.status != "answered":
        say(f"stopped: {result.status.replace('_', ' ')}", deadline)
    if result.error:
        tell(f"error: {shown(result.error)}")
    if result.answer and (not streamed or result.output is not None):
        say(shown(result.answer), deadline)
    tell(f"{result.status}: {result.steps} steps, {result.tool_calls} tool calls, {result.usage['total_tokens']} "
         f"tokens, {result.seconds:.1f} s")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C before the run began: nothing to close
        sys.exit(130)
