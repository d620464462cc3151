"""Phase 12 (learner's version): run one command in a box of its own.

A clean environment, an empty stdin, a timeout, truncate output, its own process group; with bubblewrap, new
namespaces (no network, its own processes) and only the places the policy names. Try:
    python -c "import guards, shell; print(shell.run(['sh', '-c', 'env'], guards.policy('play')))"
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import guards

TIMEOUT = 10  # seconds a command may run; then it is stopped with everything it started
MAX_OUTPUT = 1_000_000  # bytes of output after which a command is stopped: it prints without end
KEEP = 4000  # bytes of output kept for the result (tools.truncate() cuts it further)
VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "SYSTEMROOT", "COMSPEC", "PATHEXT")  # all a command gets
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")  # what a sandboxed command may read
NEW_GROUP = ({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt"
             else {"start_new_session": True})  # a process group of its own, so stop() can end all of it
SUBREAPER = 36  # Linux's PR_SET_CHILD_SUBREAPER: orphans of a command come back to the harness, not to init
RUNNING = set()  # the commands running now
LISTING = threading.Lock()  # a command starts and joins RUNNING while reap() cannot look


def shell_argv(command):
    """The system's own shell that reads a command line, by its full path: sh, or cmd on Windows."""
    if os.name == "nt":
        return [guards.system_program("cmd") or "cmd", "/c", command]
    return [guards.system_program("sh") or "/bin/sh", "-c", command]


def search_path(word, workspace):
    """word on your PATH, never in the workspace nor in `.`; None when it is not there."""
    folders = [folder for folder in os.environ.get("PATH", "").split(os.pathsep)
               if os.path.isabs(folder) and not Path(folder).resolve().is_relative_to(workspace)]
    return shutil.which(word, path=os.pathsep.join(folders)) if folders else None


def find_sandbox(workspace):
    """(bubblewrap's full path, None) when it starts here, else (None, why not)."""
    bwrap = search_path("bwrap", workspace)
    if not bwrap:
        return None, "bubblewrap is not installed, or not on PATH"
    try:
        tried = subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True,
                               text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"bubblewrap does not start here: {error}"
    if tried.returncode:
        return None, f"bubblewrap does not start here: {tried.stderr.strip()}"
    return bwrap, None


def environment(workspace):
    """Only the VARIABLES a command needs, and as PATH yours without the workspace's folders, then the system's."""
    env = {name: os.environ[name] for name in VARIABLES if name in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    folders = [folder for folder in os.environ.get("PATH", "").split(os.pathsep)
               if os.path.isabs(folder) and not Path(folder).resolve().is_relative_to(workspace)]
    env["PATH"] = os.pathsep.join(folders + [folder for folder in os.defpath.split(os.pathsep)
                                             if os.path.isabs(folder)])  # never empty: sh would look in `.`
    return env


def sandboxed(argv, policy, write, network=False, readable=()):
    """argv wrapped in bubblewrap: the system read-only, an empty /tmp, the workspace (writable only when
    write), the harness's places and every .git read-only and pinned, each file holding a secret unreadable.
    With network (an MCP server): the network too; readable: more places it may read (a server's installation)."""
    workspace = str(policy.workspace)
    mode = "--bind" if write and policy.write else "--ro-bind"
    args = [policy.sandbox, "--unshare-all", *(["--share-net"] if network else []), "--die-with-parent",
            "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for folder in (*SYSTEM, *map(str, readable)):
        args += ["--ro-bind-try", folder, folder]
    args += [mode, workspace, workspace]
    read_only, hidden = guards.sealed(policy)
    for place in read_only:
        parts = place.relative_to(policy.workspace).parts
        for at in range(1, len(parts)):  # the folders on its way, pinned as they are
            folder = str(Path(workspace, *parts[:at]))
            args += [f"{mode}-try", folder, folder]
        args += ["--ro-bind-try", str(place), str(place)]
    for file in hidden:
        args += ["--ro-bind", "/dev/null", str(file)]
    return [*args, "--chdir", workspace, "--", *argv]


def adopt():
    """Make the harness the subreaper of what it starts (Linux): a process that leaves its group comes back here."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(SUBREAPER, 1, 0, 0, 0)


def stat_fields(pid):
    """The fields of /proc/PID/stat after the program's name, or [] when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return []


def parent(pid):
    fields = stat_fields(pid)
    return int(fields[1]) if fields else None


def started(pid):
    """When a process started, in clock ticks since boot."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields else None


def ticks():
    """Now, in the clock ticks started() counts in (Linux), or None elsewhere."""
    if not os.path.isdir("/proc"):
        return None
    try:
        return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


def remove(made, workspace):
    """Take away the repositories a command made (git would run their config later, outside any sandbox);
    say so."""
    for place in made:
        if place.is_dir() and not place.is_symlink():
            shutil.rmtree(place, ignore_errors=True)
        else:
            place.unlink(missing_ok=True)
    names = ", ".join(sorted(str(place.relative_to(workspace)) for place in made))
    return f"removed {names}, which it made: a command may not make a git repository (git init is yours to run)"


def reap(since):
    """End every process that came back to the harness and started at or after `since` (clock ticks)."""
    if since is None or not os.path.isdir("/proc"):  # not Linux: a process group is all there is
        return
    with LISTING:
        running = {process.pid for process in RUNNING}
        while True:
            left = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()
                    and int(entry.name) not in running and parent(entry.name) == os.getpid()
                    and (started(entry.name) or 0) >= since]
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass


def stop(process):
    """End the command's whole process group."""
    try:
        if os.name == "nt":
            process.kill()
        else:
            os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()  # once it is gone, what it started in a session of its own has come back to the harness


def run(argv, policy, write=False, deadline=None):
    """Run argv in the workspace, in the sandbox when there is one; return `exit code N` and its output.
    It waits TIMEOUT seconds or until the run's deadline (a time.monotonic()), whichever comes first."""
    before = guards.repositories(policy.workspace) if write else None
    if policy.sandbox:
        argv = sandboxed(argv, policy, write)
    elif sys.platform == "linux":
        adopt()
    with LISTING:
        try:
            process = subprocess.Popen(argv, cwd=policy.workspace, env=environment(policy.workspace),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       **NEW_GROUP)
        except OSError as error:
            return f"error: the command could not start: {error}"
        RUNNING.add(process)
    since = started(process.pid)
    kept, reason = bytearray(), None

    def read():
        nonlocal reason
        total = 0
        for chunk in iter(lambda: process.stdout.read1(65536), b""):
            kept.extend(chunk[:KEEP - len(kept)])
            total += len(chunk)
            if total > MAX_OUTPUT:
                reason = f"the command was stopped: it printed more than MAX_OUTPUT = {MAX_OUTPUT} bytes"
                stop(process)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    began = time.monotonic()
    timeout = min(TIMEOUT, max(deadline - began, 0)) if deadline else TIMEOUT
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        reason = f"timed out after {timeout:.1f} s" + ("" if timeout == TIMEOUT else " (the run's deadline)")
    finally:
        stop(process)  # what it left running in its group ends with it
        if not policy.sandbox:
            reap(since)
    process.wait()
    reader.join(5)
    RUNNING.discard(process)
    output = kept.decode("utf-8", errors="replace")
    status = f"error: {reason}" if reason else f"exit code {code}"  # a stopped one has none
    if before is not None and (made := guards.repositories(policy.workspace) - before):
        status += f"; {remove(made, policy.workspace)}"
    return f"{status}\n{output}"
