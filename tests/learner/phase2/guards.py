"""Phase 2 (learner's version): what the tools may touch, which files are secrets, what runs without asking,
and how anything is shown to a person.

WORKSPACE is the one folder the tools work in (harness.py --workspace sets it). inside_workspace() is the one
boundary for paths; plain() says whether a command only reads; shown() spells out whatever could hide text.
"""
import fnmatch
import os
import re
import shutil
from pathlib import Path

WORKSPACE = Path.cwd()
MAX_PATH = 4096  # Linux's PATH_MAX: a longer path is refused before anything follows it

# Lower case; a name is compared in lower case, as Windows reads names too.
SECRET_NAMES = ["*.env*",  # .env, .env.local, #.env#, ".env copy", prod.env
                "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",  # ssh-keygen
                "*.pem", "*.key", "*.p12", "*.pfx", "*.crt",  # openssl
                ".netrc", "_netrc",  # curl
                ".git-credentials", ".gitconfig",  # git
                ".npmrc", ".yarnrc", ".pypirc", "pip.conf", "pip.ini",  # npm, pip
                "credentials", "credentials.json", ".htpasswd", "*.kdbx"]
SECRET_FOLDERS = {".ssh", ".aws", ".git", ".gnupg", ".docker", ".kube", ".azure", "gcloud", ".password-store"}
NOT_SECRET = {".env.example", ".env.sample", ".env.template"}

# program -> the options it may take; "-n=" takes a value. Nothing else runs without asking.
READ_ONLY = {
    "ls": "-l -a -A -h -1 -F -d -t -r -S --all --human-readable",
    "cat": "-n -b -A -E -T -v -s --number",
    "head": "-n= -c= -q -v --lines= --bytes=",
    "tail": "-n= -c= -q -v --lines= --bytes=",  # no -f: it never ends
    "wc": "-l -w -c -m -L --lines --words --bytes --chars",
    "grep": "-n -i -v -c -l -L -w -x -F -E -G -h -H -o -s -q -e= -m= -A= -B= -C= --count --line-number",
    "pwd": "",
    "echo": "-n",
}
SHELL_SYNTAX = set(";&|<>()$`\\\"'*?[]{}~#!\t\r\n")  # what a shell would read instead of pass on


class ToolError(Exception):
    """A call that will not run as asked; the model gets `error: ` and the message."""


class Refused(ToolError):
    """A call nobody may approve: outside the workspace, or a secret."""


def is_secret(path):
    """True when any part of path is a secret folder, or a name that holds credentials."""
    for part in Path(path).parts:
        name = part.lower()
        if name in NOT_SECRET:
            continue
        if name in SECRET_FOLDERS or any(fnmatch.fnmatchcase(name, pattern) for pattern in SECRET_NAMES):
            return True
    return False


def inside_workspace(path):
    """The real place of path (links followed), or Refused when it is outside WORKSPACE or a secret."""
    path = str(path)
    if len(path) > MAX_PATH:
        raise Refused(f"a path of {len(path)} characters is longer than {MAX_PATH}; use a shorter one")
    try:
        full = (WORKSPACE / path).resolve()  # a link cannot lead out: it is followed before the check
    except (OSError, RuntimeError, ValueError) as error:  # a link loop, a NUL, a name too long
        raise Refused(f"{path[:100]!r} cannot be followed: {error}") from None
    if not full.is_relative_to(WORKSPACE.resolve()):
        raise Refused(f"{path} is outside the workspace; use paths inside {WORKSPACE}")
    if is_secret(path) or is_secret(full):
        raise Refused(f"{path} is a secret file, and the model may not read credentials")
    return full


def allowed_options(program):
    """{option: takes_a_value} for a READ_ONLY program."""
    return {option.rstrip("="): option.endswith("=") for option in READ_ONLY[program].split()}


def options_read(word, allowed, rest):
    """The options in one word, read as the program reads them (-la, -n5, -nvee, --lines=5), or None when
    one is not allowed or a value is missing. A value found in the next word is taken from rest."""
    if word.startswith("--"):
        name, has_value, _ = word.partition("=")
        if name not in allowed or allowed[name] != bool(has_value):
            return None  # "--lines 5" is left to a person: not worth the reading
        return [name]
    letters = []
    for at, letter in enumerate(word[1:], start=1):
        option = "-" + letter
        if option not in allowed:
            return None
        letters.append(option)
        if allowed[option]:  # the value is the rest of this word, or else the next word
            if at + 1 == len(word) and next(rest, None) is None:
                return None
            break
    return letters


def plain(command):
    """The command as a list of words when it only reads files inside the workspace; None when a person must
    decide."""
    if not command.isascii() or any(c in SHELL_SYNTAX or not c.isprintable() for c in command):
        return None
    words = command.split()
    if not words or words[0] not in READ_ONLY:
        return None
    program = shutil.which(words[0], path=os.defpath)  # the system's own folders, never the workspace
    if program is None or Path(program).resolve().is_relative_to(WORKSPACE.resolve()):
        return None
    allowed = allowed_options(words[0])
    rest = iter(words[1:])
    given, files = [], []
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
    if words[0] == "grep" and "-e" not in given:
        if not files:
            return None
        files = files[1:]  # the pattern
    if words[0] == "echo":
        files = []  # echo prints its words, it opens nothing
    for name in files:
        try:
            inside_workspace(name)
        except ToolError:
            return None
    return [program, *words[1:]]


def shown(text, one_line=False):
    """text as it is safe to put on a screen: printable ASCII as it is, every other character spelled out as
    Python writes it (a backslash too), and long runs of spaces counted."""
    text = "".join(c if (c == "\n" and not one_line) or (" " <= c <= "~" and c != "\\") else ascii(c)[1:-1]
                   for c in text)
    return re.sub(" {40,}", lambda spaces: f"\\{{{len(spaces.group())} spaces}}", text)


def cut(text, width=200):
    """One line for the screen: the first width characters of text, shown, and how many more there were."""
    more = f"... (+{len(text) - width} characters)" if len(text) > width else ""
    return shown(text[:width], one_line=True) + more
