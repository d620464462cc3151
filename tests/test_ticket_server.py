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
LESSON = ROOT / "phases" / "11-mcp"  # the lines the lesson has a learner paste into `python ticket_server.py`
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "tickets", "version": "1.0"}}


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


def call(name, request_id=1, meta=None, **arguments):
    """A tools/call line; with meta, as MCP 2026-07-28 sends it."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments, **({"_meta": meta} if meta else {})}})


def modern(method, request_id=1, meta=MODERN):
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": meta}})


def said(text, is_error=False):
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def test_the_lessons_stateless_lines_get_the_lessons_answers_in_mcp_2026_07_28():
    """Each request names MCP 2026-07-28 in params._meta; each result says it is complete and who sent it; the
    tools list and discover's answer say how long they may be kept (an hour, by anyone)."""
    printed = answers(*(LESSON / "stateless.txt").read_text().splitlines())
    assert [answer["id"] for answer in printed] == [1, 2, 3, 4]
    assert all(answer["result"]["resultType"] == "complete" and answer["result"]["_meta"] == SERVER_INFO
               for answer in printed)
    discovered, listed, ticket, stale = (answer["result"] for answer in printed)
    assert (discovered["supportedVersions"], discovered["capabilities"]) == (
        ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"], {"tools": {}})
    assert (listed["ttlMs"], listed["cacheScope"], discovered["ttlMs"]) == (3_600_000, "public", 3_600_000)
    assert [(tool["name"], tool["inputSchema"]["required"]) for tool in listed["tools"]] == [
        ("get_ticket", ["ticket_id"]), ("propose_label", ["ticket_id", "label", "expected_version"])]
    assert (ticket["content"], ticket["structuredContent"]) == (said(json.dumps(DEMO_42))["content"], DEMO_42)
    assert (stale["isError"], stale["content"][0]["text"]) == (True, (
        "DEMO-42 is at version 3, not 2: it changed since you read it. Read it again with get_ticket, then propose "
        "a label for what it says now."))


def test_the_lessons_handshake_lines_get_the_lessons_answers_in_mcp_2025_11_25():
    printed = run(*(LESSON / "handshake.txt").read_text().splitlines())
    assert printed[0] == ('{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "capabilities": '
                          '{"tools": {}}, "serverInfo": {"name": "tickets", "version": "1.0"}}}')
    assert len(printed) == 2  # none for the notification
    assert json.loads(printed[1])["result"] == {**said(json.dumps(DEMO_42)), "structuredContent": DEMO_42}


def test_a_proposal_gets_its_answer_in_either_mcp():
    proposed = said("Proposed label billing for DEMO-42 at version 3. Nothing was applied: a person reviews every "
                    "proposal.")
    arguments = {"ticket_id": "DEMO-42", "label": "billing", "expected_version": 3}
    older, newer = answers(call("propose_label", 1, **arguments), call("propose_label", 2, MODERN, **arguments))
    assert older["result"] == proposed
    assert newer["result"] == {"resultType": "complete", **proposed, "_meta": SERVER_INFO}


@pytest.mark.parametrize("meta, code, message", [
    ({**MODERN, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}, -32022, "Unsupported protocol version"),
    ({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, -32602,
     "_meta has no io.modelcontextprotocol/clientCapabilities"),
])
def test_a_modern_request_of_another_version_or_without_capabilities_is_refused(meta, code, message):
    error = answers(modern("tools/list", meta=meta))[0]["error"]
    assert (error["code"], error["message"]) == (code, message)
    if code == -32022:  # the versions it speaks, so that the client can pick one
        assert error["data"] == {"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                                 "requested": "2099-01-01"}


def test_each_era_has_its_own_methods():
    """server/discover is MCP 2026-07-28's, ping the older versions' (2026-07-28 removed it)."""
    printed = answers(modern("ping", 1), json.dumps({"jsonrpc": "2.0", "id": 2, "method": "server/discover"}),
                      json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
    assert [answer.get("error", {}).get("code") for answer in printed] == [-32601, -32601, None]


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
@pytest.mark.parametrize("mode, era", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_the_official_sdks_client_uses_it_in_both_eras(mode, era):
    """The SDK's client by default asks server/discover first, and speaks MCP 2026-07-28 when the server does;
    in its legacy mode it shakes hands, in 2025-11-25."""
    from mcp import Client, StdioServerParameters

    async def session():
        server = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={})
        async with Client(server, mode=mode) as client:
            listed = await client.list_tools()
            ticket = await client.call_tool("get_ticket", {"ticket_id": "DEMO-42"})
            stale = await client.call_tool("propose_label", {"ticket_id": "DEMO-42", "label": "billing",
                                                             "expected_version": 2})
            return client.protocol_version, [tool.name for tool in listed.tools], ticket, stale

    version, names, ticket, stale = asyncio.run(asyncio.wait_for(session(), 20))
    assert (version, names) == (era, ["get_ticket", "propose_label"]), f"the SDK's client spoke MCP {version}"
    assert (ticket.is_error, ticket.structured_content, ticket.content[0].text) == (False, DEMO_42,
                                                                                   json.dumps(DEMO_42))
    assert (stale.is_error, stale.content[0].text.startswith("DEMO-42 is at version 3, not 2")) == (True, True)
