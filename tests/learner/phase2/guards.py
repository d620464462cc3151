"""Phase 2 (learner's version): what a run may touch, which files are secrets, what runs without asking,
and how anything the model wrote is shown to a person.

Try: python -c "import guards; print(guards.plain(guards.policy('.'), 'ls -la'))"
"""
import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

KINDS = ("command",)  # the kinds of call a person approves; --yes approves them all in advance
MAX_PATH = 4096  # Linux's own limit on a path; a longer one is refused before it is followed
SECRET_NAMES = ("*.env*", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",  # dotenv files, ssh-keygen
                "*.pem", "*.key", "*.p12", "*.pfx",  # openssl
                ".netrc", "_netrc", ".git-credentials", ".npmrc", ".pypirc", "pip.conf")  # curl, git, npm, pip
SECRET_FOLDERS = (".ssh", ".aws", ".git", ".gnupg", ".docker", ".kube", ".azure", "gcloud")
NOT_SECRET = (".env.example", ".env.sample")  # templates, written to be shared
SHELL_SYNTAX = set("|&;<>()$`\\\"'*?[]{}~!#%^")  # what a shell (or cmd) would read instead of passing on
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


def policy(workspace=".", yes=False):
    """The policy of one run: its workspace, and with yes=True every kind of call approved in advance."""
    return Policy(Path(workspace).resolve(), frozenset(KINDS if yes else ()))


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
    if is_secret(*Path(path).parts, *full.relative_to(policy.workspace).parts) or \
            any(part.lower() in SECRET_FOLDERS for part in full.parts):  # a workspace inside ~/.ssh is secret
        raise Refused(f"{path} is a secret file, and the model may not read credentials")
    return full


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
            inside_workspace(policy, file)
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
