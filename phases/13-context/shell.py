"""Run one command where it can do no harm: in the workspace, with a clean environment, a timeout,
and its output capped while it is read. It runs inside the system's sandbox (bubblewrap on Linux,
Seatbelt on macOS), seeing only what the run's policy allows: no network, no home folder, the system
read-only, the harness's own places and every .git read-only, no file that holds a secret, and (on
Linux) every process it started gone when it ends.

Run:  python shell.py sh -c 'sleep 99 & echo started'   (prints the result; the sleep is gone)
"""

import atexit
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import guards

TIMEOUT = 10  # seconds a command may run before it and everything it started are killed
MAX_OUTPUT = 1_000_000  # bytes a command may print before it is stopped: `yes` must not fill memory
KEEP = 4000  # bytes of output kept for the result
# What a command gets of the harness's environment: what programs need for their language, terminal
# and temporary files, and Windows for its own folders. API keys, DATABASE_URL, LD_PRELOAD and the
# rest stay here.
VARIABLES = ("HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR", "SYSTEMROOT",
             "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP", "USERPROFILE", "USERNAME", "APPDATA",
             "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES", "SYSTEMDRIVE", "HOMEDRIVE", "HOMEPATH")
# A group of its own, so one signal reaches everything it starts (on Windows, taskkill /T ends the
# tree).
NEW_GROUP = ({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt"
             else {"start_new_session": True})
RUNNING = set()  # the commands running now, so that whatever ends a run can end them too
# held while a command starts and joins RUNNING, and while reap() looks: never half-way
LISTING = threading.Lock()
# What the sandbox shows of the system, read-only: programs, their libraries, Python, the public
# certificates. Nothing of your home, /etc/shadow or /etc/ssl/private. NETWORK: what a program that
# may reach the network needs.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives",
          "/etc/ld.so.cache", "/etc/ssl/certs", "/etc/localtime", "/etc/passwd", "/etc/group",
          sys.base_prefix, sys.prefix)
NETWORK = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl",
           "/etc/ca-certificates")
# Linux's PR_SET_CHILD_SUBREAPER: what a command leaves behind becomes the harness's to end
SUBREAPER = 36
ADOPTED = False  # set by adopt(): before it, nothing comes back to the harness to be reaped
# macOS: Seatbelt's profile. Everything is denied but what is allowed here: running programs,
# signals and facts within the sandbox, the machine's facts that programs read (not other
# processes': their environment holds keys), user names, Python's semaphores, every file's name and
# size, /dev/null; and what seatbelt() fills in from the policy: what may be read and written
# ({reads}, {writes}) and whether there is a network ({network}).
PROFILE = """(version 1)
(deny default)
(allow process-exec process-fork)
(allow signal process-info* (target same-sandbox))
(allow sysctl-read (sysctl-name-prefix "hw.") (sysctl-name-prefix "machdep.cpu.")
  (sysctl-name "vm.loadavg") (sysctl-name "kern.ostype") (sysctl-name "kern.osrelease")
  (sysctl-name "kern.osversion") (sysctl-name "kern.osproductversion") (sysctl-name "kern.version")
  (sysctl-name "kern.hostname") (sysctl-name "kern.argmax") (sysctl-name "kern.maxfilesperproc")
  (sysctl-name "sysctl.proc_cputype"))
(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow user-preference-read ipc-posix-sem ipc-posix-shm file-read-metadata)
(allow file-read* file-write-data file-ioctl (literal "/dev/null"))
(allow file-read* {reads})
(allow file-write* {writes})
{network}"""
NETWORK_PROFILE = """(allow network*)
(allow mach-lookup (global-name "com.apple.dnssd.service")
  (global-name "com.apple.trustd.agent"))"""
# macOS: homes, disks and others' files
HOMES = ("/Users", "/Volumes", "/private/var/folders", "/private/tmp")


def run(argv, policy, write=False, deadline=None):
    """Run argv in the workspace and return "exit code N" and its output (stdout and stderr
    together): at most KEEP bytes of it, with a note of how much was cut. write: the command may
    change the workspace (an approved one, where the policy allows). After TIMEOUT seconds, or at
    the deadline (a time.monotonic()) if that comes first, it is stopped, and the result says so."""
    # never below 0: approved commands start after the others, maybe past the deadline
    timeout = max(min(TIMEOUT, deadline - time.monotonic()), 0) if deadline else TIMEOUT
    boxed = sandboxed(argv, policy, write and policy.write) if policy.sandbox else argv
    before = (guards.repositories(policy.workspace) if policy.sandbox and write and policy.write
              else None)
    if not policy.sandbox:
        adopt()
    with LISTING:  # else a reap() beside it could take it, just started, for an orphan
        process = subprocess.Popen(boxed, cwd=policy.workspace,
                                   env=environment(guards.search_path(policy.workspace)),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, **NEW_GROUP)
        RUNNING.add(process)
    since, kept, printed = started(process.pid), bytearray(), 0

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
        status = f"exit code {process.wait(timeout)}"
    except subprocess.TimeoutExpired:
        status = f"error: timed out after {timeout:.1f} s" + (" (the run's deadline)"
                                                              if timeout < TIMEOUT else "")
    finally:  # Ctrl-C included
        killed = stop(process)  # also ends what it left in the background, like `sleep 99 &`
        RUNNING.discard(process)
        if not policy.sandbox:
            # what left its group (setsid, a double fork) came back to the harness: end it too
            reap(since)
    reader.join(1)
    if printed > MAX_OUTPUT:
        status = f"error: stopped after printing {MAX_OUTPUT} bytes"
    if before is not None and (made := guards.repositories(policy.workspace) - before):
        status += f"; {remove(made, policy.workspace)}"
    cut = f"\n[... {printed - len(kept)} more bytes cut]" if printed > len(kept) else ""
    return f"{status}{killed}\n{kept.decode('utf-8', errors='replace')}{cut}"


def environment(path):
    """What a child process gets of the harness's environment: VARIABLES, and as its PATH path, then
    the system's own folders (all a sandbox shows of PATH). An empty PATH would make sh look in the
    current folder, and so does cmd unless told not to."""
    system = [folder for folder in os.defpath.split(os.pathsep) if os.path.isabs(folder)]
    return {**{name: os.environ[name] for name in VARIABLES if name in os.environ},
            "PATH": os.pathsep.join(dict.fromkeys([*filter(None, path.split(os.pathsep)),
                                                   *system])),
            **({"NoDefaultCurrentDirectoryInExePath": "1"} if os.name == "nt" else {})}


def sandboxed(argv, policy, write, network=False, readable=(), writable=()):
    """argv inside the policy's sandbox: bubblewrap() on Linux, Seatbelt on macOS (sandbox-exec,
    with the profile seatbelt() builds, and a scratch folder of its own as HOME and TMPDIR, gone
    when the harness exits). readable: more places it may read (an MCP server's own program);
    writable: more it may read and write (an MCP server's cache, which outlives the run)."""
    if Path(policy.sandbox).name != "sandbox-exec":
        return bubblewrap(argv, policy, write, network, readable, writable)
    scratch = os.path.realpath(tempfile.mkdtemp(prefix="sandbox-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return [policy.sandbox, "-p", seatbelt(policy, write, network, scratch, readable, writable),
            "/usr/bin/env", f"HOME={scratch}", f"TMPDIR={scratch}", *argv]


def bubblewrap(argv, policy, write, network=False, readable=(), writable=()):
    """argv inside bubblewrap, which it finds where the policy says. New namespaces for everything,
    the network too unless asked for (so its own process numbers: when the command ends, the kernel
    ends every process it started, wherever it went); no capabilities; the system and `readable`
    read-only, `writable` writable; an empty /tmp; the workspace, writable only when `write`, and in
    it guards.sealed(): the harness's own places and every .git read-only, each pinned where it is
    (every folder on the way is a mount point, which cannot be moved or replaced), and every file
    that holds a secret replaced by an empty one."""
    workspace, mode = str(policy.workspace), "--bind" if write else "--ro-bind"
    args = [policy.sandbox, "--unshare-all", *(["--share-net"] if network else []),
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--proc", "/proc", "--dev",
            "/dev", "--tmpfs", "/tmp", "--setenv", "HOME", "/tmp"]
    for folder in (*SYSTEM, *(NETWORK if network else ()), *map(str, readable)):
        args += ["--ro-bind-try", folder, folder]
    args += [word for folder in map(str, writable) for word in ("--bind", folder, folder)]
    args += [mode, workspace, workspace]
    read_only, hidden = guards.sealed(policy)
    for place in read_only:
        parts = place.relative_to(workspace).parts
        for at in range(1, len(parts)):  # the folders on its way, pinned as they are
            folder = str(Path(workspace, *parts[:at]))
            args += [f"{mode}-try", folder, folder]
        args += ["--ro-bind-try", str(place), str(place)]
    for file in hidden:
        args += ["--ro-bind", "/dev/null", str(file)]
    return [*args, "--chdir", workspace, "--", *argv]


def seatbelt(policy, write, network, scratch, readable=(), writable=()):
    """The Seatbelt profile of a command (PROFILE, filled in from the policy). It reads what is not
    in anyone's home (HOMES, yours, the harness's folder), or is in the workspace, Python's folders,
    its scratch folder, `readable` or `writable`, but no file that holds a secret; it writes only
    its scratch folder and `writable`, and the workspace when `write`, but no .git (now or later),
    none of the harness's places in it, no folder on their way, no file that holds a secret. Places
    kept out are matched in any case (anycase()), as macOS's disk matches names; paths are their
    real ones (/tmp is /private/tmp to Seatbelt)."""
    read_only, hidden = guards.sealed(policy)
    # .git: a rule for all of them, below
    own = [place for place in read_only if place.name.lower() != ".git"]
    pinned = {folder for place in own for folder in place.parents
              if folder.is_relative_to(policy.workspace) and
              folder != policy.workspace}
    out = " ".join(f'(require-not (regex #"{anycase(place)}"))' for place in hidden)
    homes = " ".join(f'(require-not (regex #"{anycase(place)}"))' for place in
                     (*HOMES, Path.home().resolve(), guards.HOME))
    inside = " ".join(f"(subpath {quoted(place)})" for place in
                      (policy.workspace, Path(sys.prefix).resolve(),
                       Path(sys.base_prefix).resolve(), scratch, *readable, *writable))
    kept = " ".join([r'(require-not (regex #"/\.[Gg][Ii][Tt](/|$)"))', out,
                     *(f'(require-not (regex #"{anycase(place)}"))' for place in own),
                     *(f'(require-not (regex #"{anycase(folder, "$")}"))' for folder in pinned)])
    writes = f"(require-all (subpath {quoted(policy.workspace)}) {kept}) " if write else ""
    return PROFILE.format(reads=f"(require-all (require-any (require-all {homes}) {inside}) {out})",
                          writes=writes + " ".join(f"(subpath {quoted(place)})" for place in
                                                   (scratch, *writable)), network=NETWORK_PROFILE
                          if network else "")


def anycase(path, end="(/|$)"):
    """A Seatbelt regex for a path and what is under it, in any case. A character the regex or the
    profile would read otherwise (a quote, a backslash) may stand for any: a place kept out is
    matched more, never less.
    Example: anycase("/Users/a.b") -> "^/[Uu][Ss][Ee][Rr][Ss]/[Aa][.][Bb](/|$)" """
    return "^" + "".join(f"[{c.upper()}{c.lower()}]" if c.isascii() and c.isalpha() else
                         c if c.isalnum() or c in "/_-" else "." if c in '"\\^]' else f"[{c}]"
                         for c in str(path)) + end


def quoted(path):
    """A path as a string in a Seatbelt profile: quotes and backslashes escaped, as in JSON."""
    return json.dumps(str(path), ensure_ascii=False)


def remove(made, workspace):
    """Remove the repositories a sandboxed command made, before anything outside the sandbox can run
    git there (an editor does, in every repository it finds); say what was removed, and why."""
    for place in made:
        if place.is_dir() and not place.is_symlink():
            shutil.rmtree(place, ignore_errors=True)
        else:
            place.unlink(missing_ok=True)
    names = ", ".join(sorted(str(place.relative_to(workspace)) for place in made))
    return (f"removed {names}, which it made: git runs what a repository's config says, outside "
            "any sandbox, so a command may not make one (git init is yours to run)")


def stop(process):
    """Kill a command's process group (on Windows, its process tree); "" when that went as planned,
    else a note."""
    if os.name == "nt":
        # taskkill by its own path: Windows looks in the current folder, the workspace, first
        done = subprocess.run([os.path.join(guards.SYSTEM_PATH, "taskkill.exe"), "/F", "/T", "/PID",
                               str(process.pid)], capture_output=True, text=True)
        return ("" if done.returncode == 0 or process.poll() is not None
                else f"; taskkill failed: {done.stdout}")
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:  # the group is gone already (macOS may say so with EPERM)
        pass
    process.wait()
    return ""


def reap(since):
    """Linux: kill every process orphaned to the harness (its subreaper, see adopt()) since `since`,
    a start time in clock ticks, that is no command of its own: what left the command's group
    (setsid, nohup, a double fork)."""
    if since is None or not os.path.isdir("/proc"):  # not Linux: a process group is all there is
        return
    with LISTING:
        ours = {process.pid for process in RUNNING}
        while orphans := [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                          if parent(pid) == os.getpid() and (started(pid) or 0) >= since
                          and pid not in ours]:
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:  # gone already
                    pass


def parent(pid):
    """The parent of a process, from Linux's /proc (None when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def started(pid):
    """When a process started, in clock ticks since the machine did, from Linux's /proc (None when
    it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def ticks():
    """Now, in the clock ticks that started() counts in (Linux's /proc), or None elsewhere."""
    if not os.path.isdir("/proc"):
        return None
    try:
        return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


def adopt():
    """Linux: make the harness the subreaper of what it starts, so that a process that leaves its
    command's group comes back to the harness to be ended (reap()), not to init. Elsewhere nothing:
    the group is all there is."""
    global ADOPTED
    if sys.platform.startswith("linux") and os.path.isdir("/proc"):
        ctypes.CDLL(None).prctl(SUBREAPER, 1, 0, 0, 0)
        ADOPTED = True


def shell_argv(command):
    """How a command line that needs a shell runs: sh on Linux and macOS, cmd on Windows, each by
    its own path (Windows would look for cmd.exe in the current folder, the workspace, first)."""
    return [os.path.join(guards.SYSTEM_PATH, "cmd.exe"), "/d", "/s", "/c",
            command] if os.name == "nt" else \
        ["/bin/sh", "-c", command]


if __name__ == "__main__":
    print(run(sys.argv[1:], guards.policy()))
