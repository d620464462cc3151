"""Phase 11 (learner's version): a small MCP client, one tool server over stdio.

Run:  python mcp_client.py python ticket_server.py   (starts the server, shakes hands, lists its tools)
A Server is one process that speaks JSON-RPC, one message a line, on its stdin and stdout. start() does the
handshake, tools() lists every page of tools, call() calls one and returns (text, is_error), close() ends it.
A deadline is a time.monotonic() value, or None for "no deadline but TIMEOUT". Anything that goes wrong with
the server itself (it will not start, exits, writes what is not JSON-RPC, is silent) raises McpError.
"""
import itertools
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
import weakref

PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]  # the first is the one offered
TIMEOUT = 30  # seconds one request may wait for its answer, whatever the deadline
GRACE = 2  # seconds a server gets to exit after its stdin closes, before its group is killed
MAX_WAITING = 100  # lines read ahead of the client: past this a flooding server waits
MAX_LINE = 1_000_000  # bytes of one line: the rest of an endless line is dropped
WINDOWS = os.name == "nt"
NEW_GROUP = ({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if WINDOWS else {"start_new_session": True})
CLIENT_INFO = {"name": "learner-harness", "version": "0.12"}
ENDED = object()  # what read_lines() queues when the server's stdout closes


class McpError(Exception):
    """The server failed: it did not start, exited, broke the protocol, answered with an error, or was silent."""


def part_text(part):
    """One content part as text: text as it is; an image, a sound or a link named."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        return str(part.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {part.get('mimeType', 'unknown type')}, not shown]"
    if kind == "resource_link":
        return f"[link: {part.get('name') or ''} {part.get('uri', '')}]".replace(": ]", "]")
    if kind == "resource":
        resource = part.get("resource") or {}
        return resource["text"] if "text" in resource else f"[resource: {resource.get('uri', '')}]"
    return f"[a {kind or 'malformed'} part, not shown]"


def read_lines(stream, lines):
    """Put each line the server writes on the queue (waiting while it is full), cut to MAX_LINE bytes; ENDED
    at the end."""
    try:
        while True:
            line = stream.readline(MAX_LINE + 1)
            if not line:
                break
            if len(line) > MAX_LINE and not line.endswith(b"\n"):  # an endless line: keep its start, drop the rest
                rest = line
                while rest and not rest.endswith(b"\n"):
                    rest = stream.readline(MAX_LINE)
                line = line[:MAX_LINE]
            lines.put(line)
    except (OSError, ValueError):  # the pipe was closed under us
        pass
    lines.put(ENDED)


def stop(process, stdin):
    """Close the server's stdin, give it GRACE seconds, then kill its whole process group."""
    try:
        stdin.close()
    except OSError:
        pass
    try:
        process.wait(GRACE)
    except subprocess.TimeoutExpired:
        pass
    if WINDOWS:
        subprocess.run(["taskkill", "/T", "/F", "/PID", str(process.pid)], capture_output=True)
    else:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # what it started, too
        except OSError:
            pass  # already gone
    process.kill()
    process.wait()


class Server:
    """One MCP server: a process started from command, with the environment env and its stderr to stderr."""

    def __init__(self, name, command, env=None, stderr=None):
        self.name, self.env, self.stderr = name, env, stderr
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        self.process = None
        self.version = None
        self.lines = queue.Queue(MAX_WAITING)
        self.ids = itertools.count(1)
        self.last_id = None
        self.ended = False
        self.lock = threading.Lock()
        self.close = lambda: None  # until start()

    def __repr__(self):
        return f"Server({self.name!r}, {shlex.join(self.command)!r})"

    def start(self, deadline=None):
        """Start the process and shake hands; return self, or raise McpError (the server is then closed)."""
        try:
            self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self.stderr, env=self.env, **NEW_GROUP)
        except (OSError, ValueError) as error:
            raise McpError(f"the MCP server {self.name!r} could not start ({shlex.join(self.command)}): "
                           f"{error}") from None
        # close() ends it once, whoever calls it first: this code, the harness, or Python at exit
        self.close = weakref.finalize(self, stop, self.process, self.process.stdin)
        threading.Thread(target=read_lines, args=(self.process.stdout, self.lines), daemon=True).start()
        try:
            result = self.request("initialize", {"protocolVersion": PROTOCOL_VERSIONS[0], "capabilities": {},
                                                 "clientInfo": CLIENT_INFO}, deadline)
            version = result.get("protocolVersion")
            if version not in PROTOCOL_VERSIONS:
                raise McpError(f"the MCP server {self.name!r} speaks protocol version {version!r}; this client "
                               f"speaks {', '.join(PROTOCOL_VERSIONS)}")
            self.version = version
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except McpError:
            self.close()
            raise
        return self

    def tools(self, deadline=None):
        """Every tool the server offers, page after page: [{"name", "description", "inputSchema"}]."""
        found, cursor, seen = [], None, set()
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else {}, deadline)
            listed = result.get("tools")
            if not isinstance(listed, list):
                raise McpError(f"the MCP server {self.name!r} listed no tools array: {shorter(result)}")
            for tool in listed:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    schema = tool.get("inputSchema")
                    found.append({"name": tool["name"], "description": str(tool.get("description") or ""),
                                  "inputSchema": schema if isinstance(schema, dict) else {"type": "object"}})
            cursor = result.get("nextCursor")
            if not cursor:
                return found
            if cursor in seen:
                raise McpError(f"the MCP server {self.name!r} sent the page cursor {cursor!r} twice")
            seen.add(cursor)

    def call(self, tool, arguments, deadline=None):
        """Call one tool: (text, is_error). is_error is the tool failing; McpError, the server failing."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, deadline)
        content = result.get("content")
        if isinstance(content, list) and content:
            text = "\n".join(part_text(part) for part in content)
        elif "structuredContent" in result:
            text = json.dumps(result["structuredContent"])
        else:
            text = ""
        return text, bool(result.get("isError"))

    def request(self, method, params, deadline=None):
        """Send one request and wait for the answer with its id, until the deadline or TIMEOUT; its result."""
        with self.lock:  # threads take turns: one request, one answer
            self.last_id = next(self.ids)
            self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
            while True:
                message = self.receive(method, deadline)
                if "method" in message and "id" in message:  # it asks us something: ping, sampling, roots
                    reply = {"result": {}} if message["method"] == "ping" else {"error": {
                        "code": -32601, "message": f"Method not found: {message['method']}"}}  # we offer no others
                    self.send({"jsonrpc": "2.0", "id": message["id"], **reply})
                elif message.get("id") == self.last_id:
                    break  # anything else is skipped: a notification, or a late answer to a request given up on
        if "error" in message:
            error = message["error"]
            words = error.get("message", error) if isinstance(error, dict) else error
            raise McpError(f"the MCP server {self.name!r} answered {method} with an error: {shorter(words)}")
        result = message.get("result")
        if not isinstance(result, dict):
            raise McpError(f"the MCP server {self.name!r} answered {method} with no result object: "
                           f"{shorter(message)}")
        return result

    def receive(self, method, deadline=None):
        """The next message from the server, a JSON object, waiting no later than the deadline or TIMEOUT."""
        until = time.monotonic() + TIMEOUT
        if deadline is not None:
            until = min(until, deadline)
        if self.ended:
            raise McpError(self.exited(method))
        try:
            line = self.lines.get(timeout=max(until - time.monotonic(), 0))
        except queue.Empty:
            raise McpError(f"the MCP server {self.name!r} did not answer {method} in time") from None
        if line is ENDED:
            self.ended = True
            raise McpError(self.exited(method))
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise McpError(f"the MCP server {self.name!r} wrote something that is not JSON-RPC: "
                           f"{shorter(line.decode('utf-8', errors='replace').rstrip())}")
        return message

    def send(self, message):
        """Write one message, one line."""
        if self.process is None:
            raise McpError(f"the MCP server {self.name!r} was not started")
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except (OSError, ValueError):  # a broken pipe, or a closed one
            raise McpError(self.exited(message.get("method", "a reply"))) from None

    def exited(self, method):
        code = self.process.poll() if self.process else None
        how = f"exited (exit code {code})" if code is not None else "closed its output"
        return f"the MCP server {self.name!r} {how} before it answered {method}"


def shorter(value, limit=200):
    """repr of value, cut to limit characters."""
    text = value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return repr(text[:limit]) + (f" (+{len(text) - limit} characters)" if len(text) > limit else "")


def main(argv):
    if not argv:
        print("usage: python mcp_client.py COMMAND [ARGS...]   (for example: python ticket_server.py)",
              file=sys.stderr)
        return 2
    command = [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "SYSTEMROOT") if name in os.environ}
    try:
        server = Server(os.path.splitext(os.path.basename(argv[-1]))[0], command, env).start(time.monotonic() + 60)
        tools = server.tools(time.monotonic() + 60)
    except McpError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"MCP {server.version}:")
    for tool in tools:
        print(f"{tool['name']}: {tool['description']}".encode("ascii", "backslashreplace").decode())
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
