"""A small MCP client: start a tool server as a subprocess and use its tools over stdio, one
JSON-RPC message a line.

Run:  python mcp_client.py python ticket_server.py   (prints the MCP version and the server's tools)
Server(name, argv, env, stderr).start() learns the MCP it speaks, tools() lists its tools, call()
runs one: (text, is_error); close() ends it. A server that fails raises McpError, which says how.
"""

import contextlib
import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
import weakref
import shell

MODERN = "2026-07-28"  # MCP without a handshake: each request carries its version, in params._meta
# older MCP, newest first
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
CLIENT = {"name": "course-harness", "version": "1"}  # who we are, for the server's logs
# {}: we do nothing for a server but call its tools
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": {}}
UNSUPPORTED = -32022  # the error of a modern server that does not speak the version asked for
PROBE = 10  # seconds server/discover may go unanswered before the server is taken for an older one
TIMEOUT = 30  # seconds to wait for an answer when the caller's deadline is later, or there is none
GRACE = 1  # seconds a server has to exit once its stdin is closed, before it is killed
# bytes in one message from a server: a screenshot fits, an endless line does not
MAX_LINE = 4_000_000
MAX_WAITING = 100  # lines read ahead; a server that floods us waits, rather than fill our memory
# pages of tools/list: a server that names a next page for ever must not keep the task from starting
MAX_PAGES = 20


class McpError(Exception):
    """A server failed (not its tool): it exited, wrote what is not JSON-RPC, or answered late or
    with an error."""
    code = None  # the JSON-RPC error code it answered with, if it did


class Server:
    """One MCP server: a process, its pipes, a thread that queues what it writes and one that writes
    what we send: no wait outlasts a deadline, not even on a server that stops reading."""

    def __init__(self, name, argv, env, stderr):
        self.name, self.version, self.last_id, self.lock = name, None, 0, threading.Lock()
        # what the server says of itself: {"name": "ticket-server", "version": "1.0"}
        self.info = {}
        self.inbox, self.outbox = queue.Queue(MAX_WAITING), queue.Queue()
        try:
            self.process = subprocess.Popen(argv, env=env, stderr=stderr, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, **shell.NEW_GROUP)
        except (OSError, ValueError) as error:  # no such program; a word with a NUL in it
            raise McpError(f"the MCP server {name!r} could not start "
                           f"({' '.join(argv)}): {error}") from None
        threading.Thread(target=read_lines, args=(self.process, self.inbox), daemon=True).start()
        threading.Thread(target=write_lines, args=(self.process, self.outbox), daemon=True).start()
        # once: on close(), or at exit
        self.close = weakref.finalize(self, stop, self.process, self.outbox)

    def start(self, deadline=None):
        """Ask server/discover (MCP 2026-07-28); shake hands with an older server. Returns the
        server, version set."""
        try:
            found = self.request("server/discover", {"_meta": META},
                                 min(deadline or float("inf"), time.monotonic() + PROBE))
        except McpError as error:
            if error.code == UNSUPPORTED:  # modern, but not our version: a handshake cannot help
                raise
            found = {}  # "Method not found", another error, or silence
        if not isinstance(found.get("supportedVersions"),
                          list) or MODERN not in found["supportedVersions"]:
            return self.shake_hands(deadline)
        self.version = MODERN  # from now on, every request carries META
        self.info = (found.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
        return self

    def shake_hands(self, deadline):
        """MCP 2025-11-25 and older: offer our newest version, accept any we speak, then say we are
        ready."""
        result = self.request("initialize",
                              {"protocolVersion": HANDSHAKE_VERSIONS[0], "capabilities": {},
                                             "clientInfo": CLIENT}, deadline)
        if result.get("protocolVersion") not in HANDSHAKE_VERSIONS:
            raise McpError(f"the MCP server {self.name!r} speaks MCP "
                           f"{result.get('protocolVersion')!r}, and this client "
                           f"{', '.join((MODERN, *HANDSHAKE_VERSIONS))}")
        self.version, self.info = result["protocolVersion"], result.get("serverInfo") or {}
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def tools(self, deadline=None):
        """Every tool, page after page (MAX_PAGES at most): [{"name", "description",
        "inputSchema"}], once (cache hints are not needed); not one that needs task mode
        (execution.taskSupport "required", MCP 2025-11-25), which this client does not speak."""
        found, params = [], {}
        for _ in range(MAX_PAGES):
            page = self.request("tools/list", params, deadline)
            try:  # {**schema} copies a JSON object, and raises TypeError for anything else
                found += [{"name": tool["name"], "description": tool.get("description", ""),
                           "inputSchema": {**tool.get("inputSchema", {"type": "object"})}}
                          for tool in page["tools"]
                          if {**(tool.get("execution") or {})}.get("taskSupport") != "required"]
            except (KeyError, TypeError):
                raise McpError(f"the MCP server {self.name!r} sent a tools/list page that is not "
                               "MCP's: a tool has no name, or its inputSchema or execution is no "
                               "JSON object") from None
            if not page.get("nextCursor"):  # the last page names no next one
                return found
            params = {"cursor": page["nextCursor"]}
        raise McpError(f"the MCP server {self.name!r} named a next page of tools "
                       f"after {MAX_PAGES} pages")

    def call(self, tool, arguments, deadline=None):
        """Run one tool: (text, is_error). is_error: the tool failed; McpError: the server did."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, deadline)
        return "\n".join(map(part_text, result.get("content") or [])), bool(result.get("isError"))

    def request(self, method, params, deadline=None):
        """Send one request (with META, to a modern server); its result, waited for until the
        deadline or TIMEOUT."""
        deadline = min(deadline or float("inf"), time.monotonic() + TIMEOUT)
        if not self.lock.acquire(timeout=max(0, deadline - time.monotonic())):
            raise McpError(f"the MCP server {self.name!r} was busy with another "
                           "call until the deadline")
        try:
            self.last_id += 1
            params = {**params, "_meta": META} if self.version == MODERN else params
            self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
            while True:
                message = self.receive(method, deadline)
                if "method" in message and "id" in message:
                    # an older server asks us: ping, sampling, roots
                    # we offer no others
                    reply = {"result": {}} if message["method"] == "ping" else {"error": {
                        "code": -32601, "message": f"Method not found: {message['method']}"}}
                    self.send({"jsonrpc": "2.0", "id": message["id"], **reply})
                elif message.get("id") == self.last_id:
                    # anything else is skipped: a notification, or a late answer to a request given
                    # up on
                    break
        finally:
            self.lock.release()
        result = message.get("result")
        if (
            "error" not in message
            and isinstance(result, dict)
            and result.get("resultType", "complete") == "complete"
        ):
            return result  # no resultType: an older server's result, which is complete
        failure = McpError(f"the MCP server {self.name!r} answered {method} with "
                           f"{'an error' if 'error' in message else 'no result it can use'}: "
                           f"{json.dumps(message.get('error', result))[:500]}")
        failure.code = (message["error"].get("code") if isinstance(message.get("error"), dict)
                        else None)
        raise failure

    def receive(self, method, deadline):
        """The next message from the server, a JSON object, waited for until the deadline at
        most."""
        try:
            line = self.inbox.get(timeout=max(0, deadline - time.monotonic()))
        except queue.Empty:
            raise McpError(f"the MCP server {self.name!r} did not "
                           f"answer {method} in time") from None
        if line is None:
            self.inbox.put(None)  # it has exited for good: every later wait must see that too
            raise McpError(f"the MCP server {self.name!r} has exited (exit code "
                           f"{self.process.returncode}), so its tools cannot be used in this run")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read
            message = None
        if not isinstance(message, dict):
            raise McpError(f"the MCP server {self.name!r} wrote something that is not JSON-RPC: "
                           f"{line[:200].decode(errors='replace').strip()!r} (its "
                           "logs belong on stderr)")
        return message

    def send(self, message):
        """Hand one message, one line, to the thread that writes it (write_lines()): it never waits
        here."""
        self.outbox.put(json.dumps(message).encode() + b"\n")


def command_argv(command, path, windows=os.name == "nt",
                 pathext=os.environ.get("PATHEXT", ".COM;.EXE;.BAT;.CMD")):
    """A server's command as words, a leading ~ read as your home folder. Windows splits at spaces
    outside "quotes" (its rule for backslashes before a quote aside) and finds a program as Windows
    does (npx is npx.cmd, by PATHEXT), but only in path's folders, never the current one.
    Example: "npx -y pkg" -> [r"C:\\node\\npx.cmd", "-y", "pkg"]; McpError if none."""
    try:
        words = [w.replace('"', "")
                 for w in re.findall(r'(?:[^\s"]|"[^"]*"?)+', command)] if windows else \
            shlex.split(command)
    except ValueError as error:  # an unclosed quote
        raise McpError(f"the MCP server command {command!r} cannot be split: {error}") from None
    if not words:
        raise McpError(f"the MCP server command {command!r} names no program")
    words = [os.path.expanduser(word) for word in words]  # ~/venv/bin/python, as a shell reads it
    if not windows or re.search(r"[\\/]", words[0]):
        # elsewhere Popen looks in the server's PATH
        return words
    endings = [ending for ending in pathext.lower().split(";") if ending]
    names = ([words[0] + ending for ending in endings
              if not words[0].lower().endswith(tuple(endings))] or words[:1])
    for found in (os.path.join(folder, name) for folder in path.split(";") if os.path.isabs(folder)
                  for name in names):
        if os.path.isfile(found):
            return [found, *words[1:]]
    raise McpError(f"the MCP server's program {words[0]!r} is in no folder of {path!r}")


def read_lines(process, inbox):
    """In a thread of its own: put each line the server writes on the inbox, then None once it has
    exited."""
    for line in iter(lambda: process.stdout.readline(MAX_LINE), b""):
        inbox.put(line)
    process.wait()  # for its exit code
    inbox.put(None)


def write_lines(process, outbox):
    """In a thread of its own: write each line of the outbox to the server; at None, close its
    stdin, the sign to exit. A server that stops reading holds up this thread only; one that is gone
    ends it (receive() says so)."""
    try:
        for line in iter(outbox.get, None):
            process.stdin.write(line)
            process.stdin.flush()
    except (OSError, ValueError):  # gone, or its stdin closed
        pass
    with contextlib.suppress(OSError, ValueError):
        process.stdin.close()


def part_text(part):
    """One content part as text: text as it is; an image, a sound, a link, a file as one line saying
    what and where.
    Example: {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"} -> "[image:
    image/png, 8 bytes]" """
    part = part if isinstance(part, dict) else {}
    if isinstance(part.get("resource"), dict):  # an embedded file: its fields are the part's
        part = {**part["resource"], "type": part.get("type")}
    if part.get("text") is not None:
        return str(part["text"])
    # base64: 4 characters hold 3 bytes; "=" pads the last ones
    data = part.get("data", part.get("blob"))
    size = len(data) // 4 * 3 - data[-2:].count("=") if isinstance(data, str) else part.get("size")
    said = [part.get("uri") or part.get("name"), part.get("mimeType"),
            isinstance(size, int) and f"{size:,} bytes"]
    return f"[{part.get('type')}: {', '.join(str(word) for word in said if word)}]"


def stop(process, outbox):
    """End a server as the spec asks: its stdin closed (by write_lines(), once all is written),
    GRACE seconds to exit, then what is left of its group killed (npx starts node, sh its program):
    shell.stop(), as for a command."""
    outbox.put(None)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(GRACE)
    shell.stop(process)


if __name__ == "__main__":
    # no keys
    clean = {name: os.environ[name] for name in ("PATH", "HOME", "SYSTEMROOT")
             if name in os.environ}
    try:
        argv = command_argv(" ".join(sys.argv[1:]) or "python ticket_server.py",
                            os.environ.get("PATH", os.defpath))
        server = Server("cli", argv, clean, sys.stderr).start()
        print(f"MCP {server.version}:",
              *(f"{tool['name']}: {tool['description']}" for tool in server.tools()), sep="\n")
    except McpError as error:
        sys.exit(f"error: {error}")
