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
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import guards
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
MAX_STDERR = 20_000  # bytes of what a server wrote on stderr kept for the record
TAIL = 5  # lines of its stderr shown when a server cannot start


class McpError(Exception):
    """A server failed (not its tool): it exited, wrote what is not JSON-RPC, or answered late or
    with an error."""
    code = None  # the JSON-RPC error code it answered with, if it did


class Server:
    """One MCP server: a process, its pipes, a thread that queues what it writes and one that writes
    what we send: no wait outlasts a deadline, not even on a server that stops reading."""

    def __init__(self, name, argv, env, stderr):
        self.name, self.version, self.last_id, self.lock = name, None, 0, threading.Lock()
        self.stderr = stderr  # where its stderr goes: a file, for the record
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


def start_all(commands, policy, deadline=None, servers=None):
    """Start an MCP server for each command, each joining servers (the run's list, so that each ends
    with the run, even one that failed to start): in the sandbox where there is one (the workspace
    as an approved command sees it, the network it may need, its own program: readable(), its own
    cache: cache()), its stderr kept in a temporary file, named as --mcp NAME= says, else as it
    names itself (a second of one name gets a number). One that cannot start raises McpError with
    the end of its stderr."""
    servers = [] if servers is None else servers
    if not policy.sandbox:  # what a server leaves behind comes back to the harness, which ends it
        shell.adopt()
    for command in commands:
        given, _, command = command.partition("=") if re.match(r"[\w-]+=",
                                                               command) else ("", "", command)
        path = (os.pathsep.join([os.path.dirname(sys.executable),
                                 guards.search_path(policy.workspace)]))
        argv, env = command_argv(command, path), shell.environment(path)  # our python first
        boxed = argv
        if policy.sandbox:  # with a cache that outlives the run: npx downloads a package once
            kept = cache(given or command)
            env |= {"XDG_CACHE_HOME": str(kept), "npm_config_cache": str(kept / "npm")}
            boxed = shell.sandboxed(argv, policy, policy.write, True, readable(argv, env, policy),
                                    [kept])
        server = Server(given or Path(argv[0]).stem, boxed, env, tempfile.TemporaryFile())
        servers.append(server)
        try:
            server.start(deadline)
        except McpError as error:
            raise McpError(f"{error}{why_not(server, policy)}") from None
        # its own name, else its program's
        name = given or str(server.info.get("name") or "").rsplit("/", 1)[-1] or server.name
        name = re.sub(r"[^\w-]", "_", name, flags=re.A)[:20]  # what the APIs take in a tool's name
        taken = any(other.name == name for other in servers[:-1])
        server.name = name + (str(len(servers)) if taken else "")
    return servers


def cache(name):
    """A sandboxed server's own folder, kept from one run to the next (made if need be, only you may
    enter it): <your cache folder>/course-harness/mcp/<name>, name made fit for a folder. Its
    XDG_CACHE_HOME and npm_config_cache point into it (uvx and npx read them); nothing outside the
    sandbox runs from it, so a server can spoil only its own cache.
    Example: "npx -y @modelcontextprotocol/server-everything" ->
    Path("/home/you/.cache/course-harness/mcp/npx_-y_modelcontextprotocol_server-everything")"""
    xdg = os.environ.get("XDG_CACHE_HOME", "")  # the XDG rule: a relative one is ignored
    root = (Path.home() / "Library" / "Caches" if sys.platform == "darwin" else
            Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache")
    (root / "course-harness").mkdir(mode=0o700, parents=True, exist_ok=True)  # names: yours alone
    folder = (root / "course-harness" / "mcp" /
              (re.sub(r"[^\w.-]+", "_", name).strip("._")[:80] or "server")).resolve()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def readable(argv, env, policy):
    """What a server's sandbox shows besides what a command's does, all read-only. The rule: what
    its command names (its program, found as the shell finds it, links followed; the installation
    that holds it, installed(); the files and folders its arguments name), where that is no home
    folder nor above one, holds nothing of the harness and names no secret, and (what an argument
    names) holds none. Example: ["/home/you/venv/bin/python", "/srv/mcp/server.py"] ->
    [Path("/home/you/venv"), Path("/usr"), Path("/srv/mcp/server.py")] (and the files themselves)"""
    program = (os.path.join(policy.workspace, argv[0]) if os.sep in argv[0] else
               shutil.which(argv[0], path=env["PATH"]) or argv[0])
    programs = [program, *filter(None, [interpreter(program, env["PATH"])])]
    its_own = [Path(place) for each in programs
               for file in dict.fromkeys([each, os.path.realpath(each)])
               for place in (file, *installed(file))]
    named = [Path(place) for given in argv[1:] for word in {given, given.partition("=")[2]} if word
             for place in {os.path.abspath(os.path.join(policy.workspace, word)),
                           os.path.realpath(os.path.join(policy.workspace, word))}
             if os.path.exists(place)]
    places = [*dict.fromkeys([*(place for place in its_own if allowed(place, policy)),
                              *(place for place in named if allowed(place, policy)
                                and not secret_inside(place, policy))])]
    # each once: what the sandbox shows already is left out (a mount inside a mount can fail)
    return [place for place in places if not any(map(place.is_relative_to, shell.SYSTEM))
            and not any(place != other and place.is_relative_to(other) for other in places)]


def allowed(place, policy):
    """The rule's first part: an absolute place outside the workspace (whose own rules hold), no
    home folder nor above one, naming no secret (guards.is_secret()), neither holding nor inside
    one of the harness's own places (policy.own: its folder, with its .env)."""
    home = Path.home().resolve()
    return (place.is_absolute() and not place.is_relative_to(policy.workspace)
            and not home.is_relative_to(place) and not guards.is_secret(place)
            and not any(own.is_relative_to(place) or place.is_relative_to(own)
                        for own in policy.own))


def installed(program):
    """The installation a program's file belongs to, by its layout: the folder above its bin when
    that is a venv (pyvenv.cfg: and the Python its home names), a Python (lib/python3.N/os.py) or
    Node (bin/node); else the outermost node_modules above it.
    Example: "/home/you/venv/bin/python" -> [Path("/home/you/venv"), Path("/usr")]"""
    file, top = Path(program), Path(program).parent.parent
    config = top / "pyvenv.cfg"
    if file.parent.name == "bin" and config.is_file():
        home = re.search(r"^home\s*=\s*(.+?)\s*$", config.read_text(errors="replace"), re.M)
        return [top, *(installed(Path(home[1], "python")) if home else [])]
    if file.parent.name == "bin" and (any(top.glob("lib/python3*/os.py"))
                                      or (top / "bin" / "node").is_file()):
        return [top]
    return [folder for folder in file.parents if folder.name == "node_modules"][-1:]


def interpreter(program, path):
    """The program a script names on its #! line (found on path when it is env's word), or None.
    Example: a file starting "#!/usr/bin/env node" -> "/usr/bin/node" """
    try:
        with open(program, "rb") as file:
            line = file.readline(300)
    except OSError:  # not there, or a folder
        return None
    words = line[2:].decode(errors="replace").split() if line.startswith(b"#!") else []
    if words and Path(words[0]).name == "env":
        words = [word for word in words[1:] if not word.startswith("-")]  # env -S node
        return shutil.which(words[0], path=path) if words else None
    return words[0] if words else None


def secret_inside(place, policy):
    """True when a file an argument names, or a file in a folder it names, names or holds a secret,
    or is too big to judge whole (over guards.MAX_READ bytes): what the workspace hides."""
    files = ([Path(folder, name) for folder, _, names in os.walk(place) for name in names]
             if place.is_dir() else [place])
    return any(guards.is_secret(file) or guards.holds_secret(policy, str(file))
               or (file.is_file() and file.stat().st_size > guards.MAX_READ) for file in files)


def why_not(server, policy):
    """What follows a start's failure: the last TAIL lines the server wrote on stderr (masked), and,
    in the sandbox, what it sees and how to show it the rest."""
    server.close()  # it writes no more
    server.stderr.seek(max(0, server.stderr.seek(0, os.SEEK_END) - MAX_STDERR))  # its end
    text = guards.mask(policy, server.stderr.read().decode(errors="replace"))
    lines = [f"  {line}" for line in text.splitlines() if line.strip()][-TAIL:]
    said = ". Its stderr ends:\n" + "\n".join(lines) if lines else ". It wrote nothing on stderr."
    return said + (
        "" if not policy.sandbox else
        "\nIts sandbox shows the workspace, the system, and what its command names (its program, "
        "that program's installation, the files its arguments name) unless that holds a secret or "
        "the harness: name what it needs in the command by its full path, or move it into the "
        "workspace. Last resort: --sandbox off (no sandbox for any command of the run).")


def stop_all(servers, record):
    """End every server, and record what each wrote on stderr (its first MAX_STDERR bytes)."""
    for server in servers:
        server.close()
        server.stderr.seek(0)
        record("mcp", server=server.name,
               stderr=server.stderr.read(MAX_STDERR).decode(errors="replace"))


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
