"""The scripted cases: short conversations with the offline model in scripted mode, one per way a run can
go right or wrong. Each runs `python harness.py` for real, against a scripted server, in a scratch folder.

Run:  python tests/cases.py                      (every case; each trace is written to traces/NAME.jsonl)
      python tests/cases.py -v rate_limited_then_answered     (-v: show what the harness printed, too)
The tests run the same cases (tests/checkpoints/test_phase5_recovery.py).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_model  # noqa: E402

PROVIDER_VARS = ("GROQ_API_KEY", "OPENAI_API_KEY", "API_KEY", "BACKEND", "MODEL", "BASE_URL")


def call(name, arguments, id=None):
    return {"name": name, "arguments": arguments, **({"id": id} if id is not None else {})}


def error(status, message, code=None, **extra):
    return {"error": {"message": message, "type": "invalid_request_error", **({"code": code} if code else {}), **extra}}


LIST = {"tool_calls": [call("list_dir", {"path": "."})]}
READ = {"tool_calls": [call("read_file", {"path": "notes.txt"})]}
TOOL_USE_FAILED = {"status": 400, "body": error(400, "Failed to call a function. Please adjust your prompt. See "
                                                "'failed_generation' for more details.", code="tool_use_failed",
                                                failed_generation='<function=read_file{"path": "notes.txt"}</function>')}

# name: the task, what the server does, and what must come of it. expect: status and exit code always;
# answer (a part of it), requests (how many the server got), results (parts of the tool results, in order),
# stderr (a part of it), files (what the workspace must hold afterwards).
CASES = {
    "two_steps": {
        "task": "List the files here, then read notes.txt",
        "script": [LIST, READ, "The notes say: buy milk."],
        "expect": {"status": "answered", "exit": 0, "requests": 3, "results": ["notes.txt", "buy milk"],
                   "answer": "buy milk"}},
    "declined_command": {
        "task": "Delete notes.txt", "input": "n\n",
        "script": [{"tool_calls": [call("run_shell", {"command": "rm notes.txt"})]}, "I did not delete it."],
        "expect": {"status": "answered", "exit": 0, "results": ["error: the user declined"],
                   "files": ["notes.txt"]}},
    "unknown_tool": {
        "task": "Search the web",
        "script": [{"tool_calls": [call("web_search", {"query": "milk"})]}, LIST, "I can only look at files."],
        "expect": {"status": "answered", "exit": 0, "results": ["error: there is no tool called 'web_search'", "notes.txt"]}},
    "malformed_then_fixed": {
        "task": "Read notes.txt",
        "script": [{"tool_calls": [call("read_file", '{"path": "notes.txt"')]}, READ, "Read it."],
        "expect": {"status": "answered", "exit": 0, "results": ["arguments are not valid JSON", "buy milk"]}},
    "tool_use_failed_then_answered": {
        "task": "Read notes.txt",
        "script": [TOOL_USE_FAILED, READ, "Read it."],
        "expect": {"status": "answered", "exit": 0, "requests": 3, "stderr": "the model wrote",
                   "results": ["buy milk"]}},
    "rate_limited_then_answered": {
        "task": "Say hi",
        "script": [{"status": 429, "headers": {"retry-after": "1"},
                    "body": error(429, "Rate limit reached for model `openai/gpt-oss-120b` on tokens per minute "
                                       "(TPM): Limit 8000, Used 7034, Requested 1443.", code="rate_limit_exceeded")},
                   "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "trying again in 1.0 s"}},
    "server_error_then_answered": {
        "task": "Say hi",
        "script": [{"status": 503, "body": {"error": {"message": "Service Unavailable", "type": "internal_server_error"}}},
                   {"status": 502, "body": "<html><body>502 Bad Gateway</body></html>"}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 3}},
    "dropped_connection_then_answered": {
        "task": "Say hi",
        "script": [{"drop": True}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2}},
    "answer_in_an_error_body_then_answered": {
        "task": "Say hi",
        "script": [{"status": 200, "body": error(200, "Internal error while streaming")}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "without a reply"}},
    "bad_key_is_not_retried": {
        "task": "Say hi",
        "script": [{"status": 401, "body": error(401, "Invalid API Key", code="invalid_api_key")}],
        "expect": {"status": "provider_error", "exit": 1, "requests": 1, "stderr": "GROQ_API_KEY"}},
    "unknown_model_is_not_retried": {
        "task": "Say hi",
        "script": [{"status": 404, "body": error(404, "The model `gpt-oss-120b` does not exist or you do not "
                                                      "have access to it.", code="model_not_found")}],
        "expect": {"status": "provider_error", "exit": 1, "requests": 1, "stderr": "Check MODEL"}},
    "step_limit": {
        "task": "Look around", "args": ["--max-steps", "2"],
        "script": [LIST, LIST, LIST],
        "expect": {"status": "step_limit", "exit": 3, "requests": 2}},
    "length_stop": {
        "task": "Explain everything",
        "script": [{"content": "Everything began when", "finish_reason": "length"}],
        "expect": {"status": "incomplete", "exit": 4, "answer": "Everything began when"}},
    "duplicate_ids": {
        "task": "Read notes.txt twice",
        "script": [{"tool_calls": [call("read_file", {"path": "notes.txt"}, id="x"),
                                   call("list_dir", {"path": "."}, id="x")]}, "Both done."],
        "expect": {"status": "answered", "exit": 0, "results": ["buy milk", "notes.txt"]}},
    "missing_id": {
        "task": "Read notes.txt",
        "script": [{"tool_calls": [call("read_file", {"path": "notes.txt"}, id="")]}, "Done."],
        "expect": {"status": "answered", "exit": 0, "results": ["buy milk"]}},
    "same_call_again_and_again": {
        "task": "Read notes.txt",
        "script": [READ, READ, READ, READ, READ],
        "expect": {"status": "repeated", "exit": 3, "requests": 4,
                   "results": ["buy milk", "buy milk", "error: not run: you made this exact call 3 times"]}},
    "empty_answer_then_answered": {
        "task": "Say hi",
        "script": [{"content": ""}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "answer": "Hi."}},
    "stream_arguments_in_pieces": {
        "task": "Read notes.txt", "args": ["--stream"],
        "script": [{"tool_calls": [call("read_file", {"path": "notes.txt"})], "split_arguments": 4},
                   "The notes say buy milk."],
        "expect": {"status": "answered", "exit": 0, "results": ["buy milk"], "answer": "The notes say buy milk."}},
    "stream_cut_short_then_answered": {
        "task": "Say hi", "args": ["--stream"],
        "script": [{"content": "Hello there, this stream will break", "cut_after": 2}, "Hi again."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "stream ended before"}},
    "stream_error_event_then_answered": {
        "task": "Read notes.txt", "args": ["--stream"],
        "script": [{"content": "", "error_event": TOOL_USE_FAILED["body"]["error"]}, READ, "Read it."],
        "expect": {"status": "answered", "exit": 0, "requests": 3, "results": ["buy milk"]}},
}


def run_case(name, code_dir=ROOT, trace=None, show=False):
    """Run one case against the code in code_dir; return what went wrong (an empty list when it passed).
    show: print the command and what the harness printed."""
    case, expect = CASES[name], CASES[name]["expect"]
    with tempfile.TemporaryDirectory() as scratch, demo_model.start(script=case["script"]) as server:
        work = Path(scratch)
        for source in [*Path(code_dir).glob("*.py"), ROOT / "demo_model.py"]:
            if not (work / source.name).exists():
                shutil.copy(source, work / source.name)
        (work / "notes.txt").write_text("buy milk\n")
        trace = Path(trace or work / "trace.jsonl").resolve()
        env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
        env.update(BACKEND="groq", GROQ_API_KEY="gsk_case", BASE_URL=server.url, MODEL="openai/gpt-oss-120b")
        done = subprocess.run([sys.executable, "harness.py", "--trace", str(trace), *case.get("args", []),
                               case["task"]], cwd=work, env=env, input=case.get("input", ""),
                              capture_output=True, text=True, timeout=60)
        if show:
            print("$ " + " ".join(["python harness.py", *case.get("args", []), json.dumps(case["task"])]))
            print(done.stdout + done.stderr)
        records = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
        end = records[-1] if records and records[-1]["type"] == "end" else {}
        results = [r["result"] for r in records if r["type"] == "tool"]
        problems = []
        if (done.returncode, end.get("status")) != (expect["exit"], expect["status"]):
            problems.append(f"ended {end.get('status')} with exit {done.returncode}, "
                            f"expected {expect['status']} with exit {expect['exit']}")
        if "requests" in expect and len(server.requests) != expect["requests"]:
            problems.append(f"the server got {len(server.requests)} requests, expected {expect['requests']}")
        if expect.get("answer", "") not in end.get("answer", ""):
            problems.append(f"the answer {end.get('answer')!r} lacks {expect['answer']!r}")
        if expect.get("stderr", "") not in done.stderr:
            problems.append(f"stderr lacks {expect['stderr']!r}")
        if "results" in expect and not matches(expect["results"], results):
            problems.append(f"the tool results {results} do not match {expect['results']}")
        for name_ in expect.get("files", []):
            if not (work / name_).exists():
                problems.append(f"{name_} is gone")
        if "Traceback" in done.stderr:
            problems.append("a traceback:\n" + done.stderr)
        return problems


def matches(parts, results):
    """True when each result holds its own one of the parts (parallel calls may finish in any order)."""
    left = list(results)
    for part in parts:
        found = next((result for result in left if part in result), None)
        if found is None:
            return False
        left.remove(found)
    return not left


def main(names):
    show = "-v" in names
    names = [name for name in names if name != "-v"]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"no such case: {', '.join(unknown)}. The cases are: {', '.join(CASES)}")
    Path("traces").mkdir(exist_ok=True)
    failed = 0
    for name in names or CASES:
        problems = run_case(name, ROOT, Path("traces") / f"{name}.jsonl", show)
        failed += bool(problems)
        print(f"{'ok  ' if not problems else 'FAIL'} {name:40} traces/{name}.jsonl")
        for problem in problems:
            print(f"       {problem}")
    print(f"{len(names or CASES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
