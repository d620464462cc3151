"""The guardrails against an attacker: a model that wants out, and a folder someone handed you. Each test is one
class of attack, tried through the loop the way a model would try it (a scripted turn of calls), on real files and
real processes. Phase 2's guard decides what to ask; from phase 3 on, the sandbox is the guarantee: there the
tests assert the outcome (no secret reaches the model, nothing is written outside, no process is left)."""
import getopt
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc

import pytest
from helpers import answer_of, clean_env, groq_env, run_python, running_commands, scripted_backend

PHASE = 2
FILES = ("guards.py", "shell.py", "tools.py", "harness.py")
SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def harness(load, workspace):
    """The code under test, in a workspace holding a secret, a note, and a neighbour outside it."""
    (workspace / ".env").write_text(f"MY_SERVICE_TOKEN={SECRET}\n")
    (workspace / "notes.txt").write_text("keep me\n")
    (workspace.parent / "outside.txt").write_text("not yours\n")
    return load("harness")


def turn(harness, server, *calls, approve=lambda question: False):
    """One scripted turn of calls [(name, arguments)] through the loop: what came back to the model, in call
    order, and the questions a person was asked."""
    asked = []
    server.push({"tool_calls": [{"name": name, "arguments": args, "id": f"c{n}"} for n, (name, args) in
                                enumerate(calls)]}, "ok")
    answer = answer_of(harness.run("Do it", backend=scripted_backend(server),
                                   approve=lambda q: asked.append(q) or approve(q)))
    assert answer == "ok", answer
    sent = server.requests[-1]["body"]["messages"]
    return [m["content"] for m in sent if m["role"] == "tool"][-len(calls):], asked


def shell(command):
    return "run_shell", {"command": command}


def cli(workspace, server, *commands, args=("--yes",)):
    """One scripted turn of commands through `python harness.py ARGS` (its secrets, its own files and its
    sandbox set up as a learner runs it); the results the model got."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": c}, "id": f"c{n}"}
                                for n, c in enumerate(commands)]}, "done")
    done = run_python(workspace, "harness.py", *args, "Do it", env=groq_env(server))
    assert done.returncode == 0, done.stdout + done.stderr
    return [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"][-len(commands):]


def sandbox_or_skip(load):
    problem = load("shell").sandbox_problem()
    if problem:
        pytest.skip(problem)


# 1. The screen can lie: whatever a model or a file wrote goes through one renderer, which spells out whatever
# could hide or disguise text, so two different commands or diffs never look the same.

@pytest.mark.parametrize("command", ["echo ok #\ntouch PWNED", "echo ok #\\ntouch PWNED", "echo ok\u3164# x; touch P",
                                     "echo оk; touch P", "touch P" + " " * 3000 + "# git status", "ls\x1b[2J\r"])
def test_two_commands_never_look_the_same_in_a_question(harness, server, command):
    """A real line break and a written \\n, a blank letter (U+3164), a Cyrillic о, 3,000 spaces, an escape: the
    question spells each out, on one line, in printable ASCII."""
    _, asked = turn(harness, server, shell(command))
    if asked:  # echo with plain words may run without a question: nothing to show then
        assert asked[0].isascii() and asked[0].isprintable() and len(asked[0]) < 300, repr(asked[0][:300])


def test_written_and_real_line_breaks_differ_on_screen(harness, server):
    """The pair that once looked identical: a comment with a real line break, and one with a written \\n."""
    _, real = turn(harness, server, shell("echo ok #\ntouch PWNED"))
    _, written = turn(harness, server, shell("echo ok #\\ntouch PWNED"))
    assert real and written and real[0] != written[0], (real, written)


@pytest.mark.phase(4)
def test_a_write_question_spells_out_its_file_and_its_diff(harness, server, workspace):
    """The write question and its diff go through the same renderer: a blank letter, a look-alike, an escape and
    3,000 spaces in the new text are spelled out; the question is ASCII."""
    (workspace / "a.txt").write_text("old\n")
    content = "ok\u3164# x\nоk\n\x1b[2J\n" + " " * 3000 + "end\n"
    _, asked = turn(harness, server, ("write_file", {"path": "a.txt", "content": content}))
    assert asked and asked[0].isascii() and "\\u3164" in asked[0] and "\\x1b" in asked[0], asked
    assert "\\{3000 spaces}" in asked[0] and "\\u043e" in asked[0], asked[0][-300:]


# 2. A program's own options: only the options listed for it run without asking, read as the program reads them.

@pytest.mark.parametrize("command", ["grep -d recurse KEY .", "grep --directories=recurse KEY .", "grep -rn KEY",
                                     "grep -f../outside.txt notes.txt", "grep --file=../outside.txt notes.txt",
                                     "wc --files0-from=list", "cat -- ../outside.txt", "head -n1 ../outside.txt",
                                     "tail -f notes.txt", "ls -L", "git diff --no-index ../outside.txt notes.txt",
                                     "git -C .. status", "echo hi > x", "grep -ee ../outside.txt",
                                     "grep -nvee ../outside.txt", "head -5c ../outside.txt",
                                     "grep -ce x -ee ../outside.txt", "grep --regexp x ../outside.txt"])
def test_options_off_the_list_ask_first(harness, server, command):
    """An option that is not on the program's list, a file outside, or shell syntax: a person is asked."""
    results, asked = turn(harness, server, shell(command))
    assert len(asked) == 1 and results[0].startswith("error:"), (asked, results)
    assert "not yours" not in results[0]


def test_what_runs_unasked_never_names_a_file_outside(load, workspace):
    """Every way to write up to three words after grep, head or ls: whenever plain() lets a command run
    unasked, each file the program itself would read (split by Python's getopt, as grep and head split their
    words) is inside the workspace and no secret."""
    guards = load("guards")
    (workspace / ".env").write_text("X=1\n")
    words = ["-e", "-ee", "-e^", "-n", "-c5", "-5", "-n5", "--", "a", "../o", ".env"]
    for program, short in (("grep", "nivclLwxohHFEe:m:A:B:C:"), ("head", "n:c:"), ("ls", "aAlh1trSRdF")):
        for size in (1, 2, 3):
            for rest in itertools.product(words, repeat=size):
                if guards.plain(" ".join([program, *rest])) is None:
                    continue
                try:
                    options, files = getopt.gnu_getopt(list(rest), short)
                except getopt.GetoptError:  # the program itself refuses these words
                    continue
                if program == "grep" and "-e" not in [option for option, _ in options]:
                    files = files[1:]  # the pattern
                assert not any(f in ("../o", ".env") for f in files), f"{program} {' '.join(rest)} ran unasked"


# 3. The workspace's own configuration cannot make an allowlisted program run anything.

def test_git_always_asks_whatever_its_repository_holds(harness, server, workspace):
    """git is on no list: a repository's config (core.fsmonitor, a hook, a pager) could run a program from a
    plain `git status`, so every git command asks, and a no runs nothing."""
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True, env=clean_env(GIT_CONFIG_GLOBAL=os.devnull))
    subprocess.run(["git", "config", "core.fsmonitor", "touch PWNED"], cwd=workspace, check=True)
    hook = workspace / ".git" / "hooks" / "post-index-change"
    hook.write_text("#!/bin/sh\ntouch PWNED2\n")
    hook.chmod(0o755)
    results, asked = turn(harness, server, shell("git status"), shell("git log"), shell("git diff"))
    assert len(asked) == 3 and not (workspace / "PWNED").exists() and not (workspace / "PWNED2").exists()


def test_a_program_planted_in_the_workspace_never_runs_unasked(harness, server, workspace, monkeypatch):
    """A PATH with a relative entry or the workspace in it: a plain `ls` is the system's own."""
    (workspace / "ls").write_text("#!/bin/sh\ntouch PWNED\n")
    (workspace / "ls").chmod(0o755)
    monkeypatch.setenv("PATH", f".{os.pathsep}{workspace}{os.pathsep}{os.environ['PATH']}")
    turn(harness, server, shell("ls"))
    assert not (workspace / "PWNED").exists()


@pytest.mark.phase(3)
def test_an_approved_command_does_not_find_the_workspace_programs(harness, server, workspace, monkeypatch):
    """From phase 3, an approved command's PATH holds no folder inside the workspace: `make` is not ./make."""
    (workspace / "make").write_text("#!/bin/sh\ntouch PWNED\n")
    (workspace / "make").chmod(0o755)
    monkeypatch.setenv("PATH", f".{os.pathsep}{workspace}{os.pathsep}{os.environ['PATH']}")
    turn(harness, server, shell("make"), approve=lambda q: True)
    assert not (workspace / "PWNED").exists()


# 4. Secrets: by name for the files whose contents the harness cannot know, by value for the ones it knows.

@pytest.mark.parametrize("name", ["#.env#", ".env copy", "prod.env", ".env_local", ".env~", ".ENV", ".env.",
                                  ".ssh/id_ed25519", ".aws/credentials", ".git/config", "deploy.pem"])
def test_credential_files_are_secrets_by_any_editor_copy(harness, server, workspace, name):
    """What editors and Finder make of .env on their own, and the files ssh, AWS and git keep keys in: read_file
    refuses them."""
    (workspace / name).parent.mkdir(parents=True, exist_ok=True)
    (workspace / name).write_text("TOKEN=ghp_other_0123456789\n")
    results, _ = turn(harness, server, ("read_file", {"path": name}))
    assert results[0].startswith("error:") and "secret" in results[0] and "ghp_other" not in results[0]


@pytest.mark.phase(3)
@pytest.mark.parametrize("command", ["cat .env", "cat ./.env", 'cat .e""nv', "cat '.env'", "grep KEY .env",
                                     "cp .env x.txt", "git show HEAD:.env", "cat notes.txt .env", "cat `echo .env`"])
def test_under_yes_a_command_naming_a_secret_is_refused(harness, server, command):
    """Approving everything does not approve a command with a word naming a secret, however it is spelled."""
    results, _ = turn(harness, server, shell(command), approve=lambda q: True)
    assert results[0].startswith("error:") and "secret" in results[0] and SECRET not in results[0], results


@pytest.mark.phase(3)
def test_a_value_the_harness_knows_is_masked_under_any_name(workspace, server, load):
    """The secret of the workspace's .env, copied by an editor or a command under names no list knows, read
    through a glob, or found in a process's environment: every result shows [secret NAME], never the value."""
    sandbox_or_skip(load)
    (workspace / ".env").write_text(f"MY_SERVICE_TOKEN={SECRET}\n")
    (workspace / "notes.bak").write_text(f"{SECRET}\n")
    found = cli(workspace, server, "cat notes.bak", "cat .e*", "cat */../.e*", "grep -r MY_SERVICE .",
                "cat /proc/*/environ", f"echo {SECRET[:10]}{SECRET[10:]}", "find / -name '.env' -exec cat {} +")
    assert not any(SECRET in r for r in found), [r for r in found if SECRET in r]
    assert "[secret MY_SERVICE_TOKEN]" in found[0], found[0]


# 5. The harness's own files, its code, its .env and its trace, are out of the model's reach.

@pytest.mark.phase(3)
def test_the_harness_own_files_are_out_of_reach_in_its_own_folder(workspace, server, load):
    """The quick start runs with the workspace the harness's own folder: under --yes, no command changes its code
    or its .env, and (from phase 4) write_file refuses them."""
    sandbox_or_skip(load)
    (workspace / ".env").write_text(f"MY_SERVICE_TOKEN={SECRET}\n")
    before = {p.name: p.read_bytes() for p in workspace.glob("*.py")}
    cli(workspace, server, "echo 'import os' >> tools.py", "rm -f shell.py", "mv harness.py h.py",
        "cp guards.py x.py && cp x.py backend.py")
    assert {p.name: p.read_bytes() for p in workspace.glob("*.py") if p.name in before} == before
    if "write_file" in load("tools").REGISTRY:
        server.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "tools.py", "content": "x"}}]},
                    "done")
        run_python(workspace, "harness.py", "--yes", "Do it", env=groq_env(server))
        assert (workspace / "tools.py").read_bytes() == before["tools.py"]


@pytest.mark.phase(5)
def test_a_trace_in_the_workspace_cannot_be_rewritten(workspace, server, load):
    """--trace inside the workspace: a command cannot rewrite the records the harness keeps appending to."""
    sandbox_or_skip(load)
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo forged > run.jsonl"}}]},
                "done")
    run_python(workspace, "harness.py", "--yes", "--trace", "run.jsonl", "Do it", env=groq_env(server))
    lines = (workspace / "run.jsonl").read_text().splitlines()
    assert "forged" not in lines and json.loads(lines[0])["type"] == "start", lines[:2]


# 6. Reading outside the workspace: through links, through paths too long to follow.

def test_links_that_lead_out_are_refused_or_ask(harness, server, workspace):
    """A link to a file or folder outside, named to read_file, cat, ls, head or grep: refused, or a person asked."""
    (workspace / "out.txt").symlink_to(workspace.parent / "outside.txt")
    (workspace / "up").symlink_to(workspace.parent, target_is_directory=True)
    results, asked = turn(harness, server, ("read_file", {"path": "out.txt"}),
                          ("read_file", {"path": "up/outside.txt"}), shell("cat out.txt"),
                          shell("head up/outside.txt"), shell("ls up"))
    assert len(asked) == 3 and not any("not yours" in r for r in results), (asked, results)


def test_what_a_model_sends_becomes_an_error_it_can_act_on(harness, server, workspace, load):
    """A link loop, a NUL character, a 10,000-character name, a 200,000-character path: each gets an error of at
    most MAX_CHARS, at once, and the run goes on to its answer."""
    (workspace / "loop").symlink_to("loop")
    long = "x" * 10000
    started = time.monotonic()
    results, _ = turn(harness, server, shell("cat loop"), ("read_file", {"path": "a\x00b"}),
                      ("list_dir", {"path": "\x00"}), ("read_file", {"path": long}),
                      ("read_file", {"path": "a/" * 100_000 + "x"}), (long, {}))
    assert all(r.startswith(("error:", "exit code")) for r in results), results
    assert all(len(r) <= load("tools").MAX_CHARS + 100 for r in results), [len(r) for r in results]
    assert time.monotonic() - started < 30, "each refusal should come at once"


# 7. Resources: every tool stays within its bounds.

@pytest.mark.phase(4)
def test_read_file_refuses_a_pipe_and_never_loads_a_huge_file(harness, server, workspace, load):
    """A FIFO would block a read for ever: refused at once. A 300 MB file: one page of it, and the question before
    writing over it, in little memory."""
    os.mkfifo(workspace / "pipe")
    results, _ = turn(harness, server, ("read_file", {"path": "pipe"}))
    assert results[0].startswith("error:"), results
    tools = load("tools")
    with open(workspace / "huge.txt", "wb") as file:
        file.truncate(300 * 1024 * 1024)
    tracemalloc.start()
    try:
        page = tools.read_file("huge.txt", limit=1)
        question = tools.plan("write_file", {"path": "huge.txt", "content": "x\n"})[1]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024 and len(page) <= tools.MAX_CHARS and "too big" in question, (peak, question)


def test_list_dir_stops_at_its_limit_and_says_nothing_of_where_links_lead(load, workspace):
    """A folder of 20,000 names: list_dir returns MAX_CHARS of it and says how much more there is; a link to a
    folder outside is listed without the / that would say where it leads."""
    tools = load("tools")
    (workspace / "many").mkdir()
    for n in range(20000):
        (workspace / "many" / f"file{n:05}").touch()
    (workspace / "many" / "up").symlink_to(workspace.parent, target_is_directory=True)
    result = tools.list_dir("many")
    assert len(result) <= tools.MAX_CHARS + 100 and "more" in result and result.startswith("file00000"), result[-99:]
    assert "up/" not in tools.list_dir("many")


# 8. Processes: nothing a command started outlives it (phase 3's sandbox: its own process numbers).

@pytest.mark.phase(3)
@pytest.mark.parametrize("command", ["setsid sleep 64.25 & setsid sh -c 'sleep 64.25' & sleep 0.2",
                                     "sh -c 'setsid sh -c \"setsid sleep 64.25 &\" &'; sleep 0.2",
                                     "setsid sleep 64.25 & sleep 0.2; kill -9 $$"])
def test_a_process_that_hops_sessions_does_not_outlive_its_command(harness, server, load, command):
    """fork, leave, setsid, repeat: with the sandbox, every process the command started is gone when it ends."""
    sandbox_or_skip(load)
    seconds = f"64.{os.getpid()}{time.monotonic_ns() % 10**6}"  # this test's own: others may run beside it
    turn(harness, server, shell(command.replace("64.25", seconds)), approve=lambda q: True)
    time.sleep(0.5)
    assert running_commands(f"sleep {seconds}") == [], "a process that left the session survived"


@pytest.mark.phase(3)
def test_commands_die_with_the_harness_even_on_kill_9(workspace, server, load):
    """kill -9 of the harness: the command it was running, and what that started, die too."""
    sandbox_or_skip(load)
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 65.5 & setsid sleep 65.5"}}]},
                "never")
    process = subprocess.Popen([sys.executable, "harness.py", "--yes", "Sleep"], cwd=workspace,
                               env=clean_env(**groq_env(server)), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if len(running_commands("sleep 65.5")) == 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    for _ in range(100):
        if not running_commands("sleep 65.5"):
            break
        time.sleep(0.05)
    assert running_commands("sleep 65.5") == [], "the command outlived the harness"


# 9. The sandbox: what an in-process guard cannot promise, the operating system can.

@pytest.mark.phase(3)
def test_nothing_in_the_sandbox_writes_outside_or_connects_out(workspace, server, load):
    """Even as root: no capability to remount a system folder writable, no folder outside but a scratch /tmp, no
    network, and in read-only mode nothing written at all."""
    sandbox_or_skip(load)
    marker = f"made-by-sandbox-{os.getpid()}"
    found = cli(workspace, server, f"touch ../{marker}", f"mount -o remount,rw,bind /usr; touch /usr/{marker}",
                f"touch /tmp/{marker}", f"bash -c 'echo > /dev/tcp/127.0.0.1/{server.port}' && echo connected")
    assert not any(os.path.exists(p) for p in (workspace.parent / marker, f"/usr/{marker}", f"/tmp/{marker}"))
    assert "connected" not in found[3], found
    cli(workspace, server, "touch made", args=("--yes", "--sandbox", "read-only"))
    assert not (workspace / "made").exists()


def test_without_a_sandbox_the_guard_stays_strict(workspace, server, monkeypatch):
    """No bubblewrap: one line says so; git and anything off the allowlist ask, even under --yes, and a no runs
    nothing; what is on the allowlist still runs unasked."""
    (workspace / "notes.txt").write_text("keep me\n")
    bare = workspace / "bin-without-bwrap"
    bare.mkdir()
    for program in ("sh", "touch", "ls", "cat", "git"):
        source = subprocess.run(["sh", "-c", f"command -v {program}"], capture_output=True, text=True).stdout.strip()
        if source:
            (bare / program).symlink_to(source)
    monkeypatch.setenv("PATH", str(bare))
    help_text = run_python(workspace, "harness.py", "--help").stdout
    if "--sandbox" not in help_text:
        pytest.skip("phase 2 has no sandbox to fall back from")
    found = cli(workspace, server, "touch made", "git status", "cat notes.txt")
    assert not (workspace / "made").exists() and "declined" in found[0] and "declined" in found[1], found
    assert "keep me" in found[2], found
