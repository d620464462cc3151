"""Every fault ends in a status, on time, with a valid history and a complete trace: a provider that misbehaves,
an interruption at the worst moment, a trace file shared or full, a reader that goes away. Real processes, a
real server; each test runs against every checkpoint from the phase that introduced what it checks."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import clean_env, groq_env, run_python, scripted_backend, tool_calls, trace_records

PHASE = 4








def continues(harness, server, result):
    """The conversation a run left behind is one the strict server accepts: it can be continued."""
    server.push("Continued.")
    later = harness.run("Go on", backend=scripted_backend(server), history=result.messages)
    assert later.status == "answered" and later.answer == "Continued.", later.error


def test_an_interruption_at_an_approval_leaves_a_history_that_continues(harness, server, tmp_path):
    """Ctrl-C at the second of three questions: every call of the turn is answered, in the conversation and in
    the trace, so run(..., history=result.messages) goes on."""
    server.push(tool_calls(*[("run_shell", {"command": f"touch f{n}"}) for n in range(3)]))
    asked = []

    def approve(question):
        asked.append(question)
        if len(asked) == 2:
            raise KeyboardInterrupt
        return False

    result = harness.run("Touch", backend=scripted_backend(server), approve=approve, trace=tmp_path / "t.jsonl")
    assert result.status == "interrupted"
    assert [m.get("tool_call_id") for m in result.messages[-3:]] == ["call_0", "call_1", "call_2"]
    traced = [r["id"] for r in trace_records(tmp_path / "t.jsonl") if r["type"] == "tool"]
    assert sorted(traced) == ["call_0", "call_1", "call_2"] and trace_records(tmp_path / "t.jsonl")[-1]["type"] == "end"
    continues(harness, server, result)


def test_ctrl_c_while_tools_run_leaves_a_history_that_continues(harness, server, workspace):
    """Ctrl-C while two commands run: both calls get a result saying they were interrupted; the run continues."""
    server.push(tool_calls(("run_shell", {"command": "sleep 5"}), ("run_shell", {"command": "sleep 6"})))
    threading.Timer(1, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    result = harness.run("Sleep", backend=scripted_backend(server), approve=lambda q: True)
    assert result.status == "interrupted" and result.seconds < 3, result
    assert all("interrupted" in m["content"] for m in result.messages[-2:]), result.messages[-2:]
    continues(harness, server, result)


def test_the_deadline_stops_a_running_tool_and_the_history_continues(harness, server):
    """An approved `sleep 30` under a 1 s deadline: stopped at the deadline, its call answered, the run over."""
    server.push(tool_calls(("run_shell", {"command": "sleep 30"})))
    started = time.monotonic()
    result = harness.run("Sleep", backend=scripted_backend(server), approve=lambda q: True,
                         limits=harness.Limits(deadline=1))
    assert result.status == "deadline" and time.monotonic() - started < 2, result
    assert "deadline" in result.messages[-1]["content"], result.messages[-1]
    continues(harness, server, result)


@pytest.mark.parametrize("stream", [[], ["--stream"]], ids=["plain", "stream"])
def test_a_server_that_trickles_for_ever_meets_the_deadline(workspace, server, stream, code_dir):
    """--deadline against a server that sends a byte at a time for ever: status deadline, on time (the cases hold
    --deadline 3 to 4 s)."""
    if stream and not (code_dir / "harness.py").read_text().count("--stream"):
        pytest.skip("--stream comes in phase 5")
    server.push({"content": "never", "trickle_forever": 0.1})
    started = time.monotonic()
    result = run_python(workspace, "harness.py", "--trace", "t.jsonl", "--deadline", "1.5", *stream, "Hi",
                        env=groq_env(server))
    assert result.returncode == 3 and time.monotonic() - started < 2.5, result.stderr
    assert trace_records(workspace / "t.jsonl")[-1]["status"] == "deadline"


def test_runs_sharing_a_trace_file_do_not_mix_their_lines(workspace):
    """Three runs appending to one trace at the same time: every line parses, and each run's records, told apart
    by their run id, go from start to end."""
    runs = [subprocess.Popen([sys.executable, "harness.py", "--trace", "shared.jsonl", "List the files here"],
                             cwd=workspace, env=clean_env(BACKEND="demo"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(3)]
    assert [run.wait(30) for run in runs] == [0, 0, 0]
    lines = trace_records(workspace / "shared.jsonl")
    ids = {record["run"] for record in lines}
    assert len(ids) == 3 and len(lines) == 15, lines
    for run_id in ids:
        assert [r["type"] for r in lines if r["run"] == run_id] == ["start", "reply", "tool", "reply", "end"]


def test_a_trace_that_cannot_be_written_ends_the_run_cleanly(workspace, server):
    """--trace /dev/full (a disk that is full): exit 1 with a message naming the trace, no traceback."""
    server.push("Hi.")
    result = run_python(workspace, "harness.py", "--trace", "/dev/full", "Hi", env=groq_env(server))
    assert result.returncode == 1 and "trace" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_reader_that_goes_away_ends_the_run_cleanly(workspace, server):
    """`python harness.py ... | head -c 1`: the run ends with a message on stderr, not a traceback."""
    server.push(tool_calls(*[("read_file", {"path": "harness.py", "limit": n + 1}) for n in range(3)]), "x" * 100000)
    process = subprocess.Popen([sys.executable, "harness.py", "--trace", "t.jsonl", "Read"], cwd=workspace,
                               env=clean_env(**groq_env(server)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.read(1)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(30) == 1 and "Traceback" not in stderr and "output" in stderr, stderr
    assert trace_records(workspace / "t.jsonl")[-1]["type"] == "end"


def test_a_reply_without_usage_still_counts_against_the_token_budget(harness, server):
    """A server that sends no usage: the tokens are estimated, so --max-tokens still ends the run."""
    server.push(*[{**tool_calls(("list_dir", {"path": f"d{n}"})), "usage": False} for n in range(10)])
    result = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_tokens=500))
    assert result.status == "token_limit" and result.steps < 10, result


@pytest.mark.phase(5)
def test_messages_name_the_server_the_user_configured(workspace, unused_port):
    """An unreachable BASE_URL is named as the user's own, not as the demo; a stream hint only when streaming."""
    url = f"http://127.0.0.1:{unused_port}/v1"
    result = run_python(workspace, "harness.py", "--deadline", "1", "Hi", env={"BACKEND": "demo", "BASE_URL": url})
    assert result.returncode in (1, 3) and url in result.stderr and "BASE_URL" in result.stderr, result.stderr
    assert "demo model at" not in result.stderr and ".;" not in result.stderr and "--stream" not in result.stderr


@pytest.mark.phase(5)
def test_retry_after_in_both_forms_and_out_of_bounds(load):
    """retry-after in seconds or as an HTTP date is honoured; nonsense, zero or negative falls back to backoff."""
    import email.utils
    backend = load("backend")
    asked = backend.asked_wait
    assert asked({"retry-after-ms": "300"}) == 0.3 and asked({"retry-after": "2"}) == 2.0
    assert 1.0 < asked({"retry-after": email.utils.formatdate(time.time() + 2, usegmt=True)}) <= 2.0
    for nonsense in ({"retry-after": "-1"}, {"retry-after-ms": "0"}, {"retry-after": "soon"},
                     {"retry-after": "nan"}, {"retry-after": "inf"}, {}):
        assert asked(nonsense) is None, nonsense


@pytest.mark.phase(0)
@pytest.mark.files("backend.py")
@pytest.mark.parametrize("url", ["http://localhost:PORT/v1", "http://[::1/v1", "http://localhost:99999/v1",
                                 "localhost:8000/v1", "http://local host:8000/v1", "https://", "http://a\x1b[2Jb/v1"])
def test_a_base_url_requests_cannot_go_to_is_one_message(workspace, url):
    """A BASE_URL that is no URL (a placeholder port, a broken address, no scheme, a space, an escape) is one
    message naming BASE_URL, at once, in every phase: never a traceback from deep inside the HTTP client."""
    result = run_python(workspace, "backend.py", "Hi", env={"BACKEND": "groq", "GROQ_API_KEY": "x", "BASE_URL": url})
    assert result.returncode == 1 and "BASE_URL=" in result.stderr and "http://localhost:1234/v1" in result.stderr
    assert "Traceback" not in result.stderr and "\x1b" not in result.stderr, result.stderr


@pytest.mark.phase(0)
@pytest.mark.files("backend.py")
def test_a_base_url_pasted_with_spaces_and_a_line_end_still_works(workspace, server):
    """BASE_URL as a copy and paste leaves it, with spaces and a line end around it, reaches the server."""
    server.push("Hi from the server.")
    env = {**groq_env(server), "BASE_URL": f"  {groq_env(server)['BASE_URL']}\n"}
    result = run_python(workspace, "backend.py", "Hi", env=env)
    assert result.returncode == 0 and "Hi from the server." in result.stdout, result.stderr


def blocked_run(workspace, server, *args, stdin=subprocess.DEVNULL):
    """A run whose standard output nobody reads: its first tool call's line (200 KB) fills the pipe and blocks."""
    server.push(tool_calls(("read_file", {"path": "notes.txt", "padding": "x" * 200_000})), "Done.")
    return subprocess.Popen([sys.executable, "harness.py", "--trace", "t.jsonl", *args, "Read"], cwd=workspace,
                            env=clean_env(**groq_env(server)), stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


@pytest.mark.phase(5)
def test_output_nobody_reads_still_meets_the_deadline(workspace, server):
    """Standard output blocked (a pipe nobody reads) under --deadline 2: the run ends on time, status deadline,
    its trace complete."""
    started, process = time.monotonic(), blocked_run(workspace, server, "--deadline", "2")
    assert process.wait(10) == 3 and time.monotonic() - started < 3.5, time.monotonic() - started
    assert trace_records(workspace / "t.jsonl")[-1]["status"] == "deadline"


@pytest.mark.phase(5)
def test_a_stream_nobody_reads_still_meets_the_deadline(workspace, server):
    """--stream whose text fills a pipe nobody reads, under --deadline 2: the write blocks in the thread that reads
    the stream, and the run still ends on time, status deadline."""
    server.push({"content": "word " * 60_000})
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "harness.py", "--trace", "t.jsonl", "--stream", "--deadline", "2",
                                "Say"], cwd=workspace, env=clean_env(**groq_env(server)),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.wait(10) == 3 and time.monotonic() - started < 3.5, time.monotonic() - started
    assert trace_records(workspace / "t.jsonl")[-1]["status"] == "deadline"


@pytest.mark.phase(5)
def test_sigterm_ends_a_run_whose_output_is_blocked(workspace, server):
    """SIGTERM while standard output is blocked: the run ends at once (143), interrupted, its trace complete."""
    process = blocked_run(workspace, server)
    time.sleep(1.5)
    process.send_signal(signal.SIGTERM)
    assert process.wait(3) == 143
    assert trace_records(workspace / "t.jsonl")[-1]["status"] == "interrupted"


@pytest.mark.phase(5)
def test_an_approval_nobody_answers_meets_the_deadline(workspace, server):
    """A question nobody answers (standard input open, silent) under --deadline 2: the run ends on time, status
    deadline, nothing run, the call answered in the trace."""
    server.push(tool_calls(("run_shell", {"command": "rm notes.txt"})), "Removed.")
    (workspace / "notes.txt").write_text("buy milk\n")
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "harness.py", "--trace", "t.jsonl", "--deadline", "2", "Remove"],
                               cwd=workspace, env=clean_env(**groq_env(server)), stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    process.wait(10)  # standard input stays open: nobody answers, nobody hangs up
    stderr = process.stderr.read()
    assert process.returncode == 3 and time.monotonic() - started < 3.5 and "Traceback" not in stderr, stderr
    records = trace_records(workspace / "t.jsonl")
    assert records[-1]["status"] == "deadline" and [r["type"] for r in records].count("tool") == 1, records
    assert (workspace / "notes.txt").exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("redirect, code", [(">/dev/full", 1), (">&-", 1), ("2>/dev/full", 0), ("2>&-", 0)])
def test_output_that_cannot_be_written_ends_in_a_status(workspace, server, redirect, code):
    """Standard output full or closed: exit 1, said on stderr, no traceback. Standard error full or closed: the
    run goes on without it, and answers (exit 0)."""
    server.push(tool_calls(("list_dir", {"path": "."})), "Listed.")
    done = subprocess.run(f'"{sys.executable}" harness.py --trace t.jsonl "List" {redirect}', shell=True,
                          cwd=workspace, env=clean_env(**groq_env(server)), capture_output=True, text=True, timeout=30)
    assert done.returncode == code and "Traceback" not in done.stderr + done.stdout, done.stderr
    assert trace_records(workspace / "t.jsonl")[-1]["type"] == "end"
    assert ("Listed." in done.stdout) if code == 0 else ("standard output" in done.stderr)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("reader", [False, True], ids=["nobody-reads", "a-reader-that-stalls"])
def test_a_trace_that_is_no_regular_file_is_an_error_at_once(workspace, server, reader):
    """--trace naming a FIFO, whether nobody reads it or a reader holds it open and never reads (a write could
    then wait past any deadline): one message naming the trace, at once."""
    os.mkfifo(workspace / "pipe")
    held = os.open(workspace / "pipe", os.O_RDONLY | os.O_NONBLOCK) if reader else None
    server.push("Hi." * 50_000)
    try:
        result = run_python(workspace, "harness.py", "--trace", "pipe", "Hi", env=groq_env(server), timeout=10)
    finally:
        held is None or os.close(held)
    assert result.returncode == 1 and "trace" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "regular file" in result.stderr or "No such device" in result.stderr, result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="file names there are always text")
def test_a_file_name_that_is_not_utf8_leaves_a_history_that_continues(harness, server, workspace):
    """A file named in bytes that are not UTF-8 (caf\\xe9.txt): the listing reaches the model with the byte
    replaced, the request goes out, and the history continues."""
    os.close(os.open(os.path.join(os.fsencode(workspace), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY))
    server.push(tool_calls(("list_dir", {"path": "."})), "Listed.")
    result = harness.run("List", backend=scripted_backend(server))
    assert result.status == "answered" and "caf" in result.messages[-2]["content"], result
    continues(harness, server, result)


@pytest.mark.skipif(sys.platform == "win32", reason="arguments there are always text")
def test_a_task_in_bytes_that_are_not_utf8_is_sent(workspace, server):
    """A task typed in another encoding (a byte that is not UTF-8): sent with the byte replaced, answered."""
    server.push("Hi.")
    done = subprocess.run([sys.executable, "harness.py", b"Say \xff hi"], cwd=workspace, capture_output=True,
                          env=clean_env(**groq_env(server)), timeout=30)
    assert done.returncode == 0 and len(server.requests) == 1, done.stderr.decode(errors="replace")


def test_output_the_terminal_cannot_encode_is_spelled_out(workspace, server):
    """Standard output in ASCII (PYTHONIOENCODING=ascii) and an answer that is not: printed with the character
    spelled out, exit 0, no traceback."""
    server.push("Caf\u00e9 \u2713")
    done = subprocess.run([sys.executable, "harness.py", "Say"], cwd=workspace, capture_output=True, text=True,
                          env=clean_env(**groq_env(server), PYTHONIOENCODING="ascii"), timeout=30)  # a new interpreter
    assert done.returncode == 0 and "Caf\\xe9" in done.stdout and "Traceback" not in done.stderr, done.stderr


@pytest.mark.phase(5)
def test_a_server_too_slow_is_named_slow_not_unreachable(harness, server, load):
    """A server that answers, only too slowly for TIMEOUT (a local model warming up): the message says it did not
    finish in time and how to allow more, not that it could not be reached."""
    backend = load("backend")
    backend.TIMEOUT, backend.RETRIES = 0.5, 1
    server.push(*[{"content": "slowly", "trickle_forever": 0.1}] * 2)
    result = harness.run("Hi", backend=scripted_backend(server))
    assert result.status == "provider_error" and "did not finish answering within" in result.error, result.error
    assert "Could not reach" not in result.error and "TIMEOUT" in result.error, result.error


def test_reading_far_into_a_file_of_short_lines_meets_the_deadline(workspace, server):
    """read_file at line 19,000,000 of a file of 20 million empty lines: the lines before it are counted a
    megabyte at a time, so the call answers at once and the run ends answered, well inside --deadline 3."""
    with open(workspace / "lines.txt", "wb") as file:
        file.write(b"\n" * 20_000_000)
    server.push(tool_calls(("read_file", {"path": "lines.txt", "offset": 19_000_000, "limit": 2})), "Read.")
    result = run_python(workspace, "harness.py", "--trace", "t.jsonl", "--deadline", "3", "Read",
                        env=groq_env(server))
    assert result.returncode == 0, result.stderr
    assert "lines 19000000-19000001 of 20000000" in trace_records(workspace / "t.jsonl")[2]["result"]


@pytest.mark.phase(3)
@pytest.mark.files("guards.py", "tools.py")
def test_a_write_too_long_to_diff_says_so_at_once(load, workspace):
    """A write whose file has more lines than MAX_DIFF_LINES, before or after: the question gives the counts
    instead of a diff, whose cost grows faster than its length (20,000 short lines took 16 s)."""
    tools = load("tools")
    (workspace / "cycle.txt").write_text("".join(f"{n % 201}\n" for n in range(20_000)))
    action, question = tools.plan("write_file", {"path": "cycle.txt",
                                                 "content": "".join(f"{n * 7 % 201}\n" for n in range(20_000))})
    assert question.startswith("Write cycle.txt: 20000 lines replaced by 20000, too many to show a diff"), question


@pytest.mark.phase(7)
@pytest.mark.parametrize("schema", [
    '{"type": "object", "properties": {"a": {"type": ["string", "null"]}}}',
    '{"type": "object", "properties": {"a": {"enum": []}}}',
    '{"type": "object", "properties": {"a": {"enum": [NaN]}}}',
    '{"type": "object", "properties": {"a": {"type": "string"}}, "required": 5}',
    '{"type": "object", "properties": {"_a": {"type": "string"}}}',
    '{"type": "object", "title": 7, "properties": {}}',
    "[1]",
    '{"type": "object", "properties": {"a": ' * 40 + '{"type": "string"}' + "}}" * 40,
], ids=["type-list", "empty-enum", "nan", "required-number", "underscore", "title-number", "a-list", "deep"])
def test_a_schema_the_harness_cannot_use_is_a_usage_error(workspace, schema):
    """--output-schema with a shape the harness cannot use (a type list, an empty enum, NaN, a leading underscore,
    objects nested 40 deep, ...): a usage message naming the file and the reason, exit 2, never a traceback."""
    (workspace / "schema.json").write_text(schema)
    result = run_python(workspace, "harness.py", "--output-schema", "schema.json", "Hi", env={"BACKEND": "demo"})
    assert result.returncode == 2 and "--output-schema schema.json" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.phase(5)
def test_options_that_are_no_json_or_clash_with_the_loop(harness, server):
    """options={"temperature": NaN} cannot be sent: one message saying so, no request, no retries blamed on the
    server. options={"stream": True} is the loop's to decide: it is left out, and the run answers."""
    result = harness.run("Hi", backend=scripted_backend(server), options={"temperature": float("nan")})
    assert result.status == "provider_error" and "cannot be sent as JSON" in result.error, result.error
    assert len(server.requests) == 0
    server.push("Hi.")
    result = harness.run("Hi", backend=scripted_backend(server), options={"stream": True})
    assert result.status == "answered" and result.answer == "Hi.", result
