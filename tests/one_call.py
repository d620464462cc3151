"""How much of the harness one tool call runs: the distinct functions of the project's own files that
run() goes through for a list_dir call and an answer, counted by Python's profiler.

Run:  python tests/one_call.py                   (each phase's checkpoint, then the top-level code)
      python tests/one_call.py --code DIR --names (one folder, and the functions' names)
Issue 36's target is at most 35 from phase 5 on (47 before the front door); test_guardrails.py holds it.
"""
import argparse
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from helpers import ROOT, checkpoints, copy_code

TARGET = 35  # functions, from phase 5 on
SHAPES = ("<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>")  # not functions of their own


def functions_run(harness, guards, backend, folder):
    """{(file, function)} that run() calls in folder's files for one list_dir call and an answer, and
    how many times check_call() ran (phase 4 on: once)."""
    ours, seen, checks = {str(path) for path in Path(folder).glob("*.py")}, set(), []

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename in ours and code.co_name != "<module>":
            seen.add((os.path.basename(code.co_filename), code.co_name))
            checks.extend([1] if code.co_name == "check_call" else [])

    options = {}
    if "policy" in inspect.signature(harness.run).parameters and guards:
        # the same on every machine: no sandbox to find, no note that there is none (phase 3 on)
        off = {"sandbox": "off"} if "sandbox" in inspect.signature(guards.policy).parameters else {}
        options["policy"] = guards.policy(**off)
    sys.setprofile(profile)
    try:
        harness.run("List", backend=backend, **options)
    finally:
        sys.setprofile(None)
    return {name for name in seen if name[1] not in SHAPES}, len(checks)


def measure(code):
    """Count in a copy of code, its own process (each phase's modules have the same names)."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch).resolve()
        copy_code(code, folder)
        os.chdir(folder)
        sys.path.insert(0, str(folder))
        import demo_model
        import harness
        guards = __import__("guards") if (folder / "guards.py").exists() else None
        server = demo_model.start(script=[{"tool_calls": [
            {"name": "list_dir", "arguments": '{"path": "."}', "id": "call_0"}]}, "done"])
        backend = {"name": "groq", "base_url": server.url, "api_key": "gsk_count",
                   "model": "openai/gpt-oss-120b"}
        try:
            return functions_run(harness, guards, backend, folder)
        finally:
            server.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, help="one folder (default: every checkpoint, then the top level)")
    parser.add_argument("--names", action="store_true", help="also print the functions' names")
    args = parser.parse_args()
    if args.code:
        if not (args.code / "harness.py").exists():
            parser.error(f"--code {args.code}: there is no harness.py there")
        names, checks = measure(args.code.resolve())
        print(f"{len(names)} functions, check_call() {checks} times")
        for file, function in sorted(names) if args.names else []:
            print(f"  {file}: {function}")
        return
    print(f"{'code':22} functions  check_call()  target")
    for number, folder in [*((n, f) for n, f in enumerate(checkpoints()) if n), (None, ROOT)]:
        done = subprocess.run([sys.executable, __file__, "--code", str(folder)], capture_output=True,
                              text=True)
        if done.returncode:
            print(f"{folder.name:22} failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        count, _, _, checks, _ = done.stdout.split()[:5]
        target = f"<= {TARGET}" if number is None or number >= 5 else ""
        ok = "" if not target else "yes" if int(count) <= TARGET else "NO"
        print(f"{folder.name if number is not None else 'top level':22} {count:>9}  {checks:>12}  "
              f"{target} {ok}")


if __name__ == "__main__":
    main()
