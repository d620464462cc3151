"""Phase 7 (learner's version): what a run may touch, which files are secrets (by name and by what they hold),
what runs without asking, what a sandboxed command may not change, and how anything the model wrote is shown.

Try: python -c "import guards; print(guards.plain(guards.policy('.'), 'ls -la'))"
"""
import fnmatch
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from dotenv import dotenv_values

import shell

HOME = Path(__file__).resolve().parent  # the harness's own folder: its code, its .env
KINDS = ("command", "write")  # the kinds of call a person approves; --yes approves them all in advance
MAX_PATH = 4096  # Linux's own limit on a path; a longer one is refused before it is followed
SECRET_NAMES = ("*.env*", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",  # dotenv files, ssh-keygen
                "*.pem", "*.key", "*.p12", "*.pfx",  # openssl
                ".netrc", "_netrc", ".git-credentials", ".npmrc", ".pypirc", "pip.conf")  # curl, git, npm, pip
SECRET_FOLDERS = (".ssh", ".aws", ".git", ".gnupg", ".docker", ".kube", ".azure", "gcloud")
NOT_SECRET = (".env.example", ".env.sample")  # templates, written to be shared
SHELL_SYNTAX = set("|&;<>()$`\\\"'*?[]{}~!#%^")  # what a shell (or cmd) would read instead of passing on
KEY_VARIABLES = ("KEY", "TOKEN", "SECRET", "PASSWORD")  # a variable whose name holds one of these is a secret
MAX_READ = 10_000_000  # bytes of a file read or judged for secrets; a bigger file is never plain
JUDGED = {}  # (file, its version, the secrets) -> what secret it holds, or None: each version is read once
CREDENTIALS = {  # what a credential looks like, whoever wrote it
    "a private key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    "a token": r"\b(sk-[\w-]{16,}|gsk_\w{20,}|gh[pousr]_\w{30,}|github_pat_\w{20,}|xox[abprs]-[\w-]{10,}"
               r"|AKIA[0-9A-Z]{16}|glpat-[\w-]{20,}|AIza[\w-]{35})",
    "a password in a URL": r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@",
    "a .pgpass line": r"(?m)^[^:\s]+:(\d+|\*):[^:\s]+:[^:\s]+:\S+$",
}
PASSWORD_LINE = r"(?im)^.*(passw(or)?d|pwd|secret|token|api_?key)\w*['\"]?\s*[:=]\s*['\"]?(?P<value>[^\s'\"]+)"
VALUE = r"(?=.*[A-Za-z])(?=.*\d).{8,}"  # a password line's value mixes letters and digits: no placeholder
READ_ONLY = {  # programs that only read, and the options each may take ("-n=": takes a value)
    "ls": {"-l", "-a", "-A", "-h", "-1", "-t", "-r", "-S", "-F"},
    "cat": {"-n", "-A", "-b"},
    "head": {"-n=", "-c=", *(f"-{digit}" for digit in "0123456789")},  # head -5 is head -n 5
    "tail": {"-n=", "-c=", *(f"-{digit}" for digit in "0123456789")},
    "wc": {"-l", "-w", "-c", "-m"},
    "grep": {"-n", "-i", "-v", "-c", "-l", "-w", "-x", "-o", "-F", "-E", "-H", "-h", "-e="},
    "pwd": set(),
}


class ToolError(Exception):
    """A call that will not run as asked; the model reads it as `error: ...`."""


class Refused(ToolError):
    """A call that nobody may approve."""


@dataclass(frozen=True)
class Policy:
    workspace: Path  # the only folder the tools may touch
    unasked: frozenset  # the KINDS of call approved in advance
    own: tuple = ()  # the harness's own places: a command may read them, never change them
    secrets: tuple = ()  # (value, the variable it came from) the harness knows
    sandbox: str = None  # bubblewrap's full path, or None
    why_none: str = None  # why there is no sandbox, when you did not choose --sandbox off
    write: bool = True  # False under --sandbox read-only


def policy(workspace=".", yes=False, sandbox="workspace-write", trace=None):
    """The policy of one run: its workspace, its sandbox (workspace-write, read-only or off), and with yes=True
    every kind of call approved in advance (a command only where a sandbox holds it or you said --sandbox off).
    The trace file, when there is one, is the harness's own: no write changes it, a command only reads it."""
    workspace = Path(workspace).resolve()
    box, why_none = (None, None) if sandbox == "off" else shell.find_sandbox(workspace)
    own = {HOME, *(Path(folder).resolve() for folder in sys.path if folder)}
    own |= {Path(os.path.abspath(trace))} if trace else set()
    approved = {kind for kind in KINDS if yes and (kind != "command" or box or sandbox == "off")}
    return Policy(workspace, frozenset(approved),
                  tuple(place for place in own if place.is_relative_to(workspace)), known_secrets(workspace),
                  box, why_none, sandbox != "read-only")


def known_secrets(workspace):
    """(value, name) of every value in the harness's .env and the workspace's, and of the KEY_VARIABLES in the
    environment: 8 characters or more, so that no short word is taken for one."""
    found = {}
    for env_file in (HOME / ".env", workspace / ".env"):
        found.update(dotenv_values(env_file) if env_file.is_file() else {})
    found.update({name: value for name, value in os.environ.items() if any(word in name for word in KEY_VARIABLES)})
    return tuple(sorted((value, name) for name, value in found.items() if value and len(value) >= 8))


def holds_secret(policy, full):
    """What secret the file holds, in words (`the value of GROQ_API_KEY`, `a private key`), or None."""
    try:
        if not full.is_file():
            return None
        version = (str(full), full.stat().st_mtime_ns, full.stat().st_size, policy.secrets)
        if version not in JUDGED:
            with open(full, "rb") as file:
                JUDGED[version] = secret_in(policy, file.read(MAX_READ).decode("utf-8", errors="replace"))
    except OSError:
        return None
    return JUDGED[version]


def secret_in(policy, text):
    """The first secret the text holds, in words, or None."""
    for value, name in policy.secrets:
        if value in text:
            return f"the value of {name}"
    for words, form in CREDENTIALS.items():
        if re.search(form, text):
            return words
    if any(re.fullmatch(VALUE, line["value"]) for line in re.finditer(PASSWORD_LINE, text)):
        return "a password"
    return None


def secret_reason(policy, path, full):
    """Why the model may not see this file, or None."""
    if is_secret(*Path(path).parts, *full.relative_to(policy.workspace).parts) or \
            any(part.lower() in SECRET_FOLDERS for part in full.parts):  # a workspace inside ~/.ssh is secret
        return f"{path} is a secret file, and the model may not read credentials"
    held = holds_secret(policy, full)
    return f"{path} holds a secret ({held}), and the model may not read credentials" if held else None


def is_secret(*names):
    """True when any of these names (file or folder names) looks like a credential, in any case."""
    for name in (name.lower() for name in names):
        if name in SECRET_FOLDERS or (name not in NOT_SECRET and
                                      any(fnmatch.fnmatchcase(name, pattern) for pattern in SECRET_NAMES)):
            return True
    return False


def inside_workspace(policy, path):
    """The full path of path inside the workspace, links followed; Refused when it leads out or is a secret."""
    path = str(path)
    if len(path) > MAX_PATH:
        raise Refused(f"a path of {len(path)} characters is longer than any real one (MAX_PATH = {MAX_PATH})")
    try:
        full = (policy.workspace / path).resolve()  # a link cannot lead out: it is followed before the check
    except (OSError, RuntimeError, ValueError) as error:  # a link loop, a NUL, a name too long
        raise Refused(f"{path[:100]!r} cannot be followed: {error}") from None
    if not full.is_relative_to(policy.workspace):
        raise Refused(f"{path} is outside the workspace; use paths inside {policy.workspace}")
    reason = secret_reason(policy, path, full)
    if reason:
        raise Refused(reason)
    return full


def writable(policy, path):
    """The full path of a file the model may change: inside the workspace, no secret, none of the harness's own."""
    full = inside_workspace(policy, path)
    if any(full.is_relative_to(place) for place in policy.own):
        raise Refused(f"{path} is one of the harness's own files, which the model may not change")
    return full


def words(command):
    """The command's words as its shell splits them (`.e""nv` is `.env`)."""
    try:
        return shlex.split(command, posix=os.name != "nt")
    except ValueError:  # an open quote: the shell would not run it either
        return command.split()


def names_a_secret(policy, command):
    """Refused when a word of the command names a secret file, by its name or by what it holds."""
    for word in words(command):
        for path in {word, word.rpartition("=")[2]}:  # --file=.env names .env too
            if is_secret(*Path(path).parts):
                raise Refused(f"{path} is a secret file, and no command may name it")
            try:
                full = (policy.workspace / path).resolve()
                reason = full.is_relative_to(policy.workspace) and secret_reason(policy, path, full)
            except (OSError, RuntimeError, ValueError):
                continue
            if reason:
                raise Refused(reason.replace("the model may not read", "no command may name"))


def sealed(policy):
    """(what a command may read but not change: the harness's own places in the workspace and every .git,
    the files it may not read: each one that is secret by name or holds a secret). Links are skipped."""
    read_only, hidden = list(policy.own), []
    for folder, folders, files in os.walk(policy.workspace):
        for name in folders + files:
            place = Path(folder, name)
            if place.is_symlink():
                continue
            if name.lower() == ".git":  # in any case: a disk that ignores case opens .GIT as .git
                read_only.append(place)
            elif place.is_file() and (is_secret(name) or holds_secret(policy, place)):
                hidden.append(place)
        folders[:] = [name for name in folders if name.lower() != ".git"]
    return read_only, hidden


def repositories(workspace):
    """Every .git in the workspace, a folder or a file, in any case: git runs what their config says, later
    and outside any sandbox."""
    found = set()
    for folder, folders, files in os.walk(workspace):
        found |= {Path(folder, name) for name in folders + files if name.lower() == ".git"}
        folders[:] = [name for name in folders if name.lower() != ".git"]
    return found


def mask(policy, text):
    """text with every secret value the harness knows replaced by [secret NAME]."""
    for value, name in policy.secrets:
        text = text.replace(value, f"[secret {name}]")
    return text


def system_program(word, defpath=os.defpath, pathsep=os.pathsep, pathext=os.environ.get("PATHEXT", "")):
    """The system's own program called word: looked up in defpath's absolute folders only, never `.`."""
    for folder in defpath.split(pathsep):
        if not os.path.isabs(folder):  # skips Windows' "." in ".;C:\bin"
            continue
        for ending in ("", *pathext.split(pathsep)):
            candidate = os.path.join(folder, word + ending)
            if os.path.isfile(candidate):
                return candidate
    return None


def options_read(words, takes_value):
    """Split words as the programs read them: -la is -l -a, -n5 is -n 5, -nvee is -n -v -e e.
    Returns ([(option, value or None)], [the other words])."""
    options, others = [], []
    words = iter(words)
    for word in words:
        if word == "--":  # everything after it is a file or a pattern
            others.extend(words)
        elif word.startswith("--"):
            options.append((word, None))
        elif word.startswith("-") and word != "-":
            letters = word[1:]
            while letters:
                option, letters = "-" + letters[0], letters[1:]
                if option in takes_value:  # it takes the rest of its word, or the next word
                    options.append((option, letters or next(words, "")))
                    letters = ""
                else:
                    options.append((option, None))
        else:
            others.append(word)
    return options, others


def plain(policy, command):
    """The command as a list of words when it plainly only reads files in the workspace, else None (ask)."""
    if any(char in SHELL_SYNTAX or not " " <= char <= "~" for char in command):
        return None
    words = command.split()
    if not words or words[0] not in READ_ONLY:
        return None
    allowed = READ_ONLY[words[0]]
    options, files = options_read(words[1:], {option[:-1] for option in allowed if option.endswith("=")})
    if any(option not in allowed and option + "=" not in allowed for option, _ in options):
        return None
    if words[0] == "grep" and "-e" not in (option for option, _ in options):
        files = files[1:]  # its first word is the pattern
    try:
        for file in files:
            full = inside_workspace(policy, file)
            if full.is_file() and full.stat().st_size > MAX_READ:
                return None  # too big to judge what it holds
    except Refused:
        return None
    program = system_program(words[0])
    return [program, *words[1:]] if program else None


def shown(text, one_line=False):
    """text as it may reach a screen: printable ASCII as it is, its line breaks too unless one_line, anything
    else spelled out as Python writes it (a backslash too), and a run of 40 spaces or more counted."""
    if not one_line:
        return "\n".join(shown(line, one_line=True) for line in str(text).split("\n"))
    spelled = str(text).encode("unicode_escape").decode("ascii")
    return re.sub(r" {40,}", lambda run: f"\\{{{len(run.group())} spaces}}", spelled)


def question(summary, *lines):
    """A question for a person, one shown() line per piece: nothing in it can break a line or redraw the screen."""
    return "\n".join(shown(piece, one_line=True) for piece in (summary, *lines))


def fit(text, rows, columns):
    """text cut to a screen of rows x columns: its first and last rows (long lines wrapped) and what was hidden."""
    lines = [line[start:start + columns] for line in text.split("\n")
             for start in range(0, max(len(line), 1), columns)]
    if len(lines) <= rows:
        return "\n".join(lines)
    head, tail = (rows - 1) // 2, rows - 1 - (rows - 1) // 2
    return "\n".join([*lines[:head], f"[... {len(lines) - head - tail} lines hidden: answer ? to see them]",
                      *lines[len(lines) - tail:]])
