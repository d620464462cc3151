"""mcp_client.py against real servers over real pipes: the course's ticket_server.py, tests/mcp_servers.py (which
misbehaves on purpose, and speaks only the older MCP, with its handshake), and, when installed, servers nobody here
wrote: one built on the official MCP Python SDK (tests/requirements.txt) and the MCP project's reference server from
npm (.ci/mcp-npm, see .ci/run). Each test of a server that works says which MCP was spoken: 2026-07-28, without a
handshake, or 2025-11-25, with it."""
import base64
import hashlib
import http.server
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import BUBBLEWRAP_MISSING, needs_bubblewrap, run_python

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import mcp_client  # noqa: E402
from mcp_client import McpError, Server, command_argv  # noqa: E402

ENV = {"PATH": os.environ.get("PATH", os.defpath)}  # what the servers get: no key
TICKETS = [sys.executable, str(ROOT / "ticket_server.py")]
EVERYTHING = ROOT / ".ci" / "mcp-npm"  # where the CI step installs @modelcontextprotocol/server-everything
HAS_SDK = importlib.util.find_spec("mcp") is not None
EVERYTHING_BIN = EVERYTHING / "node_modules" / ".bin" / "mcp-server-everything"


def fake(mode):
    return [sys.executable, str(ROOT / "tests" / "mcp_servers.py"), mode]


@pytest.fixture
def stderr(tmp_path):
    with open(tmp_path / "stderr.txt", "w") as file:
        yield file


@pytest.fixture
def start(stderr):
    """start(argv) -> a Server that has started; each is closed after the test."""
    servers = []

    def start(argv, seconds=5):
        servers.append(Server("test", argv, ENV, stderr))
        return servers[-1].start(time.monotonic() + seconds)

    yield start
    for server in servers:
        server.close()


def gone(pid, seconds=10):
    """True once the process has ended (a zombie counts as ended: it runs nothing), within
    seconds: a killed process ends when the kernel gets to it, which a busy machine puts off."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_lists_and_calls_the_ticket_server_in_mcp_2026_07_28(start):
    server = start(TICKETS)
    assert server.version == "2026-07-28"
    assert [tool["name"] for tool in server.tools()] == ["get_ticket", "propose_label"]
    text, is_error = server.call("get_ticket", {"ticket_id": "DEMO-42"})
    assert (json.loads(text)["title"], json.loads(text)["version"], is_error) == ("Charged twice for one order", 3,
                                                                                  False)


def test_a_failed_tool_comes_back_as_a_result_with_is_error(start):
    server = start(TICKETS)
    assert server.call("propose_label", {"ticket_id": "DEMO-42", "label": "billing", "expected_version": 2}) == (
        "DEMO-42 is at version 3, not 2: it changed since you read it. Read it again with get_ticket, then propose "
        "a label for what it says now.", True)


def test_a_json_rpc_error_raises_and_the_server_goes_on(start):
    server = start(TICKETS)
    with pytest.raises(McpError, match="answered tools/call with an error: .*Unknown tool 'nope'. The tools are "
                                       "get_ticket, propose_label"):
        server.call("nope", {})
    assert server.call("get_ticket", {"ticket_id": "DEMO-43"})[1] is False


def test_tools_come_from_every_page(start):
    names = [tool["name"] for tool in start(fake("pages")).tools()]
    assert names == ["tool_0_0", "tool_0_1", "tool_1_0", "tool_1_1", "tool_2_0", "tool_2_1"]


def test_a_server_that_names_a_next_page_for_ever_fails_after_max_pages(start):
    """A tools/list that always names a next page: McpError after MAX_PAGES pages, at once and in little memory,
    never a task that does not start."""
    server, started = start(fake("endless")), time.monotonic()
    with pytest.raises(McpError, match=f"after {mcp_client.MAX_PAGES} pages"):
        server.tools(time.monotonic() + 30)
    assert time.monotonic() - started < 10


def test_a_server_that_stops_reading_fails_a_call_at_its_deadline_and_closes(start):
    """A server that reads no more of its input once it has listed its tools: a call with 1 MB of arguments (more
    than a pipe holds) ends at its deadline with McpError, and close() ends the server: no wait is a write's."""
    server = start(fake("deaf-after"))
    assert server.tools()
    started = time.monotonic()
    with pytest.raises(McpError, match="in time"):
        server.call("work", {"text": "x" * 1_000_000}, time.monotonic() + 2)
    server.close()
    assert time.monotonic() - started < 2 + mcp_client.GRACE + 5 and server.process.poll() is not None


def test_a_server_that_answers_server_discover_with_method_not_found_gets_the_handshake_of_2025_11_25(start):
    server = start(fake("legacy"))
    assert server.version == "2025-11-25"
    assert server.call("work", {}) == ("done", False)


def test_an_older_protocol_version_the_client_speaks_is_accepted_in_mcp_2024_11_05(start):
    assert start(fake("version=2024-11-05")).version == "2024-11-05"


def test_a_server_silent_to_server_discover_gets_the_handshake_of_2025_11_25_after_probe_seconds(start, monkeypatch):
    monkeypatch.setattr(mcp_client, "PROBE", 0.5)
    started = time.monotonic()
    server = start(fake("deaf"))
    assert (server.version, server.call("work", {})) == ("2025-11-25", ("done", False))
    assert 0.5 <= time.monotonic() - started < 2


@pytest.mark.parametrize("mode, message", [
    ("exit", r"has exited \(exit code 3\)"),
    ("not-json", r"wrote something that is not JSON-RPC: 'Server listening on stdio'"),
    ("modern", r'answered server/discover with an error: .*Unsupported protocol version.*\["2099-01-01"\]'),
    ("version=2099-01-01", r"speaks MCP '2099-01-01', and this client 2026-07-28, 2025-11-25, 2025-06-18"),
])
def test_a_failed_start_raises(mode, message, stderr):
    """A modern server that does not speak 2026-07-28 answers server/discover with its versions: no handshake
    follows, since it has none (the message names server/discover, not initialize)."""
    server = Server("test", fake(mode), ENV, stderr)
    with pytest.raises(McpError, match=message):
        server.start(time.monotonic() + 5)
    server.close()
    assert server.process.poll() is not None


def test_a_handshake_never_answered_raises_at_the_deadline(stderr):
    server = Server("test", fake("silent"), ENV, stderr)
    started = time.monotonic()
    with pytest.raises(McpError, match="did not answer initialize in time"):
        server.start(started + 0.5)
    assert 0.5 <= time.monotonic() - started < 2
    server.close()


def test_the_server_gets_only_the_environment_given_and_its_stderr_is_kept(start, stderr, monkeypatch):
    monkeypatch.setenv("GROQ_API_KEY", "gsk_this_is_no_real_key")
    names = json.loads(start(fake("env")).call("work", {})[0])
    assert set(names) - {"LC_CTYPE"} == {"PATH"}  # Python itself may set LC_CTYPE when no locale is given
    stderr.flush()
    assert "mcp_servers: hello on stderr" in Path(stderr.name).read_text()


def test_server_requests_are_refused_ping_answered_and_notifications_skipped(start):
    replies = json.loads(start(fake("chatty")).call("work", {})[0])
    assert replies == [  # roots/list came with id 3, as the client's own tools/call: each side numbers its own
        {"jsonrpc": "2.0", "id": "s1", "error": {"code": -32601,
                                                 "message": "Method not found: sampling/createMessage"}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found: roots/list"}},
        {"jsonrpc": "2.0", "id": "p1", "result": {}}]


def test_a_long_result_comes_whole_and_other_parts_are_described(start):
    """The client hands the harness every part: text as it is; an image, a sound, a link or a file as one line with
    its type, where it is, its MIME type and size (of the data once decoded). Cutting a long result to MAX_CHARS is
    the harness's job, at the boundary where every tool result is cut."""
    text, is_error = start(fake("big")).call("work", {})
    assert text.split("\n") == [
        "[image: image/png, 8 bytes]", "[audio: audio/wav, 4 bytes]",
        "[resource_link: file:///tmp/report.csv, text/csv, 1,234 bytes]", "[resource_link: notes]",
        "embedded notes", "[resource: file:///tmp/logo.png, image/png, 2 bytes]", "x" * 10_000], text[:300]
    assert is_error is False


def test_a_result_that_asks_for_input_is_a_server_failure(start):
    """A resultType other than "complete" is one this client cannot use: the input_required of MCP 2026-07-28 asks
    for what the client never offered (its capabilities are {})."""
    with pytest.raises(McpError, match=r'answered tools/call with no result it can use: .*"input_required"'):
        start(fake("input-required")).call("work", {})


def test_a_call_the_server_never_answers_ends_at_the_deadline(start):
    server = start(fake("slow"))
    started = time.monotonic()
    with pytest.raises(McpError, match="did not answer tools/call in time"):
        server.call("work", {}, started + 0.5)
    assert 0.5 <= time.monotonic() - started < 1.5


def test_a_server_that_dies_fails_this_call_and_every_later_one_at_once(start):
    server = start(TICKETS)
    server.process.kill()
    for _ in range(2):
        started = time.monotonic()
        with pytest.raises(McpError, match=r"has exited \(exit code -9\), so its tools cannot be used"):
            server.call("get_ticket", {"ticket_id": "DEMO-42"}, started + 5)
        assert time.monotonic() - started < 2


def test_calls_from_several_threads_each_get_their_own_answer(start):
    server = start(TICKETS)
    ids = ["DEMO-42", "DEMO-43", "DEMO-44"] * 5
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda ticket: server.call("get_ticket", {"ticket_id": ticket}), ids))
    assert [json.loads(text)["id"] for text, _ in answers] == ids


def test_close_from_another_thread_ends_a_waiting_call(start):
    server = start(fake("slow"))
    threading.Timer(0.2, server.close).start()
    with pytest.raises(McpError, match="has exited"):
        server.call("work", {}, time.monotonic() + 5)


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads Linux's /proc: elsewhere, CI's Linux job runs it")
def test_close_kills_a_server_that_will_not_stop_and_what_it_started(start, monkeypatch):
    monkeypatch.setattr(mcp_client, "GRACE", 0.2)
    server = start(fake("stubborn"))
    pids = json.loads(server.call("work", {})[0])
    started = time.monotonic()
    server.close()
    server.close()
    assert time.monotonic() - started < 2
    assert gone(pids["server"]) and gone(pids["grandchild"])


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads Linux's /proc: elsewhere, CI's Linux job runs it")
def test_a_server_the_harness_forgets_ends_when_the_harness_does():
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import mcp_client; mcp_client.GRACE = 0.2\n"
              f"server = mcp_client.Server('forgotten', {fake('stubborn')!r}, {ENV!r}, None).start()\n"
              f"print(server.call('work', {{}})[0])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    pids = json.loads(done.stdout)
    assert gone(pids["server"]) and gone(pids["grandchild"])


def test_running_the_client_alone_prints_the_servers_tools_and_mcp_2026_07_28():
    done = subprocess.run([sys.executable, "mcp_client.py", shlex.join(TICKETS)], cwd=ROOT, capture_output=True,
                          text=True, timeout=10)
    assert (done.returncode, done.stdout) == (0, (
        "MCP 2026-07-28:\n"
        "get_ticket: Read one support ticket: its title, body, labels and version.\n"
        "propose_label: Propose one label for a ticket. Nothing is applied: a person reviews every proposal. "
        "expected_version is the version get_ticket showed; if the ticket changed since, read it again.\n"))


@pytest.mark.skipif(not HAS_SDK, reason="the official MCP SDK is not installed: pip install -r "
                                        "tests/requirements.txt")
def test_works_with_a_server_built_on_the_official_sdk_in_mcp_2026_07_28(start):
    server = start([sys.executable, str(ROOT / "tests" / "mcp_sdk_server.py")], seconds=15)
    assert server.version == "2026-07-28"
    assert [tool["name"] for tool in server.tools()] == ["add", "refuse", "peek"]
    assert server.call("add", {"a": 2, "b": 3}) == ("5", False)
    text, is_error = server.call("refuse", {"reason": "not today"})
    assert ("not today" in text, is_error) == (True, True)  # the SDK words the rest


@pytest.mark.skipif(not (shutil.which("node") and EVERYTHING_BIN.exists()),
                    reason="node, or the reference server, is missing: the CI step in .ci/run installs "
                           "@modelcontextprotocol/server-everything into .ci/mcp-npm")
def test_works_with_the_mcp_projects_reference_server_in_mcp_2025_11_25(start):
    """@modelcontextprotocol/server-everything 2026.8.31 answers server/discover with "Method not found": it speaks
    the handshake only, and the client falls back to it."""
    server = start([str(EVERYTHING_BIN), "stdio"], seconds=15)
    assert server.version == "2025-11-25"
    assert {"echo", "get-sum", "get-tiny-image"} <= {tool["name"] for tool in server.tools()}
    assert server.call("echo", {"message": "hello"}) == ("Echo: hello", False)
    assert server.call("get-sum", {"a": 2, "b": 3}) == ("The sum of 2 and 3 is 5.", False)
    assert re.search(r"\n\[image: image/png, [\d,]+ bytes\]\n", server.call("get-tiny-image", {})[0])


WINDOWS_PATHEXT = ".COM;.EXE;.BAT;.CMD"  # Windows' own values, given to command_argv() here on any system


@pytest.fixture
def windows_folders(tmp_path, monkeypatch):
    """A current folder holding a planted npx.cmd (which must never run), and a folder of the search path holding
    the real one; the search path as Windows' default has it, "." first, with that folder after."""
    current, programs = tmp_path / "workspace", tmp_path / "nodejs"
    for folder in (current, programs):
        folder.mkdir()
        (folder / "npx.cmd").write_text("@echo off\n")
    monkeypatch.chdir(current)
    return current, programs, f".;C:\\bin;{programs}"


def test_on_windows_npx_is_the_npx_cmd_of_the_search_path_never_the_current_folders(windows_folders):
    _, programs, path = windows_folders
    assert command_argv("npx -y @modelcontextprotocol/server-everything", path, True, WINDOWS_PATHEXT) == [
        str(programs / "npx.cmd"), "-y", "@modelcontextprotocol/server-everything"]
    assert command_argv("npx.cmd stdio", path, True, WINDOWS_PATHEXT)[0] == str(programs / "npx.cmd")  # as named


def test_on_windows_a_program_only_in_the_current_folder_is_not_found(windows_folders):
    current, programs, _ = windows_folders
    with pytest.raises(McpError, match=r"program 'npx' is in no folder of '\.;C:\\\\bin'"):
        command_argv("npx -y pkg", ".;C:\\bin", True, WINDOWS_PATHEXT)
    with pytest.raises(McpError, match="program 'npx' is in no folder"):  # "npx" alone is no program on Windows
        (programs / "npx.cmd").rename(programs / "npx")
        command_argv("npx -y pkg", f".;{programs}", True, WINDOWS_PATHEXT)


def test_on_windows_words_are_split_at_spaces_outside_double_quotes(windows_folders):
    line = r'"C:\Program Files\nodejs\node.exe" C:\servers\main.js --title="a b" "" it\'s'
    assert command_argv(line, windows_folders[2], True, WINDOWS_PATHEXT) == [
        r"C:\Program Files\nodejs\node.exe", r"C:\servers\main.js", "--title=a b", "", "it\\'s"]


def test_elsewhere_words_are_split_as_the_shell_does_and_popen_finds_the_program():
    assert command_argv("python 'my server.py' --name=\"a b\"", "/usr/bin", False) == [
        "python", "my server.py", "--name=a b"]
    with pytest.raises(McpError, match="cannot be split: No closing quotation"):
        command_argv("python 'my server.py", "/usr/bin", False)
    for windows in (False, True):  # --mcp "" or --mcp "NAME=": a start that says why, not an IndexError
        with pytest.raises(McpError, match="command ' ' names no program"):
            command_argv(" ", "/usr/bin", windows, WINDOWS_PATHEXT)


# A server installed where people keep them: a venv under ~, a script in another folder. Its sandbox shows what
# its command names (mcp_client.readable()), and still nothing of the harness's folder, its .env or ~/.ssh.
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" * 3 + "\n"
TOKEN = "ghp_" + "0123456789abcdefABCDEF" * 2


@pytest.fixture
def elsewhere(workspace, tmp_path, monkeypatch):
    """A learner's machine, in tmp_path: a home of its own (HOME) holding ~/.ssh and a venv made by `python -m
    venv` (which finds the MCP SDK through a .pth file); the harness's folder (workspace, the code under test) with
    its .env; the servers in a folder of their own, a .env beside them; and the run's workspace, project."""
    home, servers, project = tmp_path / "home", tmp_path / "servers", tmp_path / "project"
    for folder in (home / ".ssh", servers, project):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    (home / ".ssh" / "id_ed25519").write_text(KEY)
    (workspace / ".env").write_text(f"MY_SERVICE_TOKEN={TOKEN}\n")
    (servers / ".env").write_text(f"SERVER_TOKEN={TOKEN}\n")
    for name in ("ticket_server.py", "tests/mcp_sdk_server.py"):
        shutil.copy(ROOT / name, servers)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / "venv")], check=True)
    site = next((home / "venv" / "lib").glob("python3*/site-packages"))
    (site / "harness_venv.pth").write_text(next(p for p in sys.path if p.endswith("site-packages")) + "\n")
    return home, servers, project


def started(load, command, project, sandbox="workspace-write"):
    """The server of `--mcp COMMAND` as the harness starts it (mcp_client.start_all()), in project's sandbox."""
    guards, mcp = load("guards"), load("mcp_client")
    return mcp.start_all([command], guards.policy(project, sandbox=sandbox), time.monotonic() + 30)[0]


@needs_bubblewrap
@pytest.mark.skipif(not HAS_SDK, reason="the official MCP SDK is not installed: pip install -r tests/requirements.txt")
@pytest.mark.phase(12)
@pytest.mark.files("mcp_client.py", "shell.py", "guards.py")
def test_a_server_in_a_venv_under_home_runs_in_its_sandbox_and_reads_no_secret(load, elsewhere):
    """~/venv/bin/python /elsewhere/mcp_sdk_server.py, in bubblewrap: its calls work; the harness's .env, the .env
    beside the server and ~/.ssh/id_ed25519 are not there for it to read."""
    home, servers, project = elsewhere
    server = started(load, f"~/venv/bin/python {servers / 'mcp_sdk_server.py'}", project)
    try:
        assert server.call("add", {"a": 2, "b": 3}) == ("5", False)
        for secret in (load("guards").HOME / ".env", servers / ".env", home / ".ssh" / "id_ed25519"):
            text, is_error = server.call("peek", {"path": str(secret)})
            assert is_error and "No such file" in text and TOKEN not in text and "PRIVATE" not in text, text
    finally:
        server.close()


@needs_bubblewrap
@pytest.mark.phase(12)
@pytest.mark.files("mcp_client.py", "shell.py", "guards.py")
@pytest.mark.parametrize("python", ["python", "~/venv/bin/python"])
def test_the_course_s_server_runs_from_another_folder_in_its_sandbox(load, elsewhere, python):
    """python /elsewhere/ticket_server.py, with the harness's python or a venv's under ~: its calls work."""
    _, servers, project = elsewhere
    server = started(load, f"{python} {servers / 'ticket_server.py'}", project)
    try:
        assert json.loads(server.call("get_ticket", {"ticket_id": "DEMO-42"})[0])["id"] == "DEMO-42"
    finally:
        server.close()


@needs_bubblewrap
@pytest.mark.phase(12)
@pytest.mark.files("mcp_client.py", "shell.py", "guards.py")
def test_a_sandboxed_server_keeps_its_own_cache_from_one_start_to_the_next(load, elsewhere, monkeypatch):
    """$XDG_CACHE_HOME and $npm_config_cache (uvx's and npx's) point into ~/.cache/course-harness/mcp/NAME, which
    the server may write in its sandbox, even a read-only run's: a second start of it finds what it left, a server
    of another name does not, and the user's own ~/.npm is neither used nor shown."""
    home, servers, project = elsewhere
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    shutil.copy(ROOT / "tests" / "mcp_servers.py", servers)
    (home / ".npm").mkdir()

    def kept(name):
        server = started(load, f"{name}=python {servers / 'mcp_servers.py'} cache", project, "read-only")
        try:
            return json.loads(server.call("work", {})[0])
        finally:
            server.close()

    cache = home.resolve() / ".cache" / "course-harness" / "mcp" / "keeper"
    assert kept("keeper") == {"places": [str(cache), str(cache / "npm")], "found": [False, False],
                              "home_npm": False}
    assert kept("keeper")["found"] == [True, True] and kept("other")["found"] == [False, False]
    assert cache.stat().st_mode & 0o777 == 0o700 and (cache / "npm" / "kept.txt").read_text() == "kept\n"
    assert not any((home / ".npm").iterdir()) and not (project / "kept.txt").exists()


# A package for npx: an MCP server in Node (the handshake of MCP 2025-11-25, one tool), as npm packs it
TINY_MCP = {"package.json": json.dumps({"name": "tiny-mcp", "version": "1.0.0", "bin": {"tiny-mcp": "server.js"}}),
            "server.js": """#!/usr/bin/env node
const send = (m) => process.stdout.write(JSON.stringify({jsonrpc: "2.0", ...m}) + "\\n");
require("readline").createInterface({input: process.stdin}).on("line", (line) => {
  const r = JSON.parse(line);
  if (r.method === "initialize") send({id: r.id, result: {protocolVersion: r.params.protocolVersion,
    capabilities: {tools: {}}, serverInfo: {name: "tiny-mcp", version: "1.0.0"}}});
  else if (r.method === "tools/list") send({id: r.id, result: {tools: [{name: "hello", inputSchema: {}}]}});
  else if (r.method === "tools/call") send({id: r.id, result: {content: [{type: "text", text: "hello"}]}});
  else if (r.id !== undefined) send({id: r.id, error: {code: -32601, message: "Method not found"}});
});
"""}


@pytest.fixture
def registry():
    """npm's registry on 127.0.0.1, serving tiny-mcp (its metadata and its tarball): (URL, the paths asked for)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, text in TINY_MCP.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode = len(text.encode()), 0o755
            tar.addfile(info, io.BytesIO(text.encode()))
    tarball, asked = data.getvalue(), []
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(data.getvalue()).digest()).decode()

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            url = f"http://127.0.0.1:{self.server.server_port}/tiny-mcp/-/tiny-mcp-1.0.0.tgz"
            version = {**json.loads(TINY_MCP["package.json"]), "dist": {"tarball": url, "integrity": integrity}}
            body = tarball if self.path.endswith(".tgz") else json.dumps({
                "name": "tiny-mcp", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": version}}).encode()
            self.send_response(200 if self.path.rstrip("/").endswith(("/tiny-mcp", ".tgz")) else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry) as running:
        threading.Thread(target=running.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{running.server_port}/", asked
        running.shutdown()


@needs_bubblewrap
@pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed (Node.js)")
@pytest.mark.phase(12)
@pytest.mark.files("mcp_client.py", "shell.py", "guards.py")
def test_npx_in_the_sandbox_downloads_its_package_once(load, elsewhere, registry, monkeypatch):
    """npx -y tiny-mcp, from a registry on 127.0.0.1, started twice in bubblewrap: both calls work, the tarball is
    fetched once (the second start takes it from the server's cache), and the user's ~/.npm stays as it was."""
    home, _, project = elsewhere
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    (home / ".npm").mkdir()
    url, asked = registry
    for _ in range(2):
        server = started(load, f"tiny=npx --yes --no-update-notifier --registry={url} tiny-mcp", project)
        try:
            assert server.call("hello", {}) == ("hello", False)
        finally:
            server.close()
    assert [path for path in asked if path.endswith(".tgz")] == ["/tiny-mcp/-/tiny-mcp-1.0.0.tgz"], asked
    assert (home / ".cache" / "course-harness" / "mcp" / "tiny" / "npm" / "_cacache").is_dir()
    assert not any((home / ".npm").iterdir())


@pytest.mark.phase(12)
@pytest.mark.files("mcp_client.py", "shell.py", "guards.py", "harness.py", "cli.py")
@pytest.mark.parametrize("sandbox", ["workspace-write", "off"])
def test_a_server_that_cannot_start_ends_the_run_with_its_stderr_and_the_fix(workspace, elsewhere, sandbox):
    """A server whose script is not there: one `error:` line, then the last lines it wrote on stderr (Python's
    "can't open file") and, in the sandbox, what it sees and the fix, --sandbox off the last resort."""
    if sandbox != "off" and BUBBLEWRAP_MISSING:
        pytest.skip(BUBBLEWRAP_MISSING)
    _, servers, project = elsewhere
    done = run_python(workspace, "harness.py", "--workspace", str(project), "--sandbox", sandbox, "--mcp",
                      f"python {servers / 'missing.py'}", "Do it", env={"BACKEND": "demo"})
    assert done.returncode == 1 and "stopped: mcp error" in done.stdout, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Its stderr ends:\n  " in done.stderr, done.stderr
    assert "can't open file" in done.stderr and "missing.py" in done.stderr, done.stderr
    assert ("Last resort: --sandbox off" in done.stderr) == (sandbox != "off"), done.stderr


def test_a_tool_that_needs_task_mode_is_not_offered(start):
    """MCP 2025-11-25's execution.taskSupport "required" (server-everything's simulate-research-query): a client
    that does not speak task mode gets -32601 for it, so tools() leaves it out; "optional" stays."""
    assert [tool["name"] for tool in start(fake("tasks")).tools()] == ["work", "either"]


@pytest.mark.phase(12)
@pytest.mark.files("mcp_client.py", "shell.py", "guards.py")
def test_what_a_server_s_sandbox_shows_is_what_its_command_names(load, elsewhere, tmp_path):
    """mcp_client.readable(), on real files laid out as installers leave them (nothing runs): a tool pipx put in a
    venv, linked from ~/.local/bin, and the Python its pyvenv.cfg names; Node from nvm, its npx a link into npm's
    package; the files and folders an argument names. Never the home folder, ~/.ssh, the harness's folder, a file
    that holds a secret, or a folder that holds one."""
    home, servers, project = elsewhere
    guards, mcp = load("guards"), load("mcp_client")
    policy = guards.policy(project, sandbox="off")
    python = home / ".local" / "share" / "uv" / "python" / "cpython-3.12"  # a Python as uv installs one
    (python / "lib" / "python3.12").mkdir(parents=True)
    (python / "lib" / "python3.12" / "os.py").write_text("")
    tool = home / ".local" / "share" / "pipx" / "venvs" / "mcp-x"  # pipx's venv of a tool, and its link
    (tool / "bin").mkdir(parents=True)
    (tool / "pyvenv.cfg").write_text(f"home = {python / 'bin'}\nversion = 3.12.8\n")
    (tool / "bin" / "mcp-x").write_text(f"#!{tool / 'bin' / 'python'}\nimport mcp_x\n")
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "mcp-x").symlink_to(tool / "bin" / "mcp-x")
    node = home / ".nvm" / "versions" / "node" / "v20"  # Node as nvm installs it
    npx = node / "lib" / "node_modules" / "npm" / "bin" / "npx-cli.js"
    npx.parent.mkdir(parents=True)
    npx.write_text("#!/usr/bin/env node\n")
    (node / "bin").mkdir()
    (node / "bin" / "node").write_bytes(b"\x7fELF")
    (node / "bin" / "npx").symlink_to("../lib/node_modules/npm/bin/npx-cli.js")
    for program in (node / "bin" / "node", npx, tool / "bin" / "mcp-x"):
        program.chmod(0o755)
    env = {"PATH": f"{home / '.local' / 'bin'}:{node / 'bin'}:/usr/bin:/bin"}

    def shown(command):
        return [str(place) for place in mcp.readable(mcp.command_argv(command, env["PATH"]), env, policy)]

    assert shown("mcp-x") == [str(home / ".local" / "bin" / "mcp-x"), str(tool), str(python)]
    assert shown("npx -y @modelcontextprotocol/server-everything") == [str(node)]  # npx, npm and node are in it
    assert shown(f"{sys.executable} {servers / 'ticket_server.py'}") == [str(servers / "ticket_server.py")]
    (home / "config").mkdir()
    (home / "config" / "tools.json").write_text("{}")
    assert shown(f"{sys.executable} x.py --config={home / 'config'}") == [str(home / "config")]
    (home / "config" / "notes.txt").write_text(f"token: {TOKEN}\n")
    for named in (home / "config", home / "config" / "notes.txt", home, home / ".ssh", home / ".ssh" / "id_ed25519",
                  servers / ".env", servers, tmp_path, guards.HOME / "harness.py", guards.HOME.parent):
        assert shown(f"{sys.executable} x.py {named}") == [], named  # the harness's python: in shell.SYSTEM
