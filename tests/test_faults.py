"""Every fault ends in a status, on time, with a history the strict server accepts and a complete trace: a provider
that misbehaves, an interruption at the worst moment, a trace file shared or full, a reader that goes away. Real
processes, a real server; each test runs against every checkpoint from the phase that introduced what it checks
(PHASE, 5, budgets: the status, the trace and the history; else the phase its mark names). A test that measures
time leaves a margin of three times what it measures."""
import email.utils
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from helpers import (ROOT, clean_env, groq_env, needs_dev_full, needs_fifos, needs_signals, own_seconds,
                     posix_redirections, press_ctrl_c, run_python, running_commands, scripted_backend,
                     since_first_request, sleep_then, start_python, still_running, tool_calls, trace_records,
                     wait_for)

PHASE = 5
GRACE = 1  # seconds past the deadline the run's report may take (harness.GRACE, phase 6)
COMMAND_TIMEOUT = 10  # shell.TIMEOUT: a run that waited for a command instead of ending takes at least this long


def continues(harness, server, result):
    """The conversation a run left behind is one the strict server accepts: it can be continued."""
    server.push("Continued.")
    later = harness.run("Go on", backend=scripted_backend(server), history=result.messages)
    assert later.status == "answered" and later.answer == "Continued.", later.error


def start(workspace, server, *args, stdin=subprocess.DEVNULL):
    """`python harness.py --trace t.jsonl ARGS...` against the scripted server, running, its output in pipes:
    forked from the warm process (helpers.start_python), so that a busy machine's seconds to start Python and
    import openai do not use up the deadline these tests judge (two suites side by side failed them)."""
    return start_python(workspace, "harness.py", "--trace", "t.jsonl", *args, env=groq_env(server), stdin=stdin)


def end_of(workspace, name="t.jsonl"):
    return trace_records(workspace / name)[-1]


def test_an_interruption_at_an_approval_leaves_a_history_that_continues(harness, load, server, tmp_path):
    """Ctrl-C at the second of three questions: every call of the turn is answered, in the conversation and in
    the trace, so run(..., history=result.messages) goes on."""
    server.push(tool_calls(*[("run_shell", {"command": f"touch f{n}"}) for n in range(3)]))
    asked = []

    def approve(question):
        asked.append(question)
        if len(asked) == 2:
            raise KeyboardInterrupt
        return False

    trace = load("cli").Trace(str(tmp_path / "t.jsonl"), load("guards").policy())
    result = harness.run("Touch", backend=scripted_backend(server), approve=approve, record=trace.record)
    assert result.status == "interrupted"
    assert [m.get("tool_call_id") for m in result.messages[-3:]] == ["call_0", "call_1", "call_2"]
    traced = [r["id"] for r in trace_records(tmp_path / "t.jsonl") if r["type"] == "tool"]
    assert sorted(traced) == ["call_0", "call_1", "call_2"] and end_of(tmp_path)["type"] == "end"
    continues(harness, server, result)


@needs_signals
def test_ctrl_c_while_tools_run_leaves_a_history_that_continues(harness, server, workspace):
    """Ctrl-C while commands run: the run ends interrupted at once (not at the commands' timeout), every call is
    answered, the command killed, and the history continues."""
    first = f"sleep {own_seconds(31)}"  # this test's own: others may run beside it
    server.push(tool_calls(("run_shell", {"command": first}),
                           ("run_shell", {"command": "sleep 31.6"})))
    running = threading.Event()

    def interrupt():  # Ctrl-C once a command runs, and only while run() is still running
        if wait_for(lambda: running_commands(first)) and running.is_set():
            press_ctrl_c()

    running.set()
    threading.Thread(target=interrupt, daemon=True).start()
    try:
        result = harness.run("Sleep", backend=scripted_backend(server), approve=lambda q: True)
    finally:
        running.clear()
    assert result.status == "interrupted" and result.seconds < COMMAND_TIMEOUT / 2, result
    assert [m["role"] for m in result.messages[-2:]] == ["tool", "tool"], result.messages[-2:]
    assert all("interrupted" in m["content"] for m in result.messages[-2:]), result.messages[-2:]
    assert still_running(first) == [], "the command outlived the run"
    continues(harness, server, result)


@pytest.mark.phase(6)
def test_the_deadline_stops_a_running_tool_and_the_history_continues(harness, server):
    """An approved `sleep 30` under a 1 s deadline: stopped at the deadline (within three times it and its grace),
    its call answered, the run over, the history one that continues."""
    server.push(tool_calls(("run_shell", {"command": sleep_then(30)})))  # cmd's own wait on Windows
    started = time.monotonic()
    result = harness.run("Sleep", backend=scripted_backend(server), approve=lambda q: True,
                         limits=harness.Limits(deadline=1))
    assert result.status == "deadline" and time.monotonic() - started < 3 * (1 + GRACE), result
    assert "deadline" in result.messages[-1]["content"], result.messages[-1]
    continues(harness, server, result)


def trickles_for_ever(workspace, server, *stream):
    """--deadline 2 against a server that sends a byte at a time for ever: exit 3, status deadline, on time."""
    server.push({"content": "never", "trickle_forever": 0.1})
    started = time.monotonic()
    result = run_python(workspace, "harness.py", "--trace", "t.jsonl", "--deadline", "2", *stream, "Hi",
                        env=groq_env(server))
    assert result.returncode == 3 and since_first_request(server, started) < 3 * (2 + GRACE), result.stderr
    assert end_of(workspace)["status"] == "deadline"


@pytest.mark.phase(6)
def test_a_server_that_trickles_for_ever_meets_the_deadline(workspace, server):
    """--deadline against a reply that never ends: the run ends at the deadline, status deadline."""
    trickles_for_ever(workspace, server)


@pytest.mark.phase(8)
def test_a_stream_that_trickles_for_ever_meets_the_deadline(workspace, server):
    """--stream --deadline against a stream that never ends: the run ends at the deadline, status deadline."""
    trickles_for_ever(workspace, server, "--stream")


def test_runs_sharing_a_trace_file_do_not_mix_their_lines(workspace):
    """Three runs appending to one trace at the same time: every line parses, and each run's records, told apart
    by their run id, go from start to end."""
    runs = [subprocess.Popen([sys.executable, "harness.py", "--trace", "shared.jsonl", "List the files here"],
                             cwd=workspace, env=clean_env(BACKEND="demo"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(3)]
    assert [run.wait(60) for run in runs] == [0, 0, 0]
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


@pytest.mark.phase(8)
def test_a_reader_that_goes_away_ends_the_run_cleanly(workspace, server):
    """`python harness.py ... | head -c 1`: exit 1, a message on stderr naming the output, no traceback, the
    trace's end record written."""
    server.push(tool_calls(*[("read_file", {"path": "harness.py", "limit": n + 1}) for n in range(3)]), "x" * 100000)
    process = start(workspace, server, "Read")
    process.stdout.read(1)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(60) == 1 and "Traceback" not in stderr and "output" in stderr, stderr
    assert end_of(workspace)["type"] == "end"


def test_a_reply_without_usage_still_counts_against_the_token_budget(harness, server):
    """A server that sends no usage: the tokens are estimated, so --max-tokens still ends the run."""
    server.push(*[{**tool_calls(("list_dir", {"path": f"d{n}"})), "usage": False} for n in range(10)])
    result = harness.run("Loop", backend=scripted_backend(server), limits=harness.Limits(max_tokens=500))
    assert result.status == "token_limit" and result.steps < 10, result


@pytest.mark.phase(1)
@pytest.mark.files("backend.py", "harness.py")
def test_messages_name_the_server_the_user_configured(workspace, unused_port):
    """An unreachable BASE_URL is named as the user's own, not as the demo; a stream hint only when streaming."""
    url = f"http://127.0.0.1:{unused_port}/v1"
    result = run_python(workspace, "harness.py", "Hi", env={"BACKEND": "demo", "BASE_URL": url})
    assert result.returncode == 1 and url in result.stderr and "BASE_URL" in result.stderr, result.stderr
    assert "demo model at" not in result.stderr and ".;" not in result.stderr and "--stream" not in result.stderr


@pytest.mark.phase(7)
@pytest.mark.files("backend.py")
@pytest.mark.parametrize("headers, least, most", [
    ({"retry-after": "2"}, 1.9, None),
    ({"retry-after-ms": "1500"}, 1.4, None),
    (lambda: {"retry-after": email.utils.formatdate(time.time() + 3, usegmt=True)}, 1.0, None),
    ({"retry-after": "soon"}, 0, 1.5), ({"retry-after": "nan"}, 0, 1.5), ({"retry-after": "inf"}, 0, 1.5),
    ({"retry-after": "-1"}, 0, 1.5), ({"retry-after-ms": "0"}, 0, 1.5), ({}, 0, 1.5),
], ids=["seconds", "milliseconds", "http-date", "soon", "nan", "inf", "negative", "zero-ms", "none"])
def test_retry_after_in_both_forms_is_honoured_and_nonsense_is_a_backoff(load, server, headers, least, most):
    """A 429's retry-after in seconds, milliseconds or as an HTTP date is waited for before the one retry;
    nonsense, zero, negative or none gets the package's backoff (half a second, less jitter: at most three times
    that); either way the reply after it is the answer."""
    headers = headers() if callable(headers) else headers
    server.push({"status": 429, "headers": headers, "body": {"error": {"message": "busy"}}}, "Hi.")
    response = load("backend").chat([{"role": "user", "content": "Hi"}], backend=scripted_backend(server))
    assert response.choices[0].message.content == "Hi." and len(server.requests) == 2
    waited = server.requests[1]["time"] - server.requests[0]["time"]
    assert waited >= least and (most is None or waited < most), f"waited {waited:.2f} s"


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
def test_code_copied_out_of_the_course_with_no_key_says_what_to_set(workspace):
    """No key, and no demo_model.py beside backend.py or above it (the code copied out of the course): one message
    naming the offline model and the key to set, exit 1, never a traceback, in every phase."""
    (workspace / "demo_model.py").unlink()
    main = "harness.py" if (workspace / "harness.py").exists() else "backend.py"
    result = run_python(workspace, main, "Hi")
    assert result.returncode == 1 and "demo_model.py" in result.stderr and "GROQ_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.phase(0)
@pytest.mark.files("backend.py")
def test_a_base_url_pasted_with_spaces_and_a_line_end_still_works(workspace, server):
    """BASE_URL as a copy and paste leaves it, with spaces and a line end around it, reaches the server."""
    server.push("Hi from the server.")
    env = {**groq_env(server), "BASE_URL": f"  {groq_env(server)['BASE_URL']}\n"}
    result = run_python(workspace, "backend.py", "Hi", env=env)
    assert result.returncode == 0 and "Hi from the server." in result.stdout, result.stderr


def blocked_run(workspace, server, *args):
    """A run whose standard output nobody reads: its first line, a call of a tool with a 300 KB name (names are
    printed whole), fills the pipe and blocks."""
    server.push({"tool_calls": [{"name": "x" * 300_000, "arguments": {}}]}, "Done.")
    return start(workspace, server, *args, "Read")


@pytest.mark.phase(8)
def test_output_nobody_reads_still_meets_the_deadline(workspace, server):
    """Standard output blocked (a pipe nobody reads) under --deadline 8 (time to start on a busy machine, and to be
    blocked): exit 3, status deadline, its trace complete, within three times the deadline and its grace."""
    started, process = time.monotonic(), blocked_run(workspace, server, "--deadline", "8")
    code, seconds = process.wait(60), since_first_request(server, started)
    assert code == 3 and seconds < 3 * (8 + GRACE), seconds
    assert end_of(workspace)["error"] == "the deadline passed while waiting for the terminal", end_of(workspace)


@pytest.mark.phase(8)
def test_a_stream_nobody_reads_still_meets_the_deadline(workspace, server):
    """--stream whose text fills a pipe nobody reads, under --deadline 5: the write blocks in the thread that reads
    the stream, and the run still ends on time, status deadline."""
    server.push({"content": "word " * 60_000})
    started, process = time.monotonic(), start(workspace, server, "--stream", "--deadline", "5", "Say")
    code, seconds = process.wait(60), since_first_request(server, started)
    assert code == 3 and seconds < 3 * (5 + GRACE), seconds
    assert end_of(workspace)["status"] == "deadline"


@pytest.mark.phase(8)
@needs_signals
def test_sigterm_ends_a_run_whose_output_is_blocked(workspace, server):
    """SIGTERM while standard output is blocked and no deadline is set: exit 143 within three times the report's
    grace, status interrupted, the trace complete."""
    process = blocked_run(workspace, server)
    assert wait_for(lambda: (workspace / "t.jsonl").exists() and '"reply"' in (workspace / "t.jsonl").read_text())
    time.sleep(0.5)  # the first line is being written now, and waits for a reader
    process.send_signal(signal.SIGTERM)
    began = time.monotonic()
    assert process.wait(60) == 143 and time.monotonic() - began < 3 * GRACE + 1, time.monotonic() - began
    assert end_of(workspace)["status"] == "interrupted"


@pytest.mark.phase(6)
def test_an_approval_nobody_answers_meets_the_deadline(workspace, server):
    """A question nobody answers (standard input open, silent) under --deadline 9 (a busy machine takes
    seconds to start): exit 3 on time, status deadline, nothing run, the call answered in the trace."""
    server.push(tool_calls(("run_shell", {"command": "rm notes.txt"})), "Removed.")
    (workspace / "notes.txt").write_text("buy milk\n")
    started = time.monotonic()
    process = start(workspace, server, "--deadline", "9", "Remove", stdin=subprocess.PIPE)
    process.wait(60)  # standard input stays open: nobody answers, nobody hangs up
    stderr = process.stderr.read().decode()
    assert process.returncode == 3 and since_first_request(server, started) < 3 * (9 + GRACE), stderr
    assert "Traceback" not in stderr, stderr
    records = trace_records(workspace / "t.jsonl")
    assert records[-1]["status"] == "deadline" and [r["type"] for r in records].count("tool") == 1, records
    assert (workspace / "notes.txt").exists()


@pytest.mark.phase(8)
@posix_redirections
@pytest.mark.parametrize("redirect, code", [
    pytest.param(">/dev/full", 1, marks=needs_dev_full), (">&-", 1),
    pytest.param("2>/dev/full", 0, marks=needs_dev_full), ("2>&-", 0)])
def test_output_that_cannot_be_written_ends_in_a_status(workspace, server, redirect, code):
    """Standard output full or closed: exit 1, said on stderr, no traceback. Standard error full or closed: the
    run goes on without it, and answers (exit 0)."""
    server.push(tool_calls(("list_dir", {"path": "."})), "Listed.")
    done = subprocess.run(f'"{sys.executable}" harness.py --trace t.jsonl "List" {redirect}', shell=True,
                          cwd=workspace, env=clean_env(**groq_env(server)), capture_output=True, text=True, timeout=60)
    assert done.returncode == code and "Traceback" not in done.stderr + done.stdout, done.stderr
    assert end_of(workspace)["type"] == "end"
    assert ("Listed." in done.stdout) if code == 0 else ("standard output" in done.stderr)


@pytest.mark.phase(8)
@posix_redirections
@pytest.mark.parametrize("redirect", [pytest.param(">/dev/full", marks=needs_dev_full), ">&-"])
def test_an_answer_that_cannot_be_printed_is_no_success(workspace, server, redirect):
    """A run that answers at once, with standard output full or closed: the answer is lost, so exit 1, said on
    stderr; the trace's end record says what the run did (answered)."""
    server.push("Hi.")
    done = subprocess.run(f'"{sys.executable}" harness.py --trace t.jsonl "Hi" {redirect}', shell=True,
                          cwd=workspace, env=clean_env(**groq_env(server)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "standard output" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert end_of(workspace)["status"] == "answered"


@needs_fifos
@pytest.mark.parametrize("reader", [False, True], ids=["nobody-reads", "a-reader-that-stalls"])
def test_a_trace_that_is_no_regular_file_is_an_error_at_once(workspace, server, reader):
    """--trace naming a FIFO, whether nobody reads it or a reader holds it open and never reads (a write could
    then wait past any deadline): one message naming the trace, at once."""
    os.mkfifo(workspace / "pipe")
    held = os.open(workspace / "pipe", os.O_RDONLY | os.O_NONBLOCK) if reader else None
    server.push("Hi." * 50_000)
    try:
        result = run_python(workspace, "harness.py", "--trace", "pipe", "Hi", env=groq_env(server), timeout=30)
    finally:
        held is None or os.close(held)
    assert result.returncode == 1 and "trace" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "regular file" in result.stderr, result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="file names there are always text")
def test_a_file_name_that_is_not_utf8_leaves_a_history_that_continues(harness, server, workspace):
    """A file named in bytes that are not UTF-8 (caf\\xe9.txt): the listing reaches the model with the byte
    replaced, the request goes out, and the history continues."""
    os.close(os.open(os.path.join(os.fsencode(workspace), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY))
    server.push(tool_calls(("list_dir", {"path": "."})), "Listed.")
    result = harness.run("List", backend=scripted_backend(server))
    assert result.status == "answered" and "caf" in result.messages[-2]["content"], result
    continues(harness, server, result)


def broken_stream_server(how):
    """A server on 127.0.0.1 that answers every request with a chunked stream of one text chunk (and a finish chunk
    when how ends in "-after-finish"), then closes the connection in mid-body ("close") or stops sending ("stall").
    Returns its URL; it serves until the test ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    events = [{"choices": [{"index": 0, "delta": {"content": "Hello."}, "finish_reason": None}]}]
    if how.endswith("-after-finish"):
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})

    def answer(connection):
        received = b""
        while b"\r\n\r\n" not in received:
            received += connection.recv(65536)
        head, _, body = received.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(body) < length:  # all of it: a socket closed with a request unread sends a reset, not an end
            body += connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")
        for event in events:
            data = f"data: {json.dumps(event)}\n\n".encode()
            connection.sendall(b"%x\r\n%s\r\n" % (len(data), data))
        if how.startswith("stall"):
            time.sleep(30)
        connection.shutdown(socket.SHUT_WR)  # the end, without the last, empty chunk: the body is cut
        connection.close()

    def serve():
        while True:
            threading.Thread(target=answer, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


@pytest.mark.phase(8)
@pytest.mark.parametrize("how, status", [("close", "provider_error"), ("stall", "provider_error"),
                                         ("close-after-finish", "answered")])
def test_a_stream_that_breaks_off_is_asked_again_unless_it_had_finished(harness, load, how, status):
    """A stream whose connection breaks, or stalls past TIMEOUT, in mid-body: a broken reply, asked again, then a
    provider_error naming it, never a traceback. One that breaks off after its finish_reason is whole: answered."""
    load("backend").TIMEOUT = 1
    backend = {"name": "groq", "base_url": broken_stream_server(how), "api_key": "x", "model": "m"}
    notes = []
    result = harness.run("Hi", backend=backend, on_text=notes.append)
    assert result.status == status, result.error
    if status == "answered":
        assert result.answer == "Hello.", result
    else:
        assert "broke off" in result.error, result.error


@pytest.mark.phase(8)
@pytest.mark.skipif(sys.platform == "win32", reason="arguments there are always text")
def test_a_task_in_bytes_that_are_not_utf8_is_sent(workspace, server):
    """A task typed in another encoding (a byte that is not UTF-8): sent with the byte replaced, answered."""
    server.push("Hi.")
    done = subprocess.run([sys.executable, "harness.py", b"Say \xff hi"], cwd=workspace, capture_output=True,
                          env=clean_env(**groq_env(server)), timeout=60)
    assert done.returncode == 0 and len(server.requests) == 1, done.stderr.decode(errors="replace")


@pytest.mark.phase(2)
def test_output_the_terminal_cannot_encode_is_spelled_out(workspace, server):
    """Standard output in ASCII (PYTHONIOENCODING=ascii) and an answer that is not: printed with the character
    spelled out, exit 0, no traceback."""
    server.push("Caf\u00e9 \u2713")
    done = subprocess.run([sys.executable, "harness.py", "Say"], cwd=workspace, capture_output=True, text=True,
                          env=clean_env(**groq_env(server), PYTHONIOENCODING="ascii"), timeout=60)  # a new interpreter
    assert done.returncode == 0 and "Caf\\xe9" in done.stdout and "Traceback" not in done.stderr, done.stderr


@pytest.mark.phase(7)
def test_a_server_too_slow_is_named_slow_not_unreachable(harness, server, load):
    """A server that answers, only too slowly for TIMEOUT (a local model warming up): the message names TIMEOUT,
    the setting to raise, and does not say that the server could not be reached."""
    load("backend").TIMEOUT = 0.5
    server.push(*[{"delay": 2, "content": "late"}] * 3)
    result = harness.run("Hi", backend=scripted_backend(server))
    assert result.status == "provider_error" and "within" in result.error, result.error
    assert "Could not reach" not in result.error and "TIMEOUT" in result.error, result.error


@pytest.mark.phase(6)
def test_reading_far_into_a_file_of_short_lines_meets_the_deadline(workspace, server):
    """read_file at line 19,000,000 of a file of 20 million empty lines looks through its first MAX_SCAN bytes a
    line at a time, which takes seconds: under --deadline 2 the run still ends on time, status deadline, the call
    answered. (Before the re-cut, the lines were counted a megabyte at a time and the call answered at once.) A
    machine that reads them all within the deadline answers, and the run ended on time all the same."""
    with open(workspace / "lines.txt", "wb") as file:
        file.write(b"\n" * 20_000_000)
    server.push(tool_calls(("read_file", {"path": "lines.txt", "offset": 19_000_000, "limit": 2})), "Read.")
    started = time.monotonic()
    result = run_python(workspace, "harness.py", "--trace", "t.jsonl", "--deadline", "2", "Read",
                        env=groq_env(server))
    assert since_first_request(server, started) < 3 * (2 + GRACE), result.stderr
    records = trace_records(workspace / "t.jsonl")
    ended = {0: "answered", 3: "deadline"}.get(result.returncode)
    assert records[-1]["status"] == ended and [r["type"] for r in records].count("tool") == 1, records


@pytest.mark.phase(4)
@pytest.mark.files("guards.py", "tools.py")
def test_a_write_too_long_to_diff_says_so_at_once(load, workspace):
    """A write whose file has more lines than MAX_DIFF_LINES, before or after: the question gives the counts
    instead of a diff, whose cost grows faster than its length (20,000 short lines took 16 s)."""
    tools, project = load("tools"), workspace.parent / "project"
    project.mkdir()
    (project / "cycle.txt").write_text("".join(f"{n % 201}\n" for n in range(20_000)))
    action, question = tools.plan(load("guards").policy(project), tools.REGISTRY["write_file"], {
        "path": "cycle.txt", "content": "".join(f"{n * 7 % 201}\n" for n in range(20_000))})
    assert question.startswith("Write cycle.txt: 20000 lines replaced by 20000, too many to show a diff"), question


@pytest.mark.phase(10)
@pytest.mark.parametrize("schema", [
    '{"type": "object", "properties": {"a": {"type": ["string", "null"]}}}',
    '{"type": "object", "properties": {"a": {"enum": [NaN]}}}',
    '{"type": "object", "properties": {"a": {"type": "string"}}, "required": 5}',
    '{"type": "object", "title": 7, "properties": {}}',
    "[1]",
], ids=["type-list", "nan", "required-number", "title-number", "a-list"])
def test_a_schema_the_harness_cannot_use_is_a_usage_error(workspace, schema):
    """--output-schema with a shape the harness cannot use (a type list, NaN, a required that is no list, a title
    that is no text, no object at all): a usage message naming the file and the reason, exit 2, never a
    traceback."""
    (workspace / "schema.json").write_text(schema)
    result = run_python(workspace, "harness.py", "--output-schema", "schema.json", "Hi", env={"BACKEND": "demo"})
    assert result.returncode == 2 and "--output-schema schema.json" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.phase(10)
@pytest.mark.parametrize("schema", [
    '{"type": "object", "properties": {"a": {"enum": []}}}',
    '{"type": "object", "properties": {"_a": {"type": "string"}}}',
    '{"type": "object", "properties": {"a": ' * 40 + '{"type": "string"}' + "}}" * 40,
], ids=["empty-enum", "underscore", "deep"])
def test_a_schema_at_the_edge_of_what_the_harness_takes_still_ends_in_a_status(workspace, schema):
    """An empty enum, a property with a leading underscore, objects nested 40 deep: usage errors before the re-cut,
    now schemas the harness takes. A run with one answers (the demo gives an empty object), never a traceback."""
    (workspace / "schema.json").write_text(schema)
    result = run_python(workspace, "harness.py", "--output-schema", "schema.json", "Hi", env={"BACKEND": "demo"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


@pytest.mark.phase(10)
def test_options_that_are_no_json_or_clash_with_the_loop(harness, server):
    """options={"temperature": NaN} cannot be sent: one message saying so, no request, no retries blamed on the
    server. options={"stream": True} is the loop's to decide: it is left out, and the run answers."""
    result = harness.run("Hi", backend=scripted_backend(server), options={"temperature": float("nan")})
    assert result.status == "provider_error" and "cannot be sent as JSON" in result.error, result.error
    assert len(server.requests) == 0
    server.push("Hi.")
    result = harness.run("Hi", backend=scripted_backend(server), options={"stream": True})
    assert result.status == "answered" and result.answer == "Hi.", result


@pytest.mark.phase(12)
@pytest.mark.parametrize("mode", ["odd-schema", "no-schema"])
def test_a_server_schema_that_is_no_schema_is_an_error_not_a_traceback(workspace, server, mode):
    """A server's tool whose inputSchema has parts that are no schema (a property that is a number, required as a
    string, empty examples): calling it is an error result the model can act on. One whose inputSchema is no
    object at all: the server is unusable, one error line, status mcp_error."""
    shutil.copy(ROOT / "tests" / "mcp_servers.py", workspace)
    server.push({"tool_calls": [{"name": f"{mode}__odd", "arguments": {"a": 1}, "id": "c0"}]}, "done")
    done = run_python(workspace, "harness.py", "--mcp", f"python mcp_servers.py {mode}", "--mcp-trust", mode,
                      "Do it", env=groq_env(server))
    assert "Traceback" not in done.stderr, done.stderr
    if mode == "odd-schema":
        results = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
        assert done.returncode == 0 and results[0].startswith("error:") and "inputSchema" in results[0], results
    else:
        assert done.returncode == 1 and "inputSchema or execution is no JSON object" in done.stderr, done.stderr
        assert "stopped: mcp error" in done.stdout and not server.requests, done.stdout
