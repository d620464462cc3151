"""A small MCP server with two tools over made-up support tickets: get_ticket reads one,
propose_label proposes a label for it. Nothing is ever applied: a person reviews every proposal. It
speaks MCP over stdio, one JSON-RPC message a line on stdin, one answer a line on stdout: MCP
2026-07-28 to a request that names it in params._meta, and the versions before, with their
handshake, to a client that sends initialize. Standard library only.

Run:  python ticket_server.py      then type or paste JSON lines (the lesson has them)
      python mcp_client.py "python ticket_server.py"     lists its tools through the course's client
"""

import json
import sys

MODERN = "2026-07-28"  # MCP without a handshake: each request names its version in params._meta
# the versions it speaks with a handshake
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# where in _meta a modern request names its version
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
# a list may be kept an hour, by anyone: tools never change
CACHE_HINTS = {"ttlMs": 3_600_000, "cacheScope": "public"}
STRUCTURED_SINCE = "2025-06-18"  # the first version whose tool results may carry structuredContent
SERVER_INFO = {"name": "tickets", "version": "1.0"}
LABELS = ("billing", "bug", "account", "feature-request")
TICKETS = {
    "DEMO-42": {"id": "DEMO-42", "title": "Charged twice for one order",
                "body": "I placed one order (#58113) on Monday and my card statement shows two "
                        "charges of $39.00 from you on the same day. Only one parcel came. Please "
                        "refund the second charge.",
                "labels": [], "version": 3},
    "DEMO-43": {"id": "DEMO-43", "title": "Export button does nothing",
                "body": "Since this morning the Export to CSV button on the Reports page does "
                        "nothing when I click it: no file, no error message. Same in "
                        "Firefox and Chrome.",
                "labels": [], "version": 1},
    "DEMO-44": {"id": "DEMO-44", "title": "Cannot sign in after changing my email",
                "body": "I changed my email address yesterday and now sign-in says my password is "
                        "wrong. The reset link goes to my old address, which I can no longer open.",
                "labels": [], "version": 2},
}
TICKET_ID = {"type": "string", "description": "the ticket's id, for example DEMO-42"}
TOOLS = [
    {"name": "get_ticket",
     "description": "Read one support ticket: its title, body, labels and version.",
     "inputSchema": {"type": "object", "properties": {"ticket_id": TICKET_ID},
                     "required": ["ticket_id"], "additionalProperties": False}},
    {"name": "propose_label",
     "description": "Propose one label for a ticket. Nothing is applied: a person reviews every "
                    "proposal. expected_version is the version get_ticket showed; if the ticket "
                    "changed since, read it again.",
     "inputSchema": {"type": "object", "properties": {
         "ticket_id": TICKET_ID,
         "label": {"type": "string", "enum": list(LABELS)},
         "expected_version": {"type": "integer",
                              "description": "the ticket's version when you read it"}},
         "required": ["ticket_id", "label", "expected_version"], "additionalProperties": False}},
]


def said(text, is_error=False):
    """A tool result holding one text part; is_error marks a failure the caller can fix and try
    again."""
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def find(ticket_id):
    """The ticket with this id, or None (also for an id that is not a string, which no ticket
    has)."""
    return TICKETS.get(ticket_id) if isinstance(ticket_id, str) else None


def unknown_ticket(ticket_id):
    return said(f"There is no ticket {ticket_id!r}. The tickets are {', '.join(TICKETS)}.",
                is_error=True)


def get_ticket(arguments):
    ticket = find(arguments.get("ticket_id"))
    if ticket is None:
        return unknown_ticket(arguments.get("ticket_id"))
    # the same ticket twice: as JSON text that any client shows, and as data a newer client can use
    # as it is
    return {**said(json.dumps(ticket)), "structuredContent": ticket}


def propose_label(arguments):
    ticket_id, label, expected = (arguments.get(name)
                                  for name in ("ticket_id", "label", "expected_version"))
    ticket = find(ticket_id)
    if ticket is None:
        return unknown_ticket(ticket_id)
    if label not in LABELS:
        return said(f"There is no label {label!r}. The labels are {', '.join(LABELS)}.",
                    is_error=True)
    if type(expected) is not int:  # not isinstance: True is an int to Python, and no version
        return said("expected_version must be a whole number, the version get_ticket "
                    f"showed, not {expected!r}.",
                    is_error=True)
    if expected != ticket["version"]:
        return said(f"{ticket_id} is at version {ticket['version']}, not {expected}: it changed "
                    "since you read it. Read it again with get_ticket, then propose a label "
                    "for what it says now.", is_error=True)
    return said(f"Proposed label {label} for {ticket_id} at version {expected}. "
                f"Nothing was applied: a person reviews every proposal.")


HANDLERS = {"get_ticket": get_ticket, "propose_label": propose_label}


def handle(request, session):
    """The answer to one request, as a result or an error. A modern request names its MCP version in
    params._meta; an older client's requests are in the version agreed at initialize, which session
    keeps."""
    method, params = request.get("method"), request.get("params") or {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    if method == "initialize":
        # answer with the version the client asked for if it is one we speak, else with our newest
        asked = params.get("protocolVersion")
        session["version"] = asked if asked in VERSIONS else VERSIONS[0]
        return {"result": {"protocolVersion": session["version"], "capabilities": {"tools": {}},
                           "serverInfo": SERVER_INFO}}
    if VERSION_KEY not in meta:
        return answer(session["version"], method, params)
    if meta[VERSION_KEY] != MODERN:  # a version it does not speak: say which it does
        return {"error": {"code": -32022, "message": "Unsupported protocol version", "data": {
            "supported": [MODERN, *VERSIONS], "requested": meta[VERSION_KEY]}}}
    if not isinstance(meta.get("io.modelcontextprotocol/clientCapabilities"), dict):
        return ({"error": {"code": -32602,
                           "message": "_meta has no io.modelcontextprotocol/clientCapabilities"}})
    reply = answer(MODERN, method, params)
    if "result" in reply:  # a modern result says it is complete, and who sent it
        reply["result"] = {"resultType": "complete", **reply["result"],
                           "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    return reply


def answer(version, method, params):
    """The answer to one request in this version of MCP: server/discover is MODERN's, ping the older
    versions'."""
    if method == "server/discover" and version == MODERN:
        return ({"result": {"supportedVersions": [MODERN, *VERSIONS], "capabilities": {"tools": {}},
                            **CACHE_HINTS}})
    if method == "ping" and version != MODERN:
        return {"result": {}}
    if method == "tools/list":  # one page: no nextCursor; in MODERN, with how long it may be kept
        return {"result": {"tools": TOOLS, **(CACHE_HINTS if version == MODERN else {})}}
    if method != "tools/call":
        return {"error": {"code": -32601, "message": f"Method not found: {method}"}}
    if params.get("name") not in HANDLERS:
        return {"error": {"code": -32602, "message": f"Unknown tool {params.get('name')!r}. The "
                                                     f"tools are {', '.join(HANDLERS)}."}}
    arguments = params.get("arguments") or {}
    if not isinstance(arguments, dict):
        return {"error": {"code": -32602, "message": "arguments must be a JSON object"}}
    result = HANDLERS[params["name"]](arguments)
    if version < STRUCTURED_SINCE:
        # the versions are dates, and dates written so sort in time order
        result.pop("structuredContent", None)
    return {"result": result}


def respond(line, session):
    """The response to one line of input, or None when there is nothing to answer (a
    notification)."""
    try:
        request = json.loads(line)
    except ValueError as error:
        return {"jsonrpc": "2.0", "id": None,
                "error": {"code": -32700, "message": f"Parse error: {error}"}}
    if not isinstance(request, dict) or "id" not in request:
        return None  # a notification (notifications/initialized, cancelled): nothing to say
    try:
        return {"jsonrpc": "2.0", "id": request["id"], **handle(request, session)}
    except Exception as error:
        # a request of a shape nobody expected gets an error answer, not a dead server
        return {"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32603, "message": f"Internal error: {error}"}}


def main():
    if sys.stdin.isatty():  # a person is typing: say what to do (on stderr, which is for people)
        print("ticket_server: type one JSON-RPC message a line; Ctrl-D ends "
              "(Ctrl-Z, Enter on Windows)",
              file=sys.stderr)
    session = {"version": VERSIONS[0]}
    for line in sys.stdin.buffer:
        # skip an empty line typed by hand
        response = respond(line, session) if line.strip() else None
        if response:
            sys.stdout.buffer.write(json.dumps(response).encode() + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
