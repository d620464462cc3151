"""Phase 12 (learner's version): an MCP client: one tool server in another process, a JSON-RPC message a line.

Server(name, argv, env, stderr) starts the program; .start(deadline) finds the MCP it speaks (2026-07-28, asked
with server/discover, else the older handshake), .tools(deadline) lists its tools, .call(tool, arguments,
deadline) calls one and returns (text, is_error), .close() ends it. A server that fails is an McpError.
start_all() starts the servers of a run, each in a sandbox of its own that shows, read-only, what its command
names (readable()); stop_all() ends them and records what each wrote on stderr.

Run:  python mcp_client.py python ticket_server.py     prints the MCP it speaks and its tools
"""
import base64
import json
import math
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from functools import partial
from pathlib import Path

import guards
import shell

MODERN = "2026-07-28"  # MCP without a handshake: each request names its version in params._meta
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # the first is offered
CLIENT = {"name": "course-harness", "version": "1"}  # who we are
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": {}}  # in params._meta of every modern request: we call tools
UNSUPPORTED = -32022  # a modern server's error for a version it does not speak
NOT_FOUND = -32601  # JSON-RPC's "Method not found": our answer to a server's request we do not serve
PROBE = 10  # seconds server/discover may take; silence then means an older server: shake hands
TIMEOUT = 30  # seconds one request may take, from the moment it is asked
GRACE = 1  # seconds a server has to leave once its stdin is closed
MAX_LINE = 4_000_000  # bytes read of one line; a longer one comes in pieces, and its first is no JSON
MAX_WAITING = 100  # lines read and not yet taken; then the reader waits, and so does the server
MAX_PAGES = 20  # pages of tools/list followed; a server that never ends its list is refused
MAX_STDERR = 20_000  # bytes of a server's stderr kept in the trace
TAIL = 5  # lines of its stderr shown when a server cannot start


class McpError(Exception):
    """The server failed (not its tool): it could not start, exited, wrote no JSON, was silent, or answered an
    error. .code is the JSON-RPC error code it answered with, else None."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


def read_lines(stdout, lines):
    """Queue each line the server writes, read up to MAX_LINE bytes; None when its output ends."""
    for line in iter(partial(stdout.readline, MAX_LINE), b""):
        lines.put(line)
    lines.put(None)


def write_lines(stdin, outbox):
    """Write each line send() hands over; None closes the server's stdin. A server that stops reading holds up
    this thread, never a request: the request waits for its answer by its deadline."""
    for data in iter(outbox.get, None):
        try:
            stdin.write(data)
            stdin.flush()
        except OSError:  # it has exited; the reader says so
            break
    try:
        stdin.close()
    except OSError:
        pass


def stop(process, outbox):
    """End a server: its stdin closed (its sign to leave), GRACE seconds to do so, then its whole group ended."""
    outbox.put(None)
    try:
        process.wait(GRACE)
    except subprocess.TimeoutExpired:
        pass
    shell.stop(process)


def part_text(part):
    """One part of a tool's result as text: text as it is, any other part one line the model can act on."""
    if not isinstance(part, dict):
        return json.dumps(part)[:200]
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text"))
    if kind in ("image", "audio"):
        try:
            size = len(base64.b64decode(str(part.get("data")), validate=True))
        except ValueError:
            size = len(str(part.get("data")))
        return f"[{kind}: {part.get('mimeType')}, {size:,} bytes]"
    inner = part.get("resource") if isinstance(part.get("resource"), dict) else part
    return str(inner.get("text") or f"[{kind}: {inner.get('uri')}]")


class Server:
    """One MCP server, started at once in a session of its own; one thread reads its lines, one writes ours."""

    def __init__(self, name, argv, env, stderr):
        self.name, self.version, self.info, self.stderr, self.shows = name, None, {}, stderr, []
        self.lines, self.outbox = queue.Queue(MAX_WAITING), queue.Queue()
        self.lock, self.last_id = threading.Lock(), 0
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                            env=env, **shell.NEW_GROUP)
        except OSError as error:
            raise self.fail(f"could not start ({shlex.join(argv)}): {error}") from None
        self.close = weakref.finalize(self, stop, self.process, self.outbox)  # once; also when Python exits
        threading.Thread(target=read_lines, args=(self.process.stdout, self.lines), daemon=True).start()
        threading.Thread(target=write_lines, args=(self.process.stdin, self.outbox), daemon=True).start()

    def fail(self, what, code=None):
        return McpError(f"the MCP server '{self.name}' {what}", code)

    def send(self, message):
        self.outbox.put(json.dumps(message).encode("utf-8") + b"\n")

    def receive(self, deadline, method):
        """The server's next message, waited for until the deadline."""
        try:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            raise self.fail(f"did not answer {method} in time") from None
        if line is None:
            self.lines.put(None)  # the end stays the end, for the next request too
            try:
                code = self.process.wait(GRACE)
            except subprocess.TimeoutExpired:
                code = "none yet"
            raise self.fail(f"has exited (exit code {code}), so its tools cannot be used in this run")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            text = line.decode("utf-8", errors="replace").strip()[:200]
            raise self.fail(f"wrote something that is not JSON-RPC: {text!r} (its logs belong on stderr)")
        return message

    def request(self, method, params=None, deadline=None):
        """Send one request and return its result, by the deadline and within TIMEOUT of now. Meanwhile the
        server's ping is answered, its other requests get "Method not found", the rest is skipped."""
        deadline = min(deadline or math.inf, time.monotonic() + TIMEOUT)
        params = dict(params or {})
        if self.version == MODERN or method == "server/discover":
            params["_meta"] = META
        if not self.lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
            raise self.fail("was busy with another call until the deadline")
        try:
            self.last_id += 1
            self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
            while True:
                message = self.receive(deadline, method)
                if "method" in message and "id" in message:  # the server's request: its ids are its own
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": {}} if message["method"] == "ping"
                              else {"jsonrpc": "2.0", "id": message["id"],
                                    "error": {"code": NOT_FOUND, "message": "Method not found"}})
                elif "method" not in message and message.get("id") == self.last_id:
                    break  # a notification, or a late answer to a request given up on, is skipped
        finally:
            self.lock.release()
        if "error" in message:
            error = message["error"]
            code = error.get("code") if isinstance(error, dict) else None
            raise self.fail(f"answered {method} with an error: {json.dumps(error)[:500]}", code)
        result = message.get("result")
        if not isinstance(result, dict) or result.get("resultType", "complete") != "complete":
            raise self.fail(f"answered {method} with no result it can use: {json.dumps(result)[:500]}")
        return result

    def start(self, deadline=None):
        """Find the MCP the server speaks: MODERN when server/discover lists it, else the handshake."""
        try:
            found = self.request("server/discover", {}, min(deadline or math.inf, time.monotonic() + PROBE))
        except McpError as error:
            if error.code == UNSUPPORTED:  # modern, but not our version: a handshake cannot help
                raise
            found = {}  # "Method not found", another error, or silence
        if not isinstance(found.get("supportedVersions"), list) or MODERN not in found["supportedVersions"]:
            return self.shake_hands(deadline)
        self.version = MODERN
        meta = found.get("_meta") if isinstance(found.get("_meta"), dict) else {}
        info = meta.get("io.modelcontextprotocol/serverInfo")
        self.info = info if isinstance(info, dict) else {}
        return self

    def shake_hands(self, deadline):
        """An older server's start: initialize offers our newest handshake version, and any of them will do."""
        result = self.request("initialize", {"protocolVersion": HANDSHAKE_VERSIONS[0], "capabilities": {},
                                             "clientInfo": CLIENT}, deadline)
        if result.get("protocolVersion") not in HANDSHAKE_VERSIONS:
            raise self.fail(f"speaks MCP '{result.get('protocolVersion')}', and this client "
                            f"{', '.join((MODERN, *HANDSHAKE_VERSIONS))}")
        self.version = result["protocolVersion"]
        self.info = result["serverInfo"] if isinstance(result.get("serverInfo"), dict) else {}
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def tools(self, deadline=None):
        """[{"name", "description", "inputSchema"}] from every page of tools/list, but no tool that needs task
        mode (MCP 2025-11-25), which this client does not speak."""
        found, cursor = [], None
        for _ in range(MAX_PAGES):
            page = self.request("tools/list", {"cursor": cursor} if cursor else {}, deadline)
            listed = page.get("tools")
            if not isinstance(listed, list) or not all(
                    isinstance(tool, dict) and isinstance(tool.get("name"), str)
                    and isinstance(tool.get("inputSchema"), dict) and isinstance(tool.get("execution", {}), dict)
                    for tool in listed):
                raise self.fail("sent a tools/list page that is not MCP's: a tool has no name, or its inputSchema "
                                "or execution is no JSON object")
            found += [{"name": tool["name"], "description": str(tool.get("description") or ""),
                       "inputSchema": tool["inputSchema"]}
                      for tool in listed if tool.get("execution", {}).get("taskSupport") != "required"]
            cursor = page.get("nextCursor")
            if not cursor:
                return found
        raise self.fail(f"named a next page of tools after {MAX_PAGES} pages")

    def call(self, tool, arguments, deadline=None):
        """(text, is_error): the tool's result, each part a piece of text; is_error when the tool failed."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, deadline)
        parts = result.get("content") if isinstance(result.get("content"), list) else []
        return "\n".join(part_text(part) for part in parts), result.get("isError") is True


def command_argv(command, path):
    """A server's command as words, split as the shell splits it (on Windows at spaces outside double quotes),
    its program looked for only in path, never in the current folder (on Windows by PATHEXT: npx is npx.cmd)."""
    try:
        words = (shlex.split(command) if os.name != "nt" else
                 [word.replace('"', "") for word in re.findall(r'(?:"[^"]*"|[^\s"])+', command)])
        if not words:
            raise ValueError("it has no words")
    except ValueError as error:
        raise McpError(f"the MCP server command {command!r} cannot be split: {error}") from None
    program = shutil.which(words[0], path=path)
    if not program:
        raise McpError(f"the MCP server's program {words[0]!r} is in no folder of {path!r}")
    return [program, *words[1:]]


def start_all(commands, policy, deadline, servers):
    """Start each --mcp [NAME=]COMMAND with the environment commands get, in a sandbox of its own where there is
    one; each joins servers before it starts, so that even one that fails ends with the run."""
    env = shell.environment(policy.workspace)  # no API key
    path = os.pathsep.join([os.path.dirname(sys.executable), env["PATH"]])  # our own python first; never `.`
    for place, command in enumerate(commands, 1):
        given = re.match(r"([A-Za-z0-9_-]+)=(.*)", command, re.DOTALL)
        name, command = given.groups() if given else (None, command)
        argv = command_argv(command, path)
        shows = readable(argv, env, policy) if policy.sandbox else []
        if policy.sandbox:
            wrapped = shell.sandboxed(argv, policy, policy.write, True, shows)
        else:
            shell.adopt()  # what it leaves running comes back to the harness, to be reaped
            wrapped = argv
        server = Server(name or Path(argv[0]).stem, wrapped, env, tempfile.TemporaryFile())
        server.shows = shows
        servers.append(server)
        try:
            server.start(deadline)
        except McpError as error:
            raise McpError(f"{error}{why_not(server, policy)}", error.code) from None
        name = name or str(server.info.get("name") or "").rsplit("/", 1)[-1] or Path(argv[0]).stem
        name = re.sub(r"[^A-Za-z0-9_-]", "", name)[:20] or "server"
        server.name = f"{name}{place}" if name in {other.name for other in servers[:-1]} else name


def readable(argv, env, policy):
    """What a server's sandbox shows of its own, read-only: its program as PATH finds it (links followed), the
    interpreter of its #! line, the installation that holds each, and the files and folders its arguments name
    that hold no secret. Only places allowed(); none inside another."""
    places = []
    program = shutil.which(argv[0], path=env.get("PATH", "")) or argv[0]
    for found in filter(None, (program, interpreter(program, env.get("PATH", "")))):
        for place in dict.fromkeys((Path(found).absolute(), Path(found).resolve())):
            places += [*installed(place), place]
    places = [place for place in places if allowed(place, policy)]
    for word in argv[1:]:
        for value in {word, word.split("=", 1)[-1]}:  # --root=/srv names /srv too
            place = (policy.workspace / value).resolve() if value else None
            if place and place.exists() and allowed(place, policy) and not secret_inside(place, policy):
                places.append(place)
    places = list(dict.fromkeys(places))
    return [place for place in places if not any(place != other and place.is_relative_to(other) for other in places)]


def interpreter(program, path):
    """The program a script's #! line names (`#!/usr/bin/env node`: node, as path finds it), or None."""
    try:
        with open(program, "rb") as file:
            line = file.readline(1000).decode("utf-8", errors="replace")
    except OSError:
        return None
    words = line[2:].split() if line.startswith("#!") else []
    if words and Path(words[0]).name == "env":
        words = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        return shutil.which(words[0], path=path) if words else None
    return words[0] if words else None


def installed(program):
    """The installation that holds a program: its venv, and the Python its pyvenv.cfg names; a Python or Node
    prefix (PREFIX/bin/program beside PREFIX/lib/python3.* or PREFIX/lib/node_modules); else the outermost
    node_modules. [] when none."""
    prefix = program.parent.parent
    config = prefix / "pyvenv.cfg"
    if config.is_file():
        home = re.search(r"(?m)^home\s*=\s*(.+?)\s*$", config.read_text(errors="replace"))
        return [prefix, *(installed(Path(home.group(1)) / "python") if home else [])]
    if program.parent.name == "bin" and ((prefix / "lib" / "node_modules").is_dir()
                                         or any(prefix.glob("lib/python3*"))):
        return [prefix]
    return [folder for folder in program.parents if folder.name == "node_modules"][-1:]


def allowed(place, policy):
    """A place a server may see: outside the workspace, no home folder nor above one, naming no secret, and
    holding nothing of the harness."""
    ours = (guards.HOME, *policy.own)
    return (not place.is_relative_to(policy.workspace) and not Path.home().is_relative_to(place)
            and not guards.is_secret(*place.parts) and not any(own.is_relative_to(place) for own in ours))


def secret_inside(place, policy):
    """True when a file in place (or place itself) names or holds a secret, or is too big to judge."""
    files = [place] if place.is_file() else [Path(folder, name) for folder, _, names in os.walk(place)
                                               for name in names]
    return any(guards.is_secret(*file.relative_to(place.parent).parts) or file.stat().st_size > guards.MAX_READ
               or guards.holds_secret(policy, file) for file in files if file.is_file())


def why_not(server, policy):
    """What follows a server's McpError when it cannot start: the last TAIL lines of its stderr, masked, and in
    a sandbox what the sandbox shows of its own, and the fix."""
    server.close()  # it failed; ended, it writes no more while its stderr is read
    server.stderr.seek(0, os.SEEK_END)
    server.stderr.seek(max(server.stderr.tell() - MAX_STDERR, 0))
    lines = server.stderr.read().decode("utf-8", errors="replace").splitlines()[-TAIL:]
    tail = "".join(f"\n  {line}" for line in lines)
    said = f". Its stderr ends:{guards.mask(policy, tail)}" if lines else ". It wrote nothing on stderr."
    if policy.sandbox:
        said += (f"\nIts sandbox shows the workspace, the system, and what its command names, read-only: "
                 f"{', '.join(map(str, server.shows)) or 'nothing more'}. A file it needs elsewhere: name it in "
                 "its command by its full path, or move it into the workspace. Last resort: --sandbox off "
                 "(no sandbox for any command of the run).")
    return said


def stop_all(servers, record):
    """End every server, then record the first MAX_STDERR bytes of what each wrote on stderr (the trace masks
    it)."""
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
    env = {name: os.environ[name] for name in ("PATH", "HOME", "SYSTEMROOT") if name in os.environ}
    path = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])  # our own python first
    try:
        server = Server("cli", command_argv(" ".join(argv), path), env, None).start()
        print(f"MCP {server.version}:")
        for tool in server.tools():
            print(f"{tool['name']}: {tool['description']}")
    except McpError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
