"""The supervisor: runs one command as its child, and kills everything below it when the command ends, when its
time is up (SIGTERM from the harness), or when the harness dies, even by `kill -9`. Linux only.

Run:  python supervisor.py PID -- COMMAND...     (shell.py does this for every command; PID is the harness's)
It asks the kernel to send it SIGTERM when its parent dies (a parent-death signal), and to make it the parent of
every orphan below it (a subreaper), so a process that left its session or lost its parent is still found.
It imports almost nothing: it starts once for every command, and a fast start is a fast tool call.
"""
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36  # from <linux/prctl.h>


def supervise(harness, argv):
    """Run argv as a child; end(), killing everything below, when it ends or when SIGTERM comes."""
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    signal.signal(signal.SIGTERM, lambda *_: end(143))
    if os.getppid() != harness:
        end(143)  # the harness died before the parent-death signal was set
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as error:
            print(f"{argv[0]}: {error.strerror}", file=sys.stderr)
            os._exit(127)
    while True:
        pid, status = os.waitpid(-1, 0)  # also reaps the orphans this process adopted
        if pid == child:
            end(os.waitstatus_to_exitcode(status))


def end(code, rounds=100):
    """Kill every process below this one, again until none is left (an orphan comes up to this process when its
    parent dies), then exit with the command's code."""
    while rounds and (below := descendants(os.getpid())):
        rounds -= 1
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
    os._exit(code if code >= 0 else 128 - code)


def descendants(root, table=None):
    """The ids of the processes below root, from processes() or the table given."""
    table = table or processes()
    found, frontier = [], {root}
    while frontier:
        frontier = {pid for pid, (parent, *_) in table.items() if parent in frontier and pid not in found}
        found += frontier
    return found


def processes():
    """Every process as {pid: (parent pid, session id, start time)}, read from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := about(entry)):
            table[int(entry)] = found
    return table


def about(pid):
    """(parent pid, session id, start time in clock ticks since boot) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # "pid (name) state ppid pgrp session ... starttime"
        return int(fields[1]), int(fields[3]), int(fields[19])
    except (ValueError, OSError, IndexError):
        return None


if __name__ == "__main__":
    if sys.argv[2:3] != ["--"] or not sys.argv[1].isdigit() or len(sys.argv) < 4:
        sys.exit(__doc__)
    supervise(int(sys.argv[1]), sys.argv[3:])
