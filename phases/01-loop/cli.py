"""The front door: the command line. It runs the loop (harness.run) and shows each call and the
answer.

Run:
    python harness.py "List the files here, then read backend.py and tell me which model it calls."
    python cli.py "What does README.md say?"      (the same)
"""

import argparse
import sys

import harness
from backend import BACKENDS, BackendError, choose

SHOWN_CHARS = 200  # of a call's arguments printed on screen; the model gets them whole


def show_call(step, name, arguments):
    """A call's line on the screen, before it runs: [step] name {arguments, cut}."""
    print(f"[{step}] {name} {cut(arguments)}")


def cut(text, limit=SHOWN_CHARS):
    """Text for one line of the screen. Example: cut("x" * 300) -> 200 x's, then " [... 100 more
    characters]" """
    return (text if len(text) <= limit
            else f"{text[:limit]} [... {len(text) - limit} more characters]")


def main():
    parser = argparse.ArgumentParser(description="Run one task with a tool-calling model.")
    parser.add_argument("task", help="what you want done, in quotes")
    parser.add_argument("--backend", choices=BACKENDS,
                        help="default: $BACKEND, else the first key found, else demo")
    parser.add_argument("--model", help="default: $MODEL, else the backend's default model")
    parser.add_argument("--base-url",
                        help="any OpenAI-compatible server (default: $BASE_URL, "
                             "else the backend's)")
    args = parser.parse_args()
    if not args.task.strip():
        parser.error("the task is empty: say what you want done")
    try:
        backend = choose(args.backend, args.model, args.base_url)
        if backend["note"]:
            print(f"note: {backend['note']}", file=sys.stderr)
        answer = harness.run(args.task, backend, on_call=show_call)
    except BackendError as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {harness.MAX_STEPS})")
        sys.exit(3)
    print(answer)


if __name__ == "__main__":
    main()
