"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      python harness.py --stream --deadline 60 --trace run.jsonl "Run `make test` and tell me what failed"
      python harness.py --output-schema answer.json "How many files are here? Answer as JSON."
Every call is checked against its tool's schema, a write or a command that is not plainly read-only runs only
after you say yes, the calls of one turn run at the same time, and every run ends with a status and exit code.
"""
import time

STARTED = time.monotonic()  # --deadline counts from here: the imports below take most of a second

import argparse
import errno
import json
import os
import shlex
import signal
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import guards
import shell
from backend import BACKENDS, BackendError, OutOfTime, chat, choose
from guards import ToolError, visible
from tools import MAX_CHARS, NOTE_ROOM, REGISTRY, SCHEMAS, TOOLS, BadCall, check_call, plan

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
MAX_TOOL_CALLS = 30  # tool calls per task, refused ones included
SAME_CALL_LIMIT = 3  # the same call in this many turns in a row: the model is told; once more and the run stops
OUTPUT_TRIES = 3  # answers that fail the output schema before the run ends as invalid_output
MAX_SCHEMA_DEPTH = 10  # objects nested in an --output-schema; more is refused
GRACE = 0.5  # seconds past the deadline a tool may take to say how it was stopped
BACKSTOP = 0.7  # seconds past the deadline, or after a signal, that a wait on the terminal is cut short
TRACE_CHARS = 20_000  # longest text kept in one trace field; the rest is counted, not written
FINAL_TOOL = "final_answer"  # the tool a model calls with a structured answer, when the backend takes no schema
EXIT_CODES = {"answered": 0, "provider_error": 1, "output_error": 1, "step_limit": 3, "tool_call_limit": 3,
              "token_limit": 3, "deadline": 3, "repeated": 3, "incomplete": 4, "content_filter": 4, "refused": 4,
              "invalid_output": 4, "interrupted": 130}
SIGNAL_EXIT = {signal.SIGINT: 130, getattr(signal, "SIGTERM", 15): 143, getattr(signal, "SIGHUP", 1): 129}
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")
EMPTY_ANSWER = "Your reply was empty. Answer the task in words, or call a tool."


@dataclass
class Limits:
    """The budgets of one run; None means no limit."""
    max_steps: int = MAX_STEPS
    max_tool_calls: int = MAX_TOOL_CALLS
    max_tokens: int | None = None  # tokens as the provider counts them (estimated when it sends no count)
    deadline: float | None = None  # seconds of wall-clock time, from `started`


@dataclass
class Result:
    """How a run ended and what it used; messages is the whole conversation, ready to inspect or continue."""
    status: str = "running"  # then one of EXIT_CODES
    answer: str = ""
    error: str = ""  # what went wrong, explained, when the status is not answered
    steps: int = 0
    tool_calls: int = 0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    seconds: float = 0.0
    messages: list = field(default_factory=list)
    output: object = None  # the validated answer, when run() was given output=


@dataclass
class Settings:
    """What a run is set up with at its start (who answers, who approves, the budgets, the callbacks), and what
    the loop keeps track of on the way."""
    backend: dict
    approve: object
    limits: Limits
    options: dict
    started: float  # a time.monotonic(): the deadline counts from here
    trace: "Trace" = None
    on_text: object = None  # streamed text, as it arrives
    on_call: object = None  # each tool call, before it is decided: on_call(step, name, arguments)
    on_note: object = None  # each retry, in words
    output: object = None  # a Pydantic model the answer must fit
    final_tool: bool = False  # the answer comes as a call of FINAL_TOOL (the backend takes no schema with tools)
    tool_choice: object = None  # "auto", "none", "required", or a tool's name: for the first request
    parallel_tool_calls: bool | None = None
    used_ids: set = field(default_factory=set)  # every call id so far: a repeated id is replaced
    recent: list = field(default_factory=list)  # each turn's calls, by meaning: repeated-call handling
    nudged: bool = False  # an empty reply was answered with a nudge already
    bad_answers: int = 0  # answers that did not fit the output schema


class Stop(Exception):
    """Ends the run with a status, e.g. Stop("step_limit") or Stop("output_error", "the trace file is full")."""

    def __init__(self, status, error=""):
        super().__init__(error or status)
        self.status, self.error = status, error


class Declined(ToolError):
    """The person said no to a call."""


class Trace:
    """The JSONL trace: one JSON object a line, each with the run's id, appended whole in one write and flushed at
    once, so runs sharing a file never mix their lines, and a crash loses nothing already done."""

    def __init__(self, path=None):
        self.run, self.file = os.urandom(6).hex(), None
        try:
            self.file = open(path, "ab", buffering=0, opener=regular_file) if path else None
        except OSError as error:
            raise Stop("output_error", f"the trace file {path} cannot be opened: {error.strerror}") from None

    def record(self, kind, **fields):
        if self.file:
            fields = {name: capped(value, TRACE_CHARS) for name, value in fields.items()}
            line = (json.dumps({"run": self.run, "type": kind, **fields}) + "\n").encode()  # ASCII only
            try:
                while line:  # a write may take only a part (a signal, a file size limit): the rest follows
                    line = line[self.file.write(line):]
            except OSError as error:
                self.file = None  # one message is enough
                raise Stop("output_error", f"the trace could not be written: {error.strerror}") from None


def regular_file(path, flags):
    """An opener for open() that opens regular files only: a write to a FIFO or a terminal can wait for ever, past
    any deadline, and so can opening a FIFO nobody reads (hence O_NONBLOCK, which Windows does without)."""
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "it is not a regular file (a pipe or a device could hold the run up)")
    return fd


def capped(value, limit):
    """A text any API takes, of at most limit characters: when longer, cut, with a note of how much was cut; a lone
    surrogate (from a file name that is not UTF-8) replaced."""
    if isinstance(value, str) and not value.isascii():
        value = value.encode("utf-8", errors="replace").decode("utf-8")
    if isinstance(value, str) and len(value) > limit:
        kept = limit - NOTE_ROOM
        return value[:kept] + f"[... {len(value) - kept} more characters cut]"
    return value


def ask_user(question):
    """The default approval: ask on the terminal. Without a terminal, one line is read from standard input, and
    the end of input means no."""
    write(sys.stderr, f"{visible(question)}? [y/N] ")
    try:
        answer = waited_for("an answer", sys.stdin.readline)
    except OutOfTime:
        write(sys.stderr, "(no answer in time)\n")
        raise
    if not sys.stdin.isatty():
        write(sys.stderr, (visible(answer.strip()) or "(end of input: no)") + "\n")  # show what was piped in
    return answer.strip().lower() in ("y", "yes")


def run(task, *, backend=None, approve=ask_user, limits=None, trace=None, options=None, history=(), on_text=None,
        on_call=None, on_note=None, output=None, tool_choice=None, parallel_tool_calls=None, started=None):
    """Run one task until it ends, and return a Result whose status says how it ended.
    approve(question) decides the calls that need a person (only True means yes); limits is a Limits; trace is a
    file name for the JSONL trace; options (temperature, ...) go with every request; history is an earlier
    result.messages to continue from; on_text, on_call and on_note hear what happens as it happens; output is a
    Pydantic model the answer must fit; tool_choice and parallel_tool_calls steer the model's calls; started is
    the time.monotonic() the deadline counts from (default: now)."""
    result = Result(messages=[*(history or [{"role": "system", "content": SYSTEM}]), {"role": "user", "content": task}])
    settings = Settings(backend, approve, limits or Limits(), options or {}, started or time.monotonic(), Trace(),
                        on_text, on_call, on_note, output, tool_choice=tool_choice,
                        parallel_tool_calls=parallel_tool_calls, used_ids=call_ids(result.messages))
    try:
        settings.trace = Trace(trace)
        settings.backend = backend or choose()
        settings.final_tool = output is not None and not BACKENDS.get(settings.backend["name"], {}).get(
            "schema_with_tools")
        settings.trace.record("start", task=task, backend=settings.backend["name"], model=settings.backend["model"],
                              limits=vars(settings.limits), options=settings.options)
        loop(settings, result)
        result.status = "answered"
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
    except OutOfTime as error:
        result.status, result.error = "deadline", str(error)
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    finally:
        shell.stop_all()  # nothing a command started outlives the run
    return finish(settings, result)


def finish(settings, result):
    """Close the run: every call answered (so `history=` can continue), the time taken, the trace's end record."""
    result.seconds = round(time.monotonic() - settings.started, 3)
    try:
        answer_every_call(settings, result)
        settings.trace.record("end", status=result.status, answer=result.answer, error=result.error,
                              steps=result.steps, tool_calls=result.tool_calls, usage=result.usage,
                              seconds=result.seconds)
    except Stop as stop:  # the trace itself failed: say so, and keep the run's own status
        result.error = result.error or stop.error
    return result


def answer_every_call(settings, result):
    """The conversation stays one the API accepts, whatever ended the run: a call without a result gets one."""
    last = max((n for n, m in enumerate(result.messages) if m.get("tool_calls")), default=None)
    if last is None:
        return
    answered = {m.get("tool_call_id") for m in result.messages[last + 1:]}
    for call in result.messages[last]["tool_calls"]:
        if call["id"] not in answered:
            content = f"error: not run: the run ended first ({result.status})"
            result.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            settings.trace.record("tool", step=result.steps, id=call["id"], name=call["function"]["name"],
                                  arguments=call["function"]["arguments"], is_error=True, result=content, seconds=0.0)


def loop(settings, result):
    """The phase 1 loop, with its steps named: check the budgets, ask, keep the reply, run its tool calls."""
    while True:
        check_budgets(settings, result)
        reply = ask(settings, result)
        result.messages.append(assistant_message(reply))
        if not reply.tool_calls:
            if answered(settings, result, reply):
                return
            continue
        run_tools(settings, result, reply.tool_calls)
        if result.output is not None:  # the final_answer tool took a valid answer
            return


def check_budgets(settings, result):
    """Every budget, decided in one place, before each request: raises Stop naming the one that ran out."""
    limits = settings.limits
    if result.tool_calls > limits.max_tool_calls:
        raise Stop("tool_call_limit")
    if limits.deadline and time.monotonic() >= deadline(settings):
        raise Stop("deadline")
    if limits.max_tokens and result.usage["total_tokens"] >= limits.max_tokens:
        raise Stop("token_limit")
    if settings.bad_answers >= OUTPUT_TRIES:
        raise Stop("invalid_output", f"the answer did not fit the schema {OUTPUT_TRIES} times")
    if result.steps >= limits.max_steps:
        raise Stop("step_limit")


def deadline(settings):
    """The run's deadline as a time.monotonic(), or None."""
    return settings.started + settings.limits.deadline if settings.limits.deadline else None


def ask(settings, result):
    """One model reply: sent with the time that is left, counted, traced, its call ids made unique. A reply cut
    off, filtered or refused ends the run with that status, and nothing in it runs."""
    result.steps += 1
    asked = time.monotonic()
    response = chat(result.messages, tools=tools_for(settings), backend=settings.backend, deadline=deadline(settings),
                    options=request_options(settings, result), on_text=settings.on_text, on_note=settings.on_note)
    choice, reply = response.choices[0], response.choices[0].message
    refusal = getattr(reply, "refusal", None)
    usage = add_usage(result, response)
    fresh_ids(reply.tool_calls or [], settings.used_ids)
    settings.trace.record("reply", step=result.steps, finish_reason=choice.finish_reason, content=reply.content,
                          refusal=refusal, calls=[call.id for call in reply.tool_calls or []], usage=usage,
                          seconds=round(time.monotonic() - asked, 3))
    ending = "refused" if refusal else {"length": "incomplete", "content_filter": "content_filter"}.get(
        choice.finish_reason)
    if ending:
        result.messages.append({"role": "assistant", "content": reply.content or ""})  # no half-written calls
        result.answer = reply.content or refusal or ""
        raise Stop(ending, f"the model refused: {refusal}" if refusal else
                   f"the reply ended with finish_reason {choice.finish_reason!r}, so nothing in it was run")
    return reply


def tools_for(settings):
    """The tools sent with each request: ours, and the final-answer tool when the answer must have a shape."""
    if not settings.final_tool:
        return TOOLS
    return [*TOOLS, {"type": "function", "function": {
        "name": FINAL_TOOL, "description": "Give your final answer in exactly this shape. Call it once, at the end.",
        "parameters": settings.output.model_json_schema()}}]


def request_options(settings, result):
    """The options for this request: the caller's, then the product controls. A forced tool choice holds for the
    first request only (held longer, the model could never answer in words); after an answer in words, a final
    answer is forced until one is given."""
    options = dict(settings.options)
    choice = settings.tool_choice if result.steps == 1 else None
    if settings.final_tool and settings.bad_answers:
        choice = FINAL_TOOL
    if choice:
        options["tool_choice"] = choice if choice in ("auto", "none", "required") else {
            "type": "function", "function": {"name": choice}}
    if settings.parallel_tool_calls is not None:
        options["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.output is not None and not settings.final_tool:
        options["response_format"] = {"type": "json_schema", "json_schema": {
            "name": settings.output.__name__, "schema": settings.output.model_json_schema()}}
    return options


def add_usage(result, response):
    """Add one reply's tokens to the run's. A server that sends no count gets an estimate (4 characters a token,
    marked "estimated"), so a token budget still holds. Returns what was added."""
    usage = response.usage.model_dump(exclude_none=True) if response.usage else None
    if not usage:
        completion = len(json.dumps(assistant_message(response.choices[0].message))) // 4 + 1
        prompt = len(json.dumps(result.messages)) // 4 + 1
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                 "estimated": True}
    for key in result.usage:
        result.usage[key] += usage.get(key) or 0
    return usage


def fresh_ids(calls, used):
    """Servers sometimes send an empty id, or one already used (within a reply or across turns): give those calls
    a fresh id before anything refers to it, or the next request breaks the API's pairing rules."""
    for call in calls:
        if not call.id or call.id in used:
            call.id = f"call_{os.urandom(12).hex()}"
        used.add(call.id)


def call_ids(messages):
    """Every tool call id in a conversation."""
    return {call["id"] for message in messages for call in message.get("tool_calls") or []}


def answered(settings, result, reply):
    """Whether a reply without tool calls ends the run. An empty one gets one nudge, then the run ends incomplete.
    An answer that must fit a schema is checked, and sent back with what does not fit."""
    if not (reply.content or "").strip():
        if settings.nudged:
            raise Stop("incomplete", "the model gave an empty answer twice")
        settings.nudged = True
        result.messages.append({"role": "user", "content": EMPTY_ANSWER})
        return False
    result.answer = reply.content
    if settings.output is None:
        return True
    if settings.final_tool:  # it answered in words: the next request makes it call the tool
        settings.bad_answers += 1
        result.messages.append({"role": "user", "content": f"Give your final answer by calling {FINAL_TOOL}."})
        return False
    try:
        accept(settings, result, reply.content)
        return True
    except BadCall as error:
        result.messages.append({"role": "user", "content": str(error)})
        return False


def accept(settings, result, text):
    """Validate a structured answer (JSON text) against the output model and keep it; else BadCall, saying what
    does not fit."""
    from pydantic import ValidationError

    try:
        result.output = settings.output.model_validate_json(text)
    except ValidationError as error:
        settings.bad_answers += 1
        wrong = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the answer'}: {e['msg']}" for e in error.errors()[:5])
        raise BadCall(f"the answer does not fit the schema: {wrong}. Answer again, with JSON that fits.") from None
    result.answer = result.output.model_dump_json()
    return "accepted: that is the final answer"


def run_tools(settings, result, calls):
    """Run one turn's calls and answer every one of them: decide each in call order on this thread (a person
    answers one question at a time), run those that may run at the same time, and when something ends the turn
    early (a budget, the deadline, Ctrl-C), answer the rest with what happened."""
    results, same, why = {}, {}, "error: not run"
    try:
        same, told = repeats(settings, calls)
        # the calls the guardrails passed, then those a person agreed to: an agreed command may change what
        # a check saw (swap a folder for a link), so the two groups never run side by side
        for group in decide_all(settings, result, calls, same, told, results):
            for call, content, seconds in execute(settings, group):
                results[call.id] = content
                record_tool(settings, result, call, content, seconds)
    except KeyboardInterrupt:
        why = "error: interrupted before it finished"
        raise
    except (Stop, OutOfTime) as stop:
        why = f"error: not finished: the run stopped ({getattr(stop, 'status', 'deadline')})"
        raise
    finally:
        for call in calls:
            first = same.get(call.id, call)  # a call that repeats an earlier one of this turn shares its result
            results.setdefault(call.id, results.get(first.id, why))
            result.messages.append({"role": "tool", "tool_call_id": call.id, "content": results[call.id]})
        for call in calls:
            if call.id in same or results[call.id] == why:
                record_tool(settings, result, call, results[call.id])


def repeats(settings, calls):
    """Judge this turn's calls by meaning (the name and the parsed arguments: spacing does not count). Returns
    (same, told): same maps a call to an earlier call of this turn that means the same (it runs once, and both get
    its result); told holds the calls made in SAME_CALL_LIMIT turns in a row now, which are not run again. Raises
    Stop("repeated") when a call goes on past that."""
    firsts, same, told = {}, {}, set()
    for call in calls:
        key = meaning(call)
        if key in firsts:
            same[call.id] = firsts[key]
        else:
            firsts[key] = call
    for key, call in firsts.items():
        if key[0] == FINAL_TOOL:
            continue  # a final answer is judged by the schema, however often it comes
        turns = 1 + next((n for n, turn in enumerate(reversed(settings.recent)) if key not in turn),
                         len(settings.recent))
        if turns > SAME_CALL_LIMIT:
            raise Stop("repeated", f"the model made the same call in {turns} turns in a row: {key[0]} {key[1]}")
        if turns == SAME_CALL_LIMIT:
            told.add(call.id)
    settings.recent.append(set(firsts))
    return same, told


def meaning(call):
    """A call as (name, arguments in one spelling): the arguments parsed, the schema's defaults filled in, a path
    as the place it names, a command as its words. A call that breaks its tool's contract means what it says.

    Example (WORKSPACE is /w): read_file '{"path":"./a", "offset": 1}'
             -> ("read_file", '{"limit": 200, "offset": 1, "path": "/w/a"}')
    """
    name = call.function.name
    try:
        args = check_call(name, call.function.arguments)
    except BadCall:
        return name, call.function.arguments
    defaults = {arg: part["default"] for arg, part in SCHEMAS[name]["properties"].items() if "default" in part}
    args = {**defaults, **args}
    if isinstance(args.get("path"), str):  # the place it names: ./a, a/, /workspace/a and ../workspace/a are a
        args["path"] = os.path.normpath(os.path.join(guards.WORKSPACE, args["path"]))
    if name == "run_shell":  # the words the shell would see: spacing and quotes do not count
        try:
            args["command"] = shlex.split(args["command"])
        except ValueError:
            pass
    return name, json.dumps(args, sort_keys=True)


def decide_all(settings, result, calls, same, told, results):
    """Decide every call, in order, before any runs: returns two lists of (call, action) for those that will run: the
    calls the guardrails passed, and those a person agreed to. The others get their result now (over the budget, made
    too often, refused, declined)."""
    room = settings.limits.max_tool_calls - result.tool_calls
    result.tool_calls += len(calls)  # refused, declined and repeated calls count too
    passed, agreed = [], []
    for number, call in enumerate(calls):
        if settings.on_call:
            settings.on_call(result.steps, call.function.name, call.function.arguments)
        if call.id in same:
            continue  # it runs as the earlier call it repeats
        try:
            if number >= room:
                raise ToolError(f"not run: this run may make {settings.limits.max_tool_calls} tool calls, and "
                                "they are used up.")
            if call.id in told:
                raise ToolError(f"not run: you made this exact call in {SAME_CALL_LIMIT} turns in a row, and its "
                                "result will not change. Use the results you have, or try something else.")
            action, asked = decide(settings, result, call)
            if asked:
                agreed.append((call, action))
            else:
                passed.append((call, action))
        except OutOfTime:  # the deadline came while deciding (a check, a question): the turn ends here
            raise
        except Exception as error:  # the budget, the contract, the guardrails or the person said no
            results[call.id] = error_result(call, error)
            record_tool(settings, result, call, results[call.id])
    return passed, agreed


def decide(settings, result, call):
    """Everything decided before a call runs: its arguments against the contract, the plan under the guardrails,
    and a person's yes when the plan needs one. Returns the action that runs it, and whether a person was asked;
    raises ToolError."""
    name = call.function.name
    if name == FINAL_TOOL and settings.final_tool:
        return (lambda: accept(settings, result, call.function.arguments)), False
    args = check_call(name, call.function.arguments)  # a call that breaks the contract never runs
    action, question = plan(name, args, deadline(settings))
    if question and not approved(settings.approve, question):
        raise Declined(f"the user declined, so nothing was done ({question.splitlines()[-1]}). "
                       "Try another way, or say what you need.")
    return action, bool(question)


def approved(approve, question):
    """Ask the approver; anything but a plain True (an exception, None, no answer) means no."""
    try:
        return approve(question) is True
    except OutOfTime:  # the deadline cut the question short: the run ends, nobody said no
        raise
    except Exception:
        return False


def outcome(call, action):
    """The tool boundary: what a call returns, or the error it met, as text the model can act on; and the seconds
    it took."""
    began = time.monotonic()
    try:
        content = capped(action(), MAX_CHARS)  # no result is longer than a tool's own
    except Exception as error:  # the guardrails said no at the last moment, or the tool failed
        content = error_result(call, error)
    return content, round(time.monotonic() - began, 3)


def error_result(call, error):
    """Why a call did not run, or failed, as text the model can act on: a ToolError says what was refused and
    why; any other error is one the model's arguments caused (a missing file, a name with a NUL in it), and the
    model hears of it rather than the harness stopping."""
    return capped(f"error: {error}" if isinstance(error, ToolError) else
                  f"error: {call.function.name} failed: {type(error).__name__}: {error}", MAX_CHARS)


def execute(settings, actions):
    """Run the calls that may run, all at the same time (a lone one right here), and hand back each result as it
    comes in, until the run's deadline."""
    if len(actions) == 1:
        yield actions[0][0], *outcome(*actions[0])
        return
    from concurrent.futures import ThreadPoolExecutor, as_completed  # here: `--help` should not wait for it

    pool = ThreadPoolExecutor(max_workers=len(actions) or 1)
    futures = {pool.submit(outcome, call, action): call for call, action in actions}
    # a command stops itself at the deadline; a moment's grace lets its own result, saying what was killed, arrive
    left = deadline(settings) - time.monotonic() + GRACE if settings.limits.deadline else None
    try:
        for future in as_completed(futures, timeout=left):
            yield futures[future], *future.result()
    except TimeoutError:
        raise Stop("deadline", "the deadline passed while tools were running") from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def record_tool(settings, result, call, content, seconds=0.0):
    """The trace record of one tool call (an SDK call object)."""
    settings.trace.record("tool", step=result.steps, id=call.id, name=call.function.name,
                          arguments=call.function.arguments, is_error=content.startswith("error:"), result=content,
                          seconds=seconds)


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
    except (TypeError, ValueError, RecursionError):
        return "{}"


# ---------------------------------------------------------------------------------------------
# The command line.

def positive(kind):
    """An argparse type for a number above zero. Example: positive(int)("3") -> 3;  positive(int)("0") -> error"""
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    return parse


def arguments(argv=None):
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS,
                        help="default: $BACKEND, else the first API key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url", help="any OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="approve every command and write that would be asked about")
    parser.add_argument("--sandbox", choices=("read-only", "workspace-write"),
                        help="run commands inside bubblewrap (Linux): no network, no home folder, secrets hidden")
    parser.add_argument("--max-steps", type=positive(int), default=MAX_STEPS,
                        help=f"model replies (default {MAX_STEPS})")
    parser.add_argument("--max-tool-calls", type=positive(int), default=MAX_TOOL_CALLS,
                        help=f"tool calls, refused ones included (default {MAX_TOOL_CALLS})")
    parser.add_argument("--max-tokens", type=positive(int),
                        help="tokens, as the provider counts them (default: no limit)")
    parser.add_argument("--deadline", type=positive(float), metavar="SECONDS",
                        help="wall-clock time for the whole run, from the start (default: no limit)")
    parser.add_argument("--trace", metavar="FILE", help="append a JSONL trace of the run to FILE")
    parser.add_argument("--stream", action="store_true", help="print the model's text as it arrives")
    parser.add_argument("--tool-choice", metavar="CHOICE",
                        help="the first request's tool choice: auto, none, required, or a tool's name")
    parser.add_argument("--no-parallel-tool-calls", action="store_true", help="ask for one tool call a turn")
    parser.add_argument("--output-schema", metavar="FILE",
                        help="a JSON Schema the answer must fit; the answer is printed as JSON")
    args = parser.parse_args(argv)
    args.task = args.task.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")  # bytes not UTF-8
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    if args.tool_choice and args.tool_choice not in ("auto", "none", "required", *REGISTRY):
        parser.error(f"--tool-choice {args.tool_choice}: use auto, none, required or one of {', '.join(REGISTRY)}")
    try:
        args.output = model_from_schema(json.loads(Path(args.output_schema).read_text(), parse_constant=no_nan)) \
            if args.output_schema else None
    except (OSError, ValueError, TypeError, AttributeError, AssertionError, RecursionError, RuntimeError) as error:
        # what a schema file can make go wrong: unreadable, not JSON, a shape model_from_schema cannot use
        parser.error(f"--output-schema {args.output_schema}: {type(error).__name__}: {str(error)[:300]}")
    return args


def no_nan(constant):
    """json.loads's parse_constant: NaN and Infinity are Python's, not JSON's, and no request may carry them."""
    raise ValueError(f"{constant} is not JSON")


SCHEMA_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool}


def model_from_schema(schema, name="Answer", depth=0):
    """A Pydantic model for a JSON Schema of an object: type, properties, required, items, enum and description
    are understood; any other keyword is refused rather than ignored.

    Example: {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]} -> a model
             that takes {"count": 3} and refuses {"count": "three"}
    """
    from typing import List, Literal, Optional

    from pydantic import ConfigDict, Field, create_model

    def annotation(part, where):
        unknown = set(part) - {"type", "properties", "required", "items", "enum", "description", "title",
                               "additionalProperties", "default"}
        if unknown:
            raise ValueError(f"{where}: {', '.join(sorted(unknown))} is not supported here")
        if "enum" in part:
            return Literal[tuple(part["enum"])]
        if part.get("type") == "array":
            return List[annotation(part.get("items", {"type": "string"}), f"{where}.items")]
        if part.get("type") == "object":
            return model_from_schema(part, where.title().replace(".", ""), depth + 1)
        if part.get("type") not in SCHEMA_TYPES:
            raise ValueError(f"{where}: type {part.get('type')!r} is not supported here")
        return SCHEMA_TYPES[part["type"]]

    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise ValueError("the schema must describe an object with properties")
    if depth > MAX_SCHEMA_DEPTH:  # deeper, Pydantic's own recursion runs out later, in the middle of a run
        raise ValueError(f"objects nested more than {MAX_SCHEMA_DEPTH} deep are not supported here")
    required = set(schema.get("required", []))
    fields = {key: (annotation(part, key) if key in required else Optional[annotation(part, key)],
                    Field(... if key in required else None, description=part.get("description")))
              for key, part in schema["properties"].items()}
    extra = "forbid" if schema.get("additionalProperties") is False else "ignore"
    return create_model(schema.get("title", name).replace(" ", ""), __config__=ConfigDict(extra=extra), **fields)


def say(text="", end="\n"):
    """Print to standard output what came from a model or a file, made visible. Output that cannot be written
    (the reader went away, as in `| head -c 1`; a full disk; no standard output) ends the run as output_error."""
    if not write(sys.stdout, visible(text) + end):
        raise Stop("output_error", "standard output could not be written: its reader went away, or the disk is full")


def note(text):
    write(sys.stderr, f"note: {visible(text)}\n")


def write(stream, text):
    """Write text to sys.stdout or sys.stderr at once. False when it cannot be written; from then on, writes to it
    go nowhere, so that Python's own last flush stays quiet too."""
    if stream is None:  # the run began with it closed
        return False
    try:
        waited_for("its output", stream.write, text)
        waited_for("its output", stream.flush)
        return True
    except OSError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        return False


WAITING = []  # what the main thread waits for at the terminal, if anything: the only wait the clock cuts short


def waited_for(what, function, *args):
    """function(*args), a wait on the terminal (a write, a reader's answer): once the clock rings (see catch_signals)
    it is cut short with OutOfTime. The clock rings in the main thread, so only its waits count."""
    if threading.current_thread() is not threading.main_thread():
        return function(*args)
    WAITING.append(what)
    try:
        return function(*args)
    finally:
        WAITING.pop()


def catch_signals():
    """SIGTERM and SIGHUP end the run the way Ctrl-C does: status interrupted, every command killed, the trace
    closed. A second signal while the run closes is noted, not obeyed. SIGALRM is the clock (see ring_from):
    it cuts short a wait on the terminal. Returns the list of signals received."""
    received = []

    def handler(number, frame):
        received.append(number)
        if len(received) == 1:
            raise KeyboardInterrupt

    def clock(number, frame):
        if WAITING:
            raise OutOfTime(f"the time was up while the run waited for {WAITING[-1]}")

    on_signals(handler)
    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, clock)
    return received


def on_signals(handler):
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), handler)


def ring_from(moment):
    """Ring the clock (SIGALRM) from `moment` (a time.monotonic()) on, every tenth of a second: a run blocked on
    the terminal then ends on time. None stops it. Not on Windows, which has no such clock."""
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0 if moment is None else max(moment - time.monotonic(), 0.01), 0.1)


def main(argv=None):
    for stream in (sys.stdout, sys.stderr):  # a character the terminal cannot show is spelled out, not an error
        if stream is not None:
            stream.reconfigure(errors="backslashreplace")
    args = arguments(argv)
    guards.WORKSPACE = Path(args.workspace).resolve()
    args.trace = args.trace and os.path.abspath(args.trace)
    os.chdir(guards.WORKSPACE)  # so a path means the same to the checks and to a command (/proc/self/cwd/..)
    if args.sandbox and (problem := shell.sandbox_problem()):
        sys.exit(f"error: {problem}")
    shell.SANDBOX = args.sandbox
    shell.hide_this_process()
    try:
        backend = choose(args.backend, args.model, args.base_url)
    except BackendError as error:
        sys.exit(f"error: {visible(str(error))}")
    received = catch_signals()
    if args.deadline:
        ring_from(STARTED + args.deadline + BACKSTOP)
    result = run(args.task, backend=backend, approve=(lambda question: True) if args.yes else ask_user,
                 limits=Limits(args.max_steps, args.max_tool_calls, args.max_tokens, args.deadline), trace=args.trace,
                 on_text=(lambda text: say(text, end="")) if args.stream else None,
                 on_call=lambda step, name, arguments: say(f"[{step}] {name} {arguments}"), on_note=note,
                 output=args.output, tool_choice=args.tool_choice,
                 parallel_tool_calls=False if args.no_parallel_tool_calls else None, started=STARTED)
    if received or result.status == "deadline":  # the time is up: the report may not hold the exit up
        leave_after(BACKSTOP, exit_code(result, received))
    try:
        report(result, streamed=args.stream)
    except Stop as stop:
        result.status, result.error = stop.status, stop.error
        write(sys.stderr, f"error: {stop.error}\n")
    except (KeyboardInterrupt, OutOfTime):  # a signal, or the terminal blocked past the time: leave, not wait
        os._exit(exit_code(result, received))
    ring_from(None)  # Python's exit puts back the default SIGALRM action, which would kill the process
    on_signals(signal.SIG_IGN)  # the run is over and said so: a late signal changes nothing
    sys.exit(exit_code(result, received))


def exit_code(result, received):
    return SIGNAL_EXIT.get(received[0], 130) if received else EXIT_CODES[result.status]


def leave_after(seconds, code):
    """End the process with code in `seconds`, from a thread of its own: a write that blocks while a helper thread
    holds the output's lock (a stream's text, its reader gone) is one the main thread cannot cut short."""
    timer = threading.Timer(seconds, os._exit, [code])
    timer.daemon = True  # an exit that comes sooner does not wait for it
    timer.start()


def report(result, streamed=False):
    """Print how the run ended: the answer (unless it was streamed), why it stopped, and a one-line summary."""
    if streamed and result.answer and result.output is None:
        say()  # the answer is on screen already; end its line
    if result.status != "answered":
        say(f"stopped: {result.status.replace('_', ' ')}")
    if result.error:
        write(sys.stderr, f"error: {visible(result.error)}\n")
    if result.answer and (not streamed or result.output is not None):
        say(result.answer)
    write(sys.stderr, f"{result.status}: {result.steps} steps, {result.tool_calls} tool calls, "
                      f"{result.usage['total_tokens']} tokens, {result.seconds:.1f} s\n")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C before the run began: nothing to close
        sys.exit(130)
