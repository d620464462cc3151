"""Every OS a learner has: no file of the course or of its tests reaches, unguarded, what only some
operating systems have. On Windows `os.mkfifo`, `signal.SIGKILL` or `import resource` is an
AttributeError or ImportError where a learner expected a test to run or to skip, and `os.kill()` or
`send_signal()` ends the process it was to signal; on Linux and macOS
`subprocess.CREATE_NEW_PROCESS_GROUP` is the AttributeError.

The names are those typeshed's standard-library stubs define only where `sys.platform != "win32"`
(or only where it is), on Pythons 3.10 to 3.13. The files are read as syntax trees, never as text. A
use is guarded, and not reported, when one of these holds where it stands:

- it is in a branch of an `if`, of a conditional expression, or of an `and`/`or`, whose condition
  looks at the platform (`os.name`, `sys.platform`, `platform.system()`, `os.path.isdir("/proc")`,
  `hasattr()`, `getattr()`, or a name or function made from those), and, where the condition can be
  worked out for each OS, no OS that lacks the name takes that branch;
- an earlier statement of its block leaves on such an OS: an `if` like those whose branch ends in
  return, raise, continue, break, `pytest.skip()` or `sys.exit()`, or `pytest.importorskip()` of a
  module only the other OSes have;
- it is inside a `try` that catches ImportError, ModuleNotFoundError, AttributeError, or everything;
- its function, class or module is skipped by a `pytest.mark.skipif` whose condition looks at the
  platform, or by a marker made from one (`helpers.needs_fifos`, `needs_bubblewrap`, `pytestmark`).

Python source held in a string (one with an import statement, as `python -c CODE` runs) is read the
same way, where the string stands.
"""
import ast
import functools
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT

# What CPython on Windows lacks.
POSIX_ONLY = {
    "modules": set("""
        crypt curses fcntl grp nis ossaudiodev posix pty pwd readline resource spwd syslog
        termios tty
    """.split()),
    "os": set("""
        CLD_CONTINUED CLD_DUMPED CLD_EXITED CLD_KILLED CLD_STOPPED CLD_TRAPPED CLONE_FILES
        CLONE_FS CLONE_NEWCGROUP CLONE_NEWIPC CLONE_NEWNET CLONE_NEWNS CLONE_NEWPID
        CLONE_NEWTIME CLONE_NEWUSER CLONE_NEWUTS CLONE_SIGHAND CLONE_SYSVSEM CLONE_THREAD
        CLONE_VM EFD_CLOEXEC EFD_NONBLOCK EFD_SEMAPHORE EX_CANTCREAT EX_CONFIG EX_DATAERR
        EX_IOERR EX_NOHOST EX_NOINPUT EX_NOPERM EX_NOUSER EX_OSERR EX_OSFILE EX_PROTOCOL
        EX_SOFTWARE EX_TEMPFAIL EX_UNAVAILABLE EX_USAGE F_LOCK F_TEST F_TLOCK F_ULOCK
        GRND_NONBLOCK GRND_RANDOM MFD_ALLOW_SEALING MFD_CLOEXEC MFD_HUGETLB MFD_HUGE_16GB
        MFD_HUGE_16MB MFD_HUGE_1GB MFD_HUGE_1MB MFD_HUGE_256MB MFD_HUGE_2GB MFD_HUGE_2MB
        MFD_HUGE_32MB MFD_HUGE_512KB MFD_HUGE_512MB MFD_HUGE_64KB MFD_HUGE_8MB MFD_HUGE_MASK
        MFD_HUGE_SHIFT NGROUPS_MAX O_ACCMODE O_ASYNC O_CLOEXEC O_DIRECT O_DIRECTORY O_DSYNC
        O_EVTONLY O_EXEC O_EXLOCK O_FSYNC O_LARGEFILE O_NDELAY O_NOATIME O_NOCTTY O_NOFOLLOW
        O_NOFOLLOW_ANY O_NONBLOCK O_PATH O_RSYNC O_SEARCH O_SHLOCK O_SYMLINK O_SYNC
        O_TMPFILE PIDFD_NONBLOCK POSIX_FADV_DONTNEED POSIX_FADV_NOREUSE POSIX_FADV_NORMAL
        POSIX_FADV_RANDOM POSIX_FADV_SEQUENTIAL POSIX_FADV_WILLNEED POSIX_SPAWN_CLOSE
        POSIX_SPAWN_CLOSEFROM POSIX_SPAWN_DUP2 POSIX_SPAWN_OPEN PRIO_DARWIN_BG
        PRIO_DARWIN_NONUI PRIO_DARWIN_PROCESS PRIO_DARWIN_THREAD PRIO_PGRP PRIO_PROCESS
        PRIO_USER P_ALL P_PGID P_PID P_PIDFD RTLD_DEEPBIND RTLD_GLOBAL RTLD_LAZY RTLD_LOCAL
        RTLD_NODELETE RTLD_NOLOAD RTLD_NOW RWF_APPEND RWF_DSYNC RWF_HIPRI RWF_NOWAIT
        RWF_SYNC SCHED_BATCH SCHED_FIFO SCHED_IDLE SCHED_OTHER SCHED_RESET_ON_FORK SCHED_RR
        SEEK_DATA SEEK_HOLE SPLICE_F_MORE SPLICE_F_MOVE SPLICE_F_NONBLOCK ST_APPEND
        ST_MANDLOCK ST_NOATIME ST_NODEV ST_NODIRATIME ST_NOEXEC ST_NOSUID ST_RDONLY
        ST_RELATIME ST_SYNCHRONOUS ST_WRITE TFD_CLOEXEC TFD_NONBLOCK TFD_TIMER_ABSTIME
        TFD_TIMER_CANCEL_ON_SET WCONTINUED WCOREDUMP WEXITED WEXITSTATUS WIFCONTINUED
        WIFEXITED WIFSIGNALED WIFSTOPPED WNOHANG WNOWAIT WSTOPPED WSTOPSIG WTERMSIG
        WUNTRACED XATTR_CREATE XATTR_REPLACE XATTR_SIZE_MAX chflags chown chroot confstr
        confstr_names copy_file_range ctermid environb eventfd eventfd_read eventfd_write
        fchdir fchown fdatasync fork forkpty fpathconf fstatvfs fwalk getegid getenvb
        geteuid getgid getgrouplist getgroups getloadavg getpgid getpgrp getpriority
        getrandom getresgid getresuid getsid getuid getxattr grantpt initgroups killpg
        lchflags lchown listxattr lockf login_tty major makedev memfd_create minor mkfifo
        mknod nice openpty pathconf pathconf_names pidfd_open pipe2 posix_fadvise
        posix_fallocate posix_openpt posix_spawn posix_spawnp pread preadv ptsname pwrite
        pwritev readv register_at_fork removexattr sched_get_priority_max
        sched_get_priority_min sched_getaffinity sched_getparam sched_getscheduler
        sched_param sched_rr_get_interval sched_setaffinity sched_setparam
        sched_setscheduler sched_yield sendfile setegid seteuid setgid setgroups setns
        setpgid setpgrp setpriority setregid setresgid setresuid setreuid setsid setuid
        setxattr spawnlp spawnlpe spawnvp spawnvpe splice statvfs sync sysconf sysconf_names
        tcgetpgrp tcsetpgrp timerfd_create timerfd_gettime timerfd_gettime_ns
        timerfd_settime timerfd_settime_ns ttyname uname unlockpt unshare wait wait3 wait4
        waitid waitid_result writev
    """.split()),
    "signal": set("""
        ITIMER_PROF ITIMER_REAL ITIMER_VIRTUAL ItimerError SIGALRM SIGBUS SIGCHLD SIGCLD
        SIGCONT SIGEMT SIGHUP SIGINFO SIGIO SIGIOT SIGKILL SIGPIPE SIGPOLL SIGPROF SIGPWR
        SIGQUIT SIGRTMAX SIGRTMIN SIGSTKFLT SIGSTOP SIGSYS SIGTRAP SIGTSTP SIGTTIN SIGTTOU
        SIGURG SIGUSR1 SIGUSR2 SIGVTALRM SIGWINCH SIGXCPU SIGXFSZ SIG_BLOCK SIG_SETMASK
        SIG_UNBLOCK Sigmasks alarm getitimer pause pidfd_send_signal pthread_kill
        pthread_sigmask setitimer siginterrupt sigpending sigtimedwait sigwait sigwaitinfo
        struct_siginfo
    """.split()),
    "socket": set("""
        AF_UNIX MSG_DONTWAIT MSG_NOSIGNAL SCM_RIGHTS SOCK_CLOEXEC SOCK_NONBLOCK SO_REUSEPORT
        recv_fds send_fds sethostname
    """.split()),
    "select": set("""
        PIPE_BUF POLLERR POLLHUP POLLIN POLLNVAL POLLOUT POLLPRI epoll kevent kqueue poll
    """.split()),
    "time": set("""
        CLOCK_BOOTTIME CLOCK_PROCESS_CPUTIME_ID CLOCK_TAI CLOCK_THREAD_CPUTIME_ID clock_settime
        clock_settime_ns pthread_getcpuclockid tzset
    """.split()),
}
# What CPython on Linux and macOS lacks.
WINDOWS_ONLY = {
    "modules": set("""
        _overlapped _winapi msilib msvcrt nt winreg winsound
    """.split()),
    "os": set("""
        O_BINARY O_NOINHERIT O_RANDOM O_SEQUENTIAL O_SHORT_LIVED O_TEMPORARY O_TEXT P_DETACH
        P_OVERLAY add_dll_directory get_handle_inheritable listdrives listmounts listvolumes
        set_handle_inheritable startfile
    """.split()),
    "signal": set("""
        CTRL_BREAK_EVENT CTRL_C_EVENT SIGBREAK
    """.split()),
    "subprocess": set("""
        ABOVE_NORMAL_PRIORITY_CLASS BELOW_NORMAL_PRIORITY_CLASS CREATE_BREAKAWAY_FROM_JOB
        CREATE_DEFAULT_ERROR_MODE CREATE_NEW_CONSOLE CREATE_NEW_PROCESS_GROUP CREATE_NO_WINDOW
        DETACHED_PROCESS HIGH_PRIORITY_CLASS IDLE_PRIORITY_CLASS NORMAL_PRIORITY_CLASS
        REALTIME_PRIORITY_CLASS STARTF_USESHOWWINDOW STARTF_USESTDHANDLES STARTUPINFO
        STD_ERROR_HANDLE STD_INPUT_HANDLE STD_OUTPUT_HANDLE SW_HIDE
    """.split()),
    "socket": set("""
        SIO_KEEPALIVE_VALS SIO_LOOPBACK_FAST_PATH SIO_RCVALL SO_EXCLUSIVEADDRUSE fromshare
    """.split()),
}
# What Windows has but does otherwise: a signal sent there ends the process (os.kill() with any
# signal but CTRL_C_EVENT and CTRL_BREAK_EVENT; send_signal(SIGTERM)) or is refused (send_signal()).
SIGNALLING = {"os.kill()", "send_signal()"}
# The OSes a learner has, as the probes see them.
OSES = {"Windows": {"os.name": "nt", "sys.platform": "win32", "platform.system()": "Windows"},
        "Linux": {"os.name": "posix", "sys.platform": "linux", "platform.system()": "Linux"},
        "macOS": {"os.name": "posix", "sys.platform": "darwin", "platform.system()": "Darwin"}}
PROBES = {*OSES["Windows"], "sys.platform.startswith"}
CATCHING = {"ImportError", "ModuleNotFoundError", "AttributeError", "Exception", "BaseException"}
UNKNOWN = "guarded"  # stands for the OSes of a guard that cannot be worked out here: it guards all


def course_files():
    """The course's code: scripts, checkpoints, the phase tools, the second implementation."""
    return sorted({*ROOT.glob("*.py"), *(ROOT / "phases").rglob("*.py"),
                   *(ROOT / "tests" / "learner").rglob("*.py")})


def suite_files():
    """The tests and what they share, less the second implementation (which is course code) and
    this file, whose strings are the planted uses below."""
    return sorted(p for p in (ROOT / "tests").rglob("*.py") if p != Path(__file__).resolve()
                  and p.relative_to(ROOT).parts[:2] != ("tests", "learner"))


def lacking(module, name):
    """The OSes that lack module.name, or the module itself when name is None: a tuple, maybe ()."""
    if module == "signalling":
        return ("Windows",) if name in SIGNALLING else ()
    for table, oses in ((POSIX_ONLY, ("Windows",)), (WINDOWS_ONLY, ("Linux", "macOS"))):
        if name in table.get(module, ()) if name else module in table["modules"]:
            return oses
    return ()


def constant(node):
    """A string constant, or a tuple, list or set of them, as a list of strings; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = [constant(element) for element in node.elts]
        return None if None in values else [value for each in values for value in each]
    return None


def proc(node):
    """True for os.path.isdir("/proc") or os.path.exists("/proc"): Linux's, as the course asks."""
    return (isinstance(node, ast.Call) and len(node.args) == 1 and ast.unparse(node.func) in
            ("os.path.isdir", "os.path.exists") and constant(node.args[0]) == ["/proc"])


def called(node):
    """The name a call calls: "skip" for pytest.skip(...), "hasattr" for hasattr(...); else ""."""
    if not isinstance(node, ast.Call):
        return ""
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def leaves(statements):
    """True when a block always leaves: return, raise, continue, break, pytest.skip(), exit()."""
    last = statements[-1] if statements else None
    if isinstance(last, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(last, ast.If):
        return leaves(last.body) and leaves(last.orelse)
    return isinstance(last, ast.Expr) and called(last.value) in ("skip", "exit", "_exit", "fail")


class Reader:
    """What the files say about the platform, by name across them, as tests import it: the names
    that stand for a condition (`WINDOWS = os.name == "nt"`, or `BUBBLEWRAP_MISSING =
    bubblewrap_problem()` whose body looks at sys.platform) and the skip markers made from one
    (`needs_fifos = pytest.mark.skipif(not hasattr(os, "mkfifo"), ...)`)."""

    def __init__(self, trees):
        self.flags, self.markers, self.functions, self.assigned = {}, set(), set(), []
        for tree in trees:
            self.look(tree)
        assigned = [(name, value, self.uses(value)) for name, value in self.assigned]
        for _ in range(3):  # a flag made from a flag
            for name, value, (probes, names) in assigned:
                if self.skipif(value):
                    self.markers.add(name)
                elif probes or names & (self.flags.keys() | self.functions):
                    self.flags.setdefault(name, value)

    def look(self, node):
        """True when a node holds a probe; each function that does is noted in self.functions, and
        each assignment to a name in self.assigned."""
        found = self.probe(node)
        if isinstance(node, ast.Assign):
            self.assigned += [(target.id, node.value) for target in node.targets
                              if isinstance(target, ast.Name)]
        for child in ast.iter_child_nodes(node):
            found = self.look(child) or found
        if found and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions.add(node.name)
        return found

    def uses(self, expression):
        """(whether it holds a probe, the names it reads and calls)."""
        nodes = list(ast.walk(expression))
        return (any(self.probe(node) for node in nodes),
                {node.id for node in nodes if isinstance(node, ast.Name)} |
                {called(node) for node in nodes if isinstance(node, ast.Call)})

    def probe(self, node):
        """True for os.name, sys.platform, platform.system(), a /proc test, hasattr(), getattr()."""
        if not (isinstance(node, ast.Attribute) and node.attr in ("name", "platform") or
                called(node) in ("system", "startswith", "isdir", "exists", "hasattr", "getattr",
                                 "importorskip")):
            return False  # (unparse() below is slow: most nodes are none of these)
        startswith = isinstance(node, ast.Call) and ast.unparse(node.func) in PROBES
        return (isinstance(node, (ast.Attribute, ast.Call)) and ast.unparse(node) in PROBES or
                startswith or proc(node) or called(node) in ("hasattr", "getattr", "importorskip"))

    def about_platform(self, expression):
        """True when an expression looks at the platform, itself or through a flag or a function."""
        return any(self.probe(node) or isinstance(node, ast.Name) and node.id in self.flags
                   or called(node) in self.functions for node in ast.walk(expression))

    def skipif(self, node):
        """True for pytest.mark.skipif(CONDITION, ...) about the platform, a marker made from one,
        or a list holding one."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return any(self.skipif(element) for element in node.elts)
        if isinstance(node, (ast.Name, ast.Attribute)):
            return (node.id if isinstance(node, ast.Name) else node.attr) in self.markers
        return (called(node) == "skipif" and bool(node.args) and self.about_platform(node.args[0]))

    def truth(self, node, system, seen=()):
        """A condition's value on one OS: True, False, or None when it cannot be worked out."""
        values = OSES[system]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self.truth(node.operand, system, seen)
            return None if value is None else not value
        if isinstance(node, ast.BoolOp):
            found = [self.truth(value, system, seen) for value in node.values]
            decides = isinstance(node.op, ast.Or)  # True decides an or, False an and
            return decides if decides in found else None if None in found else not decides
        if isinstance(node, ast.Name) and node.id in self.flags and node.id not in seen:
            return self.truth(self.flags[node.id], system, (*seen, node.id))
        if proc(node):
            return system == "Linux"
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "sys.platform.startswith":
            prefixes = constant(node.args[0]) if node.args else None
            return None if prefixes is None else values["sys.platform"].startswith(tuple(prefixes))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = ast.unparse(node.left), node.comparators[0]
            if left not in values:  # "nt" == os.name
                left, right = ast.unparse(right), node.left
            known = constant(right)
            if left in values and known is not None:
                inside = values[left] in known
                return {ast.Eq: inside, ast.In: inside, ast.NotEq: not inside,
                        ast.NotIn: not inside}.get(type(node.ops[0]))
        return None


class Finder(ast.NodeVisitor):
    """Walks one tree keeping `reach`, the OSes on which the code at hand runs (all, less those a
    guard leaves out; UNKNOWN in it once a guard cannot be worked out), and notes each use of what
    an OS that reaches it lacks."""

    def __init__(self, reader, where, line=0):
        self.reader, self.where, self.line = reader, where, line
        self.found, self.reach = [], set(OSES)
        self.modules = {}  # the name a module is imported as: its name

    def note(self, node, module, name):
        oses = set(lacking(module, name)) & self.reach
        if oses and UNKNOWN not in self.reach:
            what = f"import {module}" if not name else name if module == "signalling" else \
                f"{module}.{name}"
            self.found.append((self.where, node.lineno + self.line, what, sorted(oses)))

    def narrowed(self, oses):
        """What reaches code that only `oses` reach (a set of OSes, or {UNKNOWN}), from here."""
        return self.reach | {UNKNOWN} if UNKNOWN in oses else self.reach & (oses | {UNKNOWN})

    def within(self, oses, *nodes):
        """Visit nodes (each a node, or a block: a list of statements) where only `oses` reach."""
        before, self.reach = self.reach, self.narrowed(oses)
        for node in nodes:
            self.block(node) if isinstance(node, list) else self.visit(node)
        self.reach = before

    def branches(self, test):
        """The OSes that take the true and the false branch of a condition about the platform, or
        None for any other condition."""
        if not self.reader.about_platform(test):
            return None
        values = {system: self.reader.truth(test, system) for system in OSES}
        if set(values.values()) == {None}:
            return {UNKNOWN}, {UNKNOWN}
        return ({system for system, value in values.items() if value is not False},
                {system for system, value in values.items() if value is not True})

    def block(self, statements):
        """Visit a block's statements, each where the ones before it let the code go on."""
        before = self.reach
        for statement in statements:
            self.visit(statement)
            split = self.branches(statement.test) if isinstance(statement, ast.If) else None
            if split and leaves(statement.body):
                self.reach = self.narrowed(split[1])
            if split and leaves(statement.orelse):
                self.reach = self.narrowed(split[0])
            value = getattr(statement, "value", None)
            if isinstance(statement, (ast.Expr, ast.Assign)) and called(value) == "importorskip":
                module = constant(value.args[0]) if value.args else None
                lost = set(lacking(module[0], None)) if module else set()
                self.reach = self.reach - lost if lost else self.narrowed({UNKNOWN})
        self.reach = before

    def visit_Module(self, node):
        marked = any(isinstance(statement, ast.Assign) and self.reader.skipif(statement.value) and
                     any(getattr(target, "id", "") == "pytestmark" for target in statement.targets)
                     for statement in node.body)
        self.within({UNKNOWN} if marked else set(OSES), node.body)

    def visit_If(self, node):
        self.visit(node.test)
        split = self.branches(node.test) or (set(OSES), set(OSES))
        self.within(split[0], node.body)
        self.within(split[1], node.orelse)

    def visit_IfExp(self, node):
        self.visit(node.test)
        split = self.branches(node.test) or (set(OSES), set(OSES))
        self.within(split[0], node.body)
        self.within(split[1], node.orelse)

    def visit_BoolOp(self, node):
        before = self.reach
        for value in node.values:  # each runs where the one before was true (and) or false (or)
            self.visit(value)
            split = self.branches(value)
            if split:
                self.reach = self.narrowed(split[0] if isinstance(node.op, ast.And) else split[1])
        self.reach = before

    def visit_Try(self, node):
        caught = set()
        for handler in node.handlers:
            kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {"Exception" if kind is None else ast.unparse(kind).split(".")[-1]
                       for kind in kinds}
        self.within({UNKNOWN} if caught & CATCHING else set(OSES), node.body)
        for part in (*[handler.body for handler in node.handlers], node.orelse, node.finalbody):
            self.block(part)

    visit_TryStar = visit_Try

    def visit_FunctionDef(self, node):
        """Decorators, defaults and bases run where it is defined; the body where it is called,
        which a skip marker can rule out."""
        arguments = [*node.bases, *node.keywords] if isinstance(node, ast.ClassDef) else \
            [*node.args.defaults, *node.args.kw_defaults]
        for part in (*node.decorator_list, *filter(None, arguments)):
            self.visit(part)
        skipped = any(self.reader.skipif(decorator) for decorator in node.decorator_list)
        self.within({UNKNOWN} if skipped else set(OSES), node.body)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Import(self, node):
        for alias in node.names:
            self.note(node, alias.name.split(".")[0], None)
            self.modules[alias.asname or alias.name] = alias.name

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module:
            self.note(node, node.module.split(".")[0], None)
            for alias in node.names:
                self.note(node, node.module, alias.name)

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id in self.modules:
            self.note(node, self.modules[node.value.id], node.attr)
        self.generic_visit(node)

    def visit_Call(self, node):
        """A signal sent: os.kill(PID, SIGNAL), or PROCESS.send_signal(SIGNAL)."""
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr in ("kill", "send_signal"):
            os_kill = isinstance(function.value, ast.Name) and \
                self.modules.get(function.value.id) == "os" and function.attr == "kill"
            sent = node.args[1:2] if os_kill else \
                node.args[:1] if function.attr == "send_signal" else []
            if sent and not ast.unparse(sent[0]).endswith(("CTRL_C_EVENT", "CTRL_BREAK_EVENT")):
                self.note(node, "signalling", f"{'os.kill' if os_kill else 'send_signal'}()")
        self.generic_visit(node)

    def visit_Constant(self, node):
        """A string that holds Python with an import in it (`python -c CODE`) is read as code."""
        if not isinstance(node.value, str) or "import " not in node.value:
            return
        try:
            tree = ast.parse(textwrap.dedent(node.value))
        except SyntaxError:
            return
        if any(isinstance(inner, (ast.Import, ast.ImportFrom)) for inner in ast.walk(tree)):
            inner = Finder(self.reader, self.where, node.lineno - 1 + self.line)
            inner.reach = self.reach
            inner.block(tree.body)
            self.found += inner.found


def unguarded(paths, root=ROOT):
    """(file, line, name, the OSes it fails on) for each unguarded use of what some OSes lack."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in paths}
    reader = Reader(list(trees.values()))
    found = []
    for path, tree in trees.items():
        finder = Finder(reader, path.relative_to(root).as_posix())
        finder.visit(tree)
        found += finder.found
    return found


@functools.cache
def everything():
    """What unguarded() finds in the suite and the course's code together."""
    return unguarded(suite_files() + course_files())


def report(found):
    """One line a use: FILE:LINE NAME (what goes wrong, where)."""
    return "\n".join(f"{where}:{line} {name} (" + (
        "on Windows it ends the process, or is refused" if name in SIGNALLING else
        f"missing on {' and '.join(oses)}") + ")" for where, line, name, oses in found)


def test_no_test_reaches_what_its_os_lacks():
    """Every test runs, or skips saying why, on Linux, macOS and Windows: no test file reaches a
    name its OS lacks, or sends a signal on Windows, unguarded (the module's docstring says how)."""
    ours = {path.relative_to(ROOT).as_posix() for path in suite_files()}
    found = [use for use in everything() if use[0] in ours]
    assert not found, "guard these for the platform:\n" + report(found)


def test_no_course_code_reaches_what_its_os_lacks():
    """The scripts, every checkpoint, the phase tools and the second implementation run on Linux,
    macOS and Windows: none reaches a name its OS lacks, or sends a signal on Windows, unguarded."""
    ours = {path.relative_to(ROOT).as_posix() for path in course_files()}
    found = [use for use in everything() if use[0] in ours]
    assert not found, "guard these for the platform:\n" + report(found)


# Planted files: what a file holds (its line that uses the name ends in "# here"), what is found.
UNGUARDED = {
    "a POSIX call": ("import os\nos.mkfifo('pipe')  # here\n", "os.mkfifo"),
    "a name imported from os": ("from os import setsid  # here\n", "os.setsid"),
    "a module under another name": ("import os as system\nsystem.killpg(1, 9)  # here\n",
                                    "os.killpg"),
    "a POSIX signal": ("import signal\nsignal.alarm(1)  # here\n", "signal.alarm"),
    "a POSIX module": ("import resource  # here\n", "import resource"),
    "a flag without getattr": ("import os\nflags = os.O_RDONLY | os.O_NOFOLLOW  # here\n",
                               "os.O_NOFOLLOW"),
    "a Windows name": ("import subprocess\nflags = subprocess.CREATE_NEW_PROCESS_GROUP  # here\n",
                       "subprocess.CREATE_NEW_PROCESS_GROUP"),
    "the branch Windows takes": ("import os\nif os.name == 'nt':\n    os.killpg(1, 9)  # here\n",
                                 "os.killpg"),
    "a try that catches OSError only": (
        "import os\ntry:\n    os.setsid()  # here\nexcept OSError:\n    pass\n", "os.setsid"),
    "a skip for something else": (
        "import os, sys, pytest\n@pytest.mark.skipif(sys.version_info < (3, 11), reason='old')\n"
        "def test_it():\n    os.fork()  # here\n", "os.fork"),
    "code in a string": ("LAUNCHER = 'import fcntl; print(1)'  # here\n", "import fcntl"),
    "a signal sent with os.kill": ("import os\nos.kill(os.getpid(), 2)  # here\n", "os.kill()"),
    "a signal sent to a process": ("def stop(process):\n    process.send_signal(15)  # here\n",
                                   "send_signal()"),
}
GUARDED = {
    "the branch Windows does not take": "import os\nif os.name != 'nt':\n    os.killpg(1, 9)\n",
    "an else": "import os, sys\nif sys.platform == 'win32':\n    pass\nelse:\n    os.setsid()\n",
    "getattr": "import os\nflags = os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0)\n",
    "hasattr in a conditional expression": (
        "import os\nkill = os.killpg if hasattr(os, 'killpg') else None\n"),
    "hasattr before and": "import os\nmade = hasattr(os, 'mkfifo') and os.mkfifo('pipe')\n",
    "a return before it": ("import os\ndef stop(pid):\n    if os.name == 'nt':\n        return\n"
                           "    os.killpg(pid, 9)\n"),
    "a flag": "import os\nWINDOWS = os.name == 'nt'\nif not WINDOWS:\n    os.setsid()\n",
    "a Windows name for Windows": (
        "import os, subprocess\nNEW = {'creationflags': subprocess.CREATE_NEW_PROCESS_GROUP} "
        "if os.name == 'nt' else {}\n"),
    "Linux's /proc": "import os\nif os.path.isdir('/proc'):\n    os.sysconf('SC_CLK_TCK')\n",
    "a try that catches ImportError": (
        "try:\n    import fcntl\nexcept ImportError:\n    fcntl = None\n"),
    "importorskip": "import pytest\npytest.importorskip('termios')\nimport tty\n",
    "a skipif": ("import os, pytest\n@pytest.mark.skipif(os.name == 'nt', reason='POSIX')\n"
                 "def test_it():\n    os.mkfifo('pipe')\n"),
    "a marker made from a skipif": (
        "import os, pytest\nneeds = pytest.mark.skipif(not hasattr(os, 'mkfifo'), reason='POSIX')\n"
        "@needs\ndef test_it():\n    os.mkfifo('pipe')\n"),
    "pytestmark": ("import os, sys, pytest\n"
                   "pytestmark = pytest.mark.skipif(sys.platform == 'win32', reason='POSIX')\n"
                   "def test_it():\n    os.fork()\n"),
    "a signal sent where there are signals": (
        "import os, signal\nif os.name == 'nt':\n    signal.raise_signal(signal.SIGINT)\n"
        "else:\n    os.kill(os.getpid(), signal.SIGINT)\n"),
}


@pytest.mark.parametrize("source, name", UNGUARDED.values(), ids=UNGUARDED)
def test_an_unguarded_use_is_found_with_its_line(tmp_path, source, name):
    planted = tmp_path / "test_planted.py"
    planted.write_text(f'"""A planted file."""\n{source}')
    line = next(n for n, text in enumerate(planted.read_text().splitlines(), 1) if "# here" in text)
    found = unguarded([planted], tmp_path)
    assert [use[:3] for use in found] == [("test_planted.py", line, name)], report(found)


@pytest.mark.parametrize("source", GUARDED.values(), ids=GUARDED)
def test_a_guarded_use_is_not_found(tmp_path, source):
    planted = tmp_path / "test_planted.py"
    planted.write_text(source)
    found = unguarded([planted], tmp_path)
    assert found == [], report(found)


def test_a_use_added_to_a_test_of_the_suite_is_found(tmp_path):
    """The suite as it is, with one unguarded os.mkfifo added to a checkpoint's test: the check that
    passes on the suite finds that one use, and only it."""
    copies = []
    for path in suite_files():
        copy = tmp_path / path.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes())
        copies.append(copy)
    before = {use[:3] for use in unguarded(copies, tmp_path)}
    check = tmp_path / "tests" / "checkpoints" / "test_phase5_budgets.py"
    check.write_text(check.read_text() + "\n\ndef test_made_up(workspace):\n"
                     "    os.mkfifo(workspace / 'pipe')\n")
    added = {use[:3] for use in unguarded(copies, tmp_path)} - before
    assert added == {("tests/checkpoints/test_phase5_budgets.py",
                      len(check.read_text().splitlines()), "os.mkfifo")}, added
