"""Measure the harness against what it cannot beat: a raw HTTP loop, one sleep, a bare import, a quiet run.

Run:  python tests/bench.py                           (half a minute; not part of the test suite)
      python tests/bench.py --code phases/05-recovery   (the same figures for another checkpoint)
Every figure is the median of several runs and a ratio of two things measured side by side in the same
run, so a busy machine slows both sides alike. The model is the offline one, scripted to answer at once.
"""
import argparse
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

from helpers import ROOT, clean_env, copy_code, demo_model

CODE = ROOT  # the code measured; --code changes it

STEPS = 200  # tool-call steps in the long run
CONTEXT_STEPS = 20  # steps of the context-growth run
USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def backend_for(url):
    return {"name": "bench", "base_url": url, "api_key": "bench", "model": "bench"}


def serve(script, scratch):
    """The demo model in a process of its own, as a real model would be; returns (process, url)."""
    path = Path(scratch) / "script.json"
    path.write_text(json.dumps(script))
    process = subprocess.Popen([sys.executable, str(ROOT / "demo_model.py"), "--port", "0", "--script", str(path)],
                               stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().split()[4]  # "demo model listening on URL (Ctrl-C to stop)"


def raw_loop(url, first, results, stamps):
    """The limit: the same conversation sent with json and http.client, and nothing else."""
    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port)
    messages = list(first["messages"])
    while True:
        stamps.append(time.perf_counter())
        connection.request("POST", where.path + "/chat/completions", json.dumps({**first, "messages": messages}),
                           {"Content-Type": "application/json", "Authorization": "Bearer bench"})
        message = json.loads(connection.getresponse().read())["choices"][0]["message"]
        if not message.get("tool_calls"):
            return
        calls = message["tool_calls"]
        messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": results.pop(0)} for c in calls]


def long_run(harness, workspace):
    """1. The harness's loop and the raw loop over the same 200-step conversation, each timed from one
    request to the next (tools, parsing, the model's reply: the whole step)."""
    # ids and usage given, so the server need not hash or measure the conversation: an instant model
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt", "limit": n + 1}, "id": f"c{n}"}],
               "usage": USAGE} for n in range(STEPS)] + [{"content": "done", "usage": USAGE}]
    ours, raw = [], []
    chat = harness.chat
    harness.chat = lambda *args, **kwargs: ours.append(time.perf_counter()) or chat(*args, **kwargs)
    server, url = serve(script, workspace)
    try:
        result = harness.run("Read the notes", backend=backend_for(url), approve=lambda q: True,
                             limits=harness.Limits(max_steps=STEPS + 1, max_tool_calls=STEPS + 1))
    finally:
        harness.chat = chat
        server.kill()
    assert result.status == "answered", result.status
    first = {"model": "bench", "messages": result.messages[:2], "tools": harness.TOOLS}
    server, url = serve(script, workspace)
    try:
        raw_loop(url, first, [m["content"] for m in result.messages if m["role"] == "tool"], raw)
    finally:
        server.kill()
    # step 1 is left out on both sides: it pays for starting up (imports, the connection), once a run
    ours, raw = [b - a for a, b in zip(ours[1:], ours[2:])], [b - a for a, b in zip(raw[1:], raw[2:])]
    growth = statistics.mean(ours[-20:]) / statistics.mean(ours[:20])
    own = [a - b for a, b in zip(ours, raw)]  # what the harness adds to each step, the same step side by side
    return sum(ours) / sum(raw), growth, statistics.mean(own[-20:]) / statistics.mean(own[:20])


def client_cost(workspace):
    """Why figure 1 stops where it does: one small request through the openai client and through http.client,
    in milliseconds."""
    from openai import OpenAI
    from openai.types.chat import ChatCompletion
    server, url = serve([{"content": "hi", "usage": USAGE}] * 1000, workspace)
    try:
        body, where = {"model": "bench", "messages": [{"role": "user", "content": "hi"}]}, urlsplit(url)
        client = OpenAI(base_url=url, api_key="bench", max_retries=0)
        connection = http.client.HTTPConnection(where.hostname, where.port)

        def raw():
            connection.request("POST", where.path + "/chat/completions", json.dumps(body),
                               {"Content-Type": "application/json"})
            return json.loads(connection.getresponse().read())

        costs = []
        for send in (lambda: client.post("/chat/completions", body=body, cast_to=ChatCompletion), raw):
            send()
            began = time.perf_counter()
            for _ in range(300):
                send()
            costs.append((time.perf_counter() - began) / 300 * 1000)
        return costs
    finally:
        server.kill()


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
# process would count the copy of itself that every child is for a moment after fork.
LAUNCHER = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
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
                             limits=harness.Limits(max_steps=CONTEXT_STEPS + 1))
        last = len(json.dumps(server.requests[-1]["body"]["messages"]))
    emptied = [{**m, "content": ""} if m["role"] == "tool" else m for m in result.messages[:-1]]
    return last / (CONTEXT_STEPS * tools.MAX_CHARS + len(json.dumps(emptied)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure; the median is shown (default 5)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the folder whose harness.py is measured")
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
        import harness
        import shell
        import tools
        figures = {name: [] for name in ("whole", "growth", "own_growth", "parallel", "cold", "flood_mb",
                                         "flood_ratio", "flood_s", "context", "sdk_ms", "raw_ms")}
        for run in range(args.runs):
            whole, growth, own_growth = long_run(harness, workspace)
            figures["own_growth"].append(own_growth)
            for name, value in zip(("sdk_ms", "raw_ms"), client_cost(workspace)):
                figures[name].append(value)
            flood_mb, flood_ratio, flood_s = flood(workspace)
            for name, value in [("whole", whole), ("growth", growth), ("parallel", parallel(harness)),
                                ("cold", cold_start()), ("flood_mb", flood_mb), ("flood_ratio", flood_ratio),
                                ("flood_s", flood_s), ("context", context(harness, tools, workspace))]:
                figures[name].append(value)
            print(f"run {run + 1} of {args.runs} done", file=sys.stderr)
        median = {name: statistics.median(values) for name, values in figures.items()}
    rows = [
        ("1. per-step cost, 200 steps", f"{median['whole']:.2f} x the raw HTTP loop", "<= 1.5", median["whole"] <= 1.5),
        ("   last 20 steps / first 20", f"{median['growth']:.2f} x", "<= 2", median["growth"] <= 2),
        ("   the same, harness's own cost", f"{median['own_growth']:.2f} x (what it adds to the raw loop's step)",
         "<= 2", median["own_growth"] <= 2),
        ("2. 4 parallel calls of 0.5 s", f"{median['parallel']:.2f} x a turn of one such call", "<= 1.25",
         median["parallel"] <= 1.25),
        ("3. harness.py --help", f"{median['cold']:.2f} x import openai", "<= 0.25", median["cold"] <= 0.25),
        ("4. output flood (`yes`)", f"{median['flood_mb']:.0f} MB peak, {median['flood_ratio']:.2f} x a quiet run, "
                                    f"result in {median['flood_s']:.2f} s", "< 100 MB, timeout + 1 s",
         median["flood_mb"] < 100 and median["flood_s"] <= shell.TIMEOUT + 1),
        ("5. context after 20 big reads", f"{median['context']:.2f} x (20 x MAX_CHARS + overhead)", "<= 1",
         median["context"] <= 1),
    ]
    print(f"\n{'figure':32} {'measured (median of ' + str(args.runs) + ')':58} {'target':24} ok")
    for name, measured, target, ok in rows:
        print(f"{name:32} {measured:58} {target:24} {'yes' if ok else 'NO'}")
    print(f"\none small request takes {median['sdk_ms']:.2f} ms through the openai client and "
          f"{median['raw_ms']:.2f} ms through http.client: that difference is in every step of figure 1")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
