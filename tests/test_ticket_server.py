"""ticket_server.py as a person and as clients see it: JSON lines typed by hand (the lesson's), the protocol's
answers to wrong input, the tools' answers, and the official MCP SDK's client (when installed) talking to it."""
import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "ticket_server.py"
HAS_SDK = importlib.util.find_spec("mcp") is not None
DEMO_42 = {"id": "DEMO-42", "title": "Charged twice for one order",
           "body": "I placed one order (#58113) on Monday and my card statement shows two charges of $39.00 from you "
                   "on the same day. Only one parcel came. Please refund the second charge.",
           "labels": [], "version": 3}
# The lines the lesson has a learner paste into `python ticket_server.py`, one message a line.
LESSON = [
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},'
    '"clientInfo":{"name":"me","version":"0.1"}}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_ticket","arguments":{"ticket_id":"DEMO-42"}}}',
    '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"propose_label","arguments":{"ticket_id":"DEMO-42",'
    '"label":"billing","expected_version":3}}}',
    '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"propose_label","arguments":{"ticket_id":"DEMO-42",'
    '"label":"billing","expected_version":2}}}',
]


def run(*lines):
    """What the server prints for these input lines, one string a line."""
    done = subprocess.run([sys.executable, str(SERVER)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, timeout=10)
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def answers(*lines):
    return [json.loads(line) for line in run(*lines)]


def initialize(version="2025-11-25"):
    return json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}})


def call(name, request_id=1, **arguments):
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}})


def said(text, is_error=False):
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def test_the_lessons_lines_get_the_lessons_answers():
    printed = run(*LESSON)
    assert printed[0] == ('{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "capabilities": '
                          '{"tools": {}}, "serverInfo": {"name": "ticket-server", "version": "1.0"}}}')
    assert [answer["id"] for answer in map(json.loads, printed)] == [1, 2, 3, 4, 5]  # none for the notification
    tools = json.loads(printed[1])["result"]["tools"]
    assert [(tool["name"], tool["inputSchema"]["required"]) for tool in tools] == [
        ("get_ticket", ["ticket_id"]), ("propose_label", ["ticket_id", "label", "expected_version"])]
    assert json.loads(printed[2])["result"] == {**said(json.dumps(DEMO_42)), "structuredContent": DEMO_42}
    assert json.loads(printed[3])["result"] == said(
        "Proposed label billing for DEMO-42 at version 3. Nothing was applied: a person reviews every proposal.")
    assert json.loads(printed[4])["result"] == said(
        "DEMO-42 is at version 3, not 2: it changed since you read it. Read it again with get_ticket, then propose "
        "a label for what it says now.", is_error=True)


@pytest.mark.parametrize("asked, answered", [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"),
                                             ("2024-11-05", "2024-11-05"), ("2026-07-28", "2025-11-25"),
                                             ("1.0", "2025-11-25")])
def test_it_answers_with_the_version_asked_for_if_it_speaks_it_else_its_newest(asked, answered):
    assert answers(initialize(asked))[0]["result"]["protocolVersion"] == answered


@pytest.mark.parametrize("version, structured", [("2025-06-18", True), ("2025-03-26", False)])
def test_structured_content_only_from_the_version_that_has_it(version, structured):
    result = answers(initialize(version), call("get_ticket", ticket_id="DEMO-42"))[1]["result"]
    assert ("structuredContent" in result, result["content"][0]["text"]) == (structured, json.dumps(DEMO_42))


@pytest.mark.parametrize("arguments, text", [
    ({"ticket_id": "DEMO-42", "label": "billing", "expected_version": "3"},
     "expected_version must be a whole number, the version get_ticket showed, not '3'."),
    ({"ticket_id": "DEMO-42", "label": "billing", "expected_version": 3.0},
     "expected_version must be a whole number, the version get_ticket showed, not 3.0."),
    ({"ticket_id": "DEMO-42", "label": "billing", "expected_version": True},
     "expected_version must be a whole number, the version get_ticket showed, not True."),
    ({"ticket_id": "DEMO-42", "label": "billing", "expected_version": 4},
     "DEMO-42 is at version 3, not 4: it changed since you read it. Read it again with get_ticket, then propose "
     "a label for what it says now."),
    ({"ticket_id": "DEMO-42", "label": "refund", "expected_version": 3},
     "There is no label 'refund'. The labels are billing, bug, account, feature-request."),
    ({"ticket_id": "DEMO-7", "label": "billing", "expected_version": 3},
     "There is no ticket 'DEMO-7'. The tickets are DEMO-42, DEMO-43, DEMO-44."),
    ({"label": "billing", "expected_version": 3},
     "There is no ticket None. The tickets are DEMO-42, DEMO-43, DEMO-44."),
])
def test_a_proposal_it_refuses_says_how_to_fix_it(arguments, text):
    assert answers(call("propose_label", **arguments))[0]["result"] == said(text, is_error=True)


def test_a_proposal_applies_nothing():
    first, proposed, after = answers(call("get_ticket", 1, ticket_id="DEMO-43"),
                                     call("propose_label", 2, ticket_id="DEMO-43", label="bug", expected_version=1),
                                     call("get_ticket", 3, ticket_id="DEMO-43"))
    assert proposed["result"]["isError"] is False
    assert after["result"] == first["result"]


def test_wrong_input_gets_json_rpc_errors_and_the_server_goes_on():
    printed = answers("{not json", "", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}),
                      call("delete_ticket", 2, ticket_id="DEMO-42"),
                      json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": "get_ticket"}),
                      json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
                      json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
    assert printed == [
        {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32700, "message": "Parse error: Expecting property name enclosed in double quotes: line 1 "
                                       "column 2 (char 1)"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found: resources/list"}},
        {"jsonrpc": "2.0", "id": 2, "error": {
            "code": -32602, "message": "Unknown tool 'delete_ticket'. The tools are get_ticket, propose_label."}},
        {"jsonrpc": "2.0", "id": 3, "error": {
            "code": -32603, "message": "Internal error: 'str' object has no attribute 'get'"}},
        {"jsonrpc": "2.0", "id": 4, "result": {}}]


@pytest.mark.skipif(not HAS_SDK, reason="the official MCP SDK is not installed: pip install -r "
                                        "tests/requirements.txt")
def test_the_official_sdks_client_uses_it():
    from mcp import Client, StdioServerParameters

    async def session():
        server = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={})
        async with Client(server) as client:  # it asks for server/discover first, and falls back to initialize
            listed = await client.list_tools()
            ticket = await client.call_tool("get_ticket", {"ticket_id": "DEMO-42"})
            stale = await client.call_tool("propose_label", {"ticket_id": "DEMO-42", "label": "billing",
                                                             "expected_version": 2})
            return client.protocol_version, [tool.name for tool in listed.tools], ticket, stale

    version, names, ticket, stale = asyncio.run(asyncio.wait_for(session(), 20))
    assert (version, names) == ("2025-11-25", ["get_ticket", "propose_label"])
    assert (ticket.is_error, ticket.structured_content, ticket.content[0].text) == (False, DEMO_42,
                                                                                   json.dumps(DEMO_42))
    assert (stale.is_error, stale.content[0].text.startswith("DEMO-42 is at version 3, not 2")) == (True, True)
