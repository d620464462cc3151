"""The agent loop: send the task, run the tools the model asks for, send back the results, repeat.

Run:  python harness.py "List the files here, then read backend.py and tell me which model it calls."
      python harness.py --stream --deadline 60 --trace run.jsonl "Run `make test` and tell me what failed"
Every call is checked against its tool's schema first, a write or a command that is not plainly read-only runs
only after you say yes, the calls of one turn run at the same time, and every run ends with a status. What the
model gets wrong (broken ids, empty answers, the same call again and again) is put right or stopped here.
"""
import argparse
import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import tools
from backend import BACKENDS, BackendError, chat, choose
from tools import REGISTRY, TOOLS, BadCall, Refused, check_call, needs_approval

MAX_STEPS = 10  # model replies per task; a loop without a limit is a blank check
SAME_CALL_LIMIT = 3  # the same call this many times in a row: the model is told; once more and the run stops
LIMITS = {"max_steps": MAX_STEPS, "max_tool_calls": 30, "max_tokens": None, "deadline": None}  # None: no limit
EXIT_CODES = {"answered": 0, "provider_error": 1, "step_limit": 3, "tool_call_limit": 3, "token_limit": 3,
              "deadline": 3, "repeated": 3, "incomplete": 4, "interrupted": 130}
SYSTEM = ("You are a careful assistant working in the user's workspace directory. "
          "Use the tools to look at the files before you answer, then answer briefly.")


@dataclass
class Result:
    """How a run ended and what it used; messages is the whole conversation, ready to inspect or continue."""
    status: str = "running"  # then one of EXIT_CODES
    answer: str = ""
    error: str = ""  # the provider's problem, explained, when status is provider_error
    steps: int = 0
    tool_calls: int = 0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    seconds: float = 0.0
    messages: list = field(default_factory=list)


def ask_user(question):
    """The default approval: ask on the terminal. Without a terminal, one line is read from standard
    input, and the end of input means no."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():
        print(answer.strip() or "(end of input: no)", file=sys.stderr)  # show what was piped in
    return answer.strip().lower() in ("y", "yes")


def record(trace, kind, **fields):
    """Write one line of the JSONL trace, flushed at once: a crash loses nothing already done."""
    if trace:
        trace.write(json.dumps({"type": kind, **fields}) + "\n")
        trace.flush()


def run(task, backend=None, approve=ask_user, limits=None, trace=None, options=None, history=(), on_text=None):
    """Run one task until it ends, and return a Result whose status says how it ended.
    approve(question) decides the calls that need a person (only True means yes); limits overrides LIMITS;
    trace is an open file for the JSONL trace; options (temperature, ...) go with every request; history
    is an earlier result.messages to continue from; on_text streams the model's text as it arrives."""
    backend, limits = backend or choose(), {**LIMITS, **(limits or {})}
    result = Result(messages=[*(history or [{"role": "system", "content": SYSTEM}]), {"role": "user", "content": task}])
    started = time.monotonic()
    record(trace, "start", task=task, backend=backend["name"], model=backend["model"], limits=limits,
           options=options or {})
    try:
        result.status = loop(result, backend, approve, limits, trace, options or {}, started, on_text)
    except BackendError as error:
        result.status, result.error = "provider_error", str(error)
    except KeyboardInterrupt:
        result.status = "interrupted"
    result.seconds = round(time.monotonic() - started, 3)
    record(trace, "end", status=result.status, answer=result.answer, error=result.error, steps=result.steps,
           tool_calls=result.tool_calls, usage=result.usage, seconds=result.seconds)
    return result


def loop(result, backend, approve, limits, trace, options, started, on_text):
    """Ask, keep the reply, run its tool calls, repeat; return the status the run ends with."""
    messages, recent = result.messages, []  # recent: the calls made so far, as (name, arguments)
    used = {call["id"] for m in messages for call in m.get("tool_calls", [])}  # every call id so far
    while not (stop := over_budget(result, limits, started)):
        result.steps += 1
        left = limits["deadline"] - (time.monotonic() - started) if limits["deadline"] else None
        asked = time.monotonic()
        try:
            response = chat(messages, tools=TOOLS, backend=backend, timeout=left, options=options, on_text=on_text)
        except BackendError:
            if over_budget(result, limits, started) == "deadline":
                return "deadline"  # the model was still thinking when the time ran out
            raise
        choice, message = response.choices[0], response.choices[0].message
        add_usage(result.usage, response.usage)
        record(trace, "reply", step=result.steps, finish_reason=choice.finish_reason, content=message.content,
               usage=response.usage.model_dump(exclude_none=True) if response.usage else None,
               seconds=round(time.monotonic() - asked, 3))
        if choice.finish_reason == "length":  # cut off mid-answer: never run a half-written call
            messages.append({"role": "assistant", "content": message.content or ""})
            result.answer = message.content or ""
            return "incomplete"
        if not message.tool_calls and not (message.content or "").strip():
            if messages[-1]["role"] == "user" and messages[-1]["content"] == EMPTY_ANSWER:
                return "incomplete"  # asked once already
            messages += [{"role": "assistant", "content": ""}, {"role": "user", "content": EMPTY_ANSWER}]
            continue
        fresh_ids(message.tool_calls or [], used)
        repeats = same_calls(message.tool_calls or [], recent)
        if repeats > SAME_CALL_LIMIT:
            return "repeated"  # it was told, and made the call again
        messages.append(assistant_message(message))
        if not message.tool_calls:
            result.answer = message.content or ""
            return "answered"
        told = recent[-1] if repeats == SAME_CALL_LIMIT else None
        messages.extend(run_tools(message.tool_calls, approve, result, limits, trace, told))
        if result.tool_calls > limits["max_tool_calls"]:
            return "tool_call_limit"
    return stop


def over_budget(result, limits, started):
    """The status that ends the run before its next request, or None while every budget has room."""
    if limits["deadline"] and time.monotonic() - started >= limits["deadline"]:
        return "deadline"
    if limits["max_tokens"] and result.usage["total_tokens"] >= limits["max_tokens"]:
        return "token_limit"
    if result.steps >= limits["max_steps"]:
        return "step_limit"
    return None


EMPTY_ANSWER = "Your reply was empty. Answer the task in words, or call a tool."


def fresh_ids(calls, used):
    """Servers sometimes send an empty id, or one already used (within a reply or across turns): give those
    calls a fresh id before anything refers to it, or the next request breaks the API's pairing rules.
    used is the set of ids so far, kept up to date here (collecting it anew would cost a pass over the
    whole conversation every step)."""
    for call in calls:
        if not call.id or call.id in used:
            call.id = f"call_{uuid.uuid4().hex[:24]}"
        used.add(call.id)


def same_calls(calls, recent):
    """Add this reply's calls to recent; return how many times in a row the latest call has now been made."""
    recent += [(call.function.name, call.function.arguments) for call in calls]
    count = 0
    for call in reversed(recent):
        if call != recent[-1]:
            break
        count += 1
    return count


def add_usage(total, usage):
    """Add one reply's token counts; some servers send none."""
    for key in total:
        total[key] += getattr(usage, key, 0) or 0


def run_tools(calls, approve, result, limits, trace, told=None):
    """Run one turn's calls at the same time; return their tool messages in call order, one per call id.
    A call equal to told is not run: the model hears that it keeps making the same call."""
    room = limits["max_tool_calls"] - result.tool_calls
    result.tool_calls += len(calls)  # refused and rejected calls count too
    for call in calls:
        print(f"[{result.steps}] {call.function.name} {call.function.arguments}", flush=True)
    # Checks and questions first, in order, on this thread: a person answers one question at a time.
    over = f"error: not run: this run may make {limits['max_tool_calls']} tool calls, and they are used up."
    again = (f"error: not run: you made this exact call {SAME_CALL_LIMIT} times in a row, and its result will "
             "not change. Use the results you have, or try something else.")
    decisions = [(None, over) if n >= room else (None, again) if (c.function.name, c.function.arguments) == told
                 else check(c, approve) for n, c in enumerate(calls)]

    def timed(call, decision):
        began, (args, error) = time.monotonic(), decision
        content = error or execute(call.function.name, args)
        record(trace, "tool", step=result.steps, id=call.id, name=call.function.name,
               arguments=call.function.arguments, is_error=content.startswith("error:"), result=content,
               seconds=round(time.monotonic() - began, 3))
        return {"role": "tool", "tool_call_id": call.id, "content": content}

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:  # a slow call does not hold up the others
        try:
            # a lone call runs right here: handing it to a thread and back costs more than it saves
            return list((map if len(calls) == 1 else pool.map)(timed, calls, decisions))
        except KeyboardInterrupt:
            tools.kill_running()  # Ctrl-C: the commands go too, so the threads can end now
            raise


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


def check(call, approve):
    """Everything decided before a call runs: its arguments against the contract, then a person if needed.
    Returns (args, None) to run it, or (None, "error: ...") to send back instead."""
    name = call.function.name
    try:
        args = check_call(name, call.function.arguments)  # a call that breaks the contract never runs
        question = needs_approval(name, args)
    except BadCall as error:
        return None, f"error: {error}"
    except Refused as error:
        return None, f"error: refused: {error}"
    except Exception as error:
        return None, f"error: {name} failed: {type(error).__name__}: {error}"
    if question and not approved(approve, question):
        return None, (f"error: the user declined, so nothing was done: {question.splitlines()[-1]} "
                      "Try another way, or say what you need.")
    return args, None


def execute(name, args):
    """Run a checked call; every failure becomes an 'error: ...' result the model can read and act on."""
    try:
        return REGISTRY[name](**args)
    except Refused as error:
        return f"error: refused: {error}"
    except Exception as error:  # the tool boundary: the model caused it, so the model hears about it
        return f"error: {name} failed: {type(error).__name__}: {error}"


def positive(kind):
    """An argparse type for a number above zero. Example: positive(int)("3") -> 3;  positive(int)("0") -> error"""
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    return parse


def main():
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS, help="default: $BACKEND, else the first API key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url", help="any OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="approve every command that would be asked about")
    parser.add_argument("--max-steps", type=positive(int), default=MAX_STEPS, help=f"model replies (default {MAX_STEPS})")
    parser.add_argument("--max-tool-calls", type=positive(int), default=LIMITS["max_tool_calls"],
                        help=f"tool calls, refused ones included (default {LIMITS['max_tool_calls']})")
    parser.add_argument("--max-tokens", type=positive(int), help="tokens, as the provider counts them (default: no limit)")
    parser.add_argument("--deadline", type=positive(float), metavar="SECONDS", help="wall-clock time (default: no limit)")
    parser.add_argument("--trace", metavar="FILE", help="write a JSONL trace of the run to FILE")
    parser.add_argument("--stream", action="store_true", help="print the model's text as it arrives")
    args = parser.parse_args()
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    tools.WORKSPACE = Path(args.workspace).resolve()
    approve = (lambda question: True) if args.yes else ask_user
    limits = {"max_steps": args.max_steps, "max_tool_calls": args.max_tool_calls, "max_tokens": args.max_tokens,
              "deadline": args.deadline}
    try:
        backend = choose(args.backend, args.model, args.base_url)
        trace = open(args.trace, "w", encoding="utf-8") if args.trace else None
    except (BackendError, OSError) as error:
        sys.exit(f"error: {error}")
    on_text = (lambda text: print(text, end="", flush=True)) if args.stream else None
    result = run(args.task, backend, approve, limits, trace, on_text=on_text)
    if trace:
        trace.close()
    report(result, streamed=args.stream)
    sys.exit(EXIT_CODES[result.status])


def report(result, streamed=False):
    """Print how the run ended: the answer (unless it was streamed), or the error, and a one-line summary."""
    if streamed and result.answer:
        print()  # the answer is on screen already; end its line
    if result.error:
        print(f"error: {result.error}", file=sys.stderr)
    elif result.status != "answered":
        print(f"stopped: {result.status.replace('_', ' ')}")
    if result.answer and not streamed:
        print(result.answer)
    print(f"{result.status}: {result.steps} steps, {result.tool_calls} tool calls, "
          f"{result.usage['total_tokens']} tokens, {result.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
