"""Phase 3, the sandbox: what a command can reach is decided by the operating system, and a boundary is a place.
Each check runs your harness from the command line against the scripted model, as lesson 3's attack table does,
and judges the outcome: what came back to the model, the files, the processes. With bubblewrap the attacks run
under --yes; without it (simulated by a PATH that has no bwrap) the same attacks are asked about and declined.
Without bubblewrap on this machine, the checks that need it skip and say why."""
import base64
import os
import subprocess
import time

import pytest
from helpers import (BUBBLEWRAP_MISSING, clean_env, groq_env, needs_bubblewrap, own_seconds,
                     path_without_bubblewrap, posix_shell, run_python, scripted_backend, still_running, touch)

PHASE = 3
FILES = ("backend.py", "guards.py", "harness.py", "shell.py", "tools.py", "cli.py")
SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def project(workspace, tmp_path):
    """A folder someone handed you, beside the harness's own (whose .env holds a secret): a copy of that secret
    under a name no list knows, a credential file named for what it is not, a note, and a repository."""
    (workspace / ".env").write_text(f"MY_SERVICE_TOKEN={SECRET}\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.bak").write_text(f"old token: {SECRET}\n")
    (project / "db.txt").write_text("db.example.com:5432:app:admin:Wr0ngH0rseBattery\n")
    (project / "notes.txt").write_text("keep me\n")
    return project


def turn(code, server, *commands, args=("--yes",), input=""):
    """One scripted turn of run_shell calls through `python harness.py ARGS`, run in the harness's folder; the
    results the model got, in order, and what the harness printed."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": c}, "id": f"c{n}"}
                                for n, c in enumerate(commands)]}, "done")
    done = run_python(code, "harness.py", *args, "Do it", env=groq_env(server), input=input)
    assert done.returncode == 0, f"the run should answer (exit 0).\n{done.stdout}{done.stderr}"
    sent = server.requests[-1]["body"]["messages"]
    return [m["content"] for m in sent if m["role"] == "tool"][-len(commands):], done


def carries(result, secret):
    """True when a result holds the secret in any form a command could make of it: as it is, reversed, in base64,
    or a character a line."""
    joined = "".join(line.strip() for line in result.splitlines())
    return any(form in text for form in (secret, secret[::-1], base64.b64encode(secret.encode()).decode())
               for text in (result, joined))


@needs_bubblewrap
def test_no_command_reaches_a_secret_in_any_form(workspace, project, server):
    """A file that holds a secret the harness knows, or a credential by its content, is hidden from every command,
    and refused when named: no copy, glob, transformation or process environment brings its value back."""
    found, _ = turn(workspace, server, "cat notes.bak", "base64 n*.bak", "grep -o -e . notes.bak", "rev *.bak",
                    "cat db.txt", "cat /proc/$PPID/environ /proc/1/environ", "env", "ls",
                    args=("--yes", "--workspace", str(project)))
    assert not any(carries(r, SECRET) or carries(r, "Wr0ngH0rseBattery") for r in found), found
    assert found[0].startswith("error:") and "secret" in found[0], f"`cat notes.bak` names a secret: {found[0]}"
    assert "notes.bak" in found[-1] and "notes.txt" in found[-1], "the files are listed; only their secrets hide"


def test_read_file_refuses_a_file_by_what_it_holds(workspace, project, server, load):
    """read_file refuses a file whose content holds a secret the harness knows, or a credential's form (here a
    database password line), whatever the file is called; the error says it holds a secret."""
    server.push({"tool_calls": [{"name": "read_file", "arguments": {"path": p}, "id": f"c{n}"}
                                for n, p in enumerate(["notes.bak", "db.txt", "notes.txt"])]}, "done")
    done = run_python(workspace, "harness.py", "--workspace", str(project), "Do it", env=groq_env(server))
    found = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"][-3:]
    assert all(r.startswith("error:") and "secret" in r for r in found[:2]), found
    assert not any(carries(r, SECRET) or carries(r, "Wr0ngH0rseBattery") for r in found), found
    assert found[2].startswith("keep me"), done.stderr


@pytest.mark.parametrize("command", ["cat .env", "cp .env copy.txt", "grep TOKEN .env", 'cat .e""nv'])
def test_a_command_naming_a_secret_is_refused_whoever_approves(workspace, server, command):
    """A command with a word that names a secret file is refused even under --yes: its result starts with error:
    and says secret."""
    found, _ = turn(workspace, server, command)
    assert found[0].startswith("error:") and "secret" in found[0], found
    assert not (workspace / "copy.txt").exists()


@pytest.mark.parametrize("sandboxed", [True, False], ids=["bubblewrap", "no-sandbox"])
def test_the_harness_home_is_one_read_only_place(workspace, server, sandboxed, monkeypatch):
    """The workspace is the harness's own folder (the quick start's): under --yes no command changes its code,
    adds a module it would import (json.py) or a .env, or moves it; with bubblewrap the sandbox holds, without it
    each command is asked, and a piped nothing declines."""
    if sandboxed and BUBBLEWRAP_MISSING:
        pytest.skip(BUBBLEWRAP_MISSING)
    if not sandboxed:
        monkeypatch.setenv("PATH", path_without_bubblewrap(workspace.parent))
    before = {p.name: p.read_bytes() for p in workspace.iterdir() if p.is_file()}
    turn(workspace, server, "echo 'import os' >> tools.py", "echo 'x = 1' > json.py",
         "printf 'BASE_URL=http://evil.example/v1\\n' > .env.local", "mv harness.py h.py && touch harness.py")
    assert {p.name: p.read_bytes() for p in workspace.iterdir() if p.is_file()} == before


@needs_bubblewrap
def test_a_home_inside_the_workspace_cannot_be_moved_or_replaced(workspace, server, tmp_path):
    """The workspace holds the harness's folder: an approved command can change the rest, but cannot change,
    move or replace the harness's folder, nor a folder on the way to it."""
    outer = workspace.parent
    name = workspace.name
    found, _ = turn(workspace, server, "touch made.txt", f"mv {name} old && mkdir {name}",
                    f"echo x > {name}/tools.py", args=("--yes", "--workspace", str(outer)))
    assert (outer / "made.txt").exists() and (workspace / "harness.py").exists(), found
    assert not (outer / "old").exists() and "x" != (workspace / "tools.py").read_text().strip(), found


@needs_bubblewrap
def test_a_repository_s_git_is_read_only_to_commands(workspace, project, server):
    """What runs later outside any sandbox stays as it was: an approved `git config core.fsmonitor ...` cannot
    change the workspace's .git, and the workspace's other files can still change."""
    env = clean_env(GIT_CONFIG_GLOBAL=os.devnull)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, env=env)
    config = (project / ".git" / "config").read_text()
    found, _ = turn(workspace, server, "git config core.fsmonitor 'touch pwned'", "touch made.txt",
                    args=("--yes", "--workspace", str(project)))
    assert (project / ".git" / "config").read_text() == config and (project / "made.txt").exists(), found


def test_commands_get_only_the_variables_they_need(workspace, server, monkeypatch):
    """The environment a command gets holds no API key and no variable off the list, whatever it is called."""
    database, language = "postgres://me:hunter2hunter2@db/app", "C.UTF-8"
    monkeypatch.setenv("DATABASE_URL", database)
    monkeypatch.setenv("LANG", language)
    listing = "set" if os.name == "nt" else "env"  # cmd's own on Windows, which has no env
    found, _ = turn(workspace, server, listing, args=("--yes", "--sandbox", "off"))
    seen = dict(line.split("=", 1) for line in found[0].splitlines() if "=" in line)
    assert seen.get("LANG") == language and "DATABASE_URL" not in seen and database not in found[0], seen
    assert groq_env(server)["GROQ_API_KEY"] not in found[0], "the API key reached a command"


@posix_shell
def test_a_command_and_all_it_started_end_with_its_timeout(workspace, server, load):
    """A command past shell.TIMEOUT is stopped with everything it started, and its result says it timed out;
    output past MAX_OUTPUT stops it too."""
    load("shell").TIMEOUT = 1
    left, waited = own_seconds(51), own_seconds(50)  # this test's own: others may run beside it
    commands = [f"sleep {left} & sleep {waited}", "yes"]
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": c}, "id": f"c{n}"}
                                for n, c in enumerate(commands)]}, "done")
    started = time.monotonic()
    load("harness").run("Do it", backend=scripted_backend(server), approve=lambda question: True)
    found = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    # 1 s of TIMEOUT, seconds more on a busy machine; a command not stopped takes its 50 s
    assert time.monotonic() - started < 30, "the command should stop at TIMEOUT"
    assert "timed out" in found[0], f"the first result should say `timed out`: {found[0]!r}"
    status = (found[1].splitlines() or [""])[0]  # where lesson 3 puts it, so that no cut can hide it
    assert "stopped" in found[1], (
        f"the second result (`yes`) should say `stopped` in its status, its first line (lesson 3, step 1): its "
        f"first line is {status[:200]!r}; it ends {found[1][-100:]!r} ({len(found[1])} characters)")
    assert len(found[1]) < 6000, f"a result keeps KEEP bytes of output, not {len(found[1])} characters"
    assert still_running(f"sleep {left}") == [], "a process the command started is still running"


@needs_bubblewrap
def test_an_approved_command_writes_only_the_workspace_and_reaches_no_network(workspace, project, server):
    """--sandbox workspace-write (the default): an approved command may change the workspace, and nothing outside
    it; it sees nothing outside it but the system's programs, and it has no network."""
    marker = f"made-{os.getpid()}"
    (project.parent / "neighbour.txt").write_text("not yours\n")
    found, _ = turn(workspace, server, "touch inside.txt", f"touch ../{marker}", f"touch /tmp/{marker}",
                    "bash -c 'echo > /dev/tcp/127.0.0.1/%d' && echo connected" % server.port,
                    "cat ../neighbour.txt", args=("--yes", "--workspace", str(project)))
    assert (project / "inside.txt").exists(), found[0]
    assert not (project.parent / marker).exists() and not os.path.exists(f"/tmp/{marker}"), found
    assert "connected" not in found[3] and "not yours" not in found[4], found


@needs_bubblewrap
def test_read_only_means_nothing_is_written(workspace, project, server):
    """--sandbox read-only: an approved command writes nothing, not even in the workspace."""
    found, _ = turn(workspace, server, "touch made.txt",
                    args=("--yes", "--sandbox", "read-only", "--workspace", str(project)))
    assert not (project / "made.txt").exists(), found


@needs_bubblewrap
def test_nothing_a_command_started_outlives_it(workspace, project, server):
    """A process the command left in the background, even in a session of its own, is gone when it returns: the
    sandbox's own process numbers end with it. (Without a sandbox, phase 6 ends them.)"""
    seconds = own_seconds(70)  # this test's own: others may run beside it
    found, _ = turn(workspace, server, f"sleep {seconds} > /dev/null 2>&1 &",
                    f"setsid sleep {seconds} > /dev/null 2>&1 & (setsid sh -c 'sleep {seconds} > /dev/null 2>&1 &' &)",
                    args=("--yes", "--workspace", str(project)))
    assert still_running(f"sleep {seconds}") == [], found


def test_without_a_sandbox_one_line_says_so_and_yes_asks(workspace, project, server, monkeypatch):
    """No bubblewrap (here: PATH without it): one line on stderr starts with `note: no sandbox`, and --yes does not
    approve a command; `--sandbox off` says you accept that, and --yes approves again."""
    monkeypatch.setenv("PATH", path_without_bubblewrap(project))
    made = touch("made.txt")  # sh's touch; cmd's own on Windows
    found, done = turn(workspace, server, made, args=("--yes", "--workspace", str(project)))
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: no sandbox")]
    assert len(notes) == 1 and not (project / "made.txt").exists() and "declined" in found[0], (
        f"one note, and the command asked and declined; the model got {found}; stderr: {done.stderr}")
    found, done = turn(workspace, server, made, args=("--yes", "--sandbox", "off", "--workspace", str(project)))
    assert (project / "made.txt").exists() and "note: no sandbox" not in done.stderr, (
        f"with --sandbox off and --yes, `{made}` should run; the model got {found}; stderr: {done.stderr}")
