"""Phase 1 (learner's version): the front door, all a person sees of the loop.

Run:  python cli.py "List the files here, then read backend.py and tell me which model it calls."
      (--backend, --model, --base-url override the environment for one run; python harness.py is the same)
Exit codes: 0 answered, 1 backend error, 2 usage, 3 step limit, 130 Ctrl-C.
"""
import argparse
import sys

import harness
from backend import BackendError, choose

SHOWN_CHARS = 200  # characters of a call's arguments shown on screen


def cut(arguments):
    """Text for one line of the screen, made safe: the first SHOWN_CHARS characters, and how many more there were."""
    if len(arguments) <= SHOWN_CHARS:
        return arguments
    return f"{arguments[:SHOWN_CHARS]}... (+{len(arguments) - SHOWN_CHARS} characters)"


def show_call(step, name, arguments):
    """run()'s on_call: one `[step] name arguments` line a call, shown before it runs."""
    print(f"[{step}] {name} {cut(arguments)}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Give the model a task and let it use the tools.")
    parser.add_argument("task", nargs="+", help="what to do, in words")
    parser.add_argument("--backend", help="groq, openai, ollama or demo (default: $BACKEND, else by key)")
    parser.add_argument("--model", help="model name (default: $MODEL, else the backend's)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: $BASE_URL, else the backend's)")
    options = parser.parse_args(argv)
    try:
        backend = choose(options.backend, options.model, options.base_url)
        if backend["note"]:
            print(backend["note"], file=sys.stderr)
        answer = harness.run(" ".join(options.task), backend, on_call=show_call)
    except BackendError as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
    if answer is None:
        print(f"stopped: hit the step limit (MAX_STEPS = {harness.MAX_STEPS}) before the model answered")
        sys.exit(3)
    print(answer)


if __name__ == "__main__":
    main()
