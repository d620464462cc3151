"""Phase 7 (learner's version): the front door, all a person sees of the loop: the calls, the questions, the
answer or why the run stopped, a one-line summary, the exit code, and the JSONL trace.

Run:  python cli.py "List the files here, then read backend.py and tell me which model it calls."
      (--backend, --model, --base-url override the environment for one run; --workspace DIR, --yes,
      --sandbox workspace-write|read-only|off; budgets: --max-steps, --max-tool-calls, --max-tokens,
      --deadline SECONDS; --trace FILE appends one JSON object a line; python harness.py is the same)
Exit codes: 0 answered, 1 provider, output or internal error, 2 usage, 3 a budget or a repeated call, 4 a reply
cut short, filtered or refused, 130 Ctrl-C.
"""
import argparse
import json
import logging
import math
import os
import shutil
import stat
import sys
import time
import uuid
from pathlib import Path

import guards
import harness
from backend import BackendError, choose
from guards import shown
from harness import Limits, Stop

SHOWN_CHARS = 200  # characters of a call's arguments shown on screen
TRACE_CHARS = 20_000  # characters of one text the trace keeps
EXIT_CODES = {"answered": 0, "provider_error": 1, "output_error": 1, "internal_error": 1, "step_limit": 3,
              "tool_call_limit": 3, "token_limit": 3, "deadline": 3, "repeated": 3, "incomplete": 4,
              "content_filter": 4, "refused": 4, "interrupted": 130}


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


def say(*text, file=sys.stdout):
    """Print and flush at once: a [step] line shows before the wait that follows it."""
    print(*text, file=file, flush=True)


def note(text):
    """run()'s on_note: something the person at the keyboard should know, on standard error."""
    say(shown(f"note: {text}", one_line=True), file=sys.stderr)


def cut(arguments):
    """Text for one line of the screen, made safe: the first SHOWN_CHARS characters, and how many more there were."""
    more = f"... (+{len(arguments) - SHOWN_CHARS} characters)" if len(arguments) > SHOWN_CHARS else ""
    return shown(arguments[:SHOWN_CHARS], one_line=True) + more


def show_call(step, name, arguments):
    """run()'s on_call: one `[step] name arguments` line a call, shown before it is decided."""
    say(f"[{step}] {shown(name, one_line=True)} {cut(arguments)}")


def ask_user(question):
    """Ask a person on standard error, the question fitted to the screen (? shows it whole); only y or yes is a yes."""
    size = os.get_terminal_size(2) if os.isatty(2) else shutil.get_terminal_size()  # the terminal it is asked on
    text = guards.fit(question, size.lines - 2, size.columns)
    while True:
        print(f"{text}? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline()
        if not answer:
            print("(end of input: no)", file=sys.stderr)
            return False
        if not sys.stdin.isatty():  # a piped answer is not echoed by a terminal: show it, so the screen reads right
            print(shown(answer.strip(), one_line=True), file=sys.stderr)
        if answer.strip() != "?":
            return answer.strip().lower() in ("y", "yes")
        text = question


def report(result):
    """The answer (or `stopped: ...`) on stdout; the error and a one-line summary on stderr."""
    if result.answer:  # a reply that ended the run is shown too
        say(shown(result.answer))  # its own line breaks, nothing else raw
    if result.status != "answered":
        say(f"stopped: {result.status.replace('_', ' ')}")
    if result.error:
        say(f"error: {shown(result.error)}", file=sys.stderr)
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
    parser.add_argument("--max-steps", type=above_zero(int), default=harness.MAX_STEPS, help="requests")
    parser.add_argument("--max-tool-calls", type=above_zero(int), default=harness.MAX_TOOL_CALLS, help="calls")
    parser.add_argument("--max-tokens", type=above_zero(int), help="tokens, sent and received (default: no limit)")
    parser.add_argument("--deadline", type=above_zero(float), help="seconds for the whole run (default: none)")
    parser.add_argument("--trace", help="append a JSON line for every reply, call and the end to this file")
    options = parser.parse_args(argv)
    if not Path(options.workspace).is_dir():
        parser.error(f"--workspace {options.workspace}: no such folder")
    return options


def command(argv, started):
    """The run the arguments ask for, shown and reported; its exit code."""
    options = arguments(argv)
    logging.getLogger("openai._base_client").setLevel(logging.INFO)  # its retries: chat() tells them to note()
    policy = guards.policy(options.workspace, options.yes, options.sandbox, options.trace)
    try:
        backend = choose(options.backend, options.model, options.base_url)
    except BackendError as error:
        say(f"error: {error}", file=sys.stderr)
        return 1
    if backend["note"]:
        say(backend["note"], file=sys.stderr)
    if policy.why_none:
        say(f"note: no sandbox ({policy.why_none}), so every command that is not plainly read-only asks, even "
            "under --yes; --sandbox off says you accept that", file=sys.stderr)
    result = harness.run(" ".join(options.task), backend, approve=ask_user, started=started, policy=policy,
                         limits=Limits(options.max_steps, options.max_tool_calls, options.max_tokens, options.deadline),
                         on_call=show_call, record=Trace(options.trace, policy).record, on_note=note)
    report(result)
    return EXIT_CODES[result.status]


def main(argv=None, started=None):
    try:
        code = command(argv, started or time.monotonic())
    except KeyboardInterrupt:  # before the run began
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
