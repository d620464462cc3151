"""Phase 6, measure: the fixes the benchmark (python tests/bench.py) called for, checked without a clock: the
client's work per request does not grow with the conversation, --help never imports openai, and every tool
result fits in MAX_CHARS. The figures themselves come from the benchmark, not from timed tests."""
import subprocess
import sys

import pytest
from helpers import ROOT, run_python, scripted_backend

PHASE = 6
USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def conversation(steps):
    messages = [{"role": "user", "content": "Look around"}]
    for n in range(steps):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "notes.txt"}]
    return messages


def python_calls(function):
    """How many Python function calls running function makes, on every thread: a count, not a clock."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    import threading
    threading.setprofile(count)
    sys.setprofile(count)
    try:
        function()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return calls


def test_the_clients_work_per_request_does_not_grow_with_the_conversation(load, server):
    """chat() does the same work for a request of 3 messages as for one of 401 (no per-message transforms)."""
    backend = load("backend")
    server.push(*[{"content": "ok", "usage": USAGE}] * 3)
    settings = scripted_backend(server)
    backend.chat(conversation(1), backend=settings)  # the first request imports and connects
    short = python_calls(lambda: backend.chat(conversation(1), backend=settings))
    long = python_calls(lambda: backend.chat(conversation(200), backend=settings))
    assert long <= short * 1.1, f"{short} Python calls for 3 messages, {long} for 401: post the body as it is"


@pytest.mark.parametrize("args", [["--help"], [], ["--max-steps", "0", "task"], ["--workspace", "nowhere", "task"]])
def test_help_and_usage_errors_never_import_openai(workspace, args):
    """`python harness.py --help` and usage errors finish without importing openai (it takes most of a second)."""
    result = run_python(workspace, "-X", "importtime", "harness.py", *args)
    assert result.returncode in (0, 2)
    imported = [line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert imported and not any(name == "openai" or name.startswith("openai.") for name in imported), \
        "import openai only when the first request is made"


def test_every_tool_result_fits_in_max_chars_note_included(load, workspace):
    """read_file, run_shell and list_dir results all fit in MAX_CHARS, their notes included."""
    tools = load("tools")
    (workspace / "lines.txt").write_text("".join(f"line {n} of a long file\n" for n in range(10000)))
    (workspace / "wide.txt").write_text("w" * 50000)
    for n in range(3000):
        (workspace / f"file{n:04}.txt").write_text("")
    results = [tools.read_file("lines.txt"), tools.read_file("lines.txt", offset=9990), tools.read_file("wide.txt"),
               tools.run_shell("cat lines.txt"), tools.list_dir(".")]
    assert all(len(result) <= tools.MAX_CHARS for result in results), [len(r) for r in results]
    assert "offset=" in results[0] and "more bytes cut" in results[3] and "more entries" in results[4]


def test_the_benchmark_prints_every_figure(code_dir):
    """`python tests/bench.py --runs 1 --code DIR` prints each of its figures for your code."""
    done = subprocess.run([sys.executable, "tests/bench.py", "--runs", "1", "--code", str(code_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr  # 1: some figure missed its target
    for figure in ("1. per-step cost", "last 20 steps", "2. 4 parallel calls", "3. harness.py --help",
                   "4. output flood", "5. context after 20 big reads"):
        assert figure in done.stdout, f"the benchmark did not print {figure!r}:\n{done.stdout}{done.stderr[-500:]}"
