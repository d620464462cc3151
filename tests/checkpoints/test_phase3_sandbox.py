"""Phase 3, the sandbox: what a command can reach is decided by the operating system. Each check runs your
harness from the command line with --yes against the scripted model, so that what the model asks really runs,
and reads what came back to the model: no write outside, no network, the harness's own files unchanged, no
process left, no secret value in any result. Without bubblewrap, the sandbox checks skip and say why."""
import os
import shutil
import subprocess
import time

import pytest
from helpers import groq_env, run_python, running_commands, scripted_backend

PHASE = 3
FILES = ("backend.py", "guards.py", "harness.py", "shell.py", "tools.py")
SECRET = "sk-live-0123456789abcdef"


def bubblewrap_works():
    if not shutil.which("bwrap"):
        return False
    done = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-all", "true"], capture_output=True)
    return done.returncode == 0


needs_bubblewrap = pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap is not installed here, or cannot "
                                      "start (Debian and Ubuntu: sudo apt install bubblewrap)")


@pytest.fixture
def project(workspace):
    """The harness's folder as the workspace (as in the quick start), holding its .env with a secret, a copy of
    that secret under a name no list knows, and a note."""
    (workspace / ".env").write_text(f"MY_SERVICE_TOKEN={SECRET}\n")
    (workspace / "notes.bak").write_text(f"old token: {SECRET}\n")
    (workspace / "notes.txt").write_text("keep me\n")
    return workspace


def results(project, server, *commands, args=("--yes",), input=""):
    """Run one scripted turn of run_shell calls through `python harness.py ARGS`; return the results the model
    got, in order, and what the harness printed."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": c}, "id": f"c{n}"}
                                for n, c in enumerate(commands)]}, "done")
    done = run_python(project, "harness.py", *args, "Do it", env=groq_env(server), input=input)
    assert done.returncode == 0, f"the run should answer (exit 0).\n{done.stdout}{done.stderr}"
    sent = server.requests[-1]["body"]["messages"]
    return [m["content"] for m in sent if m["role"] == "tool"][-len(commands):], done


def test_no_result_carries_a_secret_the_harness_knows(project, server):
    """The values in the harness's .env, and its API key, are masked in every result, under any name the file has:
    a copy, a glob, the environment of a process."""
    found, _ = results(project, server, "cat notes.bak", "cat .e*", "cat /proc/$PPID/environ",
                       "grep -r token . 2>/dev/null")
    assert not any(SECRET in r for r in found), found
    assert "[secret MY_SERVICE_TOKEN]" in found[0], f"a masked value is replaced by its name: {found[0]!r}"


@pytest.mark.parametrize("command", ["cat .env", "cp .env copy.txt", "grep TOKEN .env", 'cat .e""nv'])
def test_a_command_naming_a_secret_is_refused_whoever_approves(project, server, command):
    """A command with a word that names a secret file is refused even under --yes: its result starts with error:
    and says secret."""
    found, _ = results(project, server, command)
    assert found[0].startswith("error:") and "secret" in found[0], found
    assert not (project / "copy.txt").exists()


def test_commands_get_only_the_variables_they_need(project, server, monkeypatch):
    """The environment a command gets holds no API key and no variable off the list, whatever it is called."""
    monkeypatch.setenv("DATABASE_URL", "postgres://me:hunter2hunter2@db/app")
    monkeypatch.setenv("LANG", "C.UTF-8")
    found, _ = results(project, server, "env")
    assert "LANG=C.UTF-8" in found[0] and "hunter2" not in found[0] and "gsk_test" not in found[0], found[0]


def test_a_command_and_all_it_started_end_with_its_timeout(project, server, load):
    """A command past shell.TIMEOUT is stopped with everything it started, and its result says it timed out;
    output past MAX_OUTPUT stops it too."""
    load("shell").TIMEOUT = 1
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": c}, "id": f"c{n}"}
                                for n, c in enumerate(["sleep 51.5 & sleep 50.5", "yes"])]}, "done")
    started = time.monotonic()
    load("harness").run("Do it", backend=scripted_backend(server), approve=lambda question: True)
    found = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert time.monotonic() - started < 15, "the command should stop at TIMEOUT"
    assert "timed out" in found[0] and "stopped" in found[1] and len(found[1]) < 6000, found
    time.sleep(0.5)
    assert running_commands("sleep 51.5") == [], "a process the command started is still running"


@needs_bubblewrap
def test_an_approved_command_writes_only_the_workspace_and_reaches_no_network(project, server):
    """--sandbox workspace-write (the default): an approved command may change the workspace, and nothing outside
    it; it sees nothing outside it but the system's programs, and it has no network."""
    marker = f"made-{os.getpid()}"
    (project.parent / "neighbour.txt").write_text("not yours\n")
    found, _ = results(project, server, "touch inside.txt", f"touch ../{marker}", f"touch /tmp/{marker}",
                       "bash -c 'echo > /dev/tcp/127.0.0.1/%d' && echo connected" % server.port,
                       "cat ../neighbour.txt")
    assert (project / "inside.txt").exists(), found[0]
    assert not (project.parent / marker).exists() and not os.path.exists(f"/tmp/{marker}"), found
    assert "connected" not in found[3] and "not yours" not in found[4], found


@needs_bubblewrap
def test_read_only_means_nothing_is_written(project, server):
    """--sandbox read-only: an approved command writes nothing, not even in the workspace."""
    found, _ = results(project, server, "touch made.txt", args=("--yes", "--sandbox", "read-only"))
    assert not (project / "made.txt").exists(), found


@needs_bubblewrap
def test_the_harness_own_files_cannot_be_changed(project, server):
    """With the workspace the harness's own folder, no command changes its code: tools.py stays as it was."""
    before = (project / "tools.py").read_bytes()
    found, _ = results(project, server, "echo 'print(1)' >> tools.py", "rm -f harness.py")
    assert (project / "tools.py").read_bytes() == before and (project / "harness.py").exists(), found


@needs_bubblewrap
def test_nothing_a_command_started_outlives_it(project, server):
    """A process the command left in the background, even in a session of its own, is gone when it returns."""
    found, _ = results(project, server, "sleep 71.5 > /dev/null 2>&1 &", "setsid sleep 72.5 > /dev/null 2>&1 &")
    time.sleep(0.5)
    assert running_commands("sleep 71.5") == [] and running_commands("sleep 72.5") == [], found


def test_without_a_sandbox_one_line_says_so_and_yes_asks(project, server, monkeypatch):
    """No bubblewrap (here: PATH without it): one line on stderr starts with `note: no sandbox`, and --yes does not
    approve a command; `--sandbox off` says you accept that, and --yes approves again."""
    bare = project / "bare-path"
    bare.mkdir()
    for program in ("sh", "touch", "ls", "cat", "env"):
        if shutil.which(program):
            (bare / program).symlink_to(shutil.which(program))
    monkeypatch.setenv("PATH", str(bare))
    found, done = results(project, server, "touch made.txt")
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: no sandbox")]
    assert len(notes) == 1 and not (project / "made.txt").exists() and "declined" in found[0], (
        f"one note, and the command asked and declined; the model got {found}; stderr: {done.stderr}")
    found, done = results(project, server, "touch made.txt", args=("--yes", "--sandbox", "off"))
    assert (project / "made.txt").exists() and "note: no sandbox" not in done.stderr, (
        f"with --sandbox off and --yes, `touch made.txt` should run; the model got {found}; stderr: {done.stderr}")
