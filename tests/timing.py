"""How long a learner waits for a check, and for the whole suite: wall seconds, with the load they were taken at.

Run:  python tests/timing.py                  (each phase's check, then the README's `python -m pytest`: minutes)
      python tests/timing.py --phases 6 8     (those phases' checks only)
      python tests/timing.py --no-suite       (every phase's check, not the suite)
      python tests/timing.py --starting       (each phase's check on the phase before's code: what a learner meets
                                              first, a check that fails; it has no target)
      python tests/timing.py --durations 30   (also the 30 slowest tests of each run, as pytest --durations shows)
      python tests/timing.py --log runs.txt   (also keep what each run printed, to read which tests took the time)
Each figure is one run of its command alone, from the repository's root, as a learner or the README runs it:
`python -m pytest tests/checkpoints --phase N --code phases/NN-name -p no:cacheprovider` for phase N (its check
on its own checkpoint), and `python -m pytest` (pytest.ini's addopts: four workers) for the suite. The machine's
CPU count and its load average (1 minute) before and after each run are printed beside it: a figure taken on a
busy machine says so; so are the CPU seconds the run and its processes used, which a busy machine changes less
(a quiet 2-core machine takes at least half of them, and at least the longest wait a test makes). The targets: a
phase's check at most 10 s, the suite at most 3 minutes, on 2 cores when the machine is quiet. It prints figures
and whether each meets its target; it asserts nothing about time (exit 0, or 1 when a run's tests failed: that
figure is not the time of a passing check).
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

try:
    import resource  # not on Windows
except ImportError:
    resource = None

ROOT = Path(__file__).resolve().parents[1]
PHASE_TARGET = 10  # seconds: a phase's check
SUITE_TARGET = 180  # seconds: the README's whole test command


def checkpoints():
    return sorted(p for p in (ROOT / "phases").iterdir() if p.is_dir() and p.name[:2].isdigit())


def adopt_orphans():
    """Linux: become the subreaper of what the runs start, so that a process whose parent ended first (the
    forkserver a run leaves behind, which forked every warm harness) is counted in cpu() once reaped."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap(patience=5):
    """Wait for the orphans a run left (at most patience seconds); returns how many still run."""
    until = time.monotonic() + patience
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except (ChildProcessError, AttributeError):
            return 0
        if pid == 0 and time.monotonic() > until:
            return len([p for p in os.listdir("/proc") if p.isdigit() and parent_of(p) == os.getpid()])
        if pid == 0:
            time.sleep(0.05)


def parent_of(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def cpu():
    """CPU seconds (user and system) of this script's children that have ended and were reaped: the runs and
    every process they started (on Linux, orphans too: see adopt_orphans())."""
    if resource is None:
        return float("nan")
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def load():
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def timed(command, durations, log=None):
    """(seconds, load before, load after, exit code, the slowest tests' lines) of one run of command."""
    if durations:
        command = [*command, f"--durations={durations}", "--durations-min=0.5"]
    before, started, used = load(), time.monotonic(), cpu()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds, after = time.monotonic() - started, load()
    left = reap()
    used = cpu() - used
    if log:
        with open(log, "a", encoding="utf-8") as kept:
            kept.write(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}\n")
    lines = done.stdout.splitlines()
    slowest = [line for line in lines if re.match(r"\d+\.\d+s (call|setup|teardown) ", line)][:durations]
    summary = next((line for line in reversed(lines) if line.strip()), "")
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    failed += [f"{left} processes it started still ran 5 s after it ended"] if left else []
    return seconds, used, before, after, done.returncode, slowest, summary, failed


def report(name, figure, target, show):
    seconds, used, before, after, code, slowest, summary, failed = figure
    verdict = "" if target is None else "ok" if seconds <= target else f"over {target} s"
    status = "" if code == 0 else f"  (exit {code}: {summary.strip('= ')})"
    if target is None:  # a check that was to fail: its failures are no news, what it left running is
        failed = [line for line in failed if not line.startswith(("FAILED ", "ERROR "))]
    print(f"{name:<26} {seconds:6.1f} s wall {used:6.1f} s CPU  load {before:5.2f} -> {after:5.2f}  "
          f"{verdict}{status}", flush=True)
    for line in [*(slowest if show else []), *failed]:
        print(f"    {line[:200]}", flush=True)
    return code


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", type=int, nargs="*", help="only these phases' checks (default: all)")
    parser.add_argument("--no-suite", action="store_true", help="leave out the whole suite's figure")
    parser.add_argument("--no-phases", action="store_true", help="leave out the phases' figures")
    parser.add_argument("--starting", action="store_true",
                        help="instead: each phase's check on the code of the phase before it (it fails)")
    parser.add_argument("--durations", type=int, default=0, metavar="K", help="also print the K slowest tests")
    parser.add_argument("--log", metavar="FILE", help="append what each run printed to FILE")
    options = parser.parse_args()
    adopt_orphans()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{cpus} CPUs for this process ({os.cpu_count()} on the machine), Python {sys.version.split()[0]}; "
          f"load average now {load():.2f}", flush=True)
    failed = 0
    folders = checkpoints()
    for number in [] if options.no_phases else options.phases if options.phases is not None else range(len(folders)):
        folder = folders[number - 1 if options.starting else number]
        if options.starting and number == 0:
            continue  # phase 0 has no phase before it
        command = [sys.executable, "-m", "pytest", "tests/checkpoints", "--phase", str(number), "--code",
                   str(folder.relative_to(ROOT)), "-p", "no:cacheprovider"]
        figure = timed(command, options.durations, options.log)
        if options.starting:  # it fails: its figure is how long a learner waits to be told what to do
            report(f"phase {number} on {folder.name}", figure, None, options.durations)
        else:
            failed |= report(f"phase {number} ({folder.name})", figure, PHASE_TARGET, options.durations)
    if not (options.no_suite or options.starting or options.phases is not None):
        figure = timed([sys.executable, "-m", "pytest"], options.durations, options.log)
        failed |= report("suite (python -m pytest)", figure, SUITE_TARGET, options.durations)
    print(f"load average now {load():.2f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
