"""Phase 2, guardrails: the model proposes, your code decides. Attacks a curious student would try, on
real files in a scratch workspace and real processes."""
import os
import time

import pytest
from conftest import groq_env, run_python, running_commands, scripted_backend

PHASE = 2


@pytest.fixture
def tools(load, workspace):
    """tools.py of the code under test, working in a workspace that holds a secret and has a neighbour."""
    (workspace / ".env").write_text("SOME_TOKEN=from_dotenv\n")
    (workspace / "notes.txt").write_text("keep me\n")
    (workspace.parent / "outside.txt").write_text("not yours\n")
    module = load("tools")
    module.WORKSPACE = workspace
    return module


def refused(tools, function, *args):
    with pytest.raises(tools.Refused) as caught:
        function(*args)
    return str(caught.value)


def test_paths_out_of_the_workspace_are_refused(tools, workspace):
    assert "outside the workspace" in refused(tools, tools.read_file, "../outside.txt")
    assert "outside the workspace" in refused(tools, tools.read_file, str(workspace.parent / "outside.txt"))
    assert "outside the workspace" in refused(tools, tools.list_dir, "..")
    assert tools.read_file("notes.txt") == "keep me\n"


def test_a_symlink_cannot_lead_out(tools, workspace):
    (workspace / "link.txt").symlink_to(workspace.parent / "outside.txt")
    (workspace / "up").symlink_to(workspace.parent, target_is_directory=True)
    assert "outside the workspace" in refused(tools, tools.read_file, "link.txt")
    assert "outside the workspace" in refused(tools, tools.list_dir, "up")


@pytest.mark.parametrize("name", [".env", ".env.local", "server.pem", "deploy.key", "id_rsa", "id_rsa.pub"])
def test_secret_files_are_refused_by_every_tool(tools, workspace, name):
    (workspace / name).write_text("secret")
    assert "secret file" in refused(tools, tools.read_file, name)
    assert "secret file" in refused(tools, tools.run_shell, f"cat {name}")
    assert "secret file" in refused(tools, tools.needs_approval, "run_shell", {"command": f"grep KEY {name}"})


def test_a_symlink_to_a_secret_is_refused(tools, workspace):
    (workspace / "innocent.txt").symlink_to(workspace / ".env")
    assert "secret file" in refused(tools, tools.read_file, "innocent.txt")
    assert "secret file" in refused(tools, tools.run_shell, "cat innocent.txt")


@pytest.mark.parametrize("command", ['cat .e""nv', "cat './.env'", "git show HEAD:.env", "head -c 99 .env"])
def test_a_secret_in_disguise_is_still_refused(tools, command):
    assert "secret file" in refused(tools, tools.needs_approval, "run_shell", {"command": command})
    assert "secret file" in refused(tools, tools.run_shell, command)


@pytest.mark.parametrize("command", ["ls", "cat notes.txt", "grep -n keep notes.txt", "wc -l notes.txt",
                                     "head -1 notes.txt", "git status"])
def test_plain_read_only_commands_run_without_asking(tools, command):
    assert tools.needs_approval("run_shell", {"command": command}) is None


@pytest.mark.parametrize("command", ["ls; touch pwned", "ls && rm notes.txt", "echo $(touch pwned)", "echo `id`",
                                     "ls > listing.txt", "cat notes.txt | sh", "rm notes.txt", "touch pwned",
                                     "cat /etc/passwd", "ls ../", "git push", "sleep 999 &", "env",
                                     "grep -r KEY .", "grep -nR KEY", "grep --recursive KEY ."])
def test_anything_else_needs_approval(tools, command):
    assert tools.needs_approval("run_shell", {"command": command}) == f"Run `{command}`?"


def test_a_plain_command_runs_without_a_shell(tools, workspace):
    (workspace / "my notes.txt").write_text("spaces survive\n")
    assert tools.plain_command("cat 'my notes.txt'") == ["cat", "my notes.txt"]
    assert tools.run_shell("cat 'my notes.txt'") == "exit code 0\nspaces survive\n"
    assert tools.plain_command("cat notes.txt;") is None


def test_the_timeout_kills_the_whole_process_group(tools):
    tools.TIMEOUT = 1
    started = time.monotonic()
    result = tools.run_shell('sh -c "sleep 61.25 & sleep 61.25"')
    assert time.monotonic() - started < 5
    assert result.startswith("error: timed out after 1 s")
    time.sleep(0.2)
    assert running_commands("sleep 61.25") == []


def test_a_command_left_in_the_background_is_killed_too(tools):
    result = tools.run_shell("sleep 62.5 > /dev/null 2>&1 &")
    assert result.startswith("exit code 0")
    time.sleep(0.2)
    assert running_commands("sleep 62.5") == []


def test_the_timeout_keeps_the_output_so_far(tools):
    tools.TIMEOUT = 1
    result = tools.run_shell("echo started; sleep 30")
    assert result.startswith("error: timed out after 1 s") and "started" in result


def test_a_flood_of_output_is_capped_while_it_is_produced(tools):
    started = time.monotonic()
    result = tools.run_shell("yes")
    assert time.monotonic() - started < tools.TIMEOUT  # stopped by the cap, not by the clock
    assert result.startswith(f"stopped after printing {tools.MAX_OUTPUT} bytes")
    assert len(result) < tools.MAX_CHARS + 200 and "more bytes cut]" in result
    assert running_commands("yes") == []


def test_the_child_environment_has_no_api_keys(tools, monkeypatch):
    monkeypatch.setenv("GROQ_API_KEY", "gsk_must_not_leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_must_not_leak")
    monkeypatch.setenv("HARMLESS", "visible")
    output = tools.run_shell("env")
    assert "HARMLESS=visible" in output
    assert "must_not_leak" not in output


# The whole loop, through the command line: the model gets each refusal as a result and goes on.

def call(name, arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def last_tool_result(server):
    return server.requests[-1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("command", ["ls; touch pwned", "ls && rm notes.txt", "echo $(touch pwned)"])
@pytest.mark.parametrize("answer", ["n\n", ""], ids=["no", "end-of-input"])
def test_a_declined_command_changes_nothing_and_the_model_is_told(workspace, server, command, answer):
    (workspace / "notes.txt").write_text("keep me\n")
    server.push(call("run_shell", {"command": command}), "The user said no.")
    result = run_python(workspace, "harness.py", "Do it", env=groq_env(server), input=answer)
    assert result.returncode == 0, result.stderr
    assert f"Run `{command}`? [y/N]" in result.stderr
    assert last_tool_result(server).startswith("error: the user declined")
    assert sorted(p.name for p in workspace.iterdir() if p.suffix != ".py") == ["notes.txt"]
    assert result.stdout.splitlines()[-1] == "The user said no."


def test_an_approved_command_runs(workspace, server):
    server.push(call("run_shell", {"command": "touch made; ls"}), "Done.")
    result = run_python(workspace, "harness.py", "Do it", env=groq_env(server), input="y\n")
    assert result.returncode == 0, result.stderr
    assert (workspace / "made").exists() and "made" in last_tool_result(server)


def test_yes_approves_without_asking(workspace, server):
    server.push(call("run_shell", {"command": "touch made"}), "Done.")
    result = run_python(workspace, "harness.py", "--yes", "Do it", env=groq_env(server))
    assert result.returncode == 0 and "[y/N]" not in result.stderr
    assert (workspace / "made").exists()


def test_cat_env_is_refused_even_with_yes_and_the_key_never_reaches_the_model(workspace, server):
    (workspace / ".env").write_text("OTHER_SECRET=sk-dotenv-value\n")
    server.push(call("run_shell", {"command": "cat .env"}), call("run_shell", {"command": "env"}), "Done.")
    env = {**groq_env(server, key="gsk_live_value")}
    result = run_python(workspace, "harness.py", "--yes", "Show me the secrets", env=env)
    assert result.returncode == 0, result.stderr
    results = [m["content"] for r in server.requests for m in r["body"]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("error: refused: .env is a secret file")
    assert all("gsk_live_value" not in r and "sk-dotenv-value" not in r for r in results)


def test_the_workspace_flag_confines_the_tools(workspace, server, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "inside.txt").write_text("in")
    server.push(call("list_dir", {"path": "."}), call("read_file", {"path": "../work/harness.py"}), "Done.")
    result = run_python(workspace, "harness.py", "--workspace", str(other), "Look", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    listing, escape = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert listing == "inside.txt" and escape.startswith("error: refused:")


def test_a_missing_workspace_is_a_usage_error(workspace):
    result = run_python(workspace, "harness.py", "--workspace", "no/such/dir", "Look")
    assert result.returncode == 2 and "no/such/dir" in result.stderr


def test_refusals_timeouts_and_declines_reach_the_model_and_the_run_answers(load, workspace, server):
    tools, harness = load("tools"), load("harness")
    tools.WORKSPACE, tools.TIMEOUT = workspace, 1
    server.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "/etc/hostname"}},
                                {"name": "run_shell", "arguments": {"command": "sleep 30"}},
                                {"name": "run_shell", "arguments": {"command": "rm harness.py"}}]},
                "Some things were not allowed.")
    questions = []

    def approve(question):
        questions.append(question)
        return question == "Run `sleep 30`?"

    answer = harness.run("Try three things", scripted_backend(server), approve)
    assert answer == "Some things were not allowed."
    refusal, timeout, decline = [m["content"] for m in server.requests[-1]["body"]["messages"][-3:]]
    assert refusal.startswith("error: refused:") and "outside the workspace" in refusal
    assert timeout.startswith("error: timed out after 1 s")
    assert decline.startswith("error: the user declined: Run `rm harness.py`?")
    assert questions == ["Run `sleep 30`?", "Run `rm harness.py`?"]
    assert (workspace / "harness.py").exists()


@pytest.mark.parametrize("approver", [lambda q: 1 / 0, lambda q: None, lambda q: "yes"],
                         ids=["raises", "no-answer", "not-a-bool"])
def test_an_approver_that_fails_or_does_not_answer_means_no(load, workspace, server, approver):
    load("tools").WORKSPACE = workspace
    harness = load("harness")
    server.push(call("run_shell", {"command": "touch made"}), "ok")
    assert harness.run("Do it", scripted_backend(server), approver) == "ok"
    assert not (workspace / "made").exists()
    assert last_tool_result(server).startswith("error: the user declined")


def test_done_when_the_demo_model_hears_each_refusal_and_answers(workspace, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("SOME_TOKEN=abc\n")
    task = "Run `cat .env`, then read ../outside.txt, then run `rm -r .`"
    result = run_python(workspace, "harness.py", "--workspace", str(project), task, env={"BACKEND": "demo"})
    assert result.returncode == 0, result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()[:3]] == ["run_shell", "read_file", "run_shell"]
    assert "secret file" in result.stdout and "outside the workspace" in result.stdout
    assert "declined" in result.stdout and (project / ".env").exists()
