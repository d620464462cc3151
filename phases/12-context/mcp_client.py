"""A small MCP client: start a tool server as a subprocess and use its tools over stdio, one JSON-RPC message a line.

Run:  python mcp_client.py "python ticket_server.py"      (prints the tools the server offers)
Server(...).start() shakes hands, tools() lists the tools, call() runs one and returns (text, is_error), close()
ends the server. A server that exits, writes what is not JSON-RPC, or answers with an error or too late raises
McpError, whose message says what happened. Standard library only, and shell.py's way to start and stop a process.
"""
import json
import os
import queue
import shlex
import shutil
import subprocess
import sys
import threading
import time
import weakref

import shell

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # MCP with a handshake, newest first
TIMEOUT = 30  # seconds to wait for an answer when the caller's deadline is later, or there is none
GRACE = 1  # seconds a server has to exit once its stdin is closed, before it is killed
MAX_LINE = 4_000_000  # bytes in one message from a server: a screenshot fits, an endless line does not
MAX_WAITING = 100  # lines read ahead; a server that floods us waits, rather than fill our memory


class McpError(Exception):
    """A server failed (not its tool): it exited, wrote what is not JSON-RPC, or answered with an error or too late."""


class Server:
    """One MCP server: a process, the pipes to it, and the requests in flight. A thread puts each line it writes on
    a queue, so a wait for an answer is a wait on that queue, which never lasts past the deadline."""

    def __init__(self, name, command, env, stderr):
        self.name, self.last_id, self.lock, self.inbox = name, 0, threading.Lock(), queue.Queue(MAX_WAITING)
        try:
            self.process = subprocess.Popen(command, env=env, stderr=stderr,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, **shell.NEW_GROUP)
        except (OSError, ValueError) as error:  # no such program; an unclosed quote
            raise McpError(f"the MCP server {name!r} could not start ({command}): {error}") from None
        threading.Thread(target=read_lines, args=(self.process, self.inbox), daemon=True).start()
        self.close = weakref.finalize(self, stop, self.process)  # once: on close(), or when the harness exits

    def start(self, deadline=None):
        """The handshake: offer our newest version; the server answers with it or another, which must be one we
        speak too. Then say we are ready. Returns the server: Server(...).start(deadline)."""
        try:
            result = self.request("initialize", {"protocolVersion": PROTOCOL_VERSIONS[0], "capabilities": {},
                                                 "clientInfo": {"name": "course-harness", "version": "1"}}, deadline)
            if result.get("protocolVersion") not in PROTOCOL_VERSIONS:
                raise McpError(f"the MCP server {self.name!r} speaks MCP {result.get('protocolVersion')!r}, and "
                               f"this client {', '.join(PROTOCOL_VERSIONS)}")
        except McpError:
            self.close()  # a server we cannot use is not left running
            raise
        self.version = result["protocolVersion"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def tools(self, deadline=None):
        """Every tool the server offers, page after page: [{"name": ..., "description": ..., "inputSchema": ...}]"""
        found, params = [], {}
        while True:
            page = self.request("tools/list", params, deadline)
            try:
                found += [{"name": tool["name"], "description": tool.get("description", ""),
                           "inputSchema": tool.get("inputSchema", {"type": "object"})} for tool in page["tools"]]
            except (KeyError, TypeError):
                raise McpError(f"the MCP server {self.name!r} sent a tools/list page that is not MCP's") from None
            if not all(isinstance(tool["inputSchema"], dict) for tool in found):  # a schema is a JSON object
                raise McpError(f"the MCP server {self.name!r} sent a tool whose inputSchema is no JSON object")
            if not page.get("nextCursor"):  # the last page names no next one
                return found
            params = {"cursor": page["nextCursor"]}

    def call(self, tool, arguments, deadline=None):
        """Run one tool: (text, is_error). is_error says the tool failed (a stale version, a label that does not
        exist), which the model can act on like any tool error; McpError says the server failed."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, deadline)
        return "\n".join(map(part_text, result.get("content") or [])), bool(result.get("isError"))

    def request(self, method, params, deadline=None):
        """Send one request and wait for its answer, until the deadline (a time.monotonic()) or TIMEOUT: its
        result, or McpError. Threads take turns: every answer comes back on the same pipe."""
        deadline = min(deadline or float("inf"), time.monotonic() + TIMEOUT)
        if not self.lock.acquire(timeout=max(0, deadline - time.monotonic())):
            raise McpError(f"the MCP server {self.name!r} was busy with another call until the deadline")
        try:
            self.last_id += 1
            self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
            while True:
                message = self.receive(method, deadline)
                if "method" in message and "id" in message:  # it asks us something: ping, sampling, roots
                    reply = {"result": {}} if message["method"] == "ping" else {"error": {
                        "code": -32601, "message": f"Method not found: {message['method']}"}}  # we offer no others
                    self.send({"jsonrpc": "2.0", "id": message["id"], **reply})
                elif message.get("id") == self.last_id:
                    break  # anything else is skipped: a notification, or a late answer to a request given up on
        finally:
            self.lock.release()
        if "error" in message:
            raise McpError(f"the MCP server {self.name!r} answered {method} with an error: "
                           f"{json.dumps(message['error'])[:500]}")
        if not isinstance(message.get("result"), dict):
            raise McpError(f"the MCP server {self.name!r} answered {method} without a result")
        return message["result"]

    def receive(self, method, deadline):
        """The next message from the server, a JSON object, waited for until the deadline at most."""
        try:
            line = self.inbox.get(timeout=max(0, deadline - time.monotonic()))
        except queue.Empty:
            raise McpError(f"the MCP server {self.name!r} did not answer {method} in time") from None
        if line is None:
            self.inbox.put(None)  # it has exited for good: every later wait must see that too
            raise McpError(f"the MCP server {self.name!r} has exited (exit code {self.process.returncode}), so "
                           "its tools cannot be used in this run")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read
            message = None
        if not isinstance(message, dict):
            raise McpError(f"the MCP server {self.name!r} wrote something that is not JSON-RPC: "
                           f"{line[:200].decode(errors='replace').strip()!r} (its logs belong on stderr)")
        return message

    def send(self, message):
        """Write one message as one line (json.dumps writes no line breaks); a server gone is told by receive().
        A request is small, and a pipe holds 64 KB: a server that reads nothing cannot hold us here."""
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            pass


def command_argv(command, path):
    """The words of a server's command, its program found in path (a placeholder until the Windows rules land)."""
    words = shlex.split(command, posix=os.name != "nt")
    if not words:
        raise McpError("the MCP server's command is empty")
    return [shutil.which(words[0], path=path) or words[0], *words[1:]]


def read_lines(process, inbox):
    """In a thread of its own: put each line the server writes on the inbox, then None once it has exited."""
    for line in iter(lambda: process.stdout.readline(MAX_LINE), b""):
        inbox.put(line)
    process.wait()  # for its exit code
    inbox.put(None)


def part_text(part):
    """One content part of a tool result as text: text as it is (an embedded text file too), any other part named.
    Example: {"type": "image", "data": "iVBO...", "mimeType": "image/png"} -> "[a part of type image]" """
    part = part if isinstance(part, dict) else {}
    resource = part.get("resource") if isinstance(part.get("resource"), dict) else {}
    text = part.get("text", resource.get("text"))
    return str(text) if text is not None else f"[a part of type {part.get('type')}]"


def stop(process):
    """End a server as the spec asks: close its stdin, give it GRACE seconds, then kill what is left of its group
    (npx starts node, sh its program): shell.stop(), as for a command."""
    try:
        process.stdin.close()  # a polite server exits when its input ends
        process.wait(GRACE)
    except (OSError, subprocess.TimeoutExpired):
        pass
    shell.stop(process)


if __name__ == "__main__":
    clean = {name: os.environ[name] for name in ("PATH", "HOME", "SYSTEMROOT") if name in os.environ}  # no keys
    try:
        server = Server("cli", " ".join(sys.argv[1:]) or "python ticket_server.py", clean, sys.stderr).start()
        print(f"MCP {server.version}:", *(f"{tool['name']}: {tool['description']}" for tool in server.tools()),
              sep="\n")
    except McpError as error:
        sys.exit(f"error: {error}")
