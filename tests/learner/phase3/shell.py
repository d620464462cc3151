"""Phase 3 (learner's version): run one command, in a box of its own.

run(argv, workspace, write) starts it with an empty stdin, a clean environment, a process group of its own, a
timeout and a cap on its output; on Linux with bubblewrap it runs inside sandboxed(): no network, no home, the
system read-only, an empty /tmp, the workspace writable only when `write`, and PROTECTED always read-only.
Try:  python -c "import shell; print(shell.sandbox_problem() or 'bubblewrap works here')"
"""
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

TIMEOUT = 30  # seconds a command may run
MAX_OUTPUT = 1_000_000  # bytes of output: past this the command is stopped (`yes` would fill memory)
KEEP = 64_000  # bytes of output kept for the result
SANDBOX = "workspace-write"  # or "read-only" (approved commands may change nothing), or "off" (no bubblewrap)
PROTECTED = []  # paths that stay read-only inside a writable workspace: harness.main() names its own files

WINDOWS = os.name == "nt"
VARIABLES = ["HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "TEMP", "TMP",  # what a command needs
             "SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT"]  # and Windows' own
NEW_GROUP = ({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if WINDOWS else {"start_new_session": True})
SYSTEM = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/homebrew",  # programs, libraries
          "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
          "/etc/passwd", "/etc/group", "/etc/ssl", "/etc/pki", "/etc/ca-certificates",  # public certificates
          sys.base_prefix]  # the Python the harness runs on


def shell_argv(command):
    """The words that run a command line: the system's sh on Unix (whatever PATH says), cmd on Windows."""
    return ["cmd", "/c", command] if WINDOWS else [shutil.which("sh", path=os.defpath) or "/bin/sh", "-c", command]


def search_path(workspace):
    """Your PATH without any folder inside the workspace (nor ".", nor "", which mean the current folder), then
    the system's own folders: a planted ./bin/make never runs as make, and an emptied PATH still finds sh."""
    inside = Path(workspace).resolve()
    kept = []
    for folder in [*os.environ.get("PATH", "").split(os.pathsep), *os.defpath.split(os.pathsep)]:
        if folder and Path(folder).is_absolute() and not Path(folder).resolve().is_relative_to(inside):
            kept += [folder] if folder not in kept else []
    return os.pathsep.join(kept)


def environment(path):
    """Only the VARIABLES a command needs: no API key, no DATABASE_URL, no LD_PRELOAD."""
    env = {name: os.environ[name] for name in VARIABLES if name in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env["PATH"] = path if path is not None else os.defpath
    return env


def sandboxed(argv, workspace, write):
    """argv wrapped in bwrap: new namespaces (no network, its own processes), the system read-only, an empty /tmp,
    the workspace read-only or writable, PROTECTED read-only on top of it, last."""
    workspace = Path(workspace).resolve()
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--new-session",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in SYSTEM:
        if os.path.islink(path):  # /bin -> usr/bin: the same link inside
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    args += ["--bind" if write else "--ro-bind", str(workspace), str(workspace)]
    for path in PROTECTED:
        if Path(path).is_relative_to(workspace) and os.path.exists(path):
            args += ["--ro-bind", str(path), str(path)]
    return args + ["--chdir", str(workspace), "--", *argv]


@functools.cache
def sandbox_problem():
    """Why bubblewrap cannot run here, in one line, or None when it can."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap runs only on Linux, and this is {sys.platform}"
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed: sudo apt install bubblewrap"
    try:
        done = subprocess.run(sandboxed(["true"], Path.cwd(), False), capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL, env=environment(None))
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap does not start here: {error}"
    if done.returncode != 0:
        return f"bubblewrap does not start here: {' '.join(done.stderr.split()) or f'exit code {done.returncode}'}"
    return None


def use_sandbox():
    return SANDBOX != "off" and sandbox_problem() is None


def stop(process):
    """Kill the command's whole process group (what it left in the background too); "" or what went wrong."""
    if WINDOWS:
        done = subprocess.run(["taskkill", "/T", "/F", "/PID", str(process.pid)], capture_output=True, text=True)
        process.kill()
        gone = done.returncode == 0 or process.poll() is not None
        return "" if gone else f"taskkill could not stop it: {done.stdout.strip()} {done.stderr.strip()}"
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is already empty
    except OSError as error:
        return f"could not stop its process group: {error}"
    process.wait()
    return ""


def run(argv, workspace, write=False, path=None):
    """Run argv (a list of words; shell_argv() for a command line) in workspace; return `exit code N` (or why it
    was stopped) and its output, stdout and stderr together."""
    if use_sandbox():
        argv = sandboxed(argv, workspace, write)
    try:
        process = subprocess.Popen(argv, cwd=workspace, env=environment(path), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **NEW_GROUP)
    except OSError as error:
        return f"error: the command could not start: {error}"
    kept, seen, flooded = bytearray(), [0], threading.Event()

    def read():
        for chunk in iter(lambda: process.stdout.read1(65536), b""):
            kept.extend(chunk[:max(KEEP - len(kept), 0)])
            seen[0] += len(chunk)
            if seen[0] > MAX_OUTPUT and not flooded.is_set():
                flooded.set()
                stop(process)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    timeout = TIMEOUT
    try:
        status = f"exit code {process.wait(max(timeout, 0))}"
    except subprocess.TimeoutExpired:
        status = f"error: timed out after {timeout:.0f} s, and was stopped with all it started"
    finally:  # Ctrl-C included
        killed = stop(process)  # also ends what it left in the background, like `sleep 99 &`
    reader.join(2)  # a process that escaped the group may still hold the pipe: do not wait for it
    if flooded.is_set():
        status = f"error: stopped after more than {MAX_OUTPUT} bytes of output"
    output = bytes(kept).decode("utf-8", errors="replace")
    if seen[0] > len(kept):
        output += f"\n[{seen[0] - len(kept)} more bytes of output left out]"
    return "\n".join(part for part in (status, killed, output) if part)
