"""Phase 2, guardrails: the model proposes, your code decides. Each check scripts the model's calls, runs the
loop (run(task, backend=..., approve=...) or the command line) and reads what came back to the model, on real
files in a scratch workspace and real processes."""
import os
import time

import pytest
from helpers import answer_of, groq_env, run_python, running_commands, scripted_backend

PHASE = 2
FILES = ("guards.py", "shell.py", "supervisor.py", "tools.py")  # the rules; a check on the harness too says so
ALL = ("backend.py", "guards.py", "harness.py", "probe.py", "shell.py", "supervisor.py", "tools.py")


@pytest.fixture
def harness(load, workspace):
    """harness.py of the code under test, in a workspace that holds a secret and has a neighbour outside."""
    (workspace / ".env").write_text("SOME_TOKEN=from_dotenv\n")
    (workspace / "notes.txt").write_text("keep me\n")
    (workspace.parent / "outside.txt").write_text("not yours\n")
    return load("harness")


def results_of(harness, server, calls, approve=lambda question: False, task="Do it"):
    """Run one scripted turn of calls [(name, arguments)] and return what the model got back, in call order,
    with the questions the approver was asked."""
    asked = []
    server.push({"tool_calls": [{"name": name, "arguments": args, "id": f"c{n}"} for n, (name, args) in
                                enumerate(calls)]}, "ok")

    def approver(question):
        asked.append(question)
        return approve(question)

    answer = answer_of(harness.run(task, backend=scripted_backend(server), approve=approver))
    assert answer == "ok", f"the run should go on to the model's answer, not end with {answer!r}"
    sent = server.requests[-1]["body"]["messages"]
    return [m["content"] for m in sent if m["role"] == "tool"][-len(calls):], asked


def shell(command):
    return "run_shell", {"command": command}


def test_paths_out_of_the_workspace_are_refused(harness, server, workspace):
    """read_file and list_dir refuse a path outside the workspace, by .. or by an absolute path or a link."""
    (workspace / "link.txt").symlink_to(workspace.parent / "outside.txt")
    results, _ = results_of(harness, server, [("read_file", {"path": "../outside.txt"}),
                                              ("read_file", {"path": str(workspace.parent / "outside.txt")}),
                                              ("list_dir", {"path": ".."}), ("read_file", {"path": "link.txt"}),
                                              ("read_file", {"path": "notes.txt"})])
    *refusals, notes = results
    assert all(r.startswith("error:") and "outside the workspace" in r for r in refusals), refusals
    assert "not yours" not in "".join(refusals) and notes.startswith("keep me"), results


@pytest.mark.parametrize("name", [".env", ".env.local", "server.pem", "id_rsa", "id_ed25519", ".netrc"])
def test_secret_files_are_refused_even_when_the_person_says_yes(harness, server, workspace, name):
    """A secret file is refused by read_file and by a command, whoever approves: the model never sees it."""
    (workspace / name).write_text("SECRET_VALUE=shh\n")
    results, _ = results_of(harness, server, [("read_file", {"path": name}), shell(f"cat {name}"),
                                              shell(f"grep SECRET {name}")], approve=lambda q: True)
    assert all(r.startswith("error:") and "secret" in r for r in results), results
    assert "shh" not in "".join(results)


def test_plain_read_only_commands_run_without_asking(harness, server):
    """ls, cat, grep, wc, head and git status run at once, without a question."""
    commands = ["ls", "cat notes.txt", "grep -n keep notes.txt", "wc -l notes.txt", "head -1 notes.txt"]
    results, asked = results_of(harness, server, [shell(c) for c in commands])
    assert asked == [], f"nobody should have been asked, but these were asked: {asked}"
    assert all("keep me" in r or "notes.txt" in r for r in results), results


@pytest.mark.files(*ALL)
@pytest.mark.parametrize("command", ["ls; touch pwned", "echo $(touch pwned)", "rm notes.txt", "touch pwned",
                                     "cat /etc/hostname", "grep -r KEY .", "git push"])
def test_anything_else_asks_and_a_no_changes_nothing(harness, server, workspace, command):
    """A command that is not plainly read-only asks a person, showing the command; a no is an error result and
    changes nothing."""
    results, asked = results_of(harness, server, [shell(command)])
    assert len(asked) == 1 and command in asked[0], f"ask once, showing the command; asked {asked}"
    assert results[0].startswith("error:") and "declined" in results[0], results
    assert sorted(p.name for p in workspace.iterdir() if p.suffix != ".py") == [".env", "notes.txt"]


@pytest.mark.files(*ALL)
def test_an_approver_that_fails_or_does_not_answer_means_no(harness, server, workspace):
    """Only a plain True is a yes: an approver that raises, returns None or "yes" declines."""
    for approver in (lambda q: 1 / 0, lambda q: None, lambda q: "yes"):
        server.requests.clear()
        results, _ = results_of(harness, server, [shell("touch made")], approve=approver)
        assert "declined" in results[0] and not (workspace / "made").exists(), results


def test_a_timed_out_command_and_all_it_started_are_killed(harness, server, load):
    """A command running past TIMEOUT is killed with everything it started, and the model hears it timed out."""
    load("shell").TIMEOUT = 1
    started = time.monotonic()
    results, _ = results_of(harness, server, [shell('sh -c "sleep 61.25 & sleep 61.25"')], approve=lambda q: True)
    assert time.monotonic() - started < 6 and "timed out" in results[0], results
    time.sleep(0.3)
    assert running_commands("sleep 61.25") == [], "a process the command started is still running"


def test_a_command_left_in_the_background_is_killed_when_it_returns(harness, server):
    """`sleep 62.5 &` returns at once, and its sleep does not outlive it."""
    results, _ = results_of(harness, server, [shell("sleep 62.5 > /dev/null 2>&1 &")], approve=lambda q: True)
    assert results[0].startswith("exit code 0"), results
    time.sleep(0.3)
    assert running_commands("sleep 62.5") == []


def test_a_flood_of_output_is_capped_while_it_is_produced(harness, server):
    """`yes` prints without end: it is stopped long before its timeout, and the model gets a short result."""
    started = time.monotonic()
    results, _ = results_of(harness, server, [shell("yes")], approve=lambda q: True)
    assert time.monotonic() - started < 5 and len(results[0]) < 5000 and "stopped" in results[0], results[0][:300]


def test_commands_run_without_the_api_keys(harness, server, monkeypatch):
    """The environment a command gets has no API key in it, and no other variable that looks like a secret."""
    monkeypatch.setenv("GROQ_API_KEY", "gsk_must_not_leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_must_not_leak")
    monkeypatch.setenv("LANG", "C.UTF-8")  # what programs need still gets through
    results, _ = results_of(harness, server, [shell("env")], approve=lambda q: True)
    assert "LANG=C.UTF-8" in results[0] and "must_not_leak" not in results[0], results[0]


@pytest.mark.files(*ALL)
def test_what_the_model_wrote_cannot_redraw_the_screen(workspace, server):
    """Escape sequences and carriage returns in a call or an answer are printed visibly, never raw."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "ls\x1b[2J\rrm -rf ~"}}]},
                "done\x1b]0;owned\x07\rok")
    result = run_python(workspace, "harness.py", "Go", env=groq_env(server), input="n\n")
    screen = result.stdout + result.stderr
    assert "\x1b" not in screen and "\r" not in screen and "\x07" not in screen, repr(screen[-400:])
    assert "\\x1b" in screen, f"the escape should be shown, spelled out: {screen[-400:]!r}"


@pytest.mark.files(*ALL)
def test_the_command_line_asks_reads_yes_and_keeps_to_the_workspace(workspace, server, tmp_path):
    """`--yes` approves; a piped "n" (or nothing) declines; `--workspace DIR` confines the tools to DIR."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "touch made"}}]}, "Done.")
    declined = run_python(workspace, "harness.py", "Do it", env=groq_env(server), input="")
    assert declined.returncode == 0 and not (workspace / "made").exists(), declined.stderr
    assert "touch made" in declined.stderr, "the question goes to stderr, with the command"
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "touch made"}}]}, "Done.")
    approved = run_python(workspace, "harness.py", "--yes", "Do it", env=groq_env(server))
    assert approved.returncode == 0 and (workspace / "made").exists(), approved.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "inside.txt").write_text("in")
    server.push({"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}, "Done.")
    confined = run_python(workspace, "harness.py", "--workspace", str(other), "Look", env=groq_env(server))
    assert confined.returncode == 0 and server.requests[-1]["body"]["messages"][-1]["content"] == "inside.txt"
    missing = run_python(workspace, "harness.py", "--workspace", "no/such/dir", "Look")
    assert missing.returncode == 2 and "no/such/dir" in missing.stderr


@pytest.mark.files(*ALL)
def test_done_when_the_demo_model_hears_each_refusal_and_answers(workspace, tmp_path):
    """Offline: a secret, a path outside and a declined command each come back as an error, and the run answers."""
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("SOME_TOKEN=abc\n")
    task = "Run `cat .env`, then read ../outside.txt, then run `rm -r .`"
    result = run_python(workspace, "harness.py", "--workspace", str(project), task, env={"BACKEND": "demo"})
    assert result.returncode == 0, result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()[:3]] == ["run_shell", "read_file", "run_shell"]
    assert "secret" in result.stdout and "outside the workspace" in result.stdout and "declined" in result.stdout
    assert (project / ".env").exists() and os.listdir(project) == [".env"]
