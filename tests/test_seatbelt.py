"""The sandbox on macOS: Seatbelt (/usr/bin/sandbox-exec), with a profile that shell.seatbelt() builds from the run's
policy. Here (Linux) the profile's rules are held as text and its regexes matched with Python's: every place the
policy names appears as the rule lesson 3 says. On a Mac (the macOS job of .github/workflows/course.yml) the same
commands an attacker would try run inside the real sandbox, and fail."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import clean_env

PHASE = 3
FILES = ("guards.py", "shell.py")
SECRET = "sk-live-0123456789abcdef"
SEATBELT = "/usr/bin/sandbox-exec"
ON_A_MAC = sys.platform == "darwin" and os.path.exists(SEATBELT)
needs_a_mac = pytest.mark.skipif(not ON_A_MAC, reason="Seatbelt runs on macOS only: the course's workflow runs "
                                                      "this in its macOS job")


@pytest.fixture
def seatbelt(load, tmp_path):
    """(shell, policy) for a workspace as a macOS learner has it, the sandbox Seatbelt: a secret the harness knows
    copied under a name no list knows, a .env, a repository, and a trace of the run inside it."""
    workspace = tmp_path / "project"  # beside the harness's own folder (tmp_path / "work")
    (workspace / "docs").mkdir(parents=True)
    (workspace / "notes.txt").write_text("keep me\n")
    (workspace / "notes.bak").write_text(f"token: {SECRET}\n")
    (workspace / ".env").write_text("A=b\n")
    (workspace / ".git").mkdir()
    (workspace / "traces").mkdir()
    (workspace / "traces" / "run.jsonl").touch()
    guards, shell = load("guards"), load("shell")
    workspace = workspace.resolve()
    policy = guards.Policy(workspace, secrets={SECRET: "MY_TOKEN"}, sandbox=SEATBELT,
                           own=(guards.HOME, workspace / "traces" / "run.jsonl"))
    return shell, policy


def profile_of(argv):
    """The profile in a sandbox-exec command line, and what runs inside: (profile, the rest)."""
    assert argv[:2] == [SEATBELT, "-p"], argv[:3]
    return argv[2], argv[3:]


def rule(profile, operation):
    """The text of the rule (allow OPERATION (...) ...) that the policy fills in, parentheses balanced."""
    start = profile.index(f"(allow {operation} (")
    depth = 0
    for at in range(start, len(profile)):
        depth += {"(": 1, ")": -1}.get(profile[at], 0)
        if depth == 0:
            return profile[start:at + 1]
    raise AssertionError(f"the {operation} rule never closes")


def kept_out(text):
    """The regexes of a rule's (require-not (regex #"...")) parts, compiled by Python's re (the profile's use only
    ^, $, [...], . and (a|b), which read the same there)."""
    return [re.compile(found) for found in re.findall(r'\(require-not \(regex #"([^"]*)"\)\)', text)]


def matched(regexes, path):
    return any(regex.search(str(path)) for regex in regexes)


def test_a_command_runs_in_sandbox_exec_by_its_own_path_with_a_scratch_home(seatbelt):
    """/usr/bin/sandbox-exec by its full path (one on PATH could be anyone's), the profile given whole, then the
    command with HOME and TMPDIR in a fresh scratch folder of its own, by its real path (/private/var/...)."""
    shell, policy = seatbelt
    profile, rest = profile_of(shell.sandboxed(["/bin/echo", "hi"], policy, write=True))
    assert profile.startswith("(version 1)\n(deny default)\n"), profile[:60]
    assert rest[0] == "/usr/bin/env" and rest[-2:] == ["/bin/echo", "hi"], rest
    scratch = rest[1].removeprefix("HOME=")
    assert rest[2] == f"TMPDIR={scratch}" and os.path.isdir(scratch) and os.path.realpath(scratch) == scratch


def test_the_profile_is_well_formed(seatbelt):
    """Every parenthesis closes, outside strings and regexes, and every string closes: sandbox-exec refuses a
    profile it cannot read, and the command would not run at all."""
    shell, policy = seatbelt
    for write in (True, False):
        profile, _ = profile_of(shell.sandboxed(["/bin/ls"], policy, write=write, network=True))
        depth, quoted, escaped = 0, False, False
        for c in profile:
            if quoted:
                quoted, escaped = (c != '"' or escaped), (c == "\\" and not escaped)
            elif c == '"':
                quoted = True
            else:
                depth += {"(": 1, ")": -1}.get(c, 0)
                assert depth >= 0, profile
        assert depth == 0 and not quoted, profile[-200:]


def test_reads_keep_out_every_home_and_every_file_that_holds_a_secret_in_any_case(seatbelt):
    """A file holding a secret (by name, .env; by what it holds, notes.bak) is kept out in any case, as macOS's
    disk opens NOTES.BAK as notes.bak; so is every home (/Users, yours), the harness's folder, the temporary
    folders of others; the workspace, Python's folders and the scratch folder are read."""
    shell, policy = seatbelt
    guards = sys.modules["guards"]
    profile, rest = profile_of(shell.sandboxed(["/bin/ls"], policy, write=False))
    reads = rule(profile, "file-read*")
    out, workspace = kept_out(reads), policy.workspace
    for hidden in (workspace / "notes.bak", workspace / ".env"):
        for spelled in (str(hidden), str(hidden).upper(), str(hidden).swapcase()):
            assert matched(out, spelled), (spelled, reads[:300])
    for home in ("/Users/ann/.ssh/id_rsa", "/users/ann/.aws/credentials", str(Path.home() / ".netrc"),
                 "/private/var/folders/x/T/other.txt", str(guards.HOME / ".env")):
        assert matched(out, home), home
    assert not matched(out, workspace / "notes.txt") and not matched(out, "/usr/lib/libSystem.B.dylib")
    for place in (workspace, Path(sys.prefix).resolve(), rest[1].removeprefix("HOME=")):
        assert f'(subpath "{place}")' in reads, place


def test_writes_go_only_to_the_workspace_when_approved_never_to_a_git_or_the_harness_s_places(seatbelt):
    """Approved: the workspace, but no .git now or later (docs/.git, .GIT), not the trace in any case, not the
    folder on its way (it could be moved); not approved: only the scratch folder."""
    shell, policy = seatbelt
    workspace = policy.workspace
    writes = rule(profile_of(shell.sandboxed(["/bin/ls"], policy, write=True))[0], "file-write*")
    out = kept_out(writes)
    assert f'(subpath "{workspace}")' in writes, writes[:200]
    for kept in (workspace / ".git" / "config", workspace / "docs" / ".git", workspace / "docs" / ".GIT" / "HEAD",
                 workspace / "traces" / "run.jsonl", workspace / "TRACES" / "RUN.JSONL", workspace / "traces",
                 workspace / "notes.bak"):
        assert matched(out, kept), kept
    for free in (workspace / "notes.txt", workspace / ".github" / "ci.yml", workspace / "x.git",
                 workspace / "traces" / "other.txt"):
        assert not matched(out, free), free
    read_only = rule(profile_of(shell.sandboxed(["/bin/ls"], policy, write=False))[0], "file-write*")
    assert f'(subpath "{workspace}")' not in read_only and read_only.count("(subpath ") == 1, read_only


def test_only_a_server_reaches_the_network_and_nothing_reads_another_process_s_environment(seatbelt):
    """A command has no network rule at all (deny default holds); an MCP server (network=True) has one. No
    sysctl rule lets a process read another's arguments or environment (kern.procargs2), where keys are."""
    shell, policy = seatbelt
    command = profile_of(shell.sandboxed(["/bin/ls"], policy, write=True))[0]
    server = profile_of(shell.sandboxed(["/bin/ls"], policy, write=True, network=True))[0]
    assert "network" not in command and "(allow network*)" in server
    sysctls = rule(command, "sysctl-read")
    assert '(sysctl-name-prefix "kern.' not in sysctls and "procargs" not in sysctls, sysctls


@pytest.mark.phase(12)
def test_a_server_reads_the_places_its_command_names_and_writes_none_of_them(seatbelt, tmp_path):
    """readable (mcp_client.readable(): a venv under a home, a script in another folder) joins what is read, even in
    a home; never what is written; a file that holds a secret stays kept out."""
    shell, policy = seatbelt
    venv, script = Path("/Users/ann/venv"), tmp_path / "servers" / "server.py"
    argv = shell.sandboxed(["/bin/ls"], policy, write=True, network=True, readable=[venv, script])
    reads, writes = rule(profile_of(argv)[0], "file-read*"), rule(profile_of(argv)[0], "file-write*")
    for place in (venv, script):
        assert f'(subpath "{place}")' in reads and str(place) not in writes, place
    assert matched(kept_out(reads), policy.workspace / ".env") and matched(kept_out(reads), "/Users/ann/.ssh/id_rsa")


@pytest.mark.phase(12)
def test_a_server_reads_and_writes_its_own_cache_even_when_the_workspace_is_read_only(seatbelt):
    """writable (mcp_client.cache(): the server's own folder under ~/Library/Caches) joins what is read and what is
    written, beside the scratch folder, in a home though it is; nothing else outside the workspace is written."""
    shell, policy = seatbelt
    cache = Path("/Users/ann/Library/Caches/course-harness/mcp/tickets")
    argv = shell.sandboxed(["/bin/ls"], policy, write=False, network=True, writable=[cache])
    reads, writes = rule(profile_of(argv)[0], "file-read*"), rule(profile_of(argv)[0], "file-write*")
    assert f'(subpath "{cache}")' in reads and f'(subpath "{cache}")' in writes, writes
    assert writes.count("(subpath ") == 2 and f'(subpath "{policy.workspace}")' not in writes, writes
    assert not matched(kept_out(writes), cache / "npm" / "_cacache") and matched(kept_out(reads), "/Users/ann/.npm")


def test_anycase_spells_every_letter_both_ways_and_keeps_out_more_never_less(load):
    """anycase(): letters in both cases, a dot as a dot, and a character the profile would read otherwise (a
    quote, a backslash) as any character: a place kept out is matched more, never less."""
    shell = load("shell")
    assert shell.anycase("/Users/a.b") == "^/[Uu][Ss][Ee][Rr][Ss]/[Aa][.][Bb](/|$)"
    odd = re.compile(shell.anycase('/w/say "hi"\\x'))
    assert odd.search('/w/SAY "HI"\\X') and odd.search("/w/say 'hi'/x/y") and not odd.search("/w/sayhi")


def test_without_sandbox_exec_a_mac_has_no_sandbox_and_says_why(load, monkeypatch):
    """sys.platform "darwin" where /usr/bin/sandbox-exec is missing (as here): no sandbox, and the reason names it;
    nothing named sandbox-exec on PATH is ever used instead."""
    if ON_A_MAC:
        pytest.skip("this Mac has /usr/bin/sandbox-exec")
    monkeypatch.setattr(sys, "platform", "darwin")
    found, why = load("guards").find_sandbox(Path.cwd())
    assert found is None and "/usr/bin/sandbox-exec" in why, why


# On a Mac: the commands an attacker would try, in the real sandbox, judged by outcome.

@needs_a_mac
def test_on_a_mac_an_approved_command_changes_only_the_workspace(seatbelt, tmp_path):
    shell, policy = seatbelt
    result = shell.run(["/bin/sh", "-c", "touch made; touch ../outside; mkdir docs/.git .GIT; echo x >> "
                        "TRACES/RUN.JSONL; mv traces t2"], policy, write=True)
    workspace = policy.workspace
    assert (workspace / "made").exists() and not (tmp_path / "outside").exists(), result
    assert not (workspace / "docs" / ".git").exists() and (workspace / "traces" / "run.jsonl").read_text() == "", result
    assert (workspace / "traces").is_dir() and not (workspace / "t2").exists(), result


@needs_a_mac
def test_on_a_mac_a_command_reads_no_secret_no_home_and_no_other_process_s_environment(seatbelt, monkeypatch):
    shell, policy = seatbelt
    monkeypatch.setenv("GROQ_API_KEY", SECRET)
    result = shell.run(["/bin/sh", "-c", f"cat notes.bak; cat NOTES.BAK; cat .env; ls ~ {Path.home()}; "
                        f"ps eww -p {os.getpid()}; cat notes.txt"], policy, write=False)
    assert SECRET not in result and "A=b" not in result and "keep me" in result, result


@needs_a_mac
def test_on_a_mac_a_command_reaches_no_network(seatbelt):
    shell, policy = seatbelt
    probe = "import socket; socket.create_connection(('1.1.1.1', 53), 3); print('connected')"
    result = shell.run([sys.executable, "-c", probe], policy, write=False)
    assert "connected" not in result and "exit code 0" not in result, result


@needs_a_mac
def test_on_a_mac_git_status_after_a_command_runs_nothing_it_planted(seatbelt):
    shell, policy = seatbelt
    shell.run(["/bin/sh", "-c", "git init -q sub; git -C sub config core.fsmonitor 'touch ../PWNED'"], policy,
              write=True)
    (policy.workspace / "sub").mkdir(exist_ok=True)
    subprocess.run(["git", "status"], cwd=policy.workspace / "sub", capture_output=True,
                   env=clean_env(GIT_CONFIG_GLOBAL=os.devnull, GIT_CEILING_DIRECTORIES=str(policy.workspace)))
    assert not (policy.workspace / "PWNED").exists()
