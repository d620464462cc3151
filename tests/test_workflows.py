"""The course's workflow (.github/workflows/course.yml) runs what the README tells a learner to
run, as the README spells it: the quick start's commands and the test command, on Linux and macOS
and in Windows' PowerShell, on the lowest and the highest Python the README names. A README that
changes its commands fails here until the workflow follows. (That every workflow is a valid one is
CI's lint: .ci/run, with actionlint.)"""
import re

from helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
WORKFLOW = (ROOT / ".github" / "workflows" / "course.yml").read_text(encoding="utf-8")


def quick_start():
    """The README's quick start: its two commands for Linux and macOS, then its two for Windows."""
    blocks = re.findall(r"^```(?:console|text)\n(.*?)^```", README, re.M | re.S)
    posix = next(block for block in blocks if block.startswith("python3 -m venv"))
    windows = next(block for block in blocks if block.startswith("py -m venv"))
    return posix.splitlines()[:2], windows.splitlines()[:2]


def task():
    """The task the quick start gives harness.py, which the workflow holds in TASK."""
    return re.search(r'harness\.py "([^"]+)"', quick_start()[0][0])[1]


def run_of(step):
    """What the workflow's step of this name runs: `run: >-` folds its lines into one, `run: |`
    keeps them."""
    lines = WORKFLOW.splitlines()
    at = lines.index(f"      - name: {step}")
    end = next((n for n in range(at + 1, len(lines)) if lines[n].startswith("      - ")),
               len(lines))
    run = next(n for n in range(at, end) if lines[n].startswith("        run:"))
    first = lines[run].split("run:", 1)[1].strip()
    if first not in (">-", "|"):
        return first
    body = [line.strip() for line in lines[run + 1:end] if line.startswith("          ")]
    return (" " if first == ">-" else "\n").join(body)


def test_the_workflow_runs_the_readme_s_quick_start_on_linux_and_macos():
    (install, test), _ = quick_start()
    assert re.search(rf"^  TASK: {re.escape(task())}$", WORKFLOW, re.M), "the workflow's TASK"
    assert run_of("Quick start (Linux and macOS)") == install.replace(f'"{task()}"', '"$TASK"')
    assert run_of("python -m pytest (Linux and macOS)") == f". .venv/bin/activate && {test}"


def test_the_workflow_runs_the_readme_s_quick_start_in_powershell():
    """A line each where the README joins them with `;`, and `python` for `py` (the runner has
    several Pythons, and `py` picks the newest)."""
    _, (install, test) = quick_start()
    commands = install.replace(f'"{task()}"', "$env:TASK").split("; ")
    assert commands[0].startswith("py -m venv"), commands
    ran = run_of("Quick start (Windows, PowerShell)").splitlines()
    assert ran == ["$PSNativeCommandUseErrorActionPreference = $true",
                   "python" + commands[0][2:], *commands[1:]], ran
    assert run_of("python -m pytest (Windows, PowerShell)") == test


def test_the_workflow_runs_on_the_lowest_and_highest_python_the_readme_names():
    lowest, highest = re.search(r"with Python (3\.\d+) to (3\.\d+)", README).groups()
    matrix = re.search(r"^        python: \[(.*)\]$", WORKFLOW, re.M)[1]
    assert matrix == f'"{lowest}", "{highest}"', matrix
