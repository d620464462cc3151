"""Phase 11, an MCP client: talk to a tool server that lives in another process. Checked through
mcp_client.Server against real servers over real pipes (the course's ticket_server.py, and tests/mcp_servers.py,
which misbehaves on purpose), and through `python mcp_client.py COMMAND`."""
import json
import os
import shutil
import sys
import time

import pytest
from helpers import ROOT, run_python

PHASE = 11
FILES = ("mcp_client.py", "shell.py")
# what Python itself needs of the environment to start on Windows (its random numbers); Linux and macOS: nothing
WINDOWS_NEEDS = {name: os.environ[name] for name in ("SYSTEMROOT",) if name in os.environ}


@pytest.fixture
def servers(workspace):
    """The workspace holds the two servers, as a learner's folder holds ticket_server.py."""
    for name in ("ticket_server.py", "tests/mcp_servers.py"):
        shutil.copy(ROOT / name, workspace / name.split("/")[-1])
    return workspace


@pytest.fixture
def client(load, servers):
    """mcp_client of the code under test, and a way to start a server with it; every server is closed after."""
    mcp_client, started = load("mcp_client"), []

    def start(command, deadline=None):
        server = mcp_client.Server("test", [sys.executable, *command.split()], WINDOWS_NEEDS, None)
        started.append(server)
        return server.start(deadline if deadline is None else time.monotonic() + deadline)

    yield mcp_client, start
    for server in started:
        server.close()


def test_done_when_the_client_lists_the_ticket_server_s_tools(servers):
    """`python mcp_client.py python ticket_server.py` prints the MCP it spoke, then each tool, `NAME: description`."""
    done = run_python(servers, "mcp_client.py", "python", "ticket_server.py")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "MCP 2026-07-28:", f"the first line should be `MCP 2026-07-28:`, not {lines[:1]}"
    assert [line.split(":")[0] for line in lines[1:]] == ["get_ticket", "propose_label"], done.stdout


def test_the_client_speaks_mcp_2026_07_28_lists_and_calls(client):
    """Server(name, argv, env, stderr).start() asks server/discover: ticket_server.py speaks MCP 2026-07-28, so
    server.version is that; tools() lists every tool with its inputSchema, call() returns (text, is_error)."""
    _, start = client
    server = start("ticket_server.py")
    assert server.version == "2026-07-28", f"the client spoke MCP {server.version}"
    tools = {tool["name"]: tool for tool in server.tools()}
    assert set(tools) == {"get_ticket", "propose_label"} and "properties" in tools["get_ticket"]["inputSchema"]
    text, is_error = server.call("get_ticket", {"ticket_id": "DEMO-42"})
    assert json.loads(text)["version"] == 3 and is_error is False
    text, is_error = server.call("propose_label", {"ticket_id": "DEMO-42", "label": "billing", "expected_version": 2})
    assert is_error is True and "version" in text


def test_every_page_of_tools_is_listed_and_an_older_server_gets_the_handshake(client):
    """tools/list follows nextCursor to the last page. mcp_servers.py answers server/discover with "Method not
    found", as a server of MCP 2025-11-25 or older does: the client shakes hands, in 2025-11-25."""
    _, start = client
    server = start("mcp_servers.py pages")
    assert server.version == "2025-11-25", f"the client spoke MCP {server.version}"
    assert len(server.tools()) == 6


@pytest.mark.parametrize("mode", ["exit", "not-json", "silent", "modern", "version=1999-01-01"])
def test_a_server_that_fails_to_start_raises_mcp_error_in_time(client, mode):
    """A server that exits, writes what is not JSON, never answers, answers with an error, or speaks a version the
    client does not: McpError, by the deadline."""
    mcp_client, start = client
    began = time.monotonic()
    with pytest.raises(mcp_client.McpError):
        start(f"mcp_servers.py {mode}", deadline=3)
    assert time.monotonic() - began < 9, "give up at the deadline"


@pytest.mark.parametrize("mode", ["dies", "slow"])
def test_a_server_that_fails_a_call_raises_mcp_error_in_time(client, mode):
    """A server that exits in the middle of a call, or never answers it: McpError, by the deadline."""
    mcp_client, start = client
    server = start(f"mcp_servers.py {mode}")
    began = time.monotonic()
    with pytest.raises(mcp_client.McpError):
        server.call("work", {}, time.monotonic() + 3)
    assert time.monotonic() - began < 9


def test_requests_and_notifications_from_the_server_do_not_break_a_call(client):
    """A server that asks for sampling and roots, pings, and sends notifications in between: the call gets its
    answer; the server's requests get an answer (an error for what the client does not offer)."""
    _, start = client
    text, is_error = start("mcp_servers.py chatty").call("work", {})
    replies = json.loads(text)
    assert is_error is False and len(replies) == 3 and any("error" in reply for reply in replies), replies
