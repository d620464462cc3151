"""The front door: the command line. It runs the loop (harness.run), shows each call, asks you
before a call the policy does not run unasked, writes the trace, and reports how the run ended, as
an exit code too.

Run:
    python harness.py "List the files here, then read backend.py and tell me which model it calls."
    python harness.py --stream --deadline 60 --trace run.jsonl "Run `make test`; what failed?"
    python harness.py --output-schema answer.json "How many files are here? Answer as JSON."
"""

import argparse
import json
import logging
import os
import shutil
import signal
import stat
import sys
import time
from functools import partial
from pathlib import Path

import guards
import harness
from backend import BACKENDS, BackendError, choose
from guards import mask, shown
from harness import GRACE, Limits, Stop, within
from tools import truncate, unusable

SHOWN_CHARS = 200  # of a call's arguments printed on screen; the model gets them whole
# longest text kept in one field of the trace; the rest is counted, not written
TRACE_CHARS = 20_000
EXIT_CODES = {"answered": 0, "provider_error": 1, "output_error": 1, "internal_error": 1,
              "step_limit": 3, "tool_call_limit": 3, "token_limit": 3, "deadline": 3, "repeated": 3,
              "incomplete": 4, "content_filter": 4, "refused": 4, "invalid_output": 4,
              "interrupted": 130}
# SIGTERM and SIGHUP end a run as Ctrl-C does
SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}
BLOCKED = []  # writes to standard output given up on: a thread still waits in one, holding its lock


class Trace:
    """The JSONL trace: one JSON object a line, written whole and at once, so a crash loses nothing
    done; every text in it masked as tool results are. run(record=Trace(path, policy).record) writes
    it."""

    def __init__(self, path=None, policy=None):
        # the run's id tells runs apart
        self.run, self.path, self.policy = os.urandom(4).hex(), path, policy
        self.file = None

    def record(self, kind, **fields):
        """Write one record; the file is opened at the first (in the run, which ends as output_error
        if not)."""
        if not self.path:
            return
        if self.file is None:
            self.file = open(trace_file(self.path, self.policy), "ab", buffering=0)
        fields = {name: truncate(mask(self.policy, value), TRACE_CHARS) if isinstance(value, str)
                  else value
                  for name, value in fields.items()}
        try:
            self.file.write((json.dumps({"run": self.run, "type": kind, **fields}) + "\n").encode())
        except OSError as error:
            self.path = None  # once is enough
            raise Stop("output_error",
                       f"the trace could not be written: {error.strerror}") from None


def trace_file(path, policy):
    """The trace's file descriptor, opened so that nothing redirects it: a link at its path, or (in
    the workspace, where the model may have made one) on its way to it, or a file that is no regular
    file is an error."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        # a link, a pipe, a folder
        raise Stop("output_error", f"the trace {path} is not a regular file")
    try:
        if (
            Path(folder).resolve().is_relative_to(policy.workspace)
            and os.path.realpath(folder) != folder
        ):
            raise OSError(0, "a link leads to its folder")
        # a link is refused, and a pipe nobody reads cannot block
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) |
                     getattr(os, "O_NONBLOCK", 0), 0o600)
    except OSError as error:
        raise Stop("output_error", f"the trace {path} cannot be opened: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Stop("output_error", f"the trace {path} is not a regular file")
    return fd


def ask_user(question, whole=False):
    """Ask on the terminal, the question fitted to it unless whole (an answer ? shows it whole);
    only y or yes is a yes. The question is safe to show already: guards.question() built it."""
    # the terminal it is asked on
    size = os.get_terminal_size(2) if os.isatty(2) else shutil.get_terminal_size()
    tell(f"{question if whole else guards.fit(question, size.lines - 2, size.columns)}? [y/N] ",
         end="")
    answer = sys.stdin.readline() if sys.stdin else ""
    if not (sys.stdin and sys.stdin.isatty()):  # show what was piped in, as a terminal would have
        tell(shown(answer.strip(), one_line=True) or "(end of input: no)")
    if answer.strip() == "?" and not whole:
        return ask_user(question, whole=True)
    return answer.strip().lower() in ("y", "yes")


def show_call(deadline, step, name, arguments):
    """A call's line on the screen, before it is decided: [step] name {arguments, cut}, made safe to
    show."""
    say(f"[{step}] {shown(name, one_line=True)} {cut(arguments)}", deadline)


def cut(text, limit=SHOWN_CHARS):
    """Text for one line of the screen, made safe to show: cut("x" * 300) -> 200 x's + " [... 100
    more characters]" """
    more = f" [... {len(text) - limit} more characters]" if len(text) > limit else ""
    return shown(text[:limit], one_line=True) + more


def say(text, deadline=None, end="\n"):
    """Print to standard output, waited for until the deadline; output that cannot be written (its
    reader gone, as in `| head -c 1`; a full disk) ends the run as output_error."""
    try:
        if sys.stdout is None:
            # the run began with standard output closed: print() would write nothing, silently
            raise OSError("no standard output")
        within(deadline, "the terminal", partial(print, text, end=end, flush=True))
    except Stop:
        BLOCKED.append(text)
        raise
    except OSError:
        if sys.stdout:  # from now on it writes nowhere, Python's own last flush too
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise Stop("output_error",
                   "standard output could not be written: its reader went away, "
                   "or the disk is full")


def tell(text, end="\n"):
    """Print to standard error, if it can be written: notes and questions are not worth ending a run
    for."""
    try:
        print(text, end=end, file=sys.stderr, flush=True)
    except AttributeError:  # the run began with standard error closed
        pass
    except OSError:
        # from now on it writes nowhere, as say() does: Python's own last flush would fail, exit 120
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())


def note(text):
    tell(f"note: {shown(text)}")


def arguments(argv=None):
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS,
                        help="default: $BACKEND, else the first key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url",
                        help="any OpenAI-compatible server (default: $BASE_URL, "
                             "else the backend's)")
    parser.add_argument("--workspace", default=".",
                        help="the folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every call that would be asked about")
    parser.add_argument("--sandbox", choices=("workspace-write", "read-only", "off"),
                        default="workspace-write",
                        help="what an approved command may change (Linux; default: the workspace)")
    parser.add_argument("--max-steps", type=int, default=harness.MAX_STEPS,
                        help=f"default {harness.MAX_STEPS}")
    parser.add_argument("--max-tool-calls", type=int, default=harness.MAX_TOOL_CALLS,
                        help=f"default {harness.MAX_TOOL_CALLS}")
    parser.add_argument("--max-tokens", type=int, help="default: no limit")
    parser.add_argument("--deadline", type=float, metavar="SECONDS",
                        help="wall-clock time for the run (default: none)")
    parser.add_argument("--trace", metavar="FILE", help="append a JSONL trace of the run to FILE")
    parser.add_argument("--stream", action="store_true",
                        help="print the model's text as it arrives")
    parser.add_argument("--tool-choice", choices=("auto", "none", "required"),
                        help="for the first request")
    parser.add_argument("--no-parallel-tool-calls", action="store_true",
                        help="ask for one tool call a turn")
    parser.add_argument("--output-schema", metavar="FILE",
                        help="a JSON schema the answer must fit; printed as JSON")
    args = parser.parse_args(argv)
    try:
        schema = (Path(args.output_schema).read_text(encoding="utf-8") if args.output_schema
                  else "null")
        args.output = json.loads(schema)
        # NaN is Python's, not JSON's: no server would take the tool
        json.dumps(args.output, allow_nan=False)
        if args.output is not None and (wrong := unusable(args.output)):
            raise ValueError(wrong)
    except (OSError, ValueError, RecursionError) as error:
        parser.error(f"--output-schema {args.output_schema}: {error}")
    # bytes that are no UTF-8
    args.task = args.task.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    for name in ("max_steps", "max_tool_calls", "max_tokens", "deadline"):
        if getattr(args, name) is not None and not getattr(args, name) > 0:
            # NaN is not above 0 either
            parser.error(f"--{name.replace('_', '-')} must be above 0, not {getattr(args, name)}")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    return args


def main(argv=None, started=None):
    """python harness.py ARGS: run the task, show it, report it, and exit with its status's code.
    started is the time.monotonic() the deadline counts from: when Python started, for
    harness.py."""
    try:
        code = command(argv, started or time.monotonic())
    except KeyboardInterrupt:  # Ctrl-C before the run began: nothing to close
        code = 130
    if BLOCKED:  # Python's own last flush would wait for that thread for ever: leave without it
        os._exit(code)
    sys.exit(code)


def command(argv, started):
    """The run the arguments ask for, shown and reported; its exit code."""
    args = arguments(argv)
    trace = args.trace and os.path.abspath(args.trace)
    policy = guards.policy(args.workspace, args.yes, args.sandbox, trace)
    # a relative path, even /proc/self/cwd/.., means the same to a check and a command
    os.chdir(policy.workspace)
    # it logs its retries: send() makes them a note
    logging.getLogger("openai._base_client").setLevel(logging.INFO)
    try:
        backend = choose(args.backend, args.model, args.base_url)
    except BackendError as error:
        sys.exit(f"error: {shown(str(error))}")
    if backend["note"]:
        note(backend["note"])
    if not policy.sandbox and policy.why_none != "--sandbox off":
        note(f"no sandbox ({policy.why_none}): commands that are not plainly read-only ask you "
             "first, even with --yes; --sandbox off says you accept that.")
    received = []

    def interrupted(number, frame):
        # the first signal ends the run; one while it closes is only noted
        received.append(number)
        if len(received) == 1:
            raise KeyboardInterrupt

    on_signals(interrupted)
    deadline = started + args.deadline if args.deadline else None
    options = {"tool_choice": args.tool_choice} if args.tool_choice else {}
    if args.no_parallel_tool_calls:
        options["parallel_tool_calls"] = False
    result = harness.run(args.task, backend, approve=ask_user, policy=policy, started=started,
                         options=options, on_call=partial(show_call, deadline), on_note=note,
                         record=Trace(trace, policy).record, on_text=partial(stream_text, deadline)
                         if args.stream else None, output=args.output,
                         limits=Limits(args.max_steps, args.max_tool_calls, args.max_tokens,
                                       args.deadline))
    on_signals(signal.SIG_IGN)  # the run is over: a late signal changes nothing
    code = SIGNAL_EXIT[signal.Signals(received[0]).name] if received else EXIT_CODES[result.status]
    try:
        # after a signal, the report gets GRACE seconds too: the terminal may be what the run was
        # stuck in
        report(result, args.stream, time.monotonic() + GRACE if received
               else deadline and deadline + GRACE)
    except Stop as stop:
        # what could not be written is lost; the status stands, but an unseen answer is no success
        tell(f"error: {stop.error}")
        code = code or EXIT_CODES[stop.status]
    return code


def stream_text(deadline, piece):
    """Print a piece of a streamed reply as it comes; a run already out of time prints no more."""
    if deadline is None or time.monotonic() < deadline:
        say(shown(piece), end="")


def on_signals(handler):
    for name in SIGNAL_EXIT:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), handler)


def report(result, streamed=False, deadline=None):
    """Print the answer (unless streamed), why the run stopped, and a one-line summary on standard
    error."""
    if streamed and result.answer and result.output is None:
        say("", deadline)  # the answer is on screen already: end its line
    if result.status != "answered":
        say(f"stopped: {result.status.replace('_', ' ')}", deadline)
    if result.error:
        tell(f"error: {shown(result.error)}")
    if result.answer and (not streamed or result.output is not None):
        say(shown(result.answer), deadline)
    tell(f"{result.status}: {result.steps} steps, {result.tool_calls} tool calls, "
         f"{result.usage['total_tokens']} tokens, {result.seconds:.1f} s")


if __name__ == "__main__":
    main()
