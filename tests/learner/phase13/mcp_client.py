"""Phase 11 (learner's version): a small MCP client: one tool server over stdio, a JSON-RPC message a line.

Server(name, argv, env, stderr) starts the program; .start(deadline) finds the MCP it speaks (2026-07-28, asked
with server/discover, else the older handshake), .tools(deadline) lists its tools, .call(tool, arguments,
deadline) calls one and returns (text, is_error), .close() ends it. Anything that goes wrong is an McpError.

Run:  python mcp_client.py python ticket_server.py     prints the MCP it speaks and its tools
"""
import base64
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import weakref

import shell

MODERN = "2026-07-28"  # MCP without a handshake: each request names its version in params._meta
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # offered first, then accepted
CLIENT = {}  # what this client can do besides calling tools: nothing (no sampling, no elicitation)
CLIENT_INFO = {"name": "harness", "version": "0.12"}  # who we are, in the handshake
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": CLIENT}  # in params._meta of every modern request
SERVER_INFO = "io.modelcontextprotocol/serverInfo"  # where in a modern result's _meta a server names itself
UNSUPPORTED = -32022  # a modern server's error for a version it does not speak
METHOD_NOT_FOUND = -32601  # JSON-RPC's answer to a request nobody handles
TIMEOUT = 30  # seconds one request waits when the caller gives no deadline
PROBE = 10  # seconds server/discover may take; silence then means an older server: shake hands
GRACE = 1  # seconds a server has to exit once its stdin is closed
MAX_WAITING = 100  # lines read and not yet taken; then the reader waits, and so does the server
MAX_LINE = 4_000_000  # bytes of one message; a longer line is no message
MAX_STDERR = 100_000  # bytes of a server's stderr kept for the trace (which cuts it further)
MAX_PAGES = 100  # pages of tools/list followed; a server that never ends its list is refused


class McpError(Exception):
    """A server that did not do what MCP says: it could not start, exited, was silent or answered an error."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code  # the JSON-RPC error code, when the server sent one


def stop(process):
    """Close the server's stdin (its sign to leave), wait GRACE seconds, then end its whole process group."""
    try:
        process.stdin.close()
    except OSError:
        pass
    try:
        process.wait(GRACE)
    except subprocess.TimeoutExpired:
        pass
    shell.stop(process)
    process.wait()


def part_text(part):
    """One part of a tool result as text: text as it is, any other part one line that says what it was."""
    if not isinstance(part, dict):
        return json.dumps(part)[:200]
    if part.get("type") == "text":
        return str(part.get("text", ""))
    if part.get("type") in ("image", "audio"):
        try:
            size = len(base64.b64decode(str(part.get("data", "")), validate=True))
        except ValueError:
            size = len(str(part.get("data", "")))
        return f"[{part['type']}: {part.get('mimeType', '?')}, {size:,} bytes]"
    if part.get("type") in ("resource", "resource_link"):
        inner = part.get("resource") if isinstance(part.get("resource"), dict) else part
        return inner.get("text") or f"[{part['type']}: {inner.get('uri', '?')}]"
    return json.dumps(part)[:200]


class Server:
    """One MCP server, started at once in a session of its own; its stdout lines are queued by a thread."""

    def __init__(self, name, argv, env=None, stderr=None, cwd=None):
        self.name, self.argv, self.version, self.info, self.stderr = name, argv, None, {}, stderr
        self.lines = queue.Queue(MAX_WAITING)
        self.lock = threading.Lock()  # one request at a time: threads take turns
        self.last_id = 0
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=stderr or subprocess.DEVNULL, env=env, cwd=cwd, **shell.NEW_GROUP)
        except OSError as error:
            raise McpError(f"the MCP server {name} could not start: {error}") from None
        self.close = weakref.finalize(self, stop, self.process)  # once, by hand or when the harness exits
        threading.Thread(target=self.read_lines, daemon=True).start()

    def read_lines(self):
        """Queue each line the server writes; None at its end (a line too long ends it too)."""
        for line in iter(lambda: self.process.stdout.readline(MAX_LINE + 1), b""):
            if len(line) > MAX_LINE:
                self.lines.put(McpError(f"{self.name} wrote a line of more than MAX_LINE = {MAX_LINE} bytes"))
                return
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message):
        """Write one message, one line."""
        try:
            self.process.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except (OSError, ValueError):
            raise McpError(f"the MCP server {self.name} has exited ({self.exit_code()})") from None

    def exit_code(self):
        try:
            return f"exit code {self.process.wait(GRACE)}"
        except subprocess.TimeoutExpired:
            return "it closed its output"

    def receive(self, deadline, method):
        """The next message from the server, never waiting past the deadline."""
        try:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            raise McpError(f"the MCP server {self.name} did not answer {method} in time") from None
        if line is None or isinstance(line, McpError):
            self.lines.put(line)  # the end stays the end, for the next request too
            raise line or McpError(f"the MCP server {self.name} has exited ({self.exit_code()})")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise McpError(f"the MCP server {self.name} is not JSON-RPC: {line[:200].decode(errors='replace')!r}")
        return message

    def request(self, method, params=None, deadline=None):
        """Send one request and return its result; the server's own notifications are skipped, its ping answered,
        its other requests told "Method not found". An error, or a result that is not complete, is an McpError."""
        deadline = deadline or time.monotonic() + TIMEOUT
        params = dict(params or {})
        if method == "server/discover" or self.version == MODERN:
            params["_meta"] = META
        with self.lock:
            self.last_id += 1
            self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
            while True:
                message = self.receive(deadline, method)
                if "method" in message:  # the server's own: a notification, or a request for us
                    if "id" in message:
                        self.send({"jsonrpc": "2.0", "id": message["id"], "result": {}} if message["method"] == "ping"
                                  else {"jsonrpc": "2.0", "id": message["id"], "error": {
                                      "code": METHOD_NOT_FOUND, "message": f"Method not found: {message['method']}"}})
                    continue
                if message.get("id") == self.last_id:
                    break  # an answer to an earlier request, given up on, is skipped
        error = message.get("error")
        if error is not None:
            error = error if isinstance(error, dict) else {"message": error}
            raise McpError(f"the MCP server {self.name} answered {method} with error {error.get('code')}: "
                           f"{error.get('message')}", error.get("code"))
        result = message.get("result")
        if not isinstance(result, dict):
            raise McpError(f"the MCP server {self.name} answered {method} with no result object")
        if result.get("resultType", "complete") != "complete":
            raise McpError(f"the MCP server {self.name} asks for input ({result.get('resultType')}), which this "
                           "client does not give")
        return result

    def start(self, deadline=None):
        """Find the MCP the server speaks: MODERN when server/discover lists it, else the handshake."""
        deadline = deadline or time.monotonic() + TIMEOUT
        try:
            found = self.request("server/discover", {}, min(deadline, time.monotonic() + PROBE))
        except McpError as error:
            if error.code == UNSUPPORTED:  # modern, but not our version: a handshake cannot help
                raise
            found = {}  # "Method not found", another error, or silence
        if not isinstance(found.get("supportedVersions"), list) or MODERN not in found["supportedVersions"]:
            return self.shake_hands(deadline)
        self.version = MODERN
        meta = found.get("_meta") if isinstance(found.get("_meta"), dict) else {}
        self.info = meta.get(SERVER_INFO) if isinstance(meta.get(SERVER_INFO), dict) else {}
        return self

    def shake_hands(self, deadline):
        """The older servers' start: initialize offers our newest handshake version; any of them is accepted."""
        result = self.request("initialize", {"protocolVersion": HANDSHAKE_VERSIONS[0], "capabilities": CLIENT,
                                             "clientInfo": CLIENT_INFO}, deadline)
        if result.get("protocolVersion") not in HANDSHAKE_VERSIONS:
            raise McpError(f"the MCP server {self.name} speaks MCP {result.get('protocolVersion')}, which this "
                           f"client does not (it speaks {MODERN}, {', '.join(HANDSHAKE_VERSIONS)})")
        self.version = result["protocolVersion"]
        self.info = result.get("serverInfo") if isinstance(result.get("serverInfo"), dict) else {}
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def tools(self, deadline=None):
        """[{"name", "description", "inputSchema"}] of every page of tools/list."""
        found, cursor = [], None
        for _ in range(MAX_PAGES):
            result = self.request("tools/list", {"cursor": cursor} if cursor else {}, deadline)
            tools = result.get("tools")
            for tool in tools if isinstance(tools, list) else []:
                name = tool.get("name") if isinstance(tool, dict) else None
                if not isinstance(name, str) or not isinstance(tool.get("inputSchema"), dict):
                    raise McpError(f"the MCP server {self.name} lists a tool {json.dumps(tool)[:100]} whose name is "
                                   "no string or whose inputSchema is no JSON object")
                found.append({"name": name, "description": str(tool.get("description") or ""),
                              "inputSchema": tool["inputSchema"]})
            cursor = result.get("nextCursor")
            if not cursor:
                return found
        raise McpError(f"the MCP server {self.name} lists more than MAX_PAGES = {MAX_PAGES} pages of tools")

    def call(self, tool, arguments, deadline=None):
        """(text, is_error): the tool's result, each part one piece of text."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, deadline)
        parts = result.get("content")
        if isinstance(parts, list) and parts:
            text = "\n".join(part_text(part) for part in parts)
        else:
            text = json.dumps(result.get("structuredContent", ""))
        return text, bool(result.get("isError"))


def stop_all(servers, record):
    """End every server, then record what each wrote on stderr (its first MAX_STDERR bytes), masked by record."""
    for server in servers:
        server.close()
    for server in servers:
        server.stderr.seek(0)
        record("mcp", server=server.name, stderr=server.stderr.read(MAX_STDERR).decode("utf-8", errors="replace"))
        server.stderr.close()


def main(argv):
    if not argv:
        print("usage: python mcp_client.py COMMAND [ARG...]   (for example: python ticket_server.py)")
        return 2
    try:
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])  # our python first
        server = Server(argv[0], [shutil.which(argv[0], path=path) or argv[0], *argv[1:]]).start()
        print(f"MCP {server.version}:")
        for tool in server.tools():
            print(f"{tool['name']}: {tool['description']}")
    except McpError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
