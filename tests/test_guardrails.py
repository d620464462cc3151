"""The guardrails against an attacker: a model that wants out, and a folder someone handed you. Each test is one
class of attack, tried through the loop the way a model would try it (a scripted turn of calls), on real files
and real processes; it runs against every checkpoint from phase 2 on."""
import getopt
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from helpers import answer_of, clean_env, groq_env, run_python, running_commands, scripted_backend

PHASE = 2
FILES = ("guards.py", "shell.py", "supervisor.py", "tools.py")  # the rules; tests that depend on the harness say so
ALL = ("backend.py", "guards.py", "harness.py", "probe.py", "shell.py", "supervisor.py", "tools.py")
SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def harness(load, workspace):
    """The code under test, in a workspace holding a secret, a note, and a neighbour outside it."""
    (workspace / ".env").write_text(f"GROQ_API_KEY={SECRET}\n")
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


def git(workspace, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=workspace, check=True,
                   capture_output=True, env=clean_env(GIT_CONFIG_GLOBAL=os.devnull))


# 1. The screen can lie: whatever a model or a file wrote is shown with its control characters spelled out.

@pytest.mark.files(*ALL)
def test_control_characters_never_reach_the_screen(workspace, server):
    """A call, a question, a diff and an answer full of escape sequences: the terminal gets none of them raw."""
    (workspace / "notes.txt").write_text("old line\n")
    nasty = "\x1b[2J\x1b[H\rWrite notes.txt?\x08\x1b]0;title\x07\u202e"
    server.push({"tool_calls": [{"name": "run_shell", "arguments": json.dumps({"command": f"ls{nasty}"})},
                                {"name": "run_shell", "arguments": f'{{"command": "rm x{nasty}"}}'}]},
                f"done{nasty}")
    result = run_python(workspace, "harness.py", "Go", env=groq_env(server), input="n\nn\n")
    screen = result.stdout + result.stderr
    for raw in ("\x1b", "\r", "\x08", "\x07", "\u202e"):
        assert raw not in screen, f"{raw!r} reached the screen: {screen[-600:]!r}"
    assert "\\x1b[2J" in screen and "\\r" in screen, "what was there is shown, spelled out"


@pytest.mark.files(*ALL)
def test_a_write_question_shows_the_real_file_and_what_changes(load, harness, server, workspace):
    """The question for a write names the file really written (links followed), counts the lines that change,
    and shows the new content's control characters spelled out."""
    if not hasattr(load("tools"), "check_call"):
        pytest.skip("write_file comes in phase 3")
    (workspace / "innocent.txt").symlink_to(workspace / "notes.txt")
    results, asked = turn(harness, server, ("write_file", {"path": "innocent.txt",
                                                           "content": "new\r\x1b[1Ahidden\n"}))
    assert len(asked) == 1 and "notes.txt" in asked[0] and "+1 -1" in asked[0], asked
    assert "\x1b" not in asked[0] and "\r" not in asked[0] and "\\x1b[1A" in asked[0], asked[0]
    assert (workspace / "notes.txt").read_text() == "keep me\n"


@pytest.mark.parametrize("blank", ["\u3164", "\u2800", "\u00a0", "\u200b"])
def test_a_question_spells_out_every_character_that_is_not_ascii(load, workspace, blank):
    """A blank letter (U+3164 HANGUL FILLER, U+2800 BRAILLE BLANK) is printable, yet shows nothing: the question
    shows a command in ASCII, anything else spelled out, so `echo ok<blank>#<blank>; rm x` cannot read as a
    comment."""
    action, question = load("tools").plan("run_shell", {"command": f"echo ok{blank}#{blank}; touch pwned"})
    spelled = f"\\u{ord(blank):04x}" if ord(blank) > 0xff else f"\\x{ord(blank):02x}"
    assert question.isascii() and spelled in question and "touch pwned" in question, question


def test_a_run_of_spaces_in_a_question_is_counted(load, workspace):
    """4000 spaces would push the start of a command out of view, leaving `# git status? [y/N]` on screen: the
    question counts them instead."""
    action, question = load("tools").plan("run_shell", {"command": "sh -c 'echo x'" + " " * 4000 + "# git status"})
    assert "[4000 spaces]" in question and len(question) < 100, question
    assert question.startswith("Run in a shell: sh -c"), question


def test_a_name_in_a_question_stays_on_one_line(load, workspace):
    """A path with line breaks in it (a folder a workspace ships, or the model's own path) cannot forge a line of
    the question: every name is shown on one line, its line breaks spelled out; only the diff keeps its own."""
    tools = load("tools")
    if "write_file" not in tools.REGISTRY:
        pytest.skip("write_file comes in phase 3")
    folder = "pkg\nWrite notes.txt: +1 -1 lines\n"
    (workspace / folder).mkdir()
    (workspace / folder / "conftest.py").write_text("# old\n")
    _, question = tools.plan("write_file", {"path": f"{folder}/conftest.py", "content": "import os\n"})
    lines = question.splitlines()
    assert lines[0] == lines[-1] == r"Write pkg\nWrite notes.txt: +1 -1 lines\n/conftest.py: +1 -1 lines", lines
    assert len(lines) == 7, lines  # the summary, ---, +++, @@, the line removed, the line added, the summary


# 2. An allowlisted program's own options: only the options listed for it run without asking.

@pytest.mark.parametrize("command", ["grep -d recurse KEY .", "grep --directories=recurse KEY .", "grep -rn KEY",
                                     "grep --include=*.env -r KEY", "grep -f../outside.txt notes.txt",
                                     "grep --file=../outside.txt notes.txt", "wc --files0-from=list",
                                     "cat -- ../outside.txt", "head -n1 ../outside.txt", "tail -f notes.txt",
                                     "ls -L", "git diff --no-index ../outside.txt notes.txt", "git -C .. status",
                                     "git log --output=x", "git show --ext-diff", "echo hi > x",
                                     "grep -e^ -ee ../outside.txt", "grep -nvee ../outside.txt",
                                     "head -5c ../outside.txt", "grep -ce x -ee ../outside.txt",
                                     "grep --regexp x ../outside.txt"])
def test_options_off_the_list_ask_first(harness, server, command):
    """An option that is not on the program's list, a file outside, or shell syntax: a person is asked."""
    results, asked = turn(harness, server, shell(command))
    assert len(asked) == 1 and results[0].startswith("error:"), (asked, results)
    assert SECRET not in results[0] and "not yours" not in results[0]


def test_options_are_read_the_way_the_program_reads_them(load, monkeypatch):
    """The allowlist splits a command's words as getopt does (grep and head use it): which are options, which
    are their values, which are files. -ee is -e with the value "e", so the next word is a file, checked as one."""
    monkeypatch.delenv("POSIXLY_CORRECT", raising=False)
    guards = load("guards")
    tokens = ["-e", "-ee", "-e^", "-ne", "-en", "-nvee", "-n", "-c", "-c5", "-5", "-n5", "--regexp", "--regexp=x",
              "--count", "--lines=3", "--", "-", "a", "b"]
    for program in ("grep", "head", "ls"):
        allowed = guards.SAFE_COMMANDS[program].split()
        short = "".join(o[1] + ":" * o.endswith("=") for o in allowed if o[1] != "-" and o != "-NUM")
        short += "0123456789" if "-NUM" in allowed else ""  # head -5
        long = [o[2:] for o in allowed if o.startswith("--")]
        for size in (1, 2, 3):
            for words in itertools.product(tokens, repeat=size):
                parsed = guards.parse_options(guards.SAFE_COMMANDS[program], words)
                if parsed is not None:
                    _, files = getopt.gnu_getopt(list(words), short, long)
                    assert parsed[2] + parsed[3] == files, f"{program} {' '.join(words)}: {parsed} vs {files}"


def test_a_secret_in_history_makes_git_ask(harness, server, workspace):
    """A .env committed and then removed: the repository holds a secret, so git log -p, git show and git diff ask
    before they print; once nothing secret was ever committed, they run at once."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "notes")
    git(workspace, "commit", "-qm", "empty", "--allow-empty")
    commands = [shell("git log -p"), shell("git show HEAD~1"), shell("git diff HEAD~1")]
    results, asked = turn(harness, server, *commands)
    assert asked == [] and "keep me" in results[0], (asked, results)
    git(workspace, "add", ".env")
    git(workspace, "commit", "-qm", "oops")
    git(workspace, "rm", "-q", "--cached", ".env")
    git(workspace, "commit", "-qm", "remove")
    results, asked = turn(harness, server, *commands)
    assert len(asked) == 3 and not any(SECRET in r for r in results), (asked, results)


def test_git_asks_for_a_secret_nested_in_a_secret_folder(harness, server, workspace):
    """Keys below .ssh, token caches below .aws, .azure and gcloud, in any case, committed: git asks. A folder of
    a commit is not a commit, so it asks too."""
    (workspace / "docs").mkdir()
    (workspace / "docs" / "readme.txt").write_text("hello\n")
    git(workspace, "init", "-q")
    git(workspace, "add", "docs")
    git(workspace, "commit", "-qm", "docs")
    results, asked = turn(harness, server, shell("git log -p"), shell("git diff HEAD:docs HEAD:docs"))
    assert len(asked) == 1 and "hello" in results[0], (asked, results)
    for name in (".ssh/keys/deploy", ".config/gcloud/legacy_credentials/me/adc.json", ".azure/sub/token.json",
                 ".aws/sso/cache/t.json", "app/.AWS/credentials"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"{SECRET}\n")
        git(workspace, "add", "-f", name)
        git(workspace, "commit", "-qm", name)
        git(workspace, "rm", "-rq", "--cached", name.split("/")[0])
        git(workspace, "commit", "-qm", "removed")
        shutil.rmtree(workspace / name.split("/")[0])  # only history holds it now
        results, asked = turn(harness, server, shell("git log -p"), shell("git show HEAD~1"), shell("git diff"))
        assert len(asked) == 3 and not any(SECRET in r for r in results), (name, asked, results)
        shutil.rmtree(workspace / ".git")
        git(workspace, "init", "-q")
        git(workspace, "add", "docs")
        git(workspace, "commit", "-qm", "docs")


def test_git_diff_of_a_file_replaced_by_a_hard_link_asks(harness, server, workspace):
    """A tracked file swapped for a hard link to .env: git diff would print the secret as the change, so it
    asks first."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    (workspace / "notes.txt").unlink()
    os.link(workspace / ".env", workspace / "notes.txt")
    results, asked = turn(harness, server, shell("git diff"), shell("git diff HEAD"))
    assert len(asked) == 2 and not any(SECRET in r for r in results), (asked, results)


def test_an_option_whose_value_is_optional_takes_no_next_word(harness, server, workspace):
    """git diff -U takes a value only when it is attached (-U5), so the next word is git's own: an option
    (--output=../x would write anywhere) or a revision (HEAD:docs would print a folder of a commit). It is checked
    as one, and asks."""
    (workspace / "docs").mkdir()
    (workspace / "docs" / "readme.txt").write_text("hello\n")
    git(workspace, "init", "-q")
    git(workspace, "add", "docs", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    (workspace / "notes.txt").write_text("changed\n")
    results, asked = turn(harness, server, shell("git diff -U --output=../pwned.txt"),
                          shell("git diff --unified --output=../pwned.txt"), shell("git diff -U HEAD:docs"),
                          shell("git status --untracked-files ../.."), shell("git diff -U1"))
    assert len(asked) == 4 and "+changed" in results[4], (asked, results)
    assert not (workspace.parent / "pwned.txt").exists() and not any(SECRET in r for r in results), results


def test_git_checks_end_by_the_deadline(load, workspace):
    """The checks before a plain git command (its repository, its revisions) give up at the run's deadline, and
    the command asks; a thousand revisions are checked in one go, not one process each."""
    guards = load("guards")
    (workspace / "notes.txt").write_text("keep me\n")
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    assert guards.plain_command("git status", time.monotonic() + 60) is not None
    assert guards.plain_command("git status", time.monotonic() - 1) is None
    checked = []
    thread = threading.Thread(target=lambda: checked.append(
        guards.plain_command("git log --oneline" + " HEAD" * 1500, time.monotonic() + 60)), daemon=True)
    thread.start()
    thread.join(guards.GIT_CHECK_SECONDS + 10)
    assert checked and checked[0] is not None, "1500 revisions: not checked in time"


def test_git_shows_commits_not_blobs(harness, server, workspace):
    """A revision that names a blob (any file's contents, a secret git stored but nothing refers to included) is
    not a commit: a person is asked."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    blob = subprocess.run(["git", "hash-object", "-w", ".env"], cwd=workspace, capture_output=True, text=True).stdout
    assert turn(harness, server, shell("git log --oneline"))[1] == [], "the repository itself holds no secret"
    results, asked = turn(harness, server, shell(f"git show {blob.strip()}"), shell(f"git diff {blob.strip()[:7]}"))
    assert len(asked) == 2 and not any(SECRET in r for r in results), (asked, results)


@pytest.mark.parametrize("history", ["committed", "never committed"])
@pytest.mark.parametrize("pointer", ["HEAD", "note", "index"])
def test_a_secret_under_another_name_in_the_repository_makes_git_ask(harness, server, workspace, pointer, history):
    """A repository can point a harmless name at a secret's contents without knowing them, by the id of its
    blob: HEAD naming the blob, a note made of it, an index entry for notes.txt. Whether .env was committed
    once (then removed, file and all) or only stored (the file still here), git asks before it prints."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    if history == "committed":
        git(workspace, "add", "-f", ".env")
        git(workspace, "commit", "-qm", "oops")
        git(workspace, "rm", "-q", "--cached", ".env")
        git(workspace, "commit", "-qm", "remove")
    blob = subprocess.run(["git", "hash-object", "-w", ".env"], cwd=workspace, capture_output=True, text=True,
                          check=True).stdout.strip()
    if history == "committed":
        (workspace / ".env").unlink()
    if pointer == "HEAD":
        (workspace / ".git" / "HEAD").write_text(f"{blob}\n")
    elif pointer == "note":
        git(workspace, "notes", "add", "-C", blob, "HEAD")
    else:
        git(workspace, "update-index", "--cacheinfo", f"100644,{blob},notes.txt")
    commands = ["git show", "git log", "git log -p --all", "git diff", "git diff --cached", "git status"]
    results, asked = turn(harness, server, *[shell(command) for command in commands])
    assert len(asked) == len(commands) and not any(SECRET in r for r in results), (asked, results)


@pytest.mark.parametrize("name", [".env ", ".env::$DATA", ".Env . ", "id_rsa:stream", ".ssh./deploy", "prod.pem."])
def test_a_secret_committed_under_any_spelling_makes_git_ask(harness, server, workspace, name):
    """A name Windows reads as a secret's (".env " and ".env::$DATA" are .env there), in any case, committed:
    the repository holds a secret by is_secret(), the rule every tool uses, so git asks before it prints."""
    (workspace / name).parent.mkdir(parents=True, exist_ok=True)
    (workspace / name).write_text(f"{SECRET}\n")
    git(workspace, "init", "-q")
    git(workspace, "add", "-f", name, "notes.txt")
    git(workspace, "commit", "-qm", "one")
    results, asked = turn(harness, server, shell("git log -p"), shell("git show --stat"))
    assert len(asked) == 2 and not any(SECRET in r for r in results), (asked, results)


# 3. The workspace's own configuration cannot make an allowlisted program run anything.

@pytest.mark.parametrize("config", ["[core]\n\tfsmonitor = touch pwned\n", "[core]\n\tpager = touch pwned\n",
                                    "[diff]\n\texternal = touch pwned\n", "[include]\n\tpath = ../evil\n",
                                    "[diff \"x\"]\n\ttextconv = touch pwned\n", "[core]\n\thooksPath = hooks\n"])
def test_a_repository_config_that_runs_programs_makes_git_ask(harness, server, workspace, config):
    """git status and diff run without asking only in a repository whose config can run nothing."""
    git(workspace, "init", "-q")
    (workspace / ".gitattributes").write_text("* diff=x\n")
    with open(workspace / ".git" / "config", "a") as file:
        file.write(config)
    results, asked = turn(harness, server, shell("git status"), shell("git diff"))
    assert len(asked) == 2 and not (workspace / "pwned").exists(), (asked, results)


def test_a_submodule_config_runs_nothing(harness, server, workspace):
    """A repository inside the repository (a submodule) with a filter in its own config: git status and diff run
    at once, and the submodule's config runs nothing."""
    sub = workspace / "sub"
    sub.mkdir()
    (sub / "a.txt").write_text("a\n")
    git(sub, "init", "-q")
    git(sub, "add", "a.txt")
    git(sub, "commit", "-qm", "sub")
    git(workspace, "init", "-q")
    git(workspace, "add", "sub", "notes.txt")
    git(workspace, "commit", "-qm", "top")
    with open(sub / ".git" / "config", "a") as file:
        file.write(f'[filter "x"]\n\tclean = touch {workspace}/pwned; cat\n'
                   f'[core]\n\tfsmonitor = touch {workspace}/pwned\n')
    (sub / ".gitattributes").write_text("* filter=x\n")
    os.utime(sub / "a.txt", (1, 1))
    results, asked = turn(harness, server, shell("git status"), shell("git diff"), shell("git log -p"))
    assert asked == [] and not (workspace / "pwned").exists(), (asked, results)


@pytest.mark.parametrize("kind", ["objects", "refs", "fifo"])
def test_a_repository_with_links_or_pipes_inside_makes_git_ask(load, harness, server, workspace, tmp_path, kind):
    """.git/objects or .git/refs linked to another repository would show its files; a pipe for .git/config
    would hang git for ever. git asks instead, at once."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    if kind == "fifo":
        (workspace / ".git" / "config").unlink()
        os.mkfifo(workspace / ".git" / "config")
    else:
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "private.txt").write_text("not yours\n")
        git(tmp_path / "other", "init", "-q")
        git(tmp_path / "other", "add", ".")
        git(tmp_path / "other", "commit", "-qm", "other")
        shutil.rmtree(workspace / ".git" / kind)
        (workspace / ".git" / kind).symlink_to(tmp_path / "other" / ".git" / kind)
    checked = []
    thread = threading.Thread(target=lambda: checked.append(load("guards").plain_command("git log -p --all")),
                              daemon=True)
    thread.start()
    thread.join(20)
    assert checked == [None], "git ran without asking, or the check hung"

@pytest.mark.parametrize("where", ["packed-refs", "info/grafts", "rebase-merge/done"])
def test_a_hard_link_inside_the_repository_makes_git_ask(harness, server, workspace, tmp_path, where):
    """A file in .git that is .env by another name (git reads packed-refs, grafts, a rebase's list, and quotes a
    line it cannot parse in its error): git asks. Only git's own object files may have other names, as a local
    clone gives them."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    loose = next(path for path in (workspace / ".git" / "objects").rglob("*") if path.is_file())
    os.link(loose, tmp_path / "clone-of-an-object")
    assert turn(harness, server, shell("git log --oneline"))[1] == [], "an object with two names is git's own"
    if where == "rebase-merge/done":
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workspace, capture_output=True, text=True).stdout
        for name, text in [("git-rebase-todo", ""), ("head-name", "refs/heads/main\n"), ("onto", head),
                           ("interactive", "")]:
            (workspace / ".git" / "rebase-merge").mkdir(exist_ok=True)
            (workspace / ".git" / "rebase-merge" / name).write_text(text)
    (workspace / ".git" / where).parent.mkdir(exist_ok=True)
    os.link(workspace / ".env", workspace / ".git" / where)
    results, asked = turn(harness, server, shell("git log --oneline"), shell("git status"))
    assert len(asked) == 2 and not any(SECRET in r for r in results), (asked, results)



def test_a_hard_link_in_the_work_tree_makes_git_ask(harness, server, workspace):
    """A .gitattributes that is .env by another name (git reads every .gitattributes, tracked or not, and quotes
    a line it cannot parse): git asks, as read_file and cat do for a file with other names."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    assert turn(harness, server, shell("git status"))[1] == [], "a plain repository runs git status unasked"
    os.link(workspace / ".env", workspace / ".gitattributes")
    results, asked = turn(harness, server, shell("git status"), shell("git diff"), shell("git log -p -1"))
    assert len(asked) == 3 and not any(SECRET in r for r in results), (asked, results)


def test_a_hook_does_not_run_for_a_plain_git_command(harness, server, workspace):
    """A repository's hook (post-index-change runs when git status refreshes the index) never runs."""
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-qm", "one")
    hook = workspace / ".git" / "hooks" / "post-index-change"
    hook.write_text("#!/bin/sh\ntouch pwned\n")
    hook.chmod(0o755)
    (workspace / "notes.txt").write_text("changed\n")
    results, asked = turn(harness, server, shell("git status"), shell("git diff"))
    assert asked == [] and not (workspace / "pwned").exists(), (asked, results)


def test_a_program_planted_in_the_workspace_is_not_the_one_that_runs(harness, server, workspace, monkeypatch):
    """A PATH with a relative or workspace entry: the allowlisted `ls` is still the system's, not ./bin/ls."""
    (workspace / "bin").mkdir()
    (workspace / "bin" / "ls").write_text("#!/bin/sh\ntouch pwned\necho planted\n")
    (workspace / "bin" / "ls").chmod(0o755)
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}::{os.environ['PATH']}")
    results, asked = turn(harness, server, shell("ls"))
    assert "planted" not in results[0] and not (workspace / "pwned").exists(), results


def test_the_shell_for_an_approved_command_is_not_one_the_workspace_planted(harness, server, workspace, monkeypatch):
    """An approved command runs through sh: the system's, found on the same cleaned PATH as every program."""
    (workspace / "bin").mkdir()
    (workspace / "bin" / "sh").write_text("#!/bin/sh\ntouch pwned\necho planted\n")
    (workspace / "bin" / "sh").chmod(0o755)
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}:{os.environ['PATH']}")
    results, asked = turn(harness, server, shell("echo real; ls *.txt"), approve=lambda q: True)
    assert len(asked) == 1 and "real" in results[0], results
    assert "planted" not in results[0] and not (workspace / "pwned").exists(), results


# 4. Secrets the old list missed, a hard link to one, and a token in a repository's config.

@pytest.mark.parametrize("name", [".netrc", "id_ed25519", ".git-credentials", ".aws/credentials", ".npmrc",
                                  ".pypirc", ".docker/config.json", ".kube/config", ".ssh/id_ecdsa", "deploy.p12",
                                  ".envrc", "terraform.tfstate", ".config/gh/hosts.yml", ".aws/cli/cache/a.json",
                                  ".aws/sso/cache/t.json", ".config/git/credentials", "terraform.tfstate.backup",
                                  ".docker/contexts/meta/config.json", ".env~", ".ENV", ".env.", "a/.ssh/keys/deploy",
                                  ".Git-Credentials", ".m2/settings.xml", ".gradle/gradle.properties", ".boto",
                                  ".dockercfg", ".oci/config", ".oci/sessions/default/token", ".databrickscfg",
                                  ".nuget/NuGet/NuGet.Config", ".bundle/config", ".config/rclone/rclone.conf",
                                  ".yarnrc", ".config/hub", ".pulumi/credentials.json", ".config/doctl/config.yaml",
                                  "backup.git/config", "a\nb/.env", ".ssh/id\nx"])
def test_common_credential_files_are_secrets(harness, server, workspace, name):
    """The credential files ssh, git, cloud command lines and package managers write are refused to every tool."""
    (workspace / name).parent.mkdir(parents=True, exist_ok=True)
    (workspace / name).write_text(f"token={SECRET}\n")
    results, _ = turn(harness, server, ("read_file", {"path": name}), shell(f"cat {json.dumps(name)}"),
                      approve=lambda q: True)
    assert all(r.startswith("error:") and "secret" in r for r in results), results


@pytest.mark.files(*ALL)
@pytest.mark.parametrize("folder, name", [(".config", "gh/hosts.yml"), (".kube", "config"), (".ssh", "deploy")])
def test_a_workspace_inside_a_secret_folder_is_secret_throughout(load, server, tmp_path, folder, name):
    """A workspace that is itself in ~/.config or ~/.kube (a dotfiles session): its files are judged by where they
    really are, so ~/.config/gh/hosts.yml is as secret as it is from the home folder."""
    workspace = tmp_path / folder
    (workspace / name).parent.mkdir(parents=True)
    (workspace / name).write_text(f"token: {SECRET}\n")
    load("guards").WORKSPACE = workspace
    harness = load("harness")
    results, _ = turn(harness, server, ("read_file", {"path": name}), shell(f"cat {name}"), approve=lambda q: True)
    assert all(r.startswith("error:") and "secret" in r for r in results), results


def test_a_hard_link_to_a_secret_is_not_read(harness, server, workspace):
    """notes2.txt is .env under another name: read_file refuses it, and cat asks first."""
    os.link(workspace / ".env", workspace / "notes2.txt")
    results, asked = turn(harness, server, ("read_file", {"path": "notes2.txt"}), shell("cat notes2.txt"))
    assert len(asked) == 1 and not any(SECRET in r for r in results), (asked, results)


def test_a_token_in_the_repository_config_stays_there(harness, server, workspace):
    """.git/config with a token in a remote's URL: no tool reads it."""
    git(workspace, "init", "-q")
    git(workspace, "remote", "add", "origin", f"https://x:{SECRET}@example.com/r.git")
    results, _ = turn(harness, server, ("read_file", {"path": ".git/config"}), shell("cat .git/config"),
                      shell("grep -n url .git/config"), approve=lambda q: True)
    assert not any(SECRET in r for r in results), results


# 5. Reading outside the workspace: through git, and through links.

def test_git_in_a_workspace_inside_a_larger_repository_asks(harness, server, workspace):
    """The workspace is a folder of a bigger repository: git could reach the rest of it, so it asks."""
    git(workspace.parent, "init", "-q")
    results, asked = turn(harness, server, shell("git show HEAD:../outside.txt"), shell("git status"))
    assert len(asked) == 2 and not any("not yours" in r for r in results), (asked, results)


def test_a_git_file_pointing_elsewhere_makes_git_ask(harness, server, workspace, tmp_path):
    """.git as a file naming a repository elsewhere: git asks."""
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    (workspace / ".git").write_text(f"gitdir: {other / '.git'}\n")
    results, asked = turn(harness, server, shell("git log"), shell("git status"))
    assert len(asked) == 2, (asked, results)


@pytest.mark.files(*ALL)
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_proc_self_path_means_the_same_to_the_check_and_the_command(harness, server, workspace):
    """The harness started from a folder inside the workspace (`cd sub; python ../harness.py --workspace ..`):
    /proc/self/cwd means the workspace to the command, so it must mean that to the check too: a path through it
    that leads out asks first (and is declined here), one to a link to .env is refused, whatever folder the harness
    is in."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "y").write_text("harmless\n")
    (workspace / "y").symlink_to(".env")
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": command}, "id": f"c{n}"} for n, command
                                in enumerate(["cat /proc/self/cwd/../outside.txt", "cat /proc/self/cwd/y"])]}, "ok")
    done = subprocess.run([sys.executable, "../harness.py", "--workspace", "..", "Read"], cwd=workspace / "sub",
                          env=clean_env(**groq_env(server)), capture_output=True, text=True, timeout=60)
    results = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert len(results) == 2 and all("declined" in result or "refused" in result for result in results), results
    assert SECRET not in done.stdout + "".join(results) and "not yours" not in done.stdout, done.stdout


def test_a_path_too_long_to_follow_from_the_root_is_not_plain(load, harness, server, workspace):
    """A link at the end of a path that is under PATH_MAX from the workspace (where the program opens it) but over
    it from the root (where the check follows it): the check cannot see the link, so the command is not plain,
    and approved, it is refused: it could lead to .env."""
    guards = load("guards")
    root = str(guards.real_root())
    need = guards.PATH_MAX - len(root) - 1  # the word's length at which the whole path reaches PATH_MAX
    parts = ["d" * 250] * -(-(need - 250) // 251)  # folders of 250 characters, then a link's name of at most 252
    last = "l" * (need - 251 * len(parts) + 2)
    os.makedirs(workspace / "/".join(parts))
    folder = os.open(workspace / "/".join(parts), os.O_RDONLY | os.O_DIRECTORY)
    os.symlink(workspace / ".env", last, dir_fd=folder)  # made from its folder: the whole name is too long
    os.close(folder)
    word = "/".join(parts + [last])
    assert len(word) < guards.PATH_MAX <= len(root) + 1 + len(word)
    results, asked = turn(harness, server, shell(f"cat {word}"), shell(f"head -n 5 {word}"), approve=lambda q: True)
    assert all("refused" in result and "cannot be checked" in result for result in results), results
    assert SECRET not in "".join(results)


def test_links_that_lead_out_make_a_command_ask(harness, server, workspace):
    """A link to a file or folder outside, named to cat, ls, head or grep: a person is asked first."""
    (workspace / "link.txt").symlink_to(workspace.parent / "outside.txt")
    (workspace / "up").symlink_to(workspace.parent, target_is_directory=True)
    commands = ["cat link.txt", "ls up", "head up/outside.txt", "grep not link.txt", "wc up/outside.txt"]
    results, asked = turn(harness, server, *[shell(c) for c in commands])
    assert len(asked) == len(commands) and not any("not yours" in r for r in results), (asked, results)


# 6. Check and run are one decision.

def test_a_write_follows_no_link_swapped_in_after_its_check(load, workspace, monkeypatch):
    """write_file checks d/new.txt, then (a command running meanwhile) d becomes a link to the folder outside:
    the write opens each folder itself, follows no link, and writes nothing outside."""
    guards, tools = load("guards"), load("tools")
    if "write_file" not in tools.REGISTRY:
        pytest.skip("write_file comes in phase 3")
    (workspace / "d").mkdir()
    checked = guards.inside_workspace

    def check_then_swap(path):
        full = checked(path)
        (workspace / "d").rmdir()
        (workspace / "d").symlink_to(workspace.parent, target_is_directory=True)
        return full

    monkeypatch.setattr(guards, "inside_workspace", check_then_swap)
    with pytest.raises(guards.Refused, match="changed after it was checked"):
        tools.write_file("d/new.txt", "pwned\n")
    assert not (workspace.parent / "new.txt").exists()


def test_a_plain_command_changed_after_its_check_does_not_run(load, harness, workspace):
    """What runs is what was checked: a command judged plain whose file is swapped for a link before it runs is
    not run, and never falls back to the shell."""
    tools = load("tools")
    action, question = tools.plan("run_shell", {"command": "cat notes.txt"})
    assert question is None
    (workspace / "notes.txt").unlink()
    (workspace / "notes.txt").symlink_to(workspace / ".env")
    with pytest.raises(Exception) as caught:
        print(action())
    assert SECRET not in str(caught.value) and "refused" in str(caught.value)


@pytest.mark.files(*ALL)
@pytest.mark.phase(4)
def test_an_approved_command_never_runs_beside_a_checked_call(load, harness, server, workspace, monkeypatch):
    """An approved command may change what another call's check saw (swap a folder for a link), so the calls the
    guardrails passed run first, and the approved ones after them, never side by side: here a listing that takes
    half a second is done before the approved `touch` (first in the turn) runs."""
    tools, real = load("tools"), load("tools").REGISTRY["list_dir"]
    monkeypatch.setitem(tools.REGISTRY, "list_dir", lambda **args: time.sleep(0.5) or real(**args))
    results, asked = turn(harness, server, shell("touch agreed-ran"), ("list_dir", {"path": "."}),
                          approve=lambda question: True)
    assert len(asked) == 1 and (workspace / "agreed-ran").exists(), (asked, results)
    assert "notes.txt" in results[1] and "agreed-ran" not in results[1], results


# 7. Under --yes: named secrets stay refused; the environment commands get has no secret in it.

def test_under_yes_named_secrets_stay_refused(harness, server):
    """Approving everything does not approve a command that names a secret, however it is spelled."""
    commands = ["cat .env", "cat ./.env", 'cat .e""nv', "cat '.env'", "grep KEY .env", "cp .env x.txt",
                "git show HEAD:.env", "cat notes.txt .env"]
    results, _ = turn(harness, server, *[shell(c) for c in commands], approve=lambda q: True)
    assert all("secret" in r for r in results) and not any(SECRET in r for r in results), results


def test_a_command_gets_only_the_variables_it_needs(harness, server, monkeypatch):
    """The environment is an allowlist (home, language, terminal, temporary folder), whatever a secret is
    called, and a value that looks like a secret (a URL with a password, a long token) is dropped even there."""
    secrets = {"DATABASE_URL": "postgres://me:hunter2hunter2@db.example.com/app", "MYSQL_PWD": "plainpassword1",
               "DEPLOY_PASSPHRASE": "correct horse", "SENTRY_DSN": "https://abc123@o1.ingest.sentry.io/2",
               "MY_STUFF": "gsk_3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "LD_PRELOAD": "/tmp/evil.so",
               "LC_PAPER": "gsk_3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"}
    for name, value in {**secrets, "LC_TIME": "C.UTF-8", "HOME": "/home/you"}.items():
        monkeypatch.setenv(name, value)
    results, _ = turn(harness, server, shell("env"), approve=lambda q: True)
    assert "LC_TIME=C.UTF-8" in results[0] and "HOME=/home/you" in results[0], results
    assert not any(name in results[0] or value in results[0] for name, value in secrets.items()), results


# 8. Resources: every tool stays within its bounds, and what a model sends cannot stop the harness.

def test_what_a_model_sends_becomes_an_error_it_can_act_on(harness, server, workspace, load):
    """A link loop, a NUL character, a 10,000-character name: each call gets an error result of at most
    MAX_CHARS, and the run goes on to its answer."""
    (workspace / "loop").symlink_to("loop")
    long = "x" * 10000
    results, _ = turn(harness, server, shell("echo loop"), shell("cat loop"), shell("cat a\x00b"),
                      ("read_file", {"path": "a\x00b"}), ("list_dir", {"path": "\x00"}), ("read_file", {"path": long}),
                      shell(f"rm {long}"), (long, {}))
    assert all(r.startswith(("error:", "exit code")) for r in results), results
    assert all(len(r) <= load("tools").MAX_CHARS for r in results), [len(r) for r in results]



def test_read_file_refuses_a_pipe_at_once(harness, server, workspace):
    """A FIFO would block a read for ever: read_file refuses what is not a regular file."""
    os.mkfifo(workspace / "pipe")
    started = time.monotonic()
    results, _ = turn(harness, server, ("read_file", {"path": "pipe"}))
    assert time.monotonic() - started < 3 and results[0].startswith("error:"), results


def test_reading_a_huge_file_does_not_load_it(load, workspace):
    """read_file of a 300 MB file, one line of it, and the question before writing over it: memory stays small."""
    tools = load("tools")
    with open(workspace / "huge.txt", "wb") as file:
        file.truncate(300 * 1024 * 1024)
    tracemalloc.start()
    try:
        result = tools.read_file("huge.txt", **({"limit": 1} if hasattr(tools, "check_call") else {}))
        question = tools.plan("write_file", {"path": "huge.txt", "content": "x\n"})[1] if "write_file" in \
            tools.REGISTRY else ""
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 30 * 1024 * 1024, f"{peak / 1e6:.0f} MB used"
    assert len(result) <= tools.MAX_CHARS and (not question or "too big" in question), question


def test_list_dir_stops_at_its_limit(load, workspace):
    """A folder of 20,000 names: list_dir returns at most MAX_CHARS, with a note of how many more there are."""
    tools = load("tools")
    (workspace / "many").mkdir()
    for n in range(20000):
        (workspace / "many" / f"file{n:05}").touch()
    result = tools.list_dir("many")
    assert len(result) <= tools.MAX_CHARS and "more entries" in result and result.startswith("file00000")


def test_every_result_fits_even_an_approved_write_with_a_long_path(harness, server, workspace, load):
    """A write to a/../a/../... (5,000 characters of path, over PATH_MAX): refused, and what comes back, with the
    path in it, fits MAX_CHARS."""
    if "write_file" not in load("tools").REGISTRY:
        pytest.skip("write_file comes in phase 3")
    results, _ = turn(harness, server, ("write_file", {"path": "a/../" * 1000 + "x.txt", "content": "x\n"}),
                      approve=lambda q: True)
    assert results[0].startswith("error: refused") and len(results[0]) <= load("tools").MAX_CHARS, results
    assert not (workspace / "x.txt").exists()


def test_list_dir_does_not_say_where_a_link_leads(load, workspace):
    """A link to a folder outside is listed as a name, without the / that would say it leads to a folder."""
    (workspace / "up").symlink_to(workspace.parent, target_is_directory=True)
    (workspace / "sub").mkdir()
    names = load("tools").list_dir(".").splitlines()
    assert "up" in names and "sub/" in names, names


def test_reading_a_vast_file_takes_no_longer_than_reading_a_large_one(load, workspace):
    """A 20 GB file (sparse: it takes no disk) with no line ends: read_file reads a bounded part of it, says it
    could not count the rest, and says what to use to look further."""
    tools = load("tools")
    if not hasattr(tools, "check_call"):
        pytest.skip("phase 2's read_file reads one page only")
    with open(workspace / "vast.bin", "wb") as file:
        file.truncate(20 * 1024 ** 3)
    assert "too long to count" in tools.read_file("vast.bin", limit=1)[-200:]
    with pytest.raises(ValueError, match="grep -n or tail"):
        tools.read_file("vast.bin", offset=3)


def test_a_command_that_starts_its_own_session_dies_at_the_timeout(harness, server, load):
    """setsid puts a child in a session of its own, out of the command's process group: it still dies."""
    load("shell").TIMEOUT = 1
    results, _ = turn(harness, server, shell("setsid sleep 64.25 & setsid sh -c 'sleep 64.25' & sleep 30"),
                      approve=lambda q: True)
    assert "timed out" in results[0], results
    time.sleep(0.5)
    assert running_commands("sleep 64.25") == [], "a process that left the session survived"


@pytest.mark.parametrize("command", ["setsid sleep 66.5 & sleep 0.3; kill -9 $PPID",
                                     "setsid sleep 66.5 & kill -STOP $PPID; sleep 30",
                                     "(setsid sleep 66.5 &); sleep 0.3; kill -9 $PPID; sleep 30"])
def test_a_command_that_kills_its_supervisor_still_leaves_nothing(harness, server, load, command):
    """An approved command that kills or stops the supervisor watching it: what it started comes up to the
    harness, which kills it, and the result says only what is true."""
    load("shell").TIMEOUT = 2
    results, _ = turn(harness, server, shell(command), approve=lambda q: True)
    time.sleep(0.3)
    left = running_commands("sleep 66.5")
    assert left == [] and "may still run" not in results[0], (left, results)


@pytest.mark.files(*ALL)
def test_commands_die_with_the_harness_even_on_kill_9(workspace, server):
    """kill -9 of the harness: the command it was running, and what that started, die too."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 65.5 & setsid sleep 65.5"}}]},
                "never")
    process = subprocess.Popen([sys.executable, "harness.py", "--yes", "Sleep"], cwd=workspace,
                               env=clean_env(**groq_env(server)), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if len(running_commands("sleep 65.5")) == 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    for _ in range(40):
        if not running_commands("sleep 65.5"):
            break
        time.sleep(0.05)
    assert running_commands("sleep 65.5") == [], "the command outlived the harness"


# The sandbox: what an in-process guard cannot promise, bubblewrap can.

def sandbox_or_skip(load):
    shell = load("shell")
    problem = shell.sandbox_problem()
    if problem:
        pytest.skip(problem)
    return shell


@pytest.mark.parametrize("command", ["cat .e*", "cat $(printf .en)v", "grep -r GROQ .", "cat */../.env",
                                     "find / -name .env -exec cat {} + 2>/dev/null",
                                     "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'", "cat ~/.ssh/id_rsa",
                                     "umount .e?v; cat .e?v", "umount -l .e?v; mount -t tmpfs x .; cat .e?v"])
def test_under_yes_and_the_sandbox_no_spelling_reaches_a_secret(harness, server, load, monkeypatch, command):
    """--yes --sandbox: whatever the shell makes of a command, no secret comes back, not even the harness's own
    API key from its environment."""
    shell = sandbox_or_skip(load)
    monkeypatch.setattr(shell, "SANDBOX", "workspace-write")
    monkeypatch.setenv("GROQ_API_KEY", SECRET)
    results, _ = turn(harness, server, shell_call(command), approve=lambda q: True)
    assert SECRET not in results[0], results


def test_under_the_sandbox_a_secret_cannot_be_moved_out_of_its_name(harness, server, load, monkeypatch, workspace):
    """--yes --sandbox workspace-write: a command may not rename a secret, or the folder that makes it one, to a
    name that is not secret, to read it in a later call."""
    shell = sandbox_or_skip(load)
    monkeypatch.setattr(shell, "SANDBOX", "workspace-write")
    for name in (".aws/credentials", ".docker/config.json", "deep/.kube/config", ".ssh/id_ed25519"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"{SECRET}\n")
    moves = ["mv .aws aws", "mv deep deep2", "mv .ssh ssh", "mv .docker dock", "cp -r .aws copied",
             "ln -s .aws linked", "cd .aws && ln c* ../hard", "cd .aws && mv c* ../moved", "mv .e?v env.txt"]
    turn(harness, server, *[shell_call(command) for command in moves], approve=lambda q: True)
    reads = ["aws/credentials", "deep2/.kube/config", "ssh/id_ed25519", "dock/config.json", "copied/credentials",
             "linked/credentials", "hard", "moved", "env.txt"]
    results, _ = turn(harness, server, *[("read_file", {"path": path}) for path in reads],
                      *[shell_call(f"cat {path}") for path in reads], shell_call("grep -r sk-live ."),
                      approve=lambda q: True)
    assert not any(SECRET in r for r in results), [r for r in results if SECRET in r]


def test_nothing_in_the_sandbox_writes_outside_the_workspace(harness, server, load, monkeypatch, workspace):
    """Even as root: no capability to remount a system folder writable, no folder outside but a scratch /tmp."""
    shell = sandbox_or_skip(load)
    monkeypatch.setattr(shell, "SANDBOX", "workspace-write")
    marker = f"made-by-sandbox-{os.getpid()}"
    commands = [f"touch ../{marker}", f"mount -o remount,rw,bind /usr; touch /usr/{marker}",
                f"touch /tmp/{marker}", f"mount -o remount,rw,bind {workspace.parent}; touch ../{marker}"]
    turn(harness, server, *[shell_call(command) for command in commands], approve=lambda q: True)
    assert not any(os.path.exists(path) for path in (workspace.parent / marker, f"/usr/{marker}", f"/tmp/{marker}"))


def test_a_folder_the_walk_cannot_read_stops_the_sandbox(load):
    """The sandbox hides what it finds; a folder it cannot read (chmod 300) could hold a secret, so the command
    does not run rather than run with it unhidden. Tried as a user other than root, who can read everything."""
    guards = load("guards")
    guards.WORKSPACE = Path(tempfile.mkdtemp())  # a folder another user can reach
    folder = guards.WORKSPACE / "locked"
    folder.mkdir()
    (folder / ".env").write_text(f"{SECRET}\n")
    child = os.fork()
    if child == 0:  # the child gives up root, if it has it, and reports by its exit code
        try:
            if os.geteuid() == 0:
                for path in (guards.WORKSPACE, folder, folder / ".env"):
                    os.chown(path, 65534, 65534)
                os.setgid(65534)
                os.setuid(65534)
            folder.chmod(0o300)
            guards.hidden_files()
            os._exit(1)
        except guards.Refused:
            os._exit(0)
        except BaseException:
            os._exit(2)
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    shutil.rmtree(guards.WORKSPACE)
    assert code == 0, "the walk passed over a folder it could not read" if code == 1 else "the check failed"


def test_the_sandbox_has_no_network_and_a_read_only_mode(harness, server, load, monkeypatch, workspace):
    """In the sandbox nothing connects out, and in read-only mode nothing is written."""
    shell = sandbox_or_skip(load)
    monkeypatch.setattr(shell, "SANDBOX", "read-only")
    port = server.port
    results, _ = turn(harness, server, shell_call(f"echo > /dev/tcp/127.0.0.1/{port} && echo connected; touch made"),
                      approve=lambda q: True)
    assert "connected" not in results[0] and not (workspace / "made").exists(), results


def test_without_bubblewrap_the_sandbox_says_so(load, monkeypatch):
    """No bwrap on PATH: --sandbox is refused with a message saying what to install."""
    shell = load("shell")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "bubblewrap" in shell.sandbox_problem()


def shell_call(command):
    return "run_shell", {"command": command}
