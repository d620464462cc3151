"""The guardrails: which paths the tools may touch, which files are secrets, which commands run without asking,
and how anything a model or a file wrote is shown to a person, with every secret the harness knows masked.

Try:  python -c "import guards; print(guards.plain('grep -n def tools.py'))"
Every rule is positive: a path is allowed when it stays inside WORKSPACE and is no secret; a command runs without
asking when its program, its options and its files are all on the lists below. Anything else asks a person.
"""
import fnmatch
import os
import re
import shlex
import shutil
from pathlib import Path

WORKSPACE = Path.cwd()  # the only folder the tools may touch; harness.py --workspace changes it
# Credential files, by the names the programs that write them use: dotenv and direnv (any name holding ".env",
# as editors copy it: "#.env#", ".env copy", "prod.env"), ssh-keygen, openssl and Java keystores, curl, git's
# credential store, npm, pip, Terraform; and the folders ssh, gpg, the AWS, Azure, gcloud, kubectl and docker
# command lines keep keys in. .git is one too: a remote's URL may carry a token.
SECRET_NAMES = ("*.env", "*.env[!a-z]*", ".envrc", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem",
                "*.key", "*.p12", "*.pfx", "*.jks", ".netrc", "_netrc", ".git-credentials", ".npmrc", ".pypirc",
                "pip.conf", "*.tfvars", "*.tfstate")
SECRET_FOLDERS = (".ssh", ".gnupg", ".aws", ".azure", "gcloud", ".kube", ".docker", ".git")
NOT_SECRET = (".env.example", ".env.sample", ".env.template")  # templates, with empty values
# Programs that only read, and the options each may take without asking; "=" marks an option that takes a
# value. Their other words are files, checked like read_file's paths, except echo's words and grep's pattern.
READ_ONLY = {"ls": "-a -A -l -h -1 -t -r -S -R -d -F", "cat": "-n -b -s -A -E -T", "head": "-n= -c=",
             "tail": "-n= -c=", "wc": "-l -w -c -m", "pwd": "", "echo": "-n",
             "grep": "-n -i -v -c -l -L -w -x -o -h -H -F -E -e= -m= -A= -B= -C="}
MAX_PATH = 4096  # characters: a longer path is refused before it is followed (Linux's own PATH_MAX)
SHELL_SYNTAX = set(";&|<>`$(){}[]*?!~\\\n\r")  # a shell would read these, and plain commands run without one
SECRETS = {}  # value -> name, for every secret the harness knows (its keys, the values in its .env)


class ToolError(Exception):
    """A call that will not run as asked. The model gets "error: " and the message, which says what to do."""


class Refused(ToolError):
    """A call the guardrails will not run, whoever approves it."""


def is_secret(path):
    """True when a path names a credential file or lies in a credential folder, in any case, and as Windows reads
    names (".env." and ".env::$DATA" are .env there).

    Example: is_secret("config/.env.local") -> True;  is_secret("home/.ssh/deploy") -> True;
             is_secret(".env.example") -> False;  is_secret("notes.txt") -> False
    """
    parts = [part.lower().split(":")[0].rstrip(". ") or part for part in Path(path).parts]
    if not parts or parts[-1] in NOT_SECRET:
        return False
    return any(part in SECRET_FOLDERS for part in parts) or any(fnmatch.fnmatch(parts[-1], n) for n in SECRET_NAMES)


def inside_workspace(path):
    """The real place a path names, links followed, if it is inside WORKSPACE and no secret; else Refused.

    Example (WORKSPACE is /work): "notes/a.txt" -> /work/notes/a.txt;  "../etc/passwd" -> Refused
    """
    if len(path) > MAX_PATH:
        raise Refused(f"the path is {len(path)} characters long, longer than PATH_MAX ({MAX_PATH})")
    try:
        full = (WORKSPACE / path).resolve()  # a link cannot lead out: it is followed before the check
    except (OSError, RuntimeError, ValueError) as error:  # a link loop, a NUL, a name too long
        raise Refused(f"{path[:100]!r} cannot be followed: {error}") from None
    if not full.is_relative_to(WORKSPACE.resolve()):
        raise Refused(f"{path} is outside the workspace; use paths inside {WORKSPACE}")
    if is_secret(path) or is_secret(full):  # where it really is counts too: the workspace may lie in ~/.ssh
        raise Refused(f"{path} is a secret file, and the model may not read credentials")
    return full


def plain(command):
    """The command as an argument list, when it may run without asking: a READ_ONLY program with only its listed
    options, every file inside the workspace, no secret, and nothing a shell would read. Else None.

    Example: plain("grep -n def tools.py") -> ["/usr/bin/grep", "-n", "def", "tools.py"];  plain("rm x") -> None
    """
    try:
        words = [] if SHELL_SYNTAX & set(command) else shlex.split(command)
    except ValueError:  # an unclosed quote
        return None
    program = words and words[0] in READ_ONLY and shutil.which(words[0], path=os.defpath)  # the system's own
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
            inside_workspace(name)
        except Refused:
            return None
    return [program, *words[1:]]


def options_read(word, allowed, rest):
    """The option letters of a word, read as the programs read them, when each is listed; else None.

    Example: "-la" -> "la";  "-n5" -> "n" (5 is its value);  "-nvee" -> "nve";  "-n" -> "n", its value the next word
    """
    for at, letter in enumerate(word[1:], 1):
        if f"-{letter}=" in allowed:  # it takes a value: the rest of the word, or else the next word
            if at == len(word) - 1:
                next(rest, None)
            return word[1:at + 1]
        if f"-{letter}" not in allowed:  # --long options too: none is listed
            return None
    return word[1:]


def names_a_secret(command):
    """Refused when a word of the command, split as a shell splits it, names a secret file: the command could
    show it, and its value is not one the harness knows to mask. Whoever approves, it does not run.

    Example: names_a_secret('cat .e""nv') -> Refused;  names_a_secret("cat notes.txt") -> None
    """
    words = shlex.shlex(command, posix=True, punctuation_chars="();<>|&`=:,{}")  # cat .env>x is cat, .env, >, x
    words.whitespace_split = True
    try:
        for word in words:
            if is_secret(word) or is_secret((WORKSPACE / word).resolve()):
                raise Refused(f"the command names {shown(word, one_line=True)}, a secret file, and the model may "
                              "not read credentials")
    except (ValueError, OSError, RuntimeError):  # an unclosed quote, a path that cannot be followed: no name
        return


def search_path():
    """PATH without its entries that are relative or inside the workspace: a program the workspace holds
    (./bin/make) never runs in place of yours."""
    root = WORKSPACE.resolve()
    return os.pathsep.join(folder for folder in os.environ.get("PATH", os.defpath).split(os.pathsep)
                           if os.path.isabs(folder) and not Path(folder).resolve().is_relative_to(root))


def mask(text):
    """Text with the value of every secret the harness knows replaced by its name, wherever it appears: in a copy
    of .env under any name, in a command's output, in /proc.

    Example (SECRETS = {"gsk_abc123xyz": "GROQ_API_KEY"}): mask("key=gsk_abc123xyz") -> "key=[secret GROQ_API_KEY]"
    """
    for value in sorted(SECRETS, key=len, reverse=True):  # the longest first: one value may hold another
        text = text.replace(value, f"[secret {SECRETS[value]}]")
    return text


def shown(text, one_line=False):
    """Text as it is safe to show a person: printable ASCII as it is, every other character spelled out as Python
    writes it (a backslash too, so nothing spelled out can be faked), line breaks kept unless one_line, and a run
    of many spaces counted, so it cannot push the rest out of view.

    Example: shown("ok\\x1b[2J") -> "ok\\\\x1b[2J";  shown("a\\nb", one_line=True) -> "a\\\\nb"
    """
    text = "".join(c if (c == "\n" and not one_line) or (" " <= c <= "~" and c != "\\") else ascii(c)[1:-1]
                   for c in mask(text))
    return re.sub(" {40,}", lambda spaces: f"\\{{{len(spaces.group())} spaces}}", text)
