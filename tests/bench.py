"""Measure the harness against what it cannot beat: a raw HTTP loop, one sleep, a bare import, a quiet run.

Run:  python tests/bench.py                            (half a minute a run; not part of the test suite)
      python tests/bench.py --code phases/08-streaming   (the same figures for another checkpoint)
      python tests/bench.py --figure 6                   (one figure only: here the 50-step run of phase 13)
Every timed figure is the median of several runs and a ratio of two things measured side by side in the same
run, so a busy machine slows both sides alike; figure 6 counts tokens, the same in every run. The model is the
offline one, scripted to answer at once.
It prints figures and whether each meets its target; it asserts nothing about time (exit 0 either way).
"""
import argparse
import contextlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from cases import CASES
from helpers import ROOT, clean_env, copy_code, demo_model

CODE = ROOT  # the code measured; --code changes it

STEPS = 200  # tool-call steps in the long run
CONTEXT_STEPS = 20  # steps of the context-growth run
LONG_STEPS = 50  # steps of the run with and without context management (phase 13 on): the case below
LONG_CASE = "a_fact_from_step_3_survives_wordless_calls"  # in tests/cases.py
# OpenAI's prices for gpt-5-mini (the openai backend's model), dollars a million prompt tokens, not cached and
# cached, from developers.openai.com/api/docs/pricing: a cached prompt token costs a tenth.
PRICES = {"prompt": 0.25, "cached": 0.025}
USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def backend_for(url):
    return {"name": "bench", "base_url": url, "api_key": "bench", "model": "demo"}


def serve(script, scratch):
    """The demo model in a process of its own, as a real model would be; returns (process, url)."""
    path = Path(scratch) / "script.json"
    path.write_text(json.dumps(script))
    process = subprocess.Popen([sys.executable, str(ROOT / "demo_model.py"), "--port", "0", "--script", str(path)],
                               stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().split()[4]  # "demo model listening on URL (Ctrl-C to stop)"


def stop(process):
    process.kill()
    process.wait()


def limits(harness, replies):
    """The budgets of a scripted run of that many replies. Where the harness compacts the conversation (phase 13
    on), the budget for its size is one it never reaches: it still checks it at every step, but the conversation
    stays the one the script, and the raw loop, expect."""
    budgets = harness.Limits(max_steps=replies, max_tool_calls=replies)
    if hasattr(budgets, "context_tokens"):
        budgets.context_tokens = 10 ** 9
    return budgets


def stamp():
    """Now, by the wall clock and by this process's CPU time: a step is timed from one request to the next."""
    return time.perf_counter(), time.process_time()


def raw_loop(url, first, results, stamps):
    """The limit: the same conversation sent with json and http.client, and nothing else."""
    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port)
    messages = list(first["messages"])
    while True:
        stamps.append(stamp())
        connection.request("POST", where.path + "/chat/completions", json.dumps({**first, "messages": messages}),
                           {"Content-Type": "application/json", "Authorization": "Bearer bench"})
        message = json.loads(connection.getresponse().read())["choices"][0]["message"]
        if not message.get("tool_calls"):
            return
        calls = message["tool_calls"]
        messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": results.pop(0)} for c in calls]


def steps(stamps, clock):
    """Each step's time by one clock (0: wall, 1: CPU). Step 1 is left out: it pays for starting up (imports, the
    connection), once a run."""
    return [b[clock] - a[clock] for a, b in zip(stamps[1:], stamps[2:])]


def long_run(harness, tools, workspace):
    """1. The harness's loop and the raw loop over the same 200-step conversation, each timed from one
    request to the next (tools, parsing, the model's reply: the whole step). Also how the last 20 steps compare
    with the first 20: all of a step, and the CPU time the harness spends on it beyond the raw loop's."""
    # ids and usage given, so the server estimates nothing; it still reads and checks the whole conversation
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt", "limit": n + 1}, "id": f"c{n}"}],
               "usage": USAGE} for n in range(STEPS)] + [{"content": "done", "usage": USAGE}]
    ours, raw = [], []
    chat = harness.chat
    harness.chat = lambda *args, **kwargs: ours.append(stamp()) or chat(*args, **kwargs)
    server, url = serve(script, workspace)
    try:
        result = harness.run("Read the notes", backend=backend_for(url), approve=lambda q: True,
                             limits=limits(harness, STEPS + 1))
    finally:
        harness.chat = chat
        stop(server)
    assert result.status == "answered", (result.status, result.error)
    first = {"model": "demo", "messages": result.messages[:2], "tools": tools.TOOLS}  # no MCP: the same tools
    server, url = serve(script, workspace)
    try:
        raw_loop(url, first, [m["content"] for m in result.messages if m["role"] == "tool"], raw)
    finally:
        stop(server)
    wall, raw_wall = steps(ours, 0), steps(raw, 0)
    # the CPU time the harness adds to each step, the same step side by side: another program on the machine
    # does not add to it, as it adds to the wall clock
    own = [a - b for a, b in zip(steps(ours, 1), steps(raw, 1))]
    return sum(wall) / sum(raw_wall), *(statistics.mean(times[-20:]) / statistics.mean(times[:20])
                                        for times in (wall, raw_wall, own))


def client_cost(backend, workspace):
    """Why figure 1 stops where it does: one small request through the harness's openai client (backend.client(),
    posting the body as it is, as send() does) and through http.client, in milliseconds."""
    server, url = serve([{"content": "hi", "usage": USAGE}] * 1000, workspace)
    try:
        body, where = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}, urlsplit(url)
        client = backend.client(url, "bench")
        connection = http.client.HTTPConnection(where.hostname, where.port)

        def raw():
            connection.request("POST", where.path + "/chat/completions", json.dumps(body),
                               {"Content-Type": "application/json"})
            return json.loads(connection.getresponse().read())

        costs = []
        for send in (lambda: client.post("/chat/completions", body=body, cast_to=object), raw):
            send()
            began = time.perf_counter()
            for _ in range(300):
                send()
            costs.append((time.perf_counter() - began) / 300 * 1000)
        return costs
    finally:
        stop(server)


def parallel(harness):
    """2. One turn of four calls that each sleep 0.5 s, against a turn of one such call."""
    turns = []
    for count in (1, 4):
        script = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": f"sleep 0.5; echo {n}"}}
                                  for n in range(count)]}, "done"]
        with demo_model.start(script=script) as server:
            harness.run("Sleep", backend=backend_for(server.url), approve=lambda q: True)
            turns.append(server.requests[1]["time"] - server.requests[0]["time"])
    return turns[1] / turns[0]


def timed(*command):
    """Seconds a command takes, with Python's bytecode cache on, as it is on a learner's machine (the first run,
    not timed, fills it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, cwd=ROOT, capture_output=True, check=True, env=env)
    began = time.monotonic()
    subprocess.run(command, cwd=ROOT, capture_output=True, check=True, env=env)
    return time.monotonic() - began


def cold_start():
    """3. `python harness.py --help` against `python -c "import openai"`."""
    return timed(sys.executable, str(CODE / "harness.py"), "--help") / timed(sys.executable, "-c", "import openai")


# A small Python starts the harness and reports the peak memory of its children: measuring from this big
# process would count the copy of itself that every child is for a moment after fork. Windows has
# no resource module (and no `yes`): there figure 4 is not measured.
LAUNCHER = None if os.name == "nt" else (
    "import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)")


def peak_memory(task, workspace):
    """The peak resident memory of `python harness.py --yes TASK` on the demo model, in MB, and how long its
    tool call took."""
    trace = Path(workspace) / "trace.jsonl"
    trace.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, str(CODE / "harness.py"), "--yes",
                           "--trace", str(trace), task], cwd=workspace, env=clean_env(BACKEND="demo"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    peak = int(done.stdout.split()[-1]) / (1024 * 1024 if sys.platform == "darwin" else 1024)  # bytes on macOS
    tools = [json.loads(line) for line in trace.read_text().splitlines() if '"type": "tool"' in line]
    return peak, tools[0]["seconds"]


def flood(workspace):
    """4. A command printing without end, against a quiet one: peak memory, and how soon the result is back."""
    flooded, seconds = peak_memory("Run `yes`", workspace)
    quiet, _ = peak_memory("Run `echo hi`", workspace)
    return flooded, flooded / quiet, seconds


def context(harness, tools, workspace):
    """5. Twenty steps that each read a large file: the last request, against 20 x MAX_CHARS plus the
    fixed overhead (the same conversation with every tool result emptied)."""
    for n in range(CONTEXT_STEPS):
        (workspace / f"big{n}.txt").write_text("".join(f"{n}: line {i} of a large file\n" for i in range(5000)))
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": f"big{n}.txt"}}]}
              for n in range(CONTEXT_STEPS)] + ["done"]
    with demo_model.start(script=script) as server:
        result = harness.run("Read them all", backend=backend_for(server.url), approve=lambda q: True,
                             limits=limits(harness, CONTEXT_STEPS + 1))
        last = len(json.dumps(server.requests[-1]["body"]["messages"]))
    emptied = [{**m, "content": ""} if m["role"] == "tool" else m for m in result.messages[:-1]]
    return last / (CONTEXT_STEPS * tools.MAX_CHARS + len(json.dumps(emptied)))


def managed(harness, workspace):
    """6. The scripted case LONG_CASE, run here with and without a budget: 50 steps, each reading a log of about
    3,700 characters, whose tool calls carry no words of their own; the log of step 3 holds the code word the task
    asks for, on a line in its middle; the offline model answers last, from what the last request holds. For the
    whole conversation resent (no budget) and under the default budget: prompt tokens, those not cached, the
    prompt's bill at PRICES, and whether the answer has the code word. Tokens, not time: one run of each tells."""
    case = CASES[LONG_CASE]
    for name, text in case["write"].items():
        (workspace / name).write_text(text)
    figures = []
    for budget in (None, harness.CONTEXT_TOKENS):
        with demo_model.start(script=case["script"]) as server:
            result = harness.run(case["task"], backend=backend_for(server.url),
                                 limits=harness.Limits(LONG_STEPS + 5, LONG_STEPS + 5, context_tokens=budget))
            assert result.status == "answered", (result.status, result.error)
        usage = result.usage
        uncached = usage["prompt_tokens"] - usage["cached_tokens"]
        bill = (uncached * PRICES["prompt"] + usage["cached_tokens"] * PRICES["cached"]) / 1e6
        figures.append((usage["prompt_tokens"], uncached, bill, case["expect"]["answer"] in result.answer))
    return figures


# Each timed figure: what one run of it measures, as (name, value) pairs; the median of the runs is shown.
MEASURE = {
    1: lambda harness, tools, backend, workspace: [
        *zip(("whole", "growth", "raw_growth", "own_growth"), long_run(harness, tools, workspace)),
        *zip(("sdk_ms", "raw_ms"), client_cost(backend, workspace))],
    2: lambda harness, tools, backend, workspace: [("parallel", parallel(harness))],
    3: lambda harness, tools, backend, workspace: [("cold", cold_start())],
    4: lambda harness, tools, backend, workspace: [*zip(("flood_mb", "flood_ratio", "flood_s"), flood(workspace))],
    5: lambda harness, tools, backend, workspace: [("context", context(harness, tools, workspace))],
}


def timed_rows(figure, median, shell):
    """The rows of one timed figure: (name, measured, target, ok), from median, which holds the figures measured."""
    if figure == 1:
        return [("1. per-step cost, 200 steps", f"{median['whole']:.2f} x the raw HTTP loop", "<= 1.5",
                 median["whole"] <= 1.5),
                ("   last 20 steps / first 20",
                 f"{median['growth']:.2f} x (the raw loop's: {median['raw_growth']:.2f} x)",
                 "<= 1.25 x the raw loop's", median["growth"] <= 1.25 * median["raw_growth"]),
                ("   harness's own CPU, the same", f"{median['own_growth']:.2f} x (its CPU time beyond the raw loop's)",
                 "<= 2", median["own_growth"] <= 2)]
    if figure == 2:
        return [("2. 4 parallel calls of 0.5 s", f"{median['parallel']:.2f} x a turn of one such call", "<= 1.25",
                 median["parallel"] <= 1.25)]
    if figure == 3:
        return [("3. harness.py --help", f"{median['cold']:.2f} x import openai", "<= 0.25", median["cold"] <= 0.25)]
    if figure == 4 and not LAUNCHER:
        return [("4. output flood (`yes`)",
                 "not measured on Windows (no resource module, no `yes`): WSL 2 runs it",
                 "< 100 MB, timeout + 1 s", None)]
    if figure == 4:
        return [("4. output flood (`yes`)", f"{median['flood_mb']:.0f} MB peak, {median['flood_ratio']:.2f} x a "
                 f"quiet run, result in {median['flood_s']:.2f} s", "< 100 MB, timeout + 1 s",
                 median["flood_mb"] < 100 and median["flood_s"] <= shell.TIMEOUT + 1)]
    return [("5. context after 20 big reads", f"{median['context']:.2f} x (20 x MAX_CHARS + overhead)", "<= 1",
             median["context"] <= 1)]


def context_rows(budget, naive, budgeted):
    """The rows of figure 6: each run's prompt tokens, those not cached and their bill, then the ratios."""
    tokens, bill = budgeted[0] / naive[0], budgeted[2] / naive[2]
    return [
        ("6. 50 steps, whole conversation", f"{naive[0]:,} prompt tokens, {naive[1]:,} not cached, ${naive[2]:.4f}",
         "", True),
        (f"   budget {budget:,} tokens", f"{budgeted[0]:,} prompt tokens, {budgeted[1]:,} not cached, "
                                        f"${budgeted[2]:.4f}", "", True),
        ("   the budget's / the whole's", f"{tokens:.2f} x the tokens, {bill:.2f} x the bill; step 3's fact "
                                        f"answered: {'yes' if budgeted[3] else 'no'}", "<= 0.3, <= 0.6, yes",
         tokens <= 0.3 and bill <= 0.6 and budgeted[3])]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure; the median is shown (default 5)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the folder whose harness.py is measured")
    parser.add_argument("--figure", type=int, choices=range(1, 7), metavar="N",
                        help="measure figure N only, 1 to 6 (default: every figure; 6 needs phase 13 on)")
    args = parser.parse_args()
    if not (args.code / "harness.py").exists():
        parser.error(f"--code {args.code}: there is no harness.py there")
    global CODE
    with tempfile.TemporaryDirectory() as scratch:
        workspace, CODE = Path(scratch) / "work", Path(scratch) / "code"
        workspace.mkdir()
        CODE.mkdir()
        copy_code(args.code, CODE)  # a checkpoint has no demo_model.py: it is copied too
        (workspace / "notes.txt").write_text("buy milk\n")
        sys.path.insert(0, str(CODE))
        os.chdir(workspace)  # the tools work in the current directory
        import backend
        import harness
        import shell
        import tools
        timed = [n for n in MEASURE if args.figure in (None, n)]
        runnable = [n for n in timed if n != 4 or LAUNCHER]
        figures = {}  # name: its value in each run
        for run in range(args.runs if runnable else 0):
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # the harness's [step] lines
                values = [pair for n in runnable
                          for pair in MEASURE[n](harness, tools, backend, workspace)]
            for name, value in values:
                figures.setdefault(name, []).append(value)
            print(f"run {run + 1} of {args.runs} done", file=sys.stderr)
        median = {name: statistics.median(values) for name, values in figures.items()}
        rows = [row for n in timed for row in timed_rows(n, median, shell)]
        if args.figure in (None, 6) and hasattr(harness, "CONTEXT_TOKENS"):
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                rows += context_rows(harness.CONTEXT_TOKENS, *managed(harness, workspace))
        elif args.figure == 6:
            parser.error(f"--figure 6: {args.code / 'harness.py'} has no CONTEXT_TOKENS (phase 13 adds it)")
    measured = f"measured (median of {args.runs})" if timed else "measured"
    print(f"\n{'figure':32} {measured:58} {'target':24} ok")
    for name, measured, target, ok in rows:
        print(f"{name:32} {measured:58} {target:24} {'-' if ok is None else 'yes' if ok else 'NO'}")
    if 1 in timed:
        print(f"\none small request takes {median['sdk_ms']:.2f} ms through the openai client and "
              f"{median['raw_ms']:.2f} ms through http.client: that difference is in every step of figure 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
