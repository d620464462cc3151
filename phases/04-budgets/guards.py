"""The guardrails: which paths the tools may touch, which files are secrets, which commands may run without
asking, and how anything a model or a file wrote is shown to a person.

Try:  python -c "import guards; print(guards.plain_command('grep -n def tools.py'))"
Every rule here is positive: a path is allowed when it stays inside WORKSPACE and is not a secret; a command
runs without asking when its program, each of its options and each of its operands is on a known-safe list.
Anything else asks a person, and a secret file is refused whoever asks.
"""
import fnmatch
import functools
import hashlib
import os
import re
import math
import shlex
import stat
import subprocess
import time
from pathlib import Path, PurePath

import shell

WORKSPACE = Path.cwd()  # the only folder the tools may touch; harness.py --workspace changes it
# Credential files, by name or by the end of their path: what ssh-keygen, git's credential store, the AWS, Azure,
# Google Cloud, Oracle Cloud, DigitalOcean (doctl), Databricks, Pulumi, Kubernetes, Docker and GitHub (gh, hub)
# command lines, boto, rclone, npm, yarn, pip, cargo, gem, Bundler, composer, Maven, Gradle, NuGet and Terraform
# write, and the file signatures secret scanners match on (gitrob, shhgit). A * stands for part of one name; a pattern
# ending in /* is a folder that is secret whole, at any depth: the cloud tools keep caches and tokens beside their
# credentials. Inside .git, or any folder named *.git (a bare repository, a mirror): its config can carry a token
# in a remote's URL, and its objects hold every version of every file, secrets included.
SECRET_FILES = (
    ".env", ".env.*", ".env~", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk",
    "*.kdbx", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc", ".git-credentials",
    ".pgpass", ".my.cnf", ".npmrc", ".yarnrc.yml", ".pypirc", "pip.conf", ".s3cfg", ".vault-token",
    ".terraformrc", "credentials.tfrc.json", "*.tfstate", "*.tfstate.*", "*.tfvars", "kubeconfig", "auth.json",
    ".htpasswd", "application_default_credentials.json", ".gem/credentials", ".cargo/credentials*",
    ".config/git/credentials", ".boto", ".dockercfg", ".databrickscfg", ".yarnrc", ".m2/settings.xml",
    ".gradle/gradle.properties", ".nuget/NuGet/NuGet.Config", ".bundle/config", ".config/rclone/rclone.conf",
    ".config/hub", ".config/doctl/config.yaml", ".pulumi/credentials.json", ".aws/*", ".azure/*",
    ".config/gcloud/*", ".config/gh/*", ".oci/*", ".docker/*", ".kube/*", ".ssh/*", ".gnupg/*", "*.git/*",
)
NOT_SECRET = (".env.example", ".env.sample", ".env.template")  # templates with empty values
# The variables a command gets from the harness's environment (when their value does not look like a secret):
# what programs need for their home, language, terminal and temporary files, and Windows for its own folders.
# Everything else stays with the harness: API keys, DATABASE_URL, MYSQL_PWD, LD_PRELOAD, POSIXLY_CORRECT, ...
COMMAND_VARIABLES = ("HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR", "TEMP",
                     "TMP", "NO_COLOR", "VIRTUAL_ENV", "SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "USERPROFILE")
# Programs that run without asking, and the options each may take; anything else asks. "=" marks an option that
# takes a value (attached, or the next word), "=?" one whose value is optional, so only an attached one is its
# value (git diff -U5: the word after a bare -U is not -U's); "-NUM" allows head -5. Operands are files, checked
# like paths, except echo's words and grep's pattern.
SAFE_COMMANDS = {
    "ls": "-a -A -l -h -1 -t -r -S -d -F -p -R -s -i -n --all --almost-all --human-readable --reverse --recursive",
    "cat": "-n -b -s -A -E -T -v --number --number-nonblank --squeeze-blank --show-all",
    "head": "-NUM -n= -c= -q -v --lines= --bytes= --quiet --verbose",
    "tail": "-NUM -n= -c= -q -v --lines= --bytes= --quiet --verbose",
    "wc": "-l -w -c -m -L --lines --words --bytes --chars --max-line-length",
    "grep": "-n -i -v -c -l -L -w -x -o -h -H -F -E -G -s -e= -m= -A= -B= -C= --line-number --ignore-case "
            "--invert-match --count --files-with-matches --word-regexp --fixed-strings --extended-regexp "
            "--regexp= --max-count= --after-context= --before-context= --context=",
    "pwd": "",
    "echo": "-n",
}
# The read-only git subcommands and their options. Their operands are revisions (which must name commits) and
# paths; they run without asking only in a repository that holds no secret (holds_no_secret).
SAFE_GIT = {
    "status": "-s -b --short --branch --long --porcelain --untracked-files=?",
    "log": "-NUM -n= -p -u -i --max-count= --oneline --stat --shortstat --name-only --name-status --patch "
           "--graph --decorate --reverse --no-merges --first-parent --all --since= --until= --author= --grep=",
    "diff": "-U=? -w -b --unified=? --stat --shortstat --numstat --name-only --name-status --cached --staged "
            "--ignore-all-space --ignore-space-change --word-diff",
    "show": "-p -s --patch --no-patch --stat --shortstat --name-only --name-status --oneline",
}
# The only keys a repository's own .git/config may hold for git to run without asking: none of them makes git
# run a program (hooks, fsmonitor, pagers, diff drivers, filters, ...) or read elsewhere (include, alternates).
SAFE_GIT_CONFIG = (
    "core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates", "core.ignorecase",
    "core.precomposeunicode", "core.symlinks", "core.autocrlf", "core.eol", "core.safecrlf", "core.quotepath",
    "remote.*.url", "remote.*.pushurl", "remote.*.fetch", "remote.*.tagopt", "branch.*.remote", "branch.*.merge",
    "branch.*.rebase", "user.name", "user.email", "init.defaultbranch", "pull.rebase", "gc.auto",
)
MAX_COMMAND_CHARS = 10_000  # a longer command is refused: a script belongs in a file
PATH_MAX = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 260  # the longest path followed whole
GIT_CHECK_SECONDS = 2  # the checks before a git command (its config, revisions, history) end by then: they then ask
# The files in .git that may have other names: git's own objects, loose and packed, and their binary indexes, which
# a local clone hard-links. Not a text file git reads and may quote in an error (packed-refs, a commit-graph chain).
GIT_OBJECT_FILE = re.compile(r"objects/(?:[0-9a-f]{2}/[0-9a-f]{38}|pack/pack-[0-9a-f]{40}\.[a-z]+"
                             r"|pack/multi-pack-index|info/commit-graph)")
SHELL_SYNTAX = set(";&|<>`$(){}[]*?!\\\n\r")  # the shell would interpret these (and ~ starting a word)
REVISION = re.compile(r"[\w./@{}~^-]+")  # HEAD~2, main..feature, v1.0^{commit}
SECRET_VALUE = re.compile(r"://[^/\s:@]*:[^/\s@]+@|^(?!/)(?=.*\d)(?=.*[A-Za-z])[\w.+/=-]{24,}$")  # u:pw@, tokens


class ToolError(Exception):
    """A call that will not run as asked. The harness sends the model "error: " and the message, which says why
    and what to do instead: one convention for every tool, guard and check."""


class Refused(ToolError):
    """A call the guardrails will not run, whoever approves it."""

    def __str__(self):
        return f"refused: {super().__str__()}"


def visible(text, keep="\n\t"):
    """Text as it is safe to show a person: control characters (escape sequences, carriage returns, backspaces,
    direction overrides) spelled out as Python writes them, so nothing a model or a file wrote can move the cursor
    or redraw the screen. Line breaks and tabs are kept unless keep says otherwise.

    Example: visible("ok\\x1b[2J\\r") -> "ok\\\\x1b[2J\\\\r" (shown as ok\\x1b[2J\\r);
             visible("a\\nb", keep="") -> "a\\\\nb"
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def exact(text):
    """Text as a question shows what will run: on one line, in ASCII, every other character spelled out, and a run
    of spaces counted. A blank letter (U+3164, U+2800), a look-alike or 4000 spaces would otherwise make a command
    read as something it is not.

    Example: exact("echo ok\u3164# x") -> "echo ok\\u3164# x" """
    shown = visible(text, keep="").encode("ascii", errors="backslashreplace").decode("ascii")
    return re.sub(r" {4,}", lambda spaces: f" [{len(spaces.group())} spaces] ", shown)  # they push the rest away


def is_secret(path):
    """True when a path matches SECRET_FILES: its name, or the end of the path (.aws/* matches home/.aws/sso/x).
    Names match whatever their case, and the way Windows reads them (".env." and ".env::$DATA" are .env there).

    Example: is_secret("config/.env.local") -> True;  is_secret("home/.ssh/keys/deploy") -> True;
             is_secret(".ENV") -> True;  is_secret(".env.example") -> False;  is_secret("notes.txt") -> False
    """
    parts = [part.split(":")[0].rstrip(" .") or part for part in PurePath(path).parts]
    return bool(parts) and parts[-1].lower() not in NOT_SECRET and bool(SECRET_PATH.fullmatch("/".join(parts)))


def secret_regex(pattern):
    """A SECRET_FILES pattern as a regular expression: * stays inside one name; a folder/* covers all below it.

    Example: secret_regex("*.pem") -> "[^/]*\\.pem";  secret_regex(".ssh/*") -> "\\.ssh/.+" """
    folder = pattern.endswith("/*")
    return re.escape(pattern[:-2] if folder else pattern).replace(r"\*", "[^/]*") + ("/.+" if folder else "")


SECRET_PATH = re.compile(f"(?:.*/)?(?:{'|'.join(map(secret_regex, SECRET_FILES))})", re.IGNORECASE | re.DOTALL)


def inside_workspace(path):
    """The real location of a path the model gave; refused if it leaves WORKSPACE or is a secret file.

    Example (WORKSPACE is /work): "notes/a.txt" -> /work/notes/a.txt;  "../etc/passwd" -> Refused
    """
    root, full = real_root(), resolved(path)  # links followed, so a link cannot lead out
    if full is None:
        raise Refused(f"{path[:100]} cannot be followed: a link loop, a NUL, or longer than PATH_MAX "
                      f"({PATH_MAX} bytes) from the root")
    if not full.is_relative_to(root):
        raise Refused(f"{path} is outside the workspace; use paths inside {WORKSPACE}")
    if is_secret(path) or is_secret(full):  # where it really is: the workspace may itself be in ~/.kube
        raise Refused(f"{path} is a secret file, and the model may not read credentials")
    return full


@functools.lru_cache(maxsize=8)
def resolved_root(workspace):
    return workspace.resolve()


def real_root():
    """WORKSPACE with its links followed (kept: resolving it again on every call would cost a third of a read)."""
    return resolved_root(WORKSPACE)


def open_file(path):
    """Open a workspace file for reading, and check what was opened, not only what was named: a regular file (not
    a pipe that would block), with no other name (a hard link can be a secret under another name), still inside
    the workspace once opened (a link swapped in after the check does not count). Returns a binary file."""
    full = inside_workspace(path)
    if full.exists() and not full.is_file():  # do not even open a device: opening one can do something
        raise Refused(f"{path} is not a regular file (a folder, a pipe or a device)")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        file = os.fdopen(os.open(full, flags), "rb")
    except OSError as error:
        raise Refused(f"{path} cannot be opened: {error.strerror}") from None
    info = os.fstat(file.fileno())
    opened = f"/proc/self/fd/{file.fileno()}"
    problem = (None if stat.S_ISREG(info.st_mode) else "is not a regular file (a folder, a pipe or a device)") or \
              (None if info.st_nlink == 1 else "has other names (hard links), so it may be a secret by another name")
    if problem is None and os.path.exists(opened):  # Linux knows which file the descriptor really is
        real, root = Path(os.readlink(opened)), real_root()
        if real != full and (not real.is_relative_to(root) or is_secret(real)):
            problem = "changed after it was checked (a link was swapped in), so it was not read"
    if problem:
        file.close()
        raise Refused(f"{path} {problem}")
    return file


def open_for_writing(path):
    """Open a workspace file for writing, creating it and its folders, one folder at a time from the workspace
    down, following no link: a folder swapped for a link after the check (by a command running meanwhile) is not
    followed out. Returns a binary file. Where the system cannot open relative to a folder (Windows), it opens
    the checked path."""
    full = inside_workspace(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    if os.open not in os.supports_dir_fd:
        full.parent.mkdir(parents=True, exist_ok=True)
        return os.fdopen(os.open(full, flags, 0o644), "wb")
    *folders, name = full.relative_to(real_root()).parts
    folder = os.open(real_root(), os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in folders:
            try:
                os.mkdir(part, dir_fd=folder)
            except FileExistsError:
                pass
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.fdopen(os.open(name, flags, 0o644, dir_fd=folder), "wb")
    except OSError as error:
        raise Refused(f"{path} changed after it was checked ({error.strerror}), so it was not written") from None
    finally:
        os.close(folder)


def plain_command(command, deadline=None):
    """The argument list of a command that may run without asking, else None: a program on SAFE_COMMANDS (or a
    read-only git command, see plain_git), found on search_path(), with only the options listed for it, no shell
    syntax, and every operand a file or folder inside the workspace. Refuses a command naming a secret file.
    deadline (a time.monotonic()): when the checks git needs must give up, and the command asks instead.

    Example: plain_command("grep -n def tools.py") -> ["/usr/bin/grep", "-n", "def", "tools.py"];
             plain_command("grep -r KEY .") -> None;  plain_command("cat .env") -> Refused
    """
    refuse_secrets(command)
    if any(char in SHELL_SYNTAX for char in command):
        return None
    try:
        words = shlex.split(command)  # quotes work as in the shell: cat 'my notes.txt'
    except ValueError:  # unbalanced quotes
        return None
    if not words or not (words[0] in SAFE_COMMANDS or words[0] == "git") or any(w.startswith("~") for w in words):
        return None
    program = shell.program(words[0], search_path())  # never one the workspace planted
    if program is None:
        return None
    args = plain_git(words[1:], deadline) if words[0] == "git" else plain_args(words[0], words[1:])
    return None if args is None else [program, *args]


def refuse_secrets(command):
    """Refuse a command that names a secret file, as the shell would read its words: `cat .env`,
    `cat .e""nv` (the shell joins the quotes away), `git show HEAD:.env`, or a link whose real file is a secret.
    A command longer than MAX_COMMAND_CHARS is refused: checking its every word would take longer than a run."""
    if len(command) > MAX_COMMAND_CHARS:
        raise Refused(f"the command is {len(command)} characters long, and the most is {MAX_COMMAND_CHARS}: write "
                      "a long script to a file with write_file, then run the file")
    words = re.findall(r"[^\s;&|<>()`'\"=:]+", command)
    try:
        words += shlex.split(command)
    except ValueError:  # unbalanced quotes: the shell would refuse it too
        pass
    for word in words:
        if secret_path(word):
            raise Refused(f"{word} is a secret file, and the model may not read credentials")
        if "/" in word and resolved(word) is None:
            raise Refused(f"{word[:100]} is a path that cannot be checked (a link loop, or longer than PATH_MAX "
                          f"= {PATH_MAX} bytes from the root), so it could lead to a secret")


def secret_path(word):
    """True when a word names a secret, by its own name or, links followed, by the file it leads to."""
    real = resolved(word)
    return is_secret(word) or real is not None and is_secret(real)


def resolved(word):
    """The real path a word names, links followed; None when it names none that can be checked: a link loop, a NUL
    character, or a path too long to follow whole from the root (Python then stops following links, while the
    program, opening it from the workspace, would follow them all)."""
    full = real_root() / word
    if len(os.fsencode(str(full))) >= PATH_MAX:
        return None
    try:
        return full.resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def within(word):
    """True when a word, taken as a path, stays inside the workspace (links followed)."""
    real = resolved(word)
    return real is not None and real.is_relative_to(real_root())


def plain_args(program, words):
    """The arguments, when every option is on the program's list and every file operand is a plain path."""
    parsed = parse_options(SAFE_COMMANDS[program], words)
    if parsed is None:
        return None
    used, _, operands, after_dashes = parsed
    if program == "grep" and operands and not used & {"-e", "--regexp"}:
        operands = operands[1:]  # the pattern
    files = [] if program in ("echo", "pwd") else operands + after_dashes
    return words if all(plain_path(word) for word in files) else None


def parse_options(allowed, words):
    """Split words the way the program itself will (getopt): into (option names used, option words, operands,
    operands after --), or None when an option is not on the allowed list or lacks its value. In a word of short
    options, one that takes a value takes the rest of the word, or the next word when nothing of it is left.

    Example: parse_options("-n= -v", ["-vn", "5", "a.txt"]) -> ({"-v", "-n"}, ["-vn", "5"], ["a.txt"], []);
             parse_options("-e= -c", ["-ce", "x", "-ee", "b"]) -> ({"-c", "-e"}, ["-ce", "x", "-ee"], ["b"], [])
    """
    allowed = allowed.split()
    takes_value = {option.split("=")[0] for option in allowed if "=" in option}
    optional = {option[:-2] for option in allowed if option.endswith("=?")}
    used, option_words, operands, words = set(), [], [], list(words)
    while words:
        word = words.pop(0)
        if word == "--":
            return used, option_words, operands, words
        if word == "-" or not word.startswith("-"):
            operands.append(word)
            continue
        option_words.append(word)
        if word.startswith("--"):  # --name, --name=value or --name value
            name, equals, _ = word.partition("=")
            names, value_next = [name], name in takes_value - optional and not equals
            if equals and name not in takes_value:
                return None
        elif word[1:].isdigit():  # head -5
            names, value_next = ["-NUM"], False
        else:  # -vn5: -v, then -n with the value 5
            names = [f"-{letter}" for letter in word[1:]]
            takes = next((n for n, name in enumerate(names) if name in takes_value), len(names))
            names, value_next = names[:takes + 1], takes == len(names) - 1 and names[takes] not in optional
        if not all(name in allowed or name in takes_value for name in names):
            return None
        if value_next:
            if not words:
                return None  # the value is missing
            option_words.append(words.pop(0))
        used.update(names)
    return used, option_words, operands, []


def plain_path(word):
    """True when a command may open this operand without asking: inside the workspace through no link leading out,
    and, when it exists, a folder or a regular file with one name (secrets were refused already)."""
    if not within(word):
        return False
    try:
        info = os.stat(resolved(word))
    except OSError:
        return True  # not there: the program will say so
    return stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1)


def plain_git(words, deadline=None):
    """The arguments for a read-only git command that the repository here cannot turn against you, else None.
    It runs on this workspace's own .git only (git_env), with hooks, fsmonitor and submodules (repositories of
    their own, with configs of their own) left out, when safe_repository() says so; revisions must name commits
    (a blob's or a folder's id would print any file); the repository must hold no secret (holds_no_secret), so
    nothing it prints can be one; and git diff asks when a file it reads here has other names (one may be a
    secret by another name). Its checks end by the deadline, or after GIT_CHECK_SECONDS in all: a repository
    made to be slow makes git ask.

    Example: ["log", "-p", "-2"] -> ["--no-pager", "-c", ..., "log", "--ignore-submodules=all", "-p", "-2", "--"]
    """
    until = min(deadline or math.inf, time.monotonic() + GIT_CHECK_SECONDS)
    if not words or words[0] not in SAFE_GIT or not safe_repository(until):
        return None
    parsed = parse_options(SAFE_GIT[words[0]], words[1:])
    if parsed is None:
        return None
    used, options, operands, paths = parsed
    revisions = [word for word in operands if not (WORKSPACE / word).exists()]
    paths = [word for word in operands if word not in revisions] + paths
    commits, tracked = git_commits(revisions, until), tracked_files(until)
    if commits is None or tracked is None or not all(plain_path(path) for path in paths):
        return None
    if not holds_no_secret(commits, tracked, until):
        return None
    if words[0] == "diff" and not all(plain_path(path) for path in tracked):  # it reads these files here
        return None
    return ["--no-pager", "-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false", words[0],
            "--ignore-submodules=all", *options, *revisions, "--", *paths]


def git_commits(words, until):
    """The ids of the commits revision words name (HEAD~1, main..topic), or None when one names anything else:
    a file or a folder in one (HEAD:.aws), a blob."""
    parts = [part for word in words for part in re.split(r"\.\.\.?", word) if part]
    if not all(REVISION.fullmatch(part) and not part.startswith("-") for part in parts):
        return None
    if not parts:
        return []
    named = git_output("rev-parse", "--end-of-options", *[f"{part}^{{commit}}" for part in parts], until=until)
    # the ids alone: rev-parse repeats --end-of-options, and marks a commit left out of a range (^main) with ^
    return None if named is None else list(dict.fromkeys(re.findall(r"[0-9a-f]{40}", named)))


def holds_no_secret(commits, tracked, until):
    """True when nothing git can print here is a secret, whatever name it is shown under. HEAD names a commit, or
    nothing yet (git show prints whatever it names); no path in the index (tracked) or anywhere in history (every
    ref and reflog, stashes and notes with them, and the commits named) is a secret by is_secret(); and no object
    git can reach (from the index too) is a copy of a secret file here: a note, an index entry or a tree can give
    a secret's contents a harmless name by the blob's id alone. Anything not decided by until is not safe."""
    head = git_output("cat-file", "--batch-check=%(objecttype)", until=until, input=b"HEAD\n")
    history = git_output("log", "--all", "--reflog", "-m", "--format=", "--name-only", "--no-renames", "-z",
                         "--end-of-options", *commits, until=until)  # -m: a merge's own files count too
    objects = git_output("rev-list", "--objects", "--no-object-names", "--all", "--reflog", "--indexed-objects",
                         "--end-of-options", *commits, until=until)
    copies = secret_blob_ids(until)
    if None in (head, history, objects, copies):
        return False
    paths = [path for path in history.split("\0") + tracked if path]
    return head in ("commit\n", "HEAD missing\n") and not any(is_secret(real_root() / path) for path in paths) and \
        copies.isdisjoint(objects.split())


def secret_blob_ids(until):
    """The blob ids git would give the workspace's secret files, or None when the workspace cannot be vouched for:
    a folder cannot be read (it could hold a secret), a file has other names (git reads files here, tracked ones
    and every .gitattributes, and quotes a line it cannot parse: one may be a secret by another name), or the
    time is up. A folder called .git is passed over: it is git's own, and what it stores is the history these
    ids are checked against."""
    root, ids = real_root(), set()
    try:
        for folder, folders, files in os.walk(root, onerror=fail):
            if time.monotonic() > until:  # a workspace of half a million files: git asks rather than waits
                return None
            folders[:] = [name for name in folders if name != ".git"]
            for name in files:
                path = Path(folder, name)
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    return None  # git reads files here (.gitattributes, what it tracks): one may be a secret
                if is_secret(path) and stat.S_ISREG(info.st_mode):
                    ids.add(blob_id(path, until))
    except (Refused, OSError, TimeoutError):
        return None
    return ids


def blob_id(path, until):
    """The id git gives a file's bytes as a blob (it hashes "blob <size>\\0" and the bytes), read a megabyte at
    a time; TimeoutError when that is not done by until. A link or a pipe swapped in is not followed or waited
    on: OSError.

    Example: a file holding "hi\\n" -> "45b983be36b73c0788dc9cbcb76cbb80fc7bb057" """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    with os.fdopen(os.open(path, flags), "rb") as file:
        digest = hashlib.sha1(b"blob %d\0" % os.fstat(file.fileno()).st_size)
        while block := file.read(1 << 20):
            if time.monotonic() > until:
                raise TimeoutError(path)
            digest.update(block)
    return digest.hexdigest()


def safe_repository(until):
    """True when WORKSPACE is the top of a git repository whose own files cannot make git run a program, read
    elsewhere or hang: .git is a real folder here holding only real folders and regular files (a link would lead
    elsewhere, a pipe would block) with one name each (only_plain_files), objects are not borrowed from
    elsewhere, and its config holds only keys on SAFE_GIT_CONFIG."""
    git_dir = WORKSPACE / ".git"
    if git_dir.is_symlink() or not git_dir.is_dir() or not only_plain_files(git_dir, until):
        return False
    if (git_dir / "commondir").exists() or (git_dir / "objects" / "info" / "alternates").exists():
        return False
    keys = git_output("config", "--no-includes", "--file", str(git_dir / "config"), "--name-only", "--list",
                      until=until)
    return keys is not None and all(any(fnmatch.fnmatchcase(key, p) for p in SAFE_GIT_CONFIG)
                                    for key in keys.lower().split())


def only_plain_files(git_dir, until):
    """True when everything below git_dir is a real folder or a regular file with one name (and that was seen by
    until). git reads many of its files (packed-refs, grafts, a rebase's list) and quotes a line it cannot parse
    in its error, so a file there that is a secret by another name would be printed; only its object files, which
    it never quotes, may have other names (GIT_OBJECT_FILE)."""
    for parent, folders, files in os.walk(git_dir):
        if time.monotonic() > until:
            return False
        for name in folders + files:
            path = Path(parent, name)
            info = os.lstat(path)
            one_name = info.st_nlink == 1 or GIT_OBJECT_FILE.fullmatch(path.relative_to(git_dir).as_posix())
            if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode) and one_name):
                return False
    return True


def tracked_files(until):
    """The files git tracks here, as paths (a plain git diff reads each of them); None if git cannot say."""
    listed = git_output("ls-files", "-z", until=until)
    return None if listed is None else listed.split("\0")[:-1]


def git_output(*args, until, input=b""):
    """What a git check prints, or None when it fails or is not done by until (a time.monotonic()). It runs the
    git found on search_path(), like every program the harness starts, with input as all it can read."""
    git = shell.program("git", search_path())
    try:
        done = subprocess.run([git, *args], env=git_env(), input=input, capture_output=True,
                              timeout=until - time.monotonic())
    except (TypeError, ValueError, OSError, subprocess.TimeoutExpired):  # TypeError: no git; ValueError: no time
        return None
    return done.stdout.decode("utf-8", errors="replace") if done.returncode == 0 else None


def git_env():
    """git's environment: this workspace's repository and nothing else (no global or system config, no
    repository above it), no pager, no prompts, no lock files taken by a read."""
    return {**command_env(), "GIT_DIR": str(WORKSPACE / ".git"), "GIT_WORK_TREE": str(WORKSPACE),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1",
            "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1"}


def search_path():
    """PATH without the entries a workspace could plant a program in: relative ones (an empty entry means the
    current folder) and any inside the workspace. Example: "bin:/usr/bin::/work/tools" -> "/usr/bin" """
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(p for p in entries if p and Path(p).is_absolute() and not within(p))


def hidden_files():
    """What a sandboxed command must not read: the workspace's secret files and folders (.git, .ssh, ...), and
    files with more than one name (one may be a secret by another name)."""
    root, found = real_root(), []
    for folder, folders, files in os.walk(root, onerror=fail):  # a folder it cannot read could hold a secret
        for name in folders + files:
            path = Path(folder, name)
            if is_secret(path) or is_secret(path / "x"):  # "x": anything inside .git, .ssh
                found.append(path)
            elif name in files and not path.is_symlink() and path.stat().st_nlink > 1:
                found.append(path)
        folders[:] = [name for name in folders if Path(folder, name) not in found]  # hidden whole
    return found


def fail(error):
    """os.walk's onerror: a folder that cannot be read stops the walk, rather than being passed over."""
    raise Refused(f"{error.filename} cannot be read ({error.strerror}), so what it holds cannot be checked")


def command_env(argv=None):
    """The environment a command runs with: the COMMAND_VARIABLES the harness has, unless the value looks like a
    secret (a token, a URL with a password in it), and PATH from search_path(). git gets git_env().
    Example: HOME and LANG are kept; GROQ_API_KEY, DATABASE_URL and MYSQL_PWD are not."""
    if argv and Path(argv[0]).name in ("git", "git.exe"):
        return git_env()
    env = {name: value for name, value in os.environ.items() if not SECRET_VALUE.search(value)
           and any(fnmatch.fnmatchcase(name.upper(), variable) for variable in COMMAND_VARIABLES)}
    return {**env, "PATH": search_path()}
