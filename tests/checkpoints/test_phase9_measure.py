"""Phase 9, measure: the fixes the benchmark (python tests/bench.py) called for, checked by counting, never by the
clock: the work the loop does for each request does not grow with the conversation, --help, usage errors and a
missing key never import openai, and every tool result, its note included, fits in MAX_CHARS. The figures
themselves are the benchmark's, not the check's."""
import sys

import pytest
from helpers import groq_env, run_python, scripted_backend

PHASE = 9
FILES = ("backend.py", "guards.py", "tools.py", "shell.py", "harness.py", "cli.py")
USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}  # the server counts: nothing to estimate


def history(turns):
    """A finished conversation of `turns` tool calls and their results, to go on from."""
    messages = [{"role": "system", "content": "You are a careful assistant."}, {"role": "user", "content": "Look"}]
    for n in range(turns):
        messages += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"old{n}", "type": "function",
                      "function": {"name": "list_dir", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"old{n}", "content": "notes.txt"}]
    return messages


def counted_calls(function):
    """How many function calls (Python's and C's) running function makes on this thread: a count, not a clock."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        function()
    finally:
        sys.setprofile(None)
    return calls


def calls_for_steps(harness, server, turns, steps):
    """Calls made by a run of `steps` requests (at most MAX_STEPS, 10; each asks for one small read) after a
    history of `turns`."""
    server.push(*[{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt", "limit": n + 1},
                                   "id": f"c{turns}_{steps}_{n}"}], "usage": USAGE} for n in range(steps - 1)],
                {"content": "done", "usage": USAGE})
    backend = scripted_backend(server)
    return counted_calls(lambda: harness.run("Read the notes", backend=backend, approve=lambda q: False,
                                             history=history(turns)))


def test_the_work_per_request_does_not_grow_with_the_conversation(harness, server, workspace):
    """Each request costs the loop the same number of function calls after 1 earlier turn as after 400: nothing
    walks through the whole conversation at every step (the call ids seen so far are kept in a set)."""
    (workspace / "notes.txt").write_text("buy milk\n")
    calls_for_steps(harness, server, 1, 2)  # the first run imports and connects
    per_step = {}
    for turns in (1, 400):  # 10 requests against 2: what the 8 more cost, each
        per_step[turns] = (calls_for_steps(harness, server, turns, 10) - calls_for_steps(harness, server, turns, 2)) / 8
    assert per_step[400] < per_step[1] + 400, (
        f"a step made {per_step[1]:.0f} function calls after 1 earlier turn, {per_step[400]:.0f} after 400 (800 "
        "more messages): something walks through the whole conversation at every step")


@pytest.mark.parametrize("args, env", [(["--help"], {}), ([], {}), (["--max-steps", "0", "task"], {}),
                                       (["--workspace", "nowhere", "task"], {}), (["task"], {"BACKEND": "groq"})],
                         ids=["help", "no-task", "max-steps-0", "no-workspace", "no-key"])
def test_help_usage_errors_and_a_missing_key_never_import_openai(workspace, args, env):
    """`python harness.py --help`, a usage error (exit 2) and a missing key (exit 1) finish without importing
    openai: sdk() imports it on the first request."""
    result = run_python(workspace, "-X", "importtime", "harness.py", *args, env=env)
    assert result.returncode in (0, 1, 2), result.stderr[-2000:]
    imported = [line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert imported and not [name for name in imported if name == "openai" or name.startswith("openai.")], \
        "import openai only through sdk(), when the first request is made"


def test_every_tool_result_fits_in_max_chars_note_included(workspace, server, load):
    """A long file, a file of one very long line, a command printing a lot and a folder of 3,000 names: each
    result the model gets, its note included, is at most MAX_CHARS long."""
    (workspace / "lines.txt").write_text("".join(f"line {n} of a long file\n" for n in range(10000)))
    (workspace / "wide.txt").write_text("w" * 50000)
    (workspace / "many").mkdir()
    for n in range(3000):
        (workspace / "many" / f"file{n:04}.txt").touch()
    calls = [("read_file", {"path": "lines.txt", "limit": 5000}), ("read_file", {"path": "wide.txt"}),
             ("run_shell", {"command": "cat lines.txt"}), ("list_dir", {"path": "many"})]
    server.push({"tool_calls": [{"name": name, "arguments": args, "id": f"c{n}"}
                                for n, (name, args) in enumerate(calls)]}, "done")
    result = run_python(workspace, "harness.py", "Read them", env=groq_env(server))
    assert result.returncode == 0, result.stderr[-2000:]
    results = [m["content"] for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"]
    limit = load("tools").MAX_CHARS
    assert len(results) == 4 and all(len(r) <= limit for r in results), \
        f"results of {[len(r) for r in results]} characters; MAX_CHARS is {limit}: cut each to fit, its note included"
