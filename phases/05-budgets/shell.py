"""Run one command where it can do no harm: in the workspace, with a clean environment, a timeout, and its output
capped while it is read. On Linux it runs inside bubblewrap: no network, no home folder, the system read-only,
the harness's own files read-only, and every process it started gone when it ends.

Run:  python shell.py sh -c 'sleep 99 & echo started'      (prints the result; the sleep does not survive)
"""
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

TIMEOUT = 10  # seconds a command may run before it and everything it started are killed
MAX_OUTPUT = 1_000_000  # bytes a command may print before it is stopped: `yes` must not fill memory
KEEP = 4000  # bytes of output kept for the result
# What a command gets of the harness's environment: what programs need for their language, terminal and temporary
# files, and Windows for its own folders. API keys, DATABASE_URL, LD_PRELOAD and the rest stay here.
VARIABLES = ("HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR", "SYSTEMROOT", "WINDIR",
             "COMSPEC", "PATHEXT", "TEMP", "TMP", "USERPROFILE")
# A group of its own, so one signal reaches everything it starts (on Windows, taskkill /T ends the tree).
NEW_GROUP = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt" else {"start_new_session": True}
SANDBOX = "workspace-write"  # what an approved command may do: "workspace-write", "read-only", or None: no sandbox
PROTECTED = []  # paths no command may change, even in a writable workspace: the harness's own (harness.py sets them)
# What the sandbox shows of the system, read-only: programs, their libraries, Python, the public certificates.
# Nothing of your home, /etc/shadow or /etc/ssl/private.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives", "/etc/ld.so.cache",
          "/etc/ssl/certs", "/etc/localtime", "/etc/passwd", "/etc/group", sys.base_prefix, sys.prefix)


def run(argv, workspace, write=False, path=None):
    """Run argv in the workspace and return "exit code N" and its output (stdout and stderr together): at most
    KEEP bytes of it, with a note of how much was cut. write: the command may change the workspace (an approved
    one, when SANDBOX allows); path is its PATH; after TIMEOUT seconds it is stopped, and the result says so."""
    process = subprocess.Popen(sandboxed(argv, workspace, write) if SANDBOX else argv, cwd=workspace,
                               env=environment(path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, **NEW_GROUP)
    kept, printed = bytearray(), 0

    def read_output():  # reads while the command runs, keeping only what fits
        nonlocal printed
        for chunk in iter(lambda: process.stdout.read1(65536), b""):
            printed += len(chunk)
            kept.extend(chunk[:KEEP - len(kept)])
            if printed > MAX_OUTPUT:
                stop(process)

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        status = f"exit code {process.wait(TIMEOUT)}"
    except subprocess.TimeoutExpired:
        status = f"error: timed out after {TIMEOUT} s"
    finally:  # Ctrl-C included
        killed = stop(process)  # also ends what it left in the background, like `sleep 99 &`
    reader.join(1)
    if printed > MAX_OUTPUT:
        status = f"error: stopped after printing {MAX_OUTPUT} bytes"
    cut = f"\n[... {printed - len(kept)} more bytes cut]" if printed > len(kept) else ""
    return f"{status}{killed}\n{kept.decode('utf-8', errors='replace')}{cut}"


def environment(path=None):
    """What a child process gets of the harness's environment: VARIABLES, and path as its PATH."""
    return {**{name: os.environ[name] for name in VARIABLES if name in os.environ}, "PATH": path or os.defpath}


def sandboxed(argv, workspace, write):
    """argv inside bubblewrap. New namespaces for everything (so no network, and its own process numbers: when the
    command ends, the kernel ends every process it started, wherever it went), no capabilities, the system
    read-only, an empty /tmp, and the workspace, writable only when `write`; PROTECTED stays read-only in it."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--setenv", "HOME", "/tmp"]
    for folder in SYSTEM:
        args += ["--ro-bind-try", folder, folder]
    args += ["--bind" if write else "--ro-bind", str(workspace), str(workspace)]
    for path in PROTECTED:
        if Path(path).is_relative_to(workspace) and os.path.exists(path):
            args += ["--ro-bind", str(path), str(path)]
    return [*args, "--chdir", str(workspace), "--", *argv]


def sandbox_problem():
    """Why commands cannot run in the sandbox here, in one line; None when they can."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap runs on Linux only, and this is {sys.platform}"
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (Debian and Ubuntu: sudo apt install bubblewrap)"
    tried = subprocess.run(sandboxed(["true"], Path.cwd(), False), capture_output=True, text=True)
    return f"bubblewrap does not start here: {tried.stderr.strip()}" if tried.returncode else None


def stop(process):
    """Kill a command's process group (on Windows, its process tree); "" when that went as planned, else a note."""
    if os.name == "nt":
        done = subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True, text=True)
        return "" if done.returncode == 0 or process.poll() is not None else f"; taskkill failed: {done.stdout}"
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:  # the group is gone already (macOS may say so with EPERM)
        pass
    process.wait()
    return ""


def shell_argv(command):
    """How a command line that needs a shell runs: sh on Linux and macOS, cmd on Windows."""
    return ["cmd.exe", "/d", "/s", "/c", command] if os.name == "nt" else ["/bin/sh", "-c", command]


if __name__ == "__main__":
    SANDBOX = None if sandbox_problem() else SANDBOX
    print(run(sys.argv[1:], Path.cwd()))
