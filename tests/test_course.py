"""The course holds together: the top-level code is the last checkpoint, lessons show only code their checkpoint
has, the tag builder makes the tags without touching anything, a learner can start any phase on a branch of their
own, the phase folders run as they are, every definition a phase adds or changes is named in its lesson (so a fix
that missed a checkpoint shows), and the learner's check passes correct code (ours, and a second
implementation written from the lessons alone) and fails broken code with the symptom the lesson shows."""
import ast
import difflib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cases
import pytest
from changed import definitions, what_changed
from helpers import ROOT, checkpoints, clean_env, copy_code, needs_signals, run_python, tag_name
from translations import SWITCH

LESSONS = [p / "README.md" for p in checkpoints()]
MAX_LESSON_BYTES = 12 * 1024  # a lesson a learner can read in a class session, besides its list of what the check calls
MAX_CALLS_BYTES = 4 * 1024  # that list: a line for each name, a reference to look things up in, not more to read
MAX_TYPED = 250  # lines a phase asks a learner to type
MAX_CORE = 1500  # lines of the harness up to the structured answers
MAX_GUARDS = 470  # lines of guards.py and shell.py (two sandboxes, three systems); past this, a list of cases
LEARNER = ROOT / "tests" / "learner"


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def checkpoint_at_head():
    """The checkpoint a course tag at HEAD stands for (None for v0.0-start); otherwise (on main) the latest."""
    try:
        tags = git("tag", "--points-at", "HEAD").split()
    except (OSError, subprocess.CalledProcessError):
        tags = []
    if "v0.0-start" in tags:
        return None
    return next((c for c in checkpoints() if tag_name(c) in tags), checkpoints()[-1])


def test_top_level_code_equals_its_checkpoint():
    checkpoint = checkpoint_at_head()
    code = {p.name for c in checkpoints() for p in c.glob("*.py")}
    for name in sorted(code):
        if checkpoint and (checkpoint / name).exists():
            assert (ROOT / name).read_bytes() == (checkpoint / name).read_bytes(), \
                f"{name} differs from {checkpoint.name}"
        else:
            assert not (ROOT / name).exists(), f"{name} is not part of {checkpoint and checkpoint.name}"


def python_blocks(markdown):
    """The ```python blocks of a lesson, dedented."""
    return [textwrap.dedent(b) for b in re.findall(r"^ *```python\n(.*?)^ *```", markdown, re.M | re.S)]


def shown_in(block, sources):
    """True when a block appears in one of the sources, line for line at any indentation; a line '...' in
    the block stands for any number of lines.

    Example: shown_in("x = 1\\n...\\ny = 2", ["x = 1\\nz = 0\\ny = 2"]) -> True
    """
    segments = [[]]
    for line in block.rstrip().splitlines():
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line.rstrip())
    segments = [trim(s) for s in segments if any(line.strip() for line in s)]
    return any(found_in_order(segments, source.splitlines()) for source in sources)


def trim(lines):
    while not lines[0].strip():
        lines = lines[1:]
    while not lines[-1].strip():
        lines = lines[:-1]
    return lines


def found_in_order(segments, lines):
    """True when the segments appear in lines one after another."""
    start = 0
    for segment in segments:
        at = next((i for i in range(start, len(lines)) if matches(segment, lines[i:])), None)
        if at is None:
            return False
        start = at + len(segment)
    return True


def matches(segment, lines):
    """True when lines begin with the segment, every line shifted right by the same indentation."""
    if len(lines) < len(segment):
        return False
    shift = indent(lines[0]) - indent(segment[0])
    return shift >= 0 and all(line.rstrip() == " " * shift + s if s else not line.strip()
                              for s, line in zip(segment, lines))


def indent(line):
    return len(line) - len(line.lstrip(" "))


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_lesson_shows_only_code_its_checkpoint_contains(lesson):
    sources = [p.read_text(encoding="utf-8") for p in lesson.parent.glob("*.py")]
    blocks = python_blocks(lesson.read_text(encoding="utf-8"))
    assert blocks, f"{lesson} shows no code"
    for block in blocks:
        assert shown_in(block, sources), f"{lesson.parent.name}/README.md shows code its checkpoint lacks:\n{block}"


def section(text, title):
    """A lesson's section, from its "## title" to the next "## ": "" when it has none."""
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0] if f"\n## {title}\n" in text else ""


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_a_lesson_fits_a_class_session(lesson):
    """At most 12 KB besides its list of what the check calls (a reference, at most 4 KB), its What changed
    table (made from the code) and its language switch, a stated time, and a "What the check expects" box:
    the check's contract."""
    text = lesson.read_text(encoding="utf-8")
    calls = section(text, "What the check calls")
    rest = text.replace(f"\n## What the check calls\n{calls}", "").replace(f"\n{SWITCH}\n", "\n")
    rest = rest.replace(f"\n## What changed\n{section(text, 'What changed')}", "")
    assert len(rest.encode()) <= MAX_LESSON_BYTES, f"{lesson.parent.name}: {len(rest.encode())} bytes besides its list"
    assert len(calls.encode()) <= MAX_CALLS_BYTES, f"{lesson.parent.name}: its list is {len(calls.encode())} bytes"
    assert "## What the check expects" in text and "minutes typed" in text


MODULES = ("backend", "tools", "guards", "shell", "harness", "probe", "mcp_client", "cli")  # the learner's code


def loaded(node):
    """The module a node loads from the learner's code: "tools" for load("tools"), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "load" and node.args \
            and isinstance(node.args[0], ast.Constant):
        return node.args[0].value
    return None


def calls_of(source):
    """Every "module.name" of the learner's code that a check's source calls or reads: on load("m") itself, on a
    name given load("m") (x = load("m"); a, b = load("m"), load("n")), on a fixture that returns one, and on a name
    that is a module's (harness, a parameter, is the harness module). Example: calls_of('t = load("tools")\n'
    't.read_file(p, "a")') -> {"tools.read_file"}"""
    tree = ast.parse(source)
    names = {module: module for module in MODULES}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            target, value = node.targets[0], node.value
            pairs = zip(target.elts, value.elts) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                else [(target, value)]
            names.update({name.id: loaded(what) for name, what in pairs if isinstance(name, ast.Name) and loaded(what)})
        if isinstance(node, ast.FunctionDef):
            names.update({node.name: loaded(inner.value) for inner in ast.walk(node)
                          if isinstance(inner, ast.Return) and loaded(inner.value)})
    return {f"{loaded(node.value) or names[node.value.id]}.{node.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and (loaded(node.value) or isinstance(node.value, ast.Name) and
                                                    node.value.id in names)}


def check_calls(number):
    """What phase N's check and its exercises' checks call of the learner's code."""
    found = set()
    for check in CHECKS:
        if check.name.startswith(f"test_phase{number}_"):
            found |= calls_of(check.read_text(encoding="utf-8"))
    exercises = ast.parse((ROOT / "tests" / "checkpoints" / "test_exercises.py").read_text(encoding="utf-8"))
    for function in exercises.body:
        marks = [d for d in getattr(function, "decorator_list", []) if isinstance(d, ast.Call) and d.args and
                 isinstance(d.args[0], ast.Constant) and getattr(d.func, "id", "") == "exercise"]
        if marks and marks[0].args[0].value == number:
            found |= calls_of(ast.unparse(function))
    return found


@pytest.mark.parametrize("number", range(len(LESSONS)), ids=[p.parent.name for p in LESSONS])
def test_a_lesson_lists_every_name_its_check_calls(number):
    """Each lesson's "What the check calls" names, as `module.name`, every function, class and constant of your
    code that its check (and its exercises' checks) call or read: nothing the check relies on is left to guess."""
    calls = section(LESSONS[number].read_text(encoding="utf-8"), "What the check calls")
    missing = sorted(name for name in check_calls(number) if not re.search(rf"`{re.escape(name)}(?!\w)", calls))
    assert calls and not missing, f"{LESSONS[number].parent.name}: What the check calls lacks {missing}"


def test_the_list_test_finds_a_name_in_each_way_a_check_can_reach_it():
    """calls_of() finds a name read on load("m") itself, on a name it was given (alone or in a tuple), on a
    fixture that returns it, and on a parameter named for a module; and nothing on other objects."""
    source = textwrap.dedent('''
        @pytest.fixture
        def loop(load):
            return load("harness")

        def test_x(load, harness, loop, server):
            tools, policy = load("tools"), load("guards").policy()
            shell = load("shell")
            load("backend").chat([])
            tools.read_file(policy, "a")
            assert shell.TIMEOUT and harness.run and loop.Limits and server.requests and policy.workspace
        ''')
    assert calls_of(source) == {"guards.policy", "backend.chat", "tools.read_file", "shell.TIMEOUT", "harness.run",
                                "harness.Limits"}


def statement_lines(source):
    """Code as a learner types it, one statement a line: what ast.unparse() writes, each docstring on one line (its
    first), no comments, no blank lines. A budget counts these, so no phase meets it by packing lines.

    Example: statement_lines("x = {\n 'a': 1,\n}  # a comment\n") -> ["x = {'a': 1}"]
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0].value.value = body[0].value.value.strip().split("\n")[0]
    return [line for line in ast.unparse(tree).splitlines() if line.strip()]


def typed(earlier, later):
    """The lines a learner types to go from one checkpoint's code to the next, one statement a line: those added,
    by difflib."""
    added = 0
    for path in sorted(later.glob("*.py")):
        before = statement_lines((earlier / path.name).read_text()) if earlier and (earlier / path.name).exists() \
            else []
        added += sum(line.startswith("+") and not line.startswith("+++")
                     for line in difflib.unified_diff(before, statement_lines(path.read_text()), lineterm="", n=0))
    return added


def test_budgets_are_counted_one_statement_a_line():
    assert statement_lines("x = {\n 'a': 1,\n}  # a comment\n\n\ny = 2; z = 3\n") == ["x = {'a': 1}", "y = 2", "z = 3"]
    assert statement_lines('def f():\n    """Say hi.\n\n    More.\n    """\n    return 1\n') == [
        "def f():", '    """Say hi."""', "    return 1"]


def learners():
    """The second implementation's folders, phase by phase: [tests/learner/phase0, ...], one for each checkpoint."""
    return [LEARNER / f"phase{number}" for number in range(len(checkpoints()))]


def test_no_phase_asks_for_more_than_its_budget_and_the_core_stays_small():
    """No phase asks a learner to type more than 250 lines, counted on the code a learner typed from the lessons
    (tests/learner) and on the reference; the core harness, up to the structured answers, is at most 1,500 lines;
    guards.py and shell.py together at most MAX_GUARDS: all counted one statement a line."""
    for folders in (checkpoints(), learners()):
        sizes = {later.name: typed(earlier, later) for earlier, later in zip([None, *folders], folders)}
        assert max(sizes.values()) <= MAX_TYPED, sizes
    core = next(folder for folder in checkpoints() if folder.name.endswith("-structured"))
    assert sum(len(statement_lines(path.read_text())) for path in core.glob("*.py")) <= MAX_CORE
    assert sum(len(statement_lines((ROOT / name).read_text())) for name in ("guards.py", "shell.py")) <= MAX_GUARDS


def test_the_readme_map_says_what_each_phase_asks():
    """The README's table of phases gives each phase's tag, lesson, the lines a learner typed (the second
    implementation's, one statement a line) and the lesson's stated minutes."""
    readme, folders, typed_by = (ROOT / "README.md").read_text(encoding="utf-8"), checkpoints(), learners()
    for number, (earlier, later) in enumerate(zip([None, *typed_by], typed_by)):
        folder = folders[number]
        minutes = re.search(r"\*\*Time:\*\* (\d+) minutes typed", (folder / "README.md").read_text()).group(1)
        row = f"| {number} | `{tag_name(folder)}` | [{folder.name}](phases/{folder.name}/README.md) |"
        said = f"| {typed(earlier, later)} lines, {minutes} min |"
        assert row in readme and said in readme.split(row)[1].split("\n")[0], f"README.md, phase {number}: {said}"


def test_the_readme_quotes_backend_py_as_it_is():
    """The quick start's answer reads backend.py: the length and every line the README shows are the file's own."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = (ROOT / "backend.py").read_text(encoding="utf-8").splitlines()
    shown = re.findall(r"^  line (\d+): (.*)$", readme, re.M)
    assert f"of backend.py, which has {len(lines)} lines." in readme
    assert shown and all(lines[int(number) - 1].strip() == text for number, text in shown), shown
    # the listing is a fresh clone's: what git holds at the top, its .git/, and the .venv/ the quick start made
    held = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    tops = {name.split("/")[0] + ("/" if "/" in name else "") for name in held.splitlines()}
    entries = sorted(tops | {".git/", ".venv/"})
    assert f"holds {len(entries)} entries: {', '.join(entries)}." in readme, entries


@pytest.mark.parametrize("number", range(len(checkpoints())))
def test_a_lesson_says_what_changed(number):
    """Each lesson holds its "What changed" table as tests/changed.py makes it from the code: the functions,
    classes and constants each file gained, changed or lost since the phase before, and the loop named when it
    is unchanged (python tests/changed.py N prints it)."""
    folder = checkpoints()[number]
    lesson = (folder / "README.md").read_text(encoding="utf-8")
    assert what_changed(number) in lesson, f"{folder.name}/README.md: paste `python tests/changed.py {number}`"


def test_what_changed_names_the_loop_only_when_it_is_unchanged():
    """Phase 6 leaves loop() as phase 5 wrote it, phase 13 changes it (compaction): the table says so."""
    assert "Unchanged: the loop, `loop()`" in what_changed(6)
    assert "the loop" not in what_changed(13) and "`loop()`" in what_changed(13).split("| `harness.py` |")[1]


def test_every_definition_a_phase_adds_or_changes_is_named_in_its_lesson():
    """Each function, class, method and constant whose code a phase adds or changes is named in that phase's
    lesson. This is also how a fix that missed a checkpoint shows: the copies of shared code differ where no
    lesson says they do. (The behaviour tests run on the checkpoint that introduced them and on the last.)"""
    missing, before = [], {}
    for folder in checkpoints():
        now, lesson = definitions(folder), (folder / "README.md").read_text(encoding="utf-8")
        for (file, name), code in now.items():
            word = name.split(".")[-1]
            if before.get((file, name)) != code and not re.search(rf"(?<!\w){re.escape(word)}(?!\w)", lesson):
                missing.append(f"{folder.name}: {file} {name} ({'changed' if (file, name) in before else 'added'})")
        before = now
    assert not missing, "defined or changed, and not named in the lesson:\n" + "\n".join(missing)


# The wording test. A check may look, in what the learner's code printed, returned, sent or traced, only for words
# a lesson's "What the check expects" box states (of its phase or an earlier one), for what the check itself gave
# the code (a file's text, a scripted reply, a task), or for what the course's own tools write (below); otherwise it
# judges behaviour: a status, an exit code, a field's presence. The strings looked for are read from the checks'
# syntax trees, and every string constant counts as looked for unless it sits where a check gives the code its
# input (a call's argument, a path) or says something (a docstring, an assertion's message): a new way of looking
# for words is caught by default, never passed by default. A name carries what is assigned to it, and a function's
# parameter what it is called with, so words given to a helper or a parametrize are looked for where they arrive.
CHECKS = sorted((ROOT / "tests" / "checkpoints").glob("test_phase*.py"))
MATCHERS = {"startswith", "endswith", "count", "find", "index", "split", "partition", "get", "getattr", "hasattr",
            "search", "match", "fullmatch", "findall"}  # these look for their arguments
SAYERS = {"AssertionError", "fail", "skip", "print", "exit", "append"}  # their words are said, not looked for
PLAIN = {"isinstance", "len", "sorted", "set", "list", "tuple", "dict", "any", "all", "next", "str", "repr", "sum",
         "min", "max", "enumerate", "zip", "reversed", "int", "float", "bool", "map", "filter", "splitlines", "strip",
         "rstrip", "lstrip", "lower", "items", "keys", "values"}  # neither: what they are given passes through
NOT_THE_LEARNERS = {
    "body", "headers", "time",  # the offline model's record of a request
    "authorization", "Bearer ",  # HTTP's, written by the openai package
    "Traceback", "__main__", "import time:", "|", "win32", "nt", "darwin", "c_call", "Z",  # Python's, ps's
    "openai", "openai.",  # the package's modules
    "test_done_when_the_scripted_case_passes", "code_dir",  # the checks' own names
    "--deadline",  # a flag the cases give the harness, read back to time the run
    "answer"}  # helpers.answer_of(): from phase 5, run() returns a Result, its answer in .answer (lesson 5's box)
# Words the checks of phases 2 and 3 still look for and no box states: (phase, text). The test fails when one is no
# longer looked for, so that this list only shrinks.
STILL_TO_STATE = set()  # (phase, words) a check looks for and no box states yet: none


def box(lessons):
    """What the lessons' "What the check expects" boxes and "What the check calls" lists show as `code`, its spaces
    made single, one span a line."""
    return "\n".join(" ".join(span.split()) for lesson in lessons for title in ("What the check expects",
                                                                               "What the check calls")
                     for span in re.findall(r"`([^`]+)`", section(lesson.read_text(encoding="utf-8"), title)))


def callee(call):
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def scopes(tree):
    """{a Name or a def: (the function whose own name it is, or the module, the name)}."""
    keys = {}

    def visit(node, scope, local):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.Lambda)):
                if isinstance(child, ast.FunctionDef):
                    keys[child] = (scope if child.name in local else tree, child.name)
                    for outer in [*child.decorator_list, *child.args.defaults]:
                        visit(outer, scope, local)
                arguments = [*child.args.args, *child.args.kwonlyargs, child.args.vararg, child.args.kwarg]
                own = {a.arg for a in arguments if a} | {n.id for statement in ast.iter_child_nodes(child)
                                                          for n in ast.walk(statement) if isinstance(n, ast.Name)
                                                          and isinstance(n.ctx, ast.Store)}
                own |= {n.name for n in ast.walk(child) if isinstance(n, ast.FunctionDef) and n is not child}
                for statement in (child.body if isinstance(child.body, list) else [child.body]):
                    visit(ast.Module(body=[statement], type_ignores=[]) if isinstance(statement, ast.stmt) else
                          ast.Expression(body=statement), child, own)
            elif isinstance(child, ast.Name):
                keys[child] = (scope if child.id in local else tree, child.id)
            else:
                visit(child, scope, local)
    visit(tree, tree, set())
    return keys


def read_names(node, keys):
    """The names an expression reads, but for the arguments of the calls in it (what the code was given)."""
    if isinstance(node, ast.Call) and callee(node) not in PLAIN:
        return read_names(node.func, keys)
    return {keys[node]} if isinstance(node, ast.Name) else \
        set().union(set(), *(read_names(child, keys) for child in ast.iter_child_nodes(node)))


def all_names(node, keys):
    return {keys[n] for n in ast.walk(node) if isinstance(n, ast.Name)}


def said(node, up):
    """True inside a message: an assertion's, or the arguments of a call that says something."""
    while node in up:
        node, parent = up[node], node
        if isinstance(node, ast.Assert) and parent is node.msg or isinstance(node, ast.Call) and \
                callee(node) in SAYERS and parent is not node.func:
            return True
    return False


def name_flows(tree, up, keys):
    """(sought, given): the names whose values the checks compare with what the code produced, and those whose
    values they give the code, followed back through assignments and loops."""
    sought, given, flows = set(), set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and not all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            sought |= set().union(*(read_names(side, keys) for side in [node.left, *node.comparators]))
        if isinstance(node, ast.Call) and not said(node, up):
            arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
            if callee(node) in MATCHERS:
                sought |= set().union(set(), *(read_names(argument, keys) for argument in arguments))
            elif callee(node) not in SAYERS | PLAIN:
                given |= set().union(set(), *(all_names(argument, keys) for argument in arguments))
        pairs = [(node.target, node.iter)] if isinstance(node, (ast.For, ast.comprehension)) else \
            [(node.target, node.value)] if isinstance(node, ast.AugAssign) else \
            [(target, node.value) for target in node.targets] if isinstance(node, ast.Assign) else []
        for target, value in pairs:
            for name in read_names(target, keys):
                flows.setdefault(name, set()).update(all_names(value, keys))
    for names in (sought, given):
        while more := set().union(set(), *(flows.get(name, set()) for name in names)) - names:
            names |= more
    return sought, given


def wording(tree, *shared):
    """([(line, text)] the string constants a module looks for, [texts and f-string patterns] those it gives);
    shared: the modules whose functions it calls (helpers.py), for what their parameters do with the words."""
    trees = [tree, *shared]
    up = {child: node for each in trees for node in ast.walk(each) for child in ast.iter_child_nodes(node)}
    keys = {name: key for each in trees for name, key in scopes(each).items()}
    flows = [name_flows(each, up, keys) for each in trees]
    flows = (set().union(*(sought for sought, _ in flows)), set().union(*(given for _, given in flows)))
    functions = {f.name: f for each in reversed(trees) for f in ast.walk(each) if isinstance(f, ast.FunctionDef)}
    sought, given = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            verdict = role(node, up, keys, flows, functions)
            if verdict == "sought":
                sought.append((node.lineno, node.value))
            elif verdict == "given" and node.value.strip():
                given += patterns(up[node]) if isinstance(up[node], ast.JoinedStr) else [node.value]
    return sought, given


def patterns(fstring):
    """An f-string's texts, e.g. f"line {n}\\n": "line 7\\n" and what it begins or ends with ("line 7")."""
    pieces = [re.escape(v.value) if isinstance(v, ast.Constant) else ".*" for v in fstring.values]
    ways = {(0, len(pieces)), (1, len(pieces)), (0, len(pieces) - 1), (1, len(pieces) - 1)}
    return [re.compile("".join(pieces[a:b]), re.S) for a, b in ways if set(pieces[a:b]) - {".*"}]


def by_name(names, flows):
    sought, given = flows
    return "given" if names & given else "sought" if names & sought else "given"


def role(node, up, keys, flows, functions):
    """Whether a string constant is looked for ("sought"), given to the code ("given"), or said ("said")."""
    child = node
    while child in up:
        parent = up[child]
        if isinstance(parent, ast.Expr) and isinstance(child, ast.Constant) or isinstance(parent, ast.Assert) and \
                child is parent.msg or isinstance(parent, ast.keyword) and parent.arg in ("ids", "reason") or \
                isinstance(parent, ast.FunctionDef) and child in parent.decorator_list and \
                callee(child) != "parametrize":
            return "said"  # a docstring, a message, a test's id, a marker
        if isinstance(parent, (ast.Compare, ast.Subscript)) and child is not getattr(parent, "value", None):
            return "sought"
        if isinstance(parent, ast.Call) and child is not parent.func and callee(parent) not in PLAIN:
            name = callee(parent)
            if name == "parametrize":
                return parametrized(parent, node, up, keys, flows)
            if name in functions:
                function, at = functions[name].args, parent.args.index(child) if child in parent.args else -1
                param = child.arg if isinstance(child, ast.keyword) else function.args[at].arg if \
                    at < len(function.args) else getattr(function.vararg, "arg", "")
                return by_name({(functions[name], param)}, flows)
            return "sought" if name in MATCHERS else "said" if name in SAYERS else "given"
        if isinstance(parent, (ast.Assign, ast.AugAssign, ast.For, ast.comprehension)) and \
                child is getattr(parent, "value", getattr(parent, "iter", None)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            return by_name(set().union(*(read_names(target, keys) for target in targets)), flows)
        if isinstance(parent, ast.Return):
            while not isinstance(parent, ast.FunctionDef):
                parent = up[parent]
            return by_name({keys[parent]}, flows)
        if isinstance(parent, ast.arguments) or isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div):
            return "given"  # a default value, a path
        child = parent
    return "sought"


def parametrized(call, node, up, keys, flows):
    """A value of @pytest.mark.parametrize("a, b", [...]) plays the part of its parameter."""
    path = [node]
    while path[-1] is not call:
        path.append(up[path[-1]])
    if len(call.args) < 2 or path[-2] is not call.args[1]:
        return "said"
    test = up[call]
    names = [(test, name.strip()) for name in call.args[0].value.split(",")]
    case = path[-3] if len(path) > 3 else None
    if len(names) > 1 and isinstance(case, ast.Tuple):
        return by_name({names[case.elts.index(path[-4])]}, flows)
    return by_name(set(names), flows)


def texts_in(value, numbers=False):
    """Every text in a case's value: strings (and numbers, if asked), and those in its lists, tuples and dicts."""
    if isinstance(value, str) or numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, dict):
        return [text for item in value.items() for part in item for text in texts_in(part, numbers)]
    return [text for part in value for text in texts_in(part, numbers)] if isinstance(value, (list, tuple)) else []


def holds(text, words):
    """True when text holds the words as words: "end" is not in "sends", nor "calls" in "tool_calls"."""
    return re.search(r"(?<!\w)" * words[:1].isalnum() + re.escape(words) + r"(?!\w)" * words[-1:].isalnum(),
                     text) is not None


def unstated(checks, cases=None, boxes=None, shared=None):
    """Every string a check looks for that no box up to its phase states, the check did not give the code and the
    course's tools do not write: [("test_phase5_budgets.py line 88", 5, "the text"), ...]. By default cases are
    tests/cases.py's, the boxes the lessons', and shared ({"helpers": source, "cases": source}) the two files."""
    import cases as scripted

    cases = scripted.CASES if cases is None else cases
    boxes = boxes or [box(LESSONS[:phase + 1]) for phase in range(len(LESSONS))]
    shared = {name: ast.parse(source) for name, source in (shared or {
        name: (ROOT / "tests" / f"{name}.py").read_text(encoding="utf-8") for name in ("helpers", "cases")}).items()}
    shared["cases"].body = [node for node in shared["cases"].body if not (isinstance(node, ast.Assign) and
                            {"CASES", "POOL"} & {n.id for n in ast.walk(node.targets[0]) if isinstance(n, ast.Name)})]
    allowed = NOT_THE_LEARNERS | {key for case in cases.values() for key in case}  # a case's own keys
    learners = {path.name for folder in checkpoints() for path in folder.glob("*.py")}
    found = []

    def judge(where, phase, sought, given):
        for line, text in sought:
            if text not in allowed and not holds(boxes[phase], " ".join(text.split())) and not any(
                    holds(known, text) if isinstance(known, str) else known.fullmatch(text) for known in given):
                found.append((f"{where}{f' line {line}' if line else ''}", phase, text))

    for check in checks:
        tree = ast.parse(check.read_text(encoding="utf-8"))
        phase = next(node.value.value for node in tree.body if isinstance(node, ast.Assign) and
                     getattr(node.targets[0], "id", None) == "PHASE")
        sought, given = wording(tree, *shared.values())
        programs = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and str(node.value)
                    .endswith(".py") and (ROOT / node.value).is_file() and Path(node.value).name not in learners}
        given += [node.value for program in programs for node in ast.walk(ast.parse((ROOT / program).read_text()))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)]  # the course's, as they say
        used = {}  # what the check runs of the shared code, looked for at the check's phase too
        for module in [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.module in shared]:
            names = {alias.name for alias in module.names}
            used[module.module] = wording(ast.Module(body=[node for node in shared[module.module].body if
                                                           module.module == "cases" or getattr(node, "name", "")
                                                           in names], type_ignores=[]))
        given += [text for _, more in used.values() for text in more]
        judge(check.name, phase, sought, given)
        for module, (more, _) in used.items():
            judge(f"{module}.py (run by {check.name})", phase, more, given)
    _, shared_given = wording(shared["cases"])
    for name, case in cases.items():
        given = [text for key, value in case.items() if key != "expect" for text in texts_in(value, numbers=True)]
        judge(f"cases.py {name}", case["phase"], [(0, text) for value in case["expect"].values()
                                                  for text in texts_in(value)], given + shared_given)
    return found


def test_every_check_looks_only_for_words_its_lessons_state():
    """Every string a check looks for in what the learner's code produced is stated in the "What the check expects"
    box of its phase's lesson or an earlier one, or given by the check itself, or written by the course's tools."""
    found = unstated(CHECKS)
    left = [f"{where}: {text!r}" for where, phase, text in found if (phase, text) not in STILL_TO_STATE]
    assert not left, "looked for, and stated in no lesson's box up to the check's phase:\n" + "\n".join(left)
    gone = STILL_TO_STATE - {(phase, text) for _, phase, text in found}
    assert not gone, f"no longer looked for: take them out of STILL_TO_STATE: {sorted(gone)}"


def test_the_wording_test_finds_a_word_in_each_way_a_check_can_look_for_it(tmp_path):
    """A made-up check of phase 1 that looks for words its box does not state, in every way a check can: each is
    named. The words the box states, and those the check gave the code itself, pass; a message says anything."""
    check = tmp_path / "test_phase1_made_up.py"
    check.write_text(textwrap.dedent('''
        import pytest
        from helpers import expects
        PHASE = 1
        LOOKED_FOR = "in a constant"


        def says(text, *words):
            return all(word in text for word in words)


        @pytest.mark.parametrize("task, words", [("Read notes.txt", "in a parametrize")])
        def test_it(harness, workspace, task, words):
            (workspace / "notes.txt").write_text("buy milk")
            result = harness.run(task)
            assert "in a comparison" in result.answer and result.error.startswith("in a matcher")
            assert says(result.answer, "through a helper") and LOOKED_FOR in result.answer
            expects(result.answer, "through a shared helper", also="by keyword")
            assert words in result.answer and result.trace["in a field"]
            assert [line for line in result.answer.splitlines() if line] == ["in a list", f"in an {task}"]
            assert "buy milk" in result.answer and "stopped:" in result.answer and task in result.answer, \\
                "in a message"
        '''))
    cases = {"made_up": {"phase": 1, "task": "Say hi", "script": ["Hi there."],
                         "expect": {"status": "answered", "exit": 0, "stdout": "in a case", "answer": "Hi there."}}}
    helpers = "def expects(text, *words, also=None):\n    assert all(word in text for word in [*words, also])\n"
    found = unstated([check], cases=cases, boxes=["stopped:\nanswered"] * len(LESSONS),
                     shared={"helpers": helpers, "cases": "CASES = {}\n"})
    assert sorted(text for _, _, text in found) == sorted([
        "in a comparison", "in a matcher", "through a helper", "in a constant", "in a parametrize", "in a field",
        "in a list", "in an ", "through a shared helper", "by keyword", "in a case"]), found
    line = next(n for n, text in enumerate(check.read_text().splitlines(), 1) if "in a parametrize" in text)
    assert (f"test_phase1_made_up.py line {line}", 1, "in a parametrize") in found, "named by its check and line"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.parent.name for p in LESSONS])
def test_lesson_says_what_it_takes_and_links_its_code(lesson):
    """Each lesson gives its time and prerequisites, a picture, a way to check each exercise, its files."""
    text = lesson.read_text(encoding="utf-8")
    assert "**Time:**" in text and "**You need:**" in text, "time and prerequisites"
    assert "```text" in text, "a picture of what the phase adds"
    assert "](" in text and "--phase" in text, "a link to the checkpoint's code, and the check to run"
    exercises = text.split("## Exercises", 1)[1].split("\n## ", 1)[0]
    for number, exercise in enumerate(re.split(r"^\d+\. ", exercises, flags=re.M)[1:], 1):
        assert "succeeded" in exercise, f"exercise {number} does not say how you know you succeeded"


HEADERS_TO_DO = set()  # still link the reference in the header


@pytest.mark.parametrize("lesson", [pytest.param(lesson, marks=pytest.mark.xfail(
    lesson.parent.name in HEADERS_TO_DO, reason="links the reference's files at the top", strict=True))
    for lesson in LESSONS], ids=[p.parent.name for p in LESSONS])
def test_a_lesson_links_your_files_and_the_reference_only_to_compare(lesson):
    """The header's "You write:" links the files you write (the top-level ones: ../../backend.py); the
    checkpoint's own code, the reference, is linked only where the lesson says how to compare with it."""
    text = lesson.read_text(encoding="utf-8")
    written = text.split("**You write:**", 1)[1].split("\n\n", 1)[0]
    links = re.findall(r"\]\(([^)]+)\)", written)
    assert links and all(link.startswith("../../") for link in links), f"You write: links {links}"
    compare = re.search(r"Compare\b.*?(?:\n\n|$)", text, re.S)
    assert compare and "](" in compare.group(0), "a Compare step that links the reference"
    elsewhere = text.replace(compare.group(0), "")
    reference = [link for link in re.findall(r"\]\(([^)#]+)\)", elsewhere) if link == "." or
                 "/" not in link and link.endswith(".py") and (lesson.parent / link).is_file()]
    assert not reference, f"the reference is linked outside Compare: {reference}"


def test_the_lesson_check_catches_code_that_is_not_in_the_checkpoint():
    source = (checkpoints()[1] / "harness.py").read_text(encoding="utf-8")
    real = ("    for step in range(1, MAX_STEPS + 1):\n"
            "        message = chat(messages, tools=TOOLS, backend=backend).choices[0].message\n")
    assert shown_in(real, [source])
    assert shown_in("def run(task, backend=None, on_call=ignore):\n    ...\n    return None\n", [source])
    assert not shown_in(real.replace("MAX_STEPS + 1", "MAX_STEPS"), [source])
    assert not shown_in("def run(task, backend=None, on_call=ignore):\n    ...\n    return 42\n", [source])
    assert not shown_in("return None\n...\ndef run(task, backend=None):\n", [source])  # out of order


@pytest.fixture
def clone(tmp_path):
    """A clone of this repository's committed state, with an uncommitted change and a staged one."""
    path = tmp_path / "clone"
    git("clone", "--quiet", str(ROOT), str(path), cwd=tmp_path)
    git("checkout", "--quiet", "-B", "main", git("rev-parse", "HEAD"), cwd=path)
    (path / "backend.py").write_text("# my unfinished work\n")
    (path / "notes.txt").write_text("staged\n")
    git("add", "notes.txt", cwd=path)
    return path


ALL_TAGS = ["v0.0-start", *[tag_name(c) for c in checkpoints()]]


def test_tag_builder_makes_one_tag_per_phase_and_touches_nothing(clone):
    before = (git("status", "--porcelain", cwd=clone), git("rev-parse", "HEAD", cwd=clone),
              git("symbolic-ref", "HEAD", cwd=clone), (clone / ".git" / "index").read_bytes())
    build = subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    tags = {name: git("rev-parse", name, cwd=clone) for name in ALL_TAGS}
    assert before == (git("status", "--porcelain", cwd=clone), git("rev-parse", "HEAD", cwd=clone),
                      git("symbolic-ref", "HEAD", cwd=clone), (clone / ".git" / "index").read_bytes())
    again = subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, text=True)
    assert again.returncode == 0 and {name: git("rev-parse", name, cwd=clone) for name in ALL_TAGS} == tags
    for older, newer in zip(ALL_TAGS, ALL_TAGS[1:]):
        assert git("rev-parse", f"{newer}^", cwd=clone) == git("rev-parse", older, cwd=clone)  # one linear history
        changed = git("diff", "--name-only", older, newer, cwd=clone).split()
        assert changed and all("/" not in name and name.endswith(".py") for name in changed), changed
    start = git("ls-tree", "--name-only", "v0.0-start", cwd=clone).split()
    assert "demo_model.py" in start and "phases" in start and not {"backend.py", "harness.py"} & set(start)
    workflows = git("ls-tree", "-r", "--name-only", "v0.0-start", ".github", cwd=clone).split()
    assert ".github/workflows/classroom.yml" in workflows and ".github/workflows/course.yml" not in workflows
    for checkpoint in checkpoints():
        for source in checkpoint.glob("*.py"):
            assert git("show", f"{tag_name(checkpoint)}:{source.name}", cwd=clone) == source.read_text().rstrip("\n")


def test_a_learner_starts_a_phase_on_a_branch_of_their_own(clone):
    """`python phases/tags.py start 2`: a branch my-phase-2 at phase 2's start, with phase 1's code, which passes
    phase 1's check; a second start refuses, saying how to go back to the branch."""
    git("stash", "--quiet", "--include-untracked", cwd=clone)
    started = subprocess.run([sys.executable, "phases/tags.py", "start", "2"], cwd=clone, capture_output=True,
                             text=True)
    assert started.returncode == 0 and "my-phase-2" in started.stdout, started.stderr
    assert git("symbolic-ref", "--short", "HEAD", cwd=clone) == "my-phase-2"
    assert (clone / "harness.py").read_text() == (checkpoints()[1] / "harness.py").read_text()
    assert not (clone / "guards.py").exists(), "phase 2's own code is for the learner to write"
    check = subprocess.run([sys.executable, "-m", "pytest", "tests/checkpoints", "--phase", "0", "-p",
                            "no:cacheprovider"], cwd=clone, capture_output=True, text=True, env=clean_env())
    assert check.returncode == 0, check.stdout[-2000:]
    again = subprocess.run([sys.executable, "phases/tags.py", "start", "2"], cwd=clone, capture_output=True, text=True)
    assert again.returncode != 0 and "git switch my-phase-2" in again.stderr


def test_the_start_tag_and_the_first_tag_are_runnable_trees(clone, tmp_path):
    subprocess.run([sys.executable, "phases/tags.py"], cwd=clone, capture_output=True, check=True)
    for tag, runs in [("v0.0-start", False), ("v0.1-hello", True)]:
        tree = tmp_path / tag
        tree.mkdir()
        archive = subprocess.run(["git", "archive", tag], cwd=clone, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        assert not (tree / "harness.py").exists()
        assert (tree / "backend.py").exists() == runs
        if runs:
            result = run_python(tree, "backend.py")
            assert result.returncode == 0 and "demo model" in result.stdout, result.stderr


@pytest.mark.parametrize("command", [["phases/00-hello/backend.py"],
                                     ["phases/01-loop/harness.py", "List the files here"],
                                     ["phases/04-contracts/harness.py", "Read README.md"],
                                     ["phases/10-structured/harness.py", "List the files here"]])
def test_phase_folders_run_as_they_are_from_the_repository_root(command):
    result = run_python(ROOT, *command, env={"BACKEND": "demo"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


def check_command(tree, phase, *args):
    return subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "tests" / "checkpoints"), "--phase", str(phase),
                           "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=clean_env())


def test_the_check_passes_a_good_loop_and_fails_a_broken_one_with_the_lessons_words(tmp_path):
    good = check_command(None, 1, "--code", str(checkpoints()[1]), "-rA")
    assert good.returncode == 0, good.stdout[-2000:]
    ran = re.findall(r"^PASSED (\S+?)::", good.stdout, re.M)  # -rA: a line for each test that passed
    assert ran and set(ran) == {"tests/checkpoints/test_phase1_loop.py"}, f"phase 1's check only: {set(ran)}"
    broken = copy_code(checkpoints()[1], tmp_path / "broken")
    source = (broken / "harness.py").read_text()
    forgot_the_assistant_message = "        messages.append(assistant_message(message))\n"
    assert forgot_the_assistant_message in source
    (broken / "harness.py").write_text(source.replace(forgot_the_assistant_message, ""))
    failed = check_command(None, 1, "--code", str(broken))
    assert failed.returncode == 1 and "preceeding message with 'tool_calls'" in failed.stdout, failed.stdout[-3000:]
    assert "expected: " in failed.stdout and "Traceback" not in failed.stdout, "a failure reads as the lesson's words"


def test_the_cases_run_on_the_folder_given_with_code(tmp_path):
    """`python tests/cases.py --code DIR NAME` runs the case on DIR's code: phase 5's checkpoint passes two_steps,
    phase 4's (no --trace yet) fails it, each trace lands in ./traces; a folder that is not there is a usage
    message, never a traceback."""
    def cases(*args):
        return subprocess.run([sys.executable, str(ROOT / "tests" / "cases.py"), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, env=clean_env())

    good = cases("--code", str(checkpoints()[5]), "two_steps")
    assert good.returncode == 0 and "ok   two_steps" in good.stdout, good.stdout + good.stderr
    assert (tmp_path / "traces" / "two_steps.jsonl").is_file()
    bad = cases("--code", str(checkpoints()[4]), "two_steps")
    assert bad.returncode == 1 and "FAIL two_steps" in bad.stdout, bad.stdout + bad.stderr
    missing = cases("--code", str(tmp_path / "no such folder"), "two_steps")
    assert missing.returncode == 2 and "usage: cases.py" in missing.stderr and "Traceback" not in missing.stderr


def test_a_keyboard_interrupt_out_of_your_code_fails_that_test_and_the_check_goes_on(tmp_path):
    """Phase 5's run() changed to let Ctrl-C at a question out: that test fails, naming the KeyboardInterrupt and
    where it got out, and the next test still runs."""
    broken = copy_code(checkpoints()[5], tmp_path / "broken")
    source = (broken / "harness.py").read_text()
    caught = '    except KeyboardInterrupt:\n        result.status = "interrupted"\n'
    assert caught in source
    (broken / "harness.py").write_text(source.replace(caught, ""))
    result = check_command(None, 5, "--code", str(broken), "-k", "every_call_is_answered or no_regular_file")
    assert result.returncode == 1 and "1 failed, 1 passed" in result.stdout, result.stdout[-3000:]
    assert "a KeyboardInterrupt got out of your code (harness.py, line " in result.stdout, result.stdout[-3000:]


@needs_signals
def test_ctrl_c_pressed_during_a_check_stops_it_even_when_your_code_makes_a_status_of_it():
    """Ctrl-C pressed (SIGINT to pytest) while run() waits for a person: run() ends as interrupted, as it should,
    and the check stops there (exit 2) instead of going on to the next test."""
    process = subprocess.Popen([sys.executable, "-m", "pytest", str(ROOT / "tests" / "checkpoints"), "--phase", "6",
                                "--code", str(checkpoints()[6]), "-vv", "--setup-show", "-p", "no:cacheprovider",
                                "-k", "persons_answer or approved_calls_run_after"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(PYTHONUNBUFFERED="1"))
    seen = b""
    # --setup-show names the test again once its fixtures are set up (on a busy machine, importing openai takes
    # seconds): a Ctrl-C before that would land in pytest's own set-up, not in run()
    while not re.search(rb"persons_answer\S* \(fixtures used", seen) and process.poll() is None:
        seen += os.read(process.stdout.fileno(), 4096)
    time.sleep(1)  # its run() waits 3 s for an answer that never comes
    process.send_signal(signal.SIGINT)
    seen = (seen + process.communicate(timeout=60)[0]).decode()
    assert process.returncode == 2 and "approved_calls_run_after" not in seen, seen[-3000:]


@needs_signals
def test_a_run_started_warm_meets_signals_as_a_new_process_does(tmp_path):
    """Phase 8's signal checks start the harness forked from a warm process (tests/warm.py), not a new Python: a
    harness that never sets its handlers still dies of SIGTERM and SIGHUP there (not exit 143 or 129), and the
    check fails it; SIGINT's KeyboardInterrupt, which run() turns into interrupted, still passes."""
    broken = copy_code(checkpoints()[8], tmp_path / "broken")
    source = (broken / "cli.py").read_text()
    handlers_set = "    on_signals(interrupted)\n"
    assert handlers_set in source
    (broken / "cli.py").write_text(source.replace(handlers_set, ""))
    result = check_command(None, 8, "--code", str(broken), "-k", "signal_while_a_command_runs")
    assert result.returncode == 1 and "2 failed, 1 passed" in result.stdout, result.stdout[-3000:]
    assert "exit 143 for this signal, not -15" in result.stdout, result.stdout[-3000:]


def test_a_check_stops_waiting_for_a_run_that_has_ended_or_has_no_deadline_yet(tmp_path):
    """A check that waits for a run to get somewhere stops when the run has ended, and shows why it ended; a check
    of a deadline stops at its bound. Once, a harness that failed as it started held phase 8's check for 151 s,
    and phase 5's code (no deadline in its waits yet) held phase 6's for 125 s: what a learner meets first."""
    broken = copy_code(checkpoints()[8], tmp_path / "broken")
    (broken / "harness.py").write_text("raise RuntimeError('typed halfway')\n")
    result = check_command(None, 8, "--code", str(broken), "-k", "signal_while_a_command_runs")
    assert result.returncode == 1 and "3 failed" in result.stdout, result.stdout[-3000:]
    failures = result.stdout.split("short test summary info")[0]  # on CI (CI=true) the summary is not cut short
    assert failures.count("your harness ended first (exit 1)") == 3, result.stdout[-3000:]
    assert "RuntimeError: typed halfway" in result.stdout, result.stdout[-3000:]
    result = check_command(None, 6, "--code", str(checkpoints()[5]), "-k", "slow_model_is_waited_for")
    assert result.returncode == 1 and "still waiting after 10 s" in result.stdout, result.stdout[-3000:]


def test_a_deadline_case_that_a_busy_machine_kept_from_its_reply_runs_again_with_more_time(tmp_path):
    """A scripted case with a 3 s deadline needs the model's reply read before the deadline. A machine too busy for
    that (here: phase 6's code that reads each reply 4 s late) once failed approved_sleep_meets_the_deadline with
    no tool result at all: the run ended at its deadline, in time, short of what the case checks. It runs again
    with BUSY_DEADLINE and passes, judged as strictly (the tool's result, the bound on its time)."""
    slow = copy_code(checkpoints()[6], tmp_path / "slow")
    with (slow / "backend.py").open("a") as backend:
        backend.write("\nimport time\n\n_chat = chat\n\n\ndef chat(*args, **kwargs):  # a busy machine: the reply read "
                      "4 s late\n    reply = _chat(*args, **kwargs)\n    time.sleep(4)\n    return reply\n")
    assert cases.run_case("approved_sleep_meets_the_deadline", slow) == []


def test_a_module_marked_with_a_group_runs_on_one_worker():
    """pytest.ini's --dist loadgroup sends every test of a module marked xdist_group to one worker, which does the
    module's shared work once (every lesson, every scripted case, a clone of the course). With pytest 9, xdist 3.8
    no longer did (the suite ran the lessons once in each worker); conftest.py's scheduler does."""
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_lessons.py", "-n", "2", "-vv", "-p",
                           "no:cacheprovider", "-k", "says_how_to_use_it or ellipses"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=clean_env())
    workers = re.findall(r"^\[(gw\d+)\] .* PASSED tests/test_lessons\.py::", done.stdout, re.M)
    assert done.returncode == 0 and len(workers) == 6, done.stdout[-3000:]
    assert len(set(workers)) == 1, f"the module's tests ran on {sorted(set(workers))}"


@pytest.mark.parametrize("phase", range(len(checkpoints())))
def test_a_second_implementation_written_from_the_lessons_passes(phase):
    """tests/learner/ holds code written from the lessons alone, in another style, by someone who had not read the
    reference, each phase on their own earlier one: each passes its phase's check."""
    result = check_command(None, phase, "--code", str(LEARNER / f"phase{phase}"))
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_code_imports_only_the_standard_library_and_requirements_txt():
    """The scripts, every checkpoint, the course's tools and the second implementation import only the standard
    library, the course's own files and what requirements.txt installs. httpx, which openai 2 brings and openai 3
    does not, once passed CI (its test-only packages bring it) and failed in the README's own venv."""
    installed = {"openai", "pydantic", "dotenv", "pytest"}
    own = {p.stem for p in ROOT.glob("*.py")}
    folders = [ROOT, ROOT / "phases", *checkpoints(), *sorted(p for p in LEARNER.iterdir() if p.name[:5] == "phase")]
    for path in (path for folder in folders for path in folder.glob("*.py")):
        allowed = {*sys.stdlib_module_names, *installed, *own, *(p.stem for p in path.parent.glob("*.py"))}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                assert name.split(".")[0] in allowed, \
                    f"{path.relative_to(ROOT)} imports {name}, which requirements.txt does not install"


@pytest.mark.parametrize("folder", [c for c in checkpoints() if int(c.name[:2]) >= 9], ids=lambda c: c.name)
def test_the_benchmark_measures_every_checkpoint_from_phase_9(folder):
    """python tests/bench.py --code FOLDER prints every figure the code has (the sixth from phase 13) and ends 0:
    nothing runs it in a check, and it once failed on phase 12, whose harness no longer imports TOOLS."""
    done = subprocess.run([sys.executable, "tests/bench.py", "--runs", "1", "--code", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=clean_env())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    figures = {line.split(".")[0] for line in done.stdout.splitlines() if line[:1].isdigit()}
    assert figures == {"1", "2", "3", "4", "5", *(["6"] if int(folder.name[:2]) >= 13 else [])}, done.stdout


def learner_bugs():
    sys.path.insert(0, str(LEARNER))
    import bugs
    return bugs


@pytest.mark.parametrize("name", list(learner_bugs().BUGS) if (LEARNER / "bugs.py").exists() else [])
def test_each_troubleshooting_bug_shows_its_symptom_and_fails_the_check(tmp_path, name):
    """Each broken loop of phase 1's troubleshooting table, applied to the second implementation, prints the
    symptom the table shows, and the check fails it."""
    bugs = learner_bugs()
    bug = bugs.BUGS[name]
    tree = copy_code(LEARNER / "phase1", tmp_path / name)
    source = (tree / bug["file"]).read_text()
    assert bug["old"] in source
    (tree / bug["file"]).write_text(source.replace(bug["old"], bug["new"]))
    result = run_python(tree, "harness.py", bugs.TASK)
    assert bug["symptom"] in result.stdout + result.stderr and result.returncode == bug["exit"], result.stdout + \
        result.stderr
    lesson = (checkpoints()[1] / "README.md").read_text()
    assert bug["symptom"].split(" ...")[0][:40] in lesson, "the symptom is the one the lesson shows"
    assert check_command(None, 1, "--code", str(tree), "-x").returncode == 1


def test_no_file_of_the_course_holds_a_merge_s_conflict_markers():
    """A merge's conflict left in a file (a lesson, the README, code) is found before a learner reads it."""
    tracked = git("ls-files").splitlines()
    marked = [name for name in tracked if (ROOT / name).is_file() and name.endswith((".py", ".md", ".txt", ".toml"))
              and re.search(r"^(<{7} |>{7} )", (ROOT / name).read_text(encoding="utf-8", errors="replace"), re.M)]
    assert marked == [], marked
