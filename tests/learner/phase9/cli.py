"""Phase 8 (learner's version): the front door, all a person sees of the loop: the calls, the questions, the
answer or why the run stopped, a one-line summary, the exit code, and the JSONL trace.

Run:  python cli.py "List the files here, then read backend.py and tell me which model it calls."
      (--backend, --model, --base-url override the environment for one run; --workspace DIR, --yes,
      --sandbox workspace-write|read-only|off; budgets: --max-steps, --max-tool-calls, --max-tokens,
      --deadline SECONDS; --trace FILE appends one JSON object a line; --stream prints the text as it comes;
      python harness.py is the same)
Exit codes: 0 answered, 1 provider, output or internal error, 2 usage, 3 a budget or a repeated call, 4 a reply
cut short, filtered or refused, 130 Ctrl-C (143 SIGTERM, 129 SIGHUP).
"""
import argparse
import json
import logging
import math
import os
import shutil
import signal
import stat
import sys
import time
import uuid
from functools import partial
from pathlib import Path

import guards
import harness
from backend import BackendError, choose
from guards import shown
from harness import GRACE, Limits, Stop, within

SHOWN_CHARS = 200  # characters of a call's arguments shown on screen
TRACE_CHARS = 20_000  # characters of one text the trace keeps
EXIT_CODES = {"answered": 0, "provider_error": 1, "output_error": 1, "internal_error": 1, "step_limit": 3,
              "tool_call_limit": 3, "token_limit": 3, "deadline": 3, "repeated": 3, "incomplete": 4,
              "content_filter": 4, "refused": 4, "interrupted": 130}
SIGNAL_EXIT = {getattr(signal, name): code for name, code in (("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129))
               if hasattr(signal, name)}  # the signals that end a run, and its exit code: 128 + the signal's number
OUTPUT_FAILED = "standard output could not be written: its reader went away, or the disk is full"
BLOCKED = []  # writes to standard output given up on: a thread still waits in each, holding the output's lock
MID_LINE = [False]  # True while the last text on standard output did not end its line (a streamed piece)


class Trace:
    """One JSON object a line, each tagged with the run's id; texts masked and cut. No path: records nothing.
    The file is opened at the first record, so a trace that cannot be written ends the run as output_error."""

    def __init__(self, path, policy):
        self.path, self.policy, self.run = path, policy, uuid.uuid4().hex[:12]
        self.fd = None

    def record(self, kind, **fields):
        if not self.path:
            return
        if self.fd is None:
            self.fd = trace_file(self.path, self.policy)
        fields = {name: clip(guards.mask(self.policy, value)) if isinstance(value, str) else value
                  for name, value in fields.items()}
        line = json.dumps({"run": self.run, "type": kind, **fields}) + "\n"
        try:
            os.write(self.fd, line.encode("utf-8"))  # one unbuffered write: a crash leaves only whole lines
        except OSError as error:
            self.path = None  # the end of the run will not be written either
            raise Stop("output_error", f"could not write the trace: {error}") from None


def clip(text):
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


def say(text="", deadline=None, end="\n"):
    """Print to standard output and flush at once, waiting for the terminal no longer than the deadline: a write
    given up on goes into BLOCKED, a write that fails is Stop("output_error") and standard output goes to devnull."""
    if BLOCKED:  # a thread holds the output's lock: this write would wait for ever
        raise Stop("deadline", "the deadline passed while waiting for the terminal")
    if MID_LINE[0] and end and text:  # a line after streamed text starts a line of its own
        text = "\n" + text
    try:
        if sys.stdout is None:  # the run began with standard output closed: print() would write nothing, silently
            raise OSError("no standard output")
        within(deadline, "the terminal", partial(print, text, end=end, flush=True))
    except Stop:
        BLOCKED.append(text)
        raise
    except (OSError, ValueError):
        try:  # what is left in its buffer goes nowhere, quietly, when Python flushes it at the end
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):
            pass
        sys.stdout = open(os.devnull, "w")
        raise Stop("output_error", OUTPUT_FAILED) from None
    MID_LINE[0] = not (text + end).endswith("\n") if text + end else MID_LINE[0]


def tell(text, end="\n"):
    """Print to standard error if it can: a note or a question is not worth ending a run for."""
    try:
        if sys.stderr is not None:
            print(text, end=end, file=sys.stderr, flush=True)
    except ValueError:
        pass
    except OSError:  # write nowhere from now on, or Python's last flush fails too (exit 120)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())


def stream_text(deadline, piece):
    """run()'s on_text under --stream: a piece of the model's text as it comes, made safe, its line breaks kept."""
    say(shown(piece), deadline, end="")


def note(text):
    """run()'s on_note: something the person at the keyboard should know, on standard error."""
    tell(shown(f"note: {text}", one_line=True))


def cut(arguments):
    """Text for one line of the screen, made safe: the first SHOWN_CHARS characters, and how many more there were."""
    more = f"... (+{len(arguments) - SHOWN_CHARS} characters)" if len(arguments) > SHOWN_CHARS else ""
    return shown(arguments[:SHOWN_CHARS], one_line=True) + more


def show_call(deadline, step, name, arguments):
    """run()'s on_call, given the deadline: one `[step] name arguments` line a call, shown before it is decided."""
    say(f"[{step}] {shown(name, one_line=True)} {cut(arguments)}", deadline)


def ask_user(question):
    """Ask a person on standard error, the question fitted to the screen (? shows it whole); only y or yes is a yes."""
    size = os.get_terminal_size(2) if os.isatty(2) else shutil.get_terminal_size()  # the terminal it is asked on
    text = guards.fit(question, size.lines - 2, size.columns)
    while True:
        tell(f"{text}? [y/N] ", end="")
        answer = sys.stdin.readline()
        if not answer:
            tell("(end of input: no)")
            return False
        if not sys.stdin.isatty():  # a piped answer is not echoed by a terminal: show it, so the screen reads right
            tell(shown(answer.strip(), one_line=True))
        if answer.strip() != "?":
            return answer.strip().lower() in ("y", "yes")
        text = question


def report(result, deadline=None, streamed=False):
    """The answer (or `stopped: ...`) on stdout, unless it was streamed there already; the error and a one-line
    summary on stderr. An answer nobody could see is no success: its status becomes the output's."""
    try:
        if result.answer and not streamed:  # a reply that ended the run is shown too
            say(shown(result.answer), deadline)  # its own line breaks, nothing else raw
        elif MID_LINE[0]:
            say("", deadline)  # the streamed text ends its line
        if result.status != "answered":
            say(f"stopped: {result.status.replace('_', ' ')}", deadline)
    except Stop as stop:
        if result.status == "answered":
            result.status = stop.status
        result.error = "; ".join(filter(None, (result.error, stop.error)))
    if result.error:
        tell(f"error: {shown(result.error)}")
    tell(f"{result.status}: {result.steps} steps, {result.tool_calls} tool calls, {result.usage['total_tokens']} "
         f"tokens, {result.seconds:.1f} s")


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
    parser.add_argument("--max-steps", type=above_zero(int), default=harness.MAX_STEPS, help="requests")
    parser.add_argument("--max-tool-calls", type=above_zero(int), default=harness.MAX_TOOL_CALLS, help="calls")
    parser.add_argument("--max-tokens", type=above_zero(int), help="tokens, sent and received (default: no limit)")
    parser.add_argument("--deadline", type=above_zero(float), help="seconds for the whole run (default: none)")
    parser.add_argument("--trace", help="append a JSON line for every reply, call and the end to this file")
    parser.add_argument("--stream", action="store_true", help="print the model's text as it comes")
    options = parser.parse_args(argv)
    # bytes that are no UTF-8 become \ufffd: no server takes lone surrogates in JSON
    options.task = " ".join(options.task).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if not Path(options.workspace).is_dir():
        parser.error(f"--workspace {options.workspace}: no such folder")
    return options


def on_signals(handler):
    """handler for every signal that ends a run (SIGNAL_EXIT)."""
    for number in SIGNAL_EXIT:
        signal.signal(number, handler)


def command(argv, started):
    """The run the arguments ask for, shown and reported; its exit code."""
    options = arguments(argv)
    logging.getLogger("openai._base_client").setLevel(logging.INFO)  # its retries: chat() tells them to note()
    policy = guards.policy(options.workspace, options.yes, options.sandbox, options.trace)
    try:
        backend = choose(options.backend, options.model, options.base_url)
    except BackendError as error:
        tell(f"error: {error}")
        return 1
    if backend["note"]:
        tell(backend["note"])
    if policy.why_none:
        tell(f"note: no sandbox ({policy.why_none}), so every command that is not plainly read-only asks, even "
             "under --yes; --sandbox off says you accept that")
    received = []  # the signals that came, in order

    def interrupted(number, frame):  # the first signal ends the run; one while it closes is only noted
        received.append(number)
        if len(received) == 1:
            raise KeyboardInterrupt
        tell(f"note: signal {number} while the run closes; it ends as soon as it can")

    on_signals(interrupted)
    deadline = started + options.deadline if options.deadline else None
    result = harness.run(options.task, backend, approve=ask_user, started=started, policy=policy,
                         limits=Limits(options.max_steps, options.max_tool_calls, options.max_tokens, options.deadline),
                         on_call=partial(show_call, deadline), record=Trace(options.trace, policy).record,
                         on_note=note, on_text=partial(stream_text, deadline) if options.stream else None)
    on_signals(signal.SIG_IGN)  # the run is over: a late signal changes nothing
    if received or deadline:  # the terminal may be what the run was stuck in
        deadline = max(deadline or 0, time.monotonic()) + GRACE
    report(result, deadline, options.stream)
    if result.status == "interrupted" and received:
        return SIGNAL_EXIT[received[0]]
    return EXIT_CODES[result.status]


def main(argv=None, started=None):
    try:
        code = command(argv, started or time.monotonic())
    except KeyboardInterrupt:  # before the run began
        code = 130
    if BLOCKED:  # a thread still waits in a write, holding the output's lock: Python's last flush would wait too
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
