"""Phase 3 (learner's version): run one command in a box of its own.

A clean environment, an empty stdin, a timeout, truncate output, its own process group; with bubblewrap, new
namespaces (no network, its own processes) and only the places the policy names. Try:
    python -c "import guards, shell; print(shell.run(['sh', '-c', 'env'], guards.policy('play')))"
"""
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import guards

TIMEOUT = 10  # seconds a command may run; then it is stopped with everything it started
MAX_OUTPUT = 1_000_000  # bytes of output after which a command is stopped: it prints without end
KEEP = 4000  # bytes of output kept for the result (tools.truncate() cuts it further)
VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "SYSTEMROOT", "COMSPEC", "PATHEXT")  # all a command gets
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")  # what a sandboxed command may read
NEW_GROUP = ({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt"
             else {"start_new_session": True})  # a process group of its own, so stop() can end all of it
RUNNING = set()  # the commands running now


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


def sandboxed(argv, policy, write):
    """argv wrapped in bubblewrap: the system read-only, an empty /tmp, the workspace (writable only when
    write), the harness's places and every .git read-only and pinned, each file holding a secret unreadable."""
    workspace = str(policy.workspace)
    mode = "--bind" if write and policy.write else "--ro-bind"
    args = [policy.sandbox, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for folder in SYSTEM:
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


def run(argv, policy, write=False):
    """Run argv in the workspace, in the sandbox when there is one; return `exit code N` and its output."""
    if policy.sandbox:
        argv = sandboxed(argv, policy, write)
    try:
        process = subprocess.Popen(argv, cwd=policy.workspace, env=environment(policy.workspace),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   **NEW_GROUP)
    except OSError as error:
        return f"error: the command could not start: {error}"
    RUNNING.add(process)
    kept, reason = bytearray(), None

    def read():
        nonlocal reason
        total = 0
        for chunk in iter(lambda: process.stdout.read1(65536), b""):
            kept.extend(chunk[:KEEP - len(kept)])
            total += len(chunk)
            if total > MAX_OUTPUT:
                reason = f"stopped: it printed more than MAX_OUTPUT = {MAX_OUTPUT} bytes"
                stop(process)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = process.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        reason, code = f"timed out after TIMEOUT = {TIMEOUT} seconds, and was stopped", "none"
    stop(process)  # what it left running in its group ends with it
    process.wait()
    reader.join(5)
    RUNNING.discard(process)
    result = f"exit code {code}\n{kept.decode('utf-8', errors='replace')}"
    return f"error: the command {reason}\n{result}" if reason else result
