"""The front door: the command line. It runs the loop (harness.run), shows each call and the answer,
and asks you before a call the policy does not run unasked.

Run:
    python harness.py "List the files here, then read backend.py and tell me which model it calls."
    python harness.py --workspace play "Run `rm notes.txt`"      (asks you first; --yes says yes)
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

import guards
import harness
from backend import BACKENDS, BackendError, choose
from guards import shown

SHOWN_CHARS = 200  # of a call's arguments printed on screen; the model gets them whole


def ask_user(question, whole=False):
    """Ask on the terminal, the question fitted to it unless whole (an answer ? shows it whole);
    only y or yes is a yes. The question is safe to show already: guards.question() built it."""
    # the terminal it is asked on
    size = os.get_terminal_size(2) if os.isatty(2) else shutil.get_terminal_size()
    print(f"{question if whole else guards.fit(question, size.lines - 2, size.columns)}? [y/N] ",
          end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():  # show what was piped in, as a terminal would have
        print(shown(answer.strip(), one_line=True) or "(end of input: no)", file=sys.stderr)
    if answer.strip() == "?" and not whole:
        return ask_user(question, whole=True)
    return answer.strip().lower() in ("y", "yes")


def show_call(step, name, arguments):
    """A call's line on the screen, before it runs: [step] name {arguments, cut}, made safe to
    show."""
    print(f"[{step}] {shown(name, one_line=True)} {cut(arguments)}")


def cut(text, limit=SHOWN_CHARS):
    """Text for one line of the screen, made safe to show: cut("x" * 300) -> 200 x's + " [... 100
    more characters]" """
    more = f" [... {len(text) - limit} more characters]" if len(text) > limit else ""
    return shown(text[:limit], one_line=True) + more


def main():
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
                        help="what an approved command may change (default: the workspace)")
    args = parser.parse_args()
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    if not Path(args.workspace).is_dir():
        parser.error(f"--workspace {args.workspace}: no such directory")
    policy = guards.policy(args.workspace, args.yes, args.sandbox)
    # a relative path, even /proc/self/cwd/.., means the same to a check and a command
    os.chdir(policy.workspace)
    if not policy.sandbox and policy.why_none != "--sandbox off":
        print(f"note: no sandbox ({policy.why_none}): commands that are not plainly read-only ask "
              "you first, even with --yes; --sandbox off says you accept that.", file=sys.stderr)
    try:
        backend = choose(args.backend, args.model, args.base_url)
        if backend["note"]:
            print(f"note: {backend['note']}", file=sys.stderr)
        answer = harness.run(args.task, backend, approve=ask_user, policy=policy, on_call=show_call)
    except BackendError as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {harness.MAX_STEPS})")
        sys.exit(3)
    print(shown(answer))


if __name__ == "__main__":
    main()
