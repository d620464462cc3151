"""Phase 2 (learner's version): the front door, all a person sees of the loop, and where a person is asked.

Run:  python cli.py "List the files here, then read backend.py and tell me which model it calls."
      (--backend, --model, --base-url override the environment for one run; --workspace DIR, --yes;
      python harness.py is the same)
Exit codes: 0 answered, 1 backend error, 2 usage, 3 step limit, 130 Ctrl-C.
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

import guards
import harness
from backend import BackendError, choose
from guards import shown

SHOWN_CHARS = 200  # characters of a call's arguments shown on screen


def cut(arguments):
    """Text for one line of the screen, made safe: the first SHOWN_CHARS characters, and how many more there were."""
    more = f"... (+{len(arguments) - SHOWN_CHARS} characters)" if len(arguments) > SHOWN_CHARS else ""
    return shown(arguments[:SHOWN_CHARS], one_line=True) + more


def show_call(step, name, arguments):
    """run()'s on_call: one `[step] name arguments` line a call, shown before it runs."""
    print(f"[{step}] {shown(name, one_line=True)} {cut(arguments)}", flush=True)


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
        if answer.strip() != "?":
            return answer.strip().lower() in ("y", "yes")
        text = question


def main(argv=None):
    parser = argparse.ArgumentParser(description="Give the model a task and let it use the tools.")
    parser.add_argument("task", nargs="+", help="what to do, in words")
    parser.add_argument("--backend", help="groq, openai, ollama or demo (default: $BACKEND, else by key)")
    parser.add_argument("--model", help="model name (default: $MODEL, else the backend's)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    parser.add_argument("--workspace", default=".", help="the only folder the tools may touch (default: here)")
    parser.add_argument("--yes", action="store_true", help="run every command without asking")
    options = parser.parse_args(argv)
    if not Path(options.workspace).is_dir():
        parser.error(f"--workspace {options.workspace}: no such folder")
    try:
        backend = choose(options.backend, options.model, options.base_url)
        if backend["note"]:
            print(backend["note"], file=sys.stderr)
        answer = harness.run(" ".join(options.task), backend, approve=ask_user,
                             policy=guards.policy(options.workspace, options.yes), on_call=show_call)
    except BackendError as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {harness.MAX_STEPS}) before the model answered")
        sys.exit(3)
    print(shown(answer))  # its own line breaks, nothing else raw


if __name__ == "__main__":
    main()
