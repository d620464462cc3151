"""The policy of one run: the place its tools may touch, the files that are secrets, the commands
that run without asking, and the one way anything a model or a file wrote is shown to a person.

Try:  python -c "import guards; print(guards.plain(guards.policy(), 'grep -n def tools.py'))"
Every rule is positive: a path is allowed when it stays inside the workspace and is no secret; a
command runs without asking when its program, its options and its files are all on the lists below.
Anything else asks a person.
"""
import fnmatch
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

KINDS = ("command", "write", "mcp")  # the kinds of call a person may approve in advance (--yes)
# Credential files, by the names the programs that write them use: dotenv and direnv, ssh-keygen,
# openssl and Java keystores, curl, git's credential store, npm, pip, Terraform; and any copy of
# one, as editors and people make them (the name, then anything that starts with no letter:
# ".env.local", "#.env#", ".env copy", "server.key.bak"). And the folders ssh, gpg, the AWS, Azure,
# gcloud, kubectl and docker command lines keep keys in. .git is one too: a remote's URL may carry a
# token.
SECRET_NAMES = ("*.env", ".envrc", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem",
                "*.key", "*.p12", "*.pfx", "*.jks", ".netrc", "_netrc", ".git-credentials",
                ".npmrc", ".pypirc", "pip.conf", "*.tfvars", "*.tfstate")
SECRET_FOLDERS = (".ssh", ".gnupg", ".aws", ".azure", "gcloud", ".kube", ".docker", ".git")
NOT_SECRET = (".env.example", ".env.sample", ".env.template")  # templates, with empty values
# Programs that only read, and the options each may take without asking; "=" marks an option that
# takes a value. Their other words are files, checked like read_file's paths, except echo's words
# and grep's pattern.
READ_ONLY = {"ls": "-a -A -l -h -1 -t -r -S -R -d -F", "cat": "-n -b -s -A -E -T",
             "head": "-n= -c=", "tail": "-n= -c=", "wc": "-l -w -c -m", "pwd": "", "echo": "-n",
             "grep": "-n -i -v -c -l -L -w -x -o -h -H -F -E -e= -m= -A= -B= -C="}
MAX_PATH = 4096  # characters: a longer path is refused before it is followed (Linux's own PATH_MAX)
# what sh or cmd would read: plain commands run without a shell
SHELL_SYNTAX = set(";&|<>`$(){}[]*?!~\\\n\r%^")
# where the system keeps its own programs ("." and C:\bin are Windows' os.defpath)
SYSTEM_PATH = (os.path.join(os.environ.get("SYSTEMROOT", r"C:\Windows"), "System32")
               if os.name == "nt" else
               os.defpath)


class ToolError(Exception):
    """A call that will not run as asked. The model gets "error: " and the message, which says what
    to do."""


class Refused(ToolError):
    """A call the guardrails will not run, whoever approves it."""


@dataclass(frozen=True)
class Policy:
    """What one run may touch and what it asks about, decided before it starts: policy() builds
    one."""
    workspace: Path  # the only folder the tools may touch, its real place
    unasked: frozenset = frozenset()  # the KINDS of call approved in advance: --yes


def policy(workspace=".", yes=False):
    """The policy of a run in workspace; yes approves every kind of call in advance.
    Example: policy("play", yes=True).unasked -> frozenset({"command", "write", "mcp"})"""
    return Policy(Path(workspace).resolve(), frozenset(KINDS if yes else ()))


def is_secret(path):
    """True when a path names a credential file, or a copy of one (".env.local", "server.key.bak"),
    or lies in a credential folder: in any case, and as Windows reads names (".env." and
    ".env::$DATA" are .env there); each piece between colons is a name (git's HEAD:.env too).

    Example: is_secret("config/.env.local") -> True;  is_secret("home/.ssh/deploy") -> True;
             is_secret(".env.example") -> False;  is_secret("notes.txt") -> False
    """
    parts = [[piece.rstrip(". ") or piece for piece in part.lower().split(":")]
             for part in Path(path).parts]
    last = [piece for piece in parts[-1] if piece not in NOT_SECRET] if parts else []
    return any(piece in SECRET_FOLDERS for part in parts for piece in part) or any(
        fnmatch.fnmatch(piece, name) or fnmatch.fnmatch(piece, name + "[!a-z]*")
        for piece in last for name in SECRET_NAMES)


def inside_workspace(policy, path):
    """The real place a path names, links followed, if it is inside the workspace and no secret;
    else Refused.

    Example (workspace /work): "notes/a.txt" -> /work/notes/a.txt;  "../etc/passwd" -> Refused
    """
    if len(path) > MAX_PATH:
        raise Refused(f"the path is {len(path)} characters long, longer than PATH_MAX ({MAX_PATH})")
    try:
        # a link cannot lead out: it is followed before the check
        full = (policy.workspace / path).resolve()
    except (OSError, RuntimeError, ValueError) as error:  # a link loop, a NUL, a name too long
        raise Refused(f"{path[:100]!r} cannot be followed: {error}") from None
    if not full.is_relative_to(policy.workspace):
        raise Refused(f"{path} is outside the workspace; use paths inside {policy.workspace}")
    if is_secret(path) or is_secret(full):
        # where it really is counts too: the workspace may lie in ~/.ssh
        raise Refused(f"{path} is a secret file, and the model may not read credentials")
    return full


def plain(policy, command):
    """The command as an argument list, when it may run without asking: a READ_ONLY program with
    only its listed options, every file inside the workspace and no secret, and nothing a shell
    would read. Else None.

    Example: plain(policy, "grep -n def tools.py") -> ["/usr/bin/grep", "-n", "def", "tools.py"];
             "rm x" -> None
    """
    try:
        words = [] if SHELL_SYNTAX & set(command) else shlex.split(command)
    except ValueError:  # an unclosed quote
        return None
    program = words and words[0] in READ_ONLY and system_program(words[0])
    if not program:
        return None
    allowed, files, given, rest = READ_ONLY[words[0]].split(), [], "", iter(words[1:])
    for word in rest:
        if word == "--":
            files += rest  # after --, every word is a file
        elif word[1:].isdigit() and words[0] in ("head", "tail"):
            continue  # head -5
        elif word.startswith("-") and len(word) > 1:
            letters = options_read(word, allowed, rest)
            if letters is None:
                return None
            given += letters
        else:
            files.append(word)
    if words[0] == "grep" and "e" not in given:
        files = files[1:]  # without -e, the first is the pattern
    for name in files if words[0] != "echo" else []:
        try:
            inside_workspace(policy, name)
        except Refused:
            return None
    return [program, *words[1:]]


def options_read(word, allowed, rest):
    """The option letters of a word, read as the programs read them, when each is listed; else None.

    Example: "-la" -> "la";  "-n5" -> "n" (5 is its value);  "-nvee" -> "nve";
             "-n" -> "n", its value the next word
    """
    for at, letter in enumerate(word[1:], 1):
        if f"-{letter}=" in allowed:
            # it takes a value: the rest of the word, or else the next word
            if at == len(word) - 1:
                next(rest, None)
            return word[1:at + 1]
        if f"-{letter}" not in allowed:  # --long options too: none is listed
            return None
    return word[1:]


def system_program(word, defpath=SYSTEM_PATH, pathsep=os.pathsep,
                   pathext=os.environ.get("PATHEXT", "")):
    """A program's full path in the system's own folders (the absolute entries of defpath: /bin and
    /usr/bin, or Windows' System32), never in the workspace or the current folder; None if there is
    none. PATHEXT's endings count. Example: system_program("ls") -> "/bin/ls";  system_program("ls",
    ".;C:\\bin", ";", ".EXE") -> None"""
    for folder in (folder for folder in defpath.split(pathsep) if os.path.isabs(folder)):
        for name in [word, *(word + end for end in pathext.split(pathsep) if end)]:
            if os.path.isfile(os.path.join(folder, name)) and os.access(os.path.join(folder, name),
                                                                        os.X_OK):
                return os.path.join(folder, name)
    return None


def shown(text, one_line=False):
    """Text as it is safe to show a person: printable ASCII as it is, every other character spelled
    out as Python writes it (a backslash too, so nothing spelled out can be faked), line breaks kept
    unless one_line, and a run of many spaces counted, so it cannot push the rest out of view.

    Example: shown("ok\\x1b[2J") -> "ok\\\\x1b[2J";  shown("a\\nb", one_line=True) -> "a\\\\nb"
    """
    text = "".join(c if (c == "\n" and not one_line) or (" " <= c <= "~" and c != "\\")
                   else ascii(c)[1:-1]
                   for c in text)
    return re.sub(" {40,}", lambda spaces: f"\\{{{len(spaces.group())} spaces}}", text)


def question(summary, *lines):
    """What a person is asked, every piece made safe by shown(): the summary on one line, then the
    lines (a diff), then the summary again right above the answer. ask_user() fits it to the screen.
    Example: question("Run: rm x") -> "Run: rm x";
             question("Write a", "+b") -> "Write a\\n+b\\nWrite a" """
    pieces = [summary, *lines, summary] if lines else [summary]
    return "\n".join(shown(piece, one_line=True) for piece in pieces)


def fit(text, rows, columns):
    """Text cut to a screen of rows and columns: its first and last lines, long ones counted as the
    screen wraps them, and how many were hidden between them.
    Example: fit("1\\n2\\n3\\n4\\n5", rows=3, columns=80) -> "1\\n[... 3 lines hidden: answer ? to
    see them]\\n5" """
    lines = [line[at:at + columns] for line in text.split("\n")
             for at in range(0, max(len(line), 1), columns)]
    if len(lines) <= rows:
        return text
    head, tail = (rows - 1) // 2, rows - 1 - (rows - 1) // 2
    return "\n".join([*lines[:head],
                      f"[... {len(lines) - head - tail} lines hidden: answer ? to see them]",
                      *lines[len(lines) - tail:]])
