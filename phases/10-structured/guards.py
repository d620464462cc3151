"""The policy of one run: the places its tools may touch, the files that hold secrets, the commands
that run without asking, and the one way anything a model or a file wrote is shown to a person.

Try:  python -c "import guards; print(guards.plain(guards.policy(), 'grep -n def tools.py'))"
Every rule is positive: a path is allowed when it stays inside the workspace and holds no secret; a
command runs without asking when its program, its options and its files are all on the lists below.
Anything else asks a person, and shell.py's sandbox holds whatever an approved command does to the
places named here.
"""
import errno
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from dotenv import dotenv_values

from backend import ENV_FILE

# the harness's own folder: its code and its .env, never the model's to change
HOME = Path(__file__).resolve().parent
# the API keys it knows, wherever they are set
KEY_VARIABLES = ("GROQ_API_KEY", "OPENAI_API_KEY", "API_KEY")
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
# What a credential holds, whatever its file is called: a private key block (ssh-keygen, openssl,
# gpg, a cloud service account's JSON, a kubeconfig's client-key-data); a token by the prefix its
# issuer documents (Groq, OpenAI, Stripe, GitHub, GitLab, Slack, Vault, npm, PyPI, Hugging Face,
# Databricks, AWS, Google); a URL with a password in it; a password hash as crypt(3) writes it
# (.htpasswd, /etc/shadow); a database password file's line (.pgpass: host:port:db:user:password); a
# file that is one token and nothing else (.vault-token, gh's token). Every repetition that can fail
# is bounded ({0,200}), so a rule takes time in proportion to the text, never more: a file of 190 KB
# of "key=key=..." must not keep the harness busy for minutes.
CREDENTIALS = re.compile(
    rb"(?P<key>-----BEGIN [A-Z ]{0,20}PRIVATE KEY[A-Z ]{0,10}-----[\s\S]{0,200}?[A-Za-z0-9+/]{40}"
    rb"|LS0tLS1CRUdJTi[\w+/]{40})"
    rb"|(?P<token>\b(?:gsk_|sk-|sk_live_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|"
    rb"xox[abprs]-|hv[bsr]\.|npm_|pypi-|hf_|dapi|AKIA|ASIA|AIza|GOCSPX-)[\w-]{16,})"
    rb"|(?P<url>://[^\s/:@]{1,200}:[^\s/@]{3,200}@)"
    rb"|(?P<hash>\$(?:1|2[abxy]?|5|6|y|apr1|argon2id?)\$[\w./$=,+-]{20,})"
    rb"|(?P<pgpass>^[^:\s]{1,200}:(?:\d{1,5}|\*):[^:\s]{1,200}:[^:\s]{1,200}:\S{6,200}$)"
    rb"|(?P<file>\A\s{0,9}(?=[\w.+/=-]{0,200}[A-Z])(?=[\w.+/=-]{0,200}[a-z])(?=[\w.+/=-]{0,200}\d)"
    rb"[\w.+/=-]{20,200}\s{0,9}\Z)", re.M)
# A password or token line, in lower case (.netrc, .my.cnf, .pypirc, .npmrc, hosts.yml,
# ~/.aws/credentials, a kubeconfig, a .env under any name, a framework's config: PHP's
# define('DB_PASSWORD', '...')): a name ending in one of these words, then a value of 8 or more
# characters with a digit and a letter in its first 100, so that code naming a password (password =
# input()) is not one.
VALUE = rb"[^\s'\"<>$(){}\[\],;]"
PASSWORD_LINE = re.compile(
    rb"(?P<line>(?:pass(?:word|wd)?|pwd|secret|token|key|auth)"
    rb"(?:['\"]?\s{0,9}[:=>]\s{0,9}['\"]?|\s{1,9}|['\"]\s{0,9},\s{0,9}['\"])"
    rb"(?=" + VALUE + rb"{0,99}\d)(?=" + VALUE + rb"{0,99}[a-z])" + VALUE + rb"{8})")
KINDS_OF_SECRET = {"key": "a private key", "token": "an API token", "url": "a URL with a password",
                   "hash": "a password hash", "line": "a password or token", "pgpass": "a password",
                   "file": "a token"}
# (device, inode, size, times, the secrets known) -> what secret_in() found in that version of a
# file
JUDGED = {}
# bytes of a file that are judged, all a tool returns of it: a command given more asks first
MAX_READ = 10_000_000
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
# macOS's sandbox, by its own path: one found on PATH could be anyone's
SEATBELT = "/usr/bin/sandbox-exec"
# os.open's flags, where the system has them (Windows has neither): never follow a link; never wait
# for a writer
NOFOLLOW, NONBLOCK = (getattr(os, f"O_{name}", 0) for name in ("NOFOLLOW", "NONBLOCK"))
DIRECTORY = getattr(os, "O_DIRECTORY", 0)  # open a folder, or fail: a step of a path must be one


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
    secrets: dict = field(default_factory=dict)  # value -> name, for every secret the harness knows
    # the harness's places (its home, where it imports from, its trace): the model's never
    own: tuple = (HOME,)
    sandbox: str = None  # bubblewrap's absolute path, or None when there is none here
    why_none: str = ""  # why there is none, in one line
    # whether an approved command may change the workspace (--sandbox read-only: no)
    write: bool = True


def policy(workspace=".", yes=False, sandbox="workspace-write", trace=None):
    """The policy of a run in workspace. yes approves every kind of call in advance, except a
    command where no sandbox holds it; sandbox is what an approved command may change
    ("workspace-write", "read-only") or "off".
    Example: policy("play", yes=True).unasked -> frozenset({"command", "write", "mcp"}) where
    bubblewrap runs"""
    workspace = Path(workspace).resolve()
    found, why = find_sandbox(workspace) if sandbox != "off" else (None, "--sandbox off")
    unasked = {kind for kind in KINDS if yes and (kind != "command" or found or sandbox == "off")}
    # a module put there would run as ours
    imports = [Path(folder or ".").resolve() for folder in sys.path]
    own = (HOME, *(folder for folder in imports if folder.is_relative_to(workspace)),
           *([Path(os.path.abspath(trace))] if trace else []))
    return Policy(workspace, frozenset(unasked), known_secrets(workspace), own, found, why,
                  sandbox != "read-only")


def find_sandbox(workspace):
    """(the sandbox's absolute path, "") where one runs here, else (None, why not): bubblewrap on
    Linux, looked for on your PATH (/usr/bin, /usr/local/bin, ~/.local/bin, Nix), never in the
    workspace; Seatbelt on macOS, by its own path; Windows has none. Each is tried once, on a
    command that does nothing."""
    if sys.platform == "darwin":
        found, tried = SEATBELT, [SEATBELT, "-p", "(version 1)(allow default)", "/usr/bin/true"]
    elif sys.platform.startswith("linux"):
        found = shutil.which("bwrap", path=search_path(workspace))
        tried = [found, "--ro-bind", "/", "/", "--unshare-all", "true"]
    else:
        return (None, f"{sys.platform} has no sandbox the harness can start (WSL 2 with "
                      "bubblewrap has one)")
    if not found or not os.path.isfile(found):
        return None, ("bubblewrap is not installed (Debian and Ubuntu: sudo apt install bubblewrap)"
                      if found != SEATBELT else f"macOS's sandbox, {SEATBELT}, is missing")
    done = subprocess.run(tried, capture_output=True, text=True)
    if done.returncode:
        return None, f"{Path(found).name} does not start here: {done.stderr.strip()[:200]}"
    return os.path.abspath(found), ""


def known_secrets(workspace):
    """{value: name} of the secrets the harness knows: the values in its .env and the workspace's,
    and the API keys in its environment; not the settings, nor values under 8 characters (they would
    be ordinary words)."""
    found = [*dotenv_values(Path(workspace, ".env"), encoding="utf-8").items(),
             *dotenv_values(ENV_FILE, encoding="utf-8").items(),
             *((name, os.environ.get(name)) for name in KEY_VARIABLES)]
    return {value: name for name, value in found
            if value and len(value) >= 8 and name not in ("BACKEND", "MODEL", "BASE_URL")}


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


def secret_in(policy, data):
    """What bytes hold that is a secret, or "": the value of a secret the harness knows, or a
    credential (CREDENTIALS, PASSWORD_LINE), written in UTF-8 or in UTF-16 (PowerShell's >: a NUL
    beside each character).
    Example: secret_in(policy, ("ghp_" + "0a" * 10).encode("utf-16")) -> "an API token" """
    # UTF-16, LE or BE, reads as ASCII; no BOM
    text = data.replace(b"\0", b"").lstrip(b"\xef\xbb\xbf\xfe\xff")
    known = next((name for value, name in policy.secrets.items() if value.encode() in text), None)
    found = CREDENTIALS.search(text) or PASSWORD_LINE.search(text.lower())
    return f"the value of {known}" if known else KINDS_OF_SECRET[found.lastgroup] if found else ""


def holds_secret(policy, place):
    """What a file holds that is a secret (secret_in() of its first MAX_READ bytes), or "" for a
    folder, a pipe, a device, a link or a file that is gone. place is a path, or a file already open
    (its descriptor). Each version of a file is read once: JUDGED keeps the verdict by the file's
    identity, size and times, whatever its name."""
    try:
        fd = place if isinstance(place, int) else os.open(place, os.O_RDONLY | NOFOLLOW | NONBLOCK)
    except (OSError, ValueError):
        # gone, a link, unreadable, or a name no file can have: nothing to read
        return ""
    try:
        stat = os.fstat(fd)
        version = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns,
                   *policy.secrets.items())
        if version not in JUDGED:
            JUDGED[version] = secret_in(policy, read(fd)) if S_ISREG(stat.st_mode) else ""
        return JUDGED[version]
    finally:
        if fd is not place:
            os.close(fd)


def read(fd):
    """The first MAX_READ bytes of an open file, from its start: all that is judged, and all a tool
    returns."""
    os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "rb", closefd=False) as file:
        return file.read(MAX_READ)


@contextmanager
def opened(policy, path, flags=os.O_RDONLY):
    """A file or folder of the workspace, opened once and judged as opened: yields its descriptor
    (on Windows, a folder's path). Each step of the path is opened inside the one before it, from
    the workspace on, never following a link, so no step can change between the check and the use.
    To write (flags), no step may be one of the harness's own places (checked before the file is
    opened, let alone made); then what was opened must be a regular file or a folder (a pipe or a
    device is refused before it can block) and hold no secret.
    Example: opened(policy, "notes/a.txt") -> 5;  opened(policy, "../a") -> Refused;
             "link/a" -> Refused"""
    steps, writes = where_in(policy, path), flags & (os.O_WRONLY | os.O_RDWR)
    ours, fd, folders = {identity(place) for place in policy.own} if writes else set(), None, []
    try:
        if os.open in os.supports_dir_fd:
            folders.append(os.open(policy.workspace, os.O_RDONLY | DIRECTORY))
            for step in steps[:-1]:
                folders.append(step_in(folders[-1], step, os.O_RDONLY | DIRECTORY | NOFOLLOW, path))
        else:  # Windows opens no path inside a folder: the path is judged where it leads
            full = Path(os.path.realpath(policy.workspace.joinpath(*steps)))
            if not full.is_relative_to(policy.workspace):
                raise Refused(f"{path} leads outside the workspace; use paths "
                              f"inside {policy.workspace}")
            folders = [folder for folder in (full, *full.parents)
                       if folder.is_relative_to(policy.workspace)][1:]
        if writes and {identity(folder) for folder in folders} & ours:
            raise Refused(f"{path} is in the harness's own folder, which the model may not change")
        if not steps:  # the workspace itself
            fd = (folders.pop() if folders and isinstance(folders[-1], int)
                  else str(policy.workspace))
        elif os.open in os.supports_dir_fd:
            fd = step_in(folders[-1], steps[-1], flags | NOFOLLOW | NONBLOCK, path)
        else:
            fd = str(full) if full.is_dir() else os.open(full, flags | os.O_BINARY)
        if writes and identity(fd) in ours:
            raise Refused(f"{path} is one of the harness's own files, which the "
                          "model may not change")
        kind = os.stat(fd).st_mode
        if not (S_ISREG(kind) or S_ISDIR(kind)):
            raise Refused(f"{path} is not a regular file: a pipe or a device could wait for "
                          "ever, or do something")
        if S_ISREG(kind) and (held := holds_secret(policy, fd)):
            raise Refused(f"{path} holds a secret ({held}), and the model may not read credentials")
        yield fd
    finally:
        for handle in (fd, *folders):
            if isinstance(handle, int):
                os.close(handle)


def where_in(policy, path):
    """The steps of a path inside the workspace, read as written: no link is followed, so ".." is
    the folder above. Refused for a path that leaves the workspace or names a secret file.
    Example (workspace /work): "notes/../a.txt" -> ("a.txt",);  "/work/a" -> ("a",);
                               "../x" -> Refused"""
    if len(path) > MAX_PATH or "\0" in path:  # refused before any step is taken
        raise Refused(f"{path[:100]!r} cannot be a path: it is longer than PATH_MAX "
                      f"({MAX_PATH}) or holds a NUL")
    full = Path(os.path.normpath(policy.workspace / path))
    if not full.is_relative_to(policy.workspace):
        raise Refused(f"{path} is outside the workspace; use paths inside {policy.workspace}")
    if is_secret(path) or is_secret(full):
        # where it really is counts too: the workspace may lie in ~/.ssh
        raise Refused(f"{path} is a secret file, and the model may not read credentials")
    return full.relative_to(policy.workspace).parts


def step_in(folder, name, flags, path):
    """Open name inside an open folder with flags (O_NOFOLLOW among them). Refused for a link,
    saying where it leads so the model can use that path, and for a pipe no one reads; other
    failures are the system's."""
    try:
        return os.open(name, flags, 0o666, dir_fd=folder)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EMLINK):
            raise
        with suppress(OSError):  # a link: say where it leads
            raise Refused(f"{path} goes through a link ({name} -> "
                          f"{os.readlink(name, dir_fd=folder)}); a link may lead outside the "
                          "workspace, so none is followed: use the path it leads to") from None
        raise Refused(f"{path} is not a regular file: a pipe no one reads "
                      "could wait for ever") from None


def identity(place):
    """The file or folder a path or descriptor is, as the disk knows it: (device, inode), whatever
    its name or the case it is written in; None when there is none. Two names of one file have one
    identity."""
    with suppress(OSError, ValueError):
        stat = os.stat(place)
        return stat.st_dev, stat.st_ino
    return None


def sealed(policy):
    """What commands see of the workspace besides what they may change: (read_only, hidden).
    read_only: the harness's own places in it and every repository's .git (git runs them later,
    outside any sandbox); hidden: every file that holds a secret, by name or by content, or is too
    big to judge whole (over MAX_READ bytes)."""
    # Python's, read-only
    ws, skip = policy.workspace, (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve())
    read_only = [*dict.fromkeys(place for place in policy.own if place.is_relative_to(ws)),
                 *repositories(ws)]
    hidden = []
    for folder, folders, files in os.walk(ws):
        here = Path(folder)
        # git's files: judged by content
        in_git = ".git" in (part.lower() for part in here.relative_to(ws).parts)
        folders[:] = [name for name in folders
                      if here / name not in skip and not (in_git and name == "objects")]
        # a link: its target is judged
        files = [here / name for name in files if not (here / name).is_symlink()]
        hidden += [file for file in files
                   if holds_secret(policy, file) or (not in_git and is_secret(file)) or
                   file.stat().st_size > MAX_READ]
    return read_only, hidden


def repositories(workspace):
    """Every .git in the workspace, a folder or a file, in any case (a case-insensitive disk opens
    .GIT as .git): git runs what their config says, later and outside any sandbox. Example:
    {Path("/work/.git")}"""
    found = set()
    for folder, folders, files in os.walk(workspace):
        found |= {Path(folder, name) for name in folders + files if name.lower() == ".git"}
        folders[:] = [name for name in folders if name.lower() != ".git"]
    return found


def plain(policy, command):
    """The command as an argument list, when it may run without asking: a READ_ONLY program with
    only its listed options, every file inside the workspace and holding no secret, and nothing a
    shell would read. Else None.

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
            with opened(policy, name) as fd:
                if os.stat(fd).st_size > MAX_READ:  # too big to judge whole
                    return None
        except (ToolError, OSError):
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


def names_a_secret(policy, command):
    """Refused when a word of the command, split as its shell splits it, names a secret file: the
    command could show it, in any form. Whoever approves, it does not run.

    Example: names_a_secret(policy, 'cat .e""nv') -> Refused;
             names_a_secret(policy, "cat notes.txt") -> None
    """
    for word in words(command):
        try:
            if is_secret(word) or holds_secret(policy, (policy.workspace / word).resolve()):
                raise Refused(f"the command names {shown(word, one_line=True)}, a secret file, and "
                              "the model may not read credentials")
        except (OSError, RuntimeError, ValueError):  # a name that cannot be followed names no file
            continue


def words(command, windows=os.name == "nt"):
    """The words the shell that runs a command sees: sh's rules, or cmd's on Windows (only " quotes,
    ^ escapes).
    Example: words('cat .e""nv>x') -> ["cat", ".env", ">", "x"];
             words('type .e^nv', True) -> ["type", ".env"]"""
    if not windows:
        lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&`=:,{}")
        lexer.whitespace_split = True
        try:
            return list(lexer)
        except ValueError:  # an unclosed quote: the words up to it
            return command.split()
    found, word, quoted, escaped = [], "", False, False
    for c in command + " ":  # a space at the end ends the last word
        if escaped or (quoted and c != '"') or (c not in '^"&|<>(),;=' and not c.isspace()):
            word += c
            escaped = False
        elif c == "^":
            escaped = True
        elif c == '"':
            quoted = not quoted
        else:  # a space or an operator ends a word; an operator is a word of its own
            found += [word] if word else []
            found += [] if c.isspace() else [c]
            word = ""
    return found


def search_path(workspace):
    """PATH without its entries that are relative or inside the workspace: a program the workspace
    holds (./bin/make) never runs in place of yours."""
    return os.pathsep.join(folder for folder in os.environ.get("PATH", os.defpath).split(os.pathsep)
                           if os.path.isabs(folder)
                           and not Path(folder).resolve().is_relative_to(workspace))


def mask(policy, text):
    """Text with the value of every secret the harness knows replaced by its name, wherever it
    appears.

    Example (secrets {"gsk_abc123xyz": "GROQ_API_KEY"}): mask(policy, "k=gsk_abc123xyz") ->
    "k=[secret GROQ_API_KEY]"
    """
    for value in sorted(policy.secrets, key=len, reverse=True):
        # the longest first: one value may hold another
        text = text.replace(value, f"[secret {policy.secrets[value]}]")
    return text


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
