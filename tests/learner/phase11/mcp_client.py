"""Phase 11 (learner's version): a small MCP client, one tool server over stdio.

Run:  python mcp_client.py python ticket_server.py   (starts the server, learns its MCP, lists its tools)
A Server is one process that speaks JSON-RPC, one message a line, on its stdin and stdout. start() asks
server/discover (MCP 2026-07-28) and shakes hands with an older server, tools() lists every page of tools, call()
calls one and returns (text, is_error), close() ends it. command_argv() turns a command line into its words.
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

MODERN = "2026-07-28"  # the stateless MCP: version and capabilities in every request's _meta
PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]  # with a handshake; the first offered
PROBE = 10  # seconds to wait for server/discover before taking the server for an older one
TIMEOUT = 30  # seconds one request may wait for its answer, whatever the deadline
GRACE = 2  # seconds a server gets to exit after its stdin closes, before its group is killed
MAX_WAITING = 100  # lines read ahead of the client: past this a flooding server waits
MAX_LINE = 1_000_000  # bytes of one line: the rest of an endless line is dropped
WINDOWS = os.name == "nt"
NEW_GROUP = ({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if WINDOWS else {"start_new_session": True})
CLIENT_INFO = {"name": "learner-harness", "version": "0.12"}
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {}}
ENDED = object()  # what read_lines() queues when the server's stdout closes


class McpError(Exception):
    """The server failed: it did not start, exited, broke the protocol, answered with an error, or was silent."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code  # the JSON-RPC error code, when the server answered with an error


def decoded_size(data):
    """Bytes in base64 data, without decoding it."""
    return len(data) * 3 // 4 - len(data) + len(data.rstrip("=")) if isinstance(data, str) else None


def part_text(part):
    """One content part as text: text as it is; an image, a sound, a link or a file described in one line."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        return str(part.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind} {part.get('mimeType', 'of unknown type')}, {decoded_size(part.get('data'))} bytes]"
    if kind == "resource_link":
        return f"[resource link: {part.get('uri', part.get('name', ''))} ({part.get('mimeType', 'unknown type')})]"
    if kind == "resource":
        resource = part.get("resource") or {}
        if "text" in resource:
            return resource["text"]
        return f"[resource {resource.get('uri', '')} ({resource.get('mimeType', 'unknown type')}), " \
               f"{decoded_size(resource.get('blob'))} bytes]"
    return f"[a {kind or 'malformed'} part, not shown]"


def command_argv(command, path, windows=WINDOWS, pathext=os.environ.get("PATHEXT", ".COM;.EXE;.BAT;.CMD")):
    """The words of a command line, its program found in path's folders (never the current one); on Windows with
    Windows' quoting and PATHEXT (npx is npx.cmd)."""
    if not windows:
        try:
            return shlex.split(command)
        except ValueError as error:
            raise McpError(f"cannot split the MCP server command {command!r}: {error}") from None
    words, word, quoted = [], None, False
    for char in command:
        if char == '"':
            quoted, word = not quoted, word or ""
        elif char in " \t" and not quoted:
            if word is not None:
                words.append(word)
            word = None
        else:
            word = (word or "") + char
    words += [word] if word is not None else []
    if not words or "\\" in words[0] or "/" in words[0]:
        return words
    endings = [e.lower() for e in pathext.split(";") if e]
    names = [words[0]] if os.path.splitext(words[0])[1].lower() in endings else [words[0] + e for e in endings]
    for folder in path.split(";"):
        if not os.path.isabs(folder):
            continue  # ".": the current folder, whatever the path says
        for name in names:
            if os.path.isfile(os.path.join(folder, name)):
                return [os.path.join(folder, name), *words[1:]]
    raise McpError(f"no program {words[0]!r} in the folders of {path!r}")


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
            if not self.discover(deadline):
                self.shake_hands(deadline)
        except McpError:
            self.close()
            raise
        return self

    def discover(self, deadline):
        """True when the server speaks MODERN; False for an older one (any error but -32022, or silence)."""
        probe = time.monotonic() + PROBE
        try:
            result = self.request("server/discover", {"_meta": META}, probe if deadline is None else min(deadline,
                                                                                                            probe))
        except McpError as error:
            if error.code == -32022:  # a modern server of versions this client does not speak
                raise
            return False
        if MODERN in (result.get("supportedVersions") or []):
            self.version = MODERN
            return True
        return False

    def shake_hands(self, deadline):
        result = self.request("initialize", {"protocolVersion": PROTOCOL_VERSIONS[0], "capabilities": {},
                                             "clientInfo": CLIENT_INFO}, deadline)
        version = result.get("protocolVersion")
        if version not in PROTOCOL_VERSIONS:
            raise McpError(f"the MCP server {self.name!r} speaks protocol version {version!r}; this client "
                           f"speaks {MODERN}, {', '.join(PROTOCOL_VERSIONS)}")
        self.version = version
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

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
            if self.version == MODERN:
                params = {**params, "_meta": META}
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
            raise McpError(f"the MCP server {self.name!r} answered {method} with an error: {shorter(words)}",
                           error.get("code") if isinstance(error, dict) else None)
        result = message.get("result")
        if not isinstance(result, dict) or result.get("resultType", "complete") != "complete":
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
    command = [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]  # the shell split it
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
