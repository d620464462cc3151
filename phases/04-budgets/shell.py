"""Run one command the guarded way: in the workspace, with a clean environment, a timeout, output capped while it
is read, and the whole process tree killed when it ends, when its time is up, or when the harness dies.

Run:  python shell.py sh -c 'sleep 99 & echo started'      (prints the result; the sleep does not survive)
On Linux every command runs under supervisor.py, which adopts whatever the command leaves behind, even a process
that started a session of its own, and kills it all when the command ends or times out, and when the harness
dies, even by `kill -9`. Should a command kill or stop its own supervisor, what it left comes up to the harness,
which adopts orphans too, and is killed here. With SANDBOX set, the command runs inside bubblewrap instead: no
network, no home folder, secret files hidden, the harness out of sight.
"""
import math
import os
import signal
import subprocess
import sys
import threading
import time
from functools import cache
from pathlib import Path

import supervisor

TIMEOUT = 10  # seconds a command may run before it and everything it started are killed
MAX_OUTPUT = 1_000_000  # bytes a command may print before it is stopped: `yes` must not fill memory
SANDBOX = None  # None, "read-only" or "workspace-write": harness.py --sandbox sets it (Linux, bubblewrap)
SUPERVISED = sys.platform.startswith("linux")  # prctl() exists there only; elsewhere the process group is killed
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36  # from <linux/prctl.h>
SUPERVISOR = str(Path(__file__).with_name("supervisor.py"))
# Windows has no process groups as such: a new process group there lets taskkill /T end the whole tree.
NEW_GROUP = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt" else {"start_new_session": True}
RUNNING = {}  # commands running now, and when each started (Linux), so that Ctrl-C or a signal can end them too
# What a sandboxed command sees of the system, read-only: programs, their libraries and the public certificates;
# the workspace is added, and nothing from your home, /opt or /etc/ssl/private.
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives", "/etc/ssl/certs",
                  "/etc/ca-certificates", "/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group",
                  "/etc/nsswitch.conf", "/etc/resolv.conf", sys.base_prefix)


def run(argv, cwd, env, keep=4000, deadline=None, hide=()):
    """Run argv in cwd and return its exit code and output: at most `keep` characters of it, with a note saying
    how much was cut. It is stopped after TIMEOUT seconds, or at `deadline` (a time.monotonic()) if sooner.
    hide: the paths a sandbox must keep from the command (secret files)."""
    timeout = TIMEOUT
    seconds = min(timeout, deadline - time.monotonic()) if deadline else timeout
    if SUPERVISED:
        adopt_orphans()
    process = subprocess.Popen(wrapped(argv, cwd, hide), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **NEW_GROUP)
    RUNNING[process] = (supervisor.about(process.pid) or (0, 0, math.inf))[2] if SUPERVISED else math.inf
    kept, printed = bytearray(), 0

    def read_output():  # reads while the command runs, keeping only what fits
        nonlocal printed
        for chunk in iter(lambda: process.stdout.read1(65536), b""):
            printed += len(chunk)
            kept.extend(chunk[:keep - len(kept)])
            if printed > MAX_OUTPUT:
                stop(process)
                return

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        code = process.wait(max(seconds, 0))
    except subprocess.TimeoutExpired:
        code = None
    all_ended = stop(process)  # also ends whatever it left running in the background, like `sleep 999 &`
    reader.join(1)  # the rest of the output, already in the pipe
    RUNNING.pop(process, None)
    output = kept.decode("utf-8", errors="replace")
    cut = f"\n[... {printed - len(kept)} more bytes cut]" if printed > len(kept) else ""
    return f"{status(code, printed, seconds, timeout, all_ended)}\n{output}{cut}"


def status(code, printed, seconds, timeout, all_ended=True):
    """The first line of a result: how the command ended, truthfully, and what was killed."""
    killed = ("the command's process group was killed; a process that left it may still run"
              if not (SUPERVISED or SANDBOX or os.name == "nt") else "the command and everything it started were "
              "killed" if all_ended else "the command was killed, and some processes it started may still run")
    if printed > MAX_OUTPUT:
        return f"stopped after printing {MAX_OUTPUT} bytes; {killed}"
    if code is None and seconds < timeout:
        return f"error: stopped after {max(seconds, 0):.1f} s at the run's deadline; {killed}"
    if code is None:
        return f"error: timed out after {timeout} s; {killed}"
    return f"exit code {code}"


def wrapped(argv, cwd, hide):
    """What really starts: the sandbox around the command, or the supervisor (Linux), or the command itself."""
    if SANDBOX:
        return sandboxed(argv, cwd, hide)
    if SUPERVISED:
        return [sys.executable, "-I", "-S", SUPERVISOR, str(os.getpid()), "--", *argv]
    return argv


def stop(process):
    """End a command and everything it started: its supervisor kills the tree (Linux); elsewhere, its process
    group (on Windows, its process tree). Returns False when something it started may still run."""
    if process.poll() is None and SUPERVISED and not SANDBOX:
        process.terminate()  # the supervisor kills every process below it, then exits
        try:
            process.wait(1)
        except subprocess.TimeoutExpired:
            pass
    if os.name == "nt":
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True)
        return True
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone
    if SUPERVISED and not SANDBOX and process.wait() < 0 and process in RUNNING:  # it was killed: no clean-up
        return end_orphans(RUNNING[process])
    return True


@cache
def adopt_orphans():
    """Make this process the parent of whatever is left when a supervisor dies before it could kill it (Linux)."""
    import ctypes

    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def end_orphans(since):
    """Kill what came up to this process from a killed supervisor: the processes below this one that started
    after it (at `since`) in a session other than this one's, except the supervisors still at work. What this
    process starts itself (a git check, a test's helper) stays in its session. Returns True when none is left."""
    for _ in range(100):  # a killed process's children come up in turn
        table, working, session = supervisor.processes(), {process.pid for process in RUNNING}, os.getsid(0)
        orphans = [pid for pid, (parent, their_session, started) in table.items()
                   if parent == os.getpid() and their_session != session and started >= since and pid not in working]
        if not orphans:
            return True
        for pid in orphans + [pid for orphan in orphans for pid in supervisor.descendants(orphan, table)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return False


def stop_all():
    """End every command still running, and everything they started (Ctrl-C, SIGTERM, the end of a run)."""
    for process in list(RUNNING):
        stop(process)


def program(name, path):
    """The file a bare program name runs, looked for in path (a PATH string) only, or None.

    Example: program("ls", "/usr/local/bin:/usr/bin") -> "/usr/bin/ls"
    """
    endings = [""] + [e for e in os.environ.get("PATHEXT", "").split(os.pathsep) if e]  # Windows: ls.exe, ...
    for folder in path.split(os.pathsep):
        for ending in endings:
            full = os.path.join(folder, name + ending)
            if os.path.isfile(full) and os.access(full, os.X_OK):
                return full
    return None


def shell_argv(command, path):
    """How a command a person approved runs: through the shell (cmd.exe on Windows), found on path (a PATH string
    that the workspace cannot plant a program in)."""
    if os.name == "nt":
        return [os.environ.get("COMSPEC", "cmd.exe"), "/d", "/c", command]
    return [program("sh", path) or "/bin/sh", "-c", command]


def sandboxed(argv, cwd, hide):
    """argv inside bubblewrap: system folders read-only, the workspace read-write or read-only as SANDBOX says,
    the paths in hide (secret files) behind empty ones, no network, no home folder, and the harness's own
    processes and environment out of sight. It dies with the harness (--die-with-parent), and has no
    capabilities, even when you are root: it cannot unmount what hides a secret."""
    mount = "--bind" if SANDBOX == "workspace-write" else "--ro-bind"
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL", "--proc", "/proc",
            "--dev", "/dev", "--tmpfs", "/tmp", "--setenv", "HOME", "/tmp"]
    for folder in SYSTEM_FOLDERS:
        args += ["--ro-bind-try", folder, folder]
    args += [mount, str(cwd), str(cwd)]
    root = Path(cwd).resolve()  # hide holds real paths
    for folder in sorted({folder for path in hide for folder in Path(path).parents if folder.is_relative_to(root)
                          and folder != root}, key=lambda folder: len(folder.parts)):
        args += [mount, str(folder), str(folder)]  # a mount point cannot be renamed: .aws stays .aws
    for path in hide:
        args += ["--tmpfs", str(path)] if os.path.isdir(path) else ["--ro-bind", "/dev/null", str(path)]
    return [*args, "--chdir", str(cwd), "--", *argv]


def sandbox_problem():
    """None when bubblewrap can run a command here, else why not (in words a person can act on)."""
    if not sys.platform.startswith("linux"):
        return "--sandbox uses bubblewrap, which runs only on Linux; on this system approved commands run unconfined"
    if program("bwrap", os.environ.get("PATH", os.defpath)) is None:
        return "--sandbox needs bubblewrap: install it (Debian, Ubuntu: sudo apt install bubblewrap)"
    tried = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                           capture_output=True, text=True)
    if tried.returncode != 0:
        return f"bubblewrap cannot start a sandbox here ({tried.stderr.strip()}); it needs user namespaces"
    return None


def hide_this_process():
    """Make this process's memory and environment unreadable to the commands it starts (Linux, not as root):
    an approved `cat /proc/$PPID/environ` would otherwise show the harness's API key."""
    if SUPERVISED:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


if __name__ == "__main__":
    print(run(sys.argv[1:] or ["sh", "-c", "sleep 99 & echo started"], cwd=".", env=os.environ))
