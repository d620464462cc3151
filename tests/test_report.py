"""The instructor's report (phases/report.py): learners' repositories, made here as GitHub Classroom
makes them and followed with phases/tags.py, read into exactly their states, as CSV and as one HTML
page that needs no network and no script and fits a class of thirty in 1400 px; the learners' code
runs in bubblewrap (with bubblewrap inside for the checks that start one), or a line says there is
none; and the files it watches for a check someone edited are every file the checks load."""
import csv
import html
import html.parser
import json
import re
import shutil
import socket
import struct
import subprocess
import sys
from importlib import metadata

import pytest
from helpers import (ROOT, apply_solution, checkpoints, classroom_copy, clean_env, copy_code,
                     course_clone, needs_bubblewrap, path_without_bubblewrap)

sys.path.insert(0, str(ROOT / "phases"))
import report  # noqa: E402

LEARNER = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "ada@example.invalid"}


def git(cwd, *args, when=None):
    dates = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env=clean_env(**LEARNER, **dates)).stdout.strip()


pytestmark = pytest.mark.xdist_group("test_report")  # one worker runs the module: one clone of the course

@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A clone of this course, with its tags built (python phases/tags.py)."""
    return course_clone(tmp_path_factory.mktemp("course") / "course")


def learner(course, folder, phase):
    """A learner's GitHub Classroom copy, after `python phases/tags.py start PHASE` (a commit on top
    of the Classroom's own, but for phase 0)."""
    classroom_copy(course, folder)
    subprocess.run([sys.executable, "phases/tags.py", "start", str(phase)], cwd=folder, check=True,
                   capture_output=True)
    return folder


def commit(folder, message, when, *code):
    """Copy the code of these checkpoints' folders (later ones win) to the top of folder, as the
    learner's own (a line of theirs at the end: the report knows the course's code by its content),
    and commit it."""
    for checkpoint in code:
        for source in checkpoint.glob("*.py"):
            (folder / source.name).write_text(source.read_text() + "# typed by the learner\n")
    git(folder, "add", "-A")
    git(folder, "commit", "--quiet", "-m", message, when=when)
    return git(folder, "rev-parse", "--short=7", "HEAD")


class Page(html.parser.HTMLParser):
    """The report page's tables read back: {table class: its rows}, a row a list of cells, a cell
    {the class of an element in it (the cell's own included): its text}, and "boxes": the classes of
    its <i> boxes."""

    def __init__(self):
        super().__init__()
        self.tables, self.table, self.where, self.tags = {}, None, None, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        kind = dict(attrs).get("class")
        if tag == "table":
            self.table = self.tables.setdefault(kind, [])
        elif "tbody" not in self.tags:
            return
        elif tag == "tr":
            self.table.append([])
        elif tag == "td":
            self.table[-1].append({})
        if tag == "i":
            self.table[-1][-1].setdefault("boxes", []).append(kind)
        elif tag in ("td", "b", "span", "small"):
            self.where = kind or tag

    def handle_endtag(self, tag):
        self.tags.pop()

    def handle_data(self, data):
        if "tbody" in self.tags and self.table and self.table[-1]:
            cell = self.table[-1][-1]
            cell[self.where] = cell.get(self.where, "") + data


def test_the_report_reads_each_learner_into_exactly_their_state(course, tmp_path):
    """Three learners: one at phase 4 with its exercises done, one at phase 1 (green at the second try), one whose
    phase-2 check was edited to pass; and two repositories that cannot be read. The CSV holds exactly their
    states, and the HTML page shows the same grid, with no script and nothing to fetch."""
    ada = learner(course, tmp_path / "ada", 4)  # phases 0 to 3: the reference
    ada_4 = commit(ada, "Phase 4: contracts", "2026-03-02T10:00:00Z", checkpoints()[4])
    for exercise in (1, 2):
        apply_solution(ada, 4, exercise)
    commit(ada, "Phase 4: exercises", "2026-03-02T11:00:00Z")
    ben = learner(course, tmp_path / "ben", 0)  # everything of his own
    ben_0 = commit(ben, "Phase 0: hello", "2026-03-01T09:00:00Z", checkpoints()[0])
    copy_code(checkpoints()[1], ben)
    harness = (ben / "harness.py").read_text()  # the loop forgets to send the model's reply back
    (ben / "harness.py").write_text(harness.replace("        messages.append(assistant_message(message))\n", ""))
    commit(ben, "Phase 1: the loop, almost", "2026-03-01T10:00:00Z")
    ben_1 = commit(ben, "Phase 1: the loop", "2026-03-01T11:00:00Z", checkpoints()[1])
    cat = learner(course, tmp_path / "cat", 2)
    edited = cat / "tests" / "checkpoints" / "test_phase2_guardrails.py"
    edited.write_text("PHASE = 2\n\n\ndef test_guardrails():\n    pass\n")
    commit(cat, "Phase 2: done?", "2026-03-03T09:00:00Z")
    check = subprocess.run([sys.executable, "-m", "pytest", "tests/checkpoints", "--phase", "2", "-p",
                            "no:cacheprovider"], cwd=cat, capture_output=True, text=True, env=clean_env())
    assert check.returncode == 0, "the edited check passes in Cat's own repository"
    (tmp_path / "not-a-repo").mkdir()
    (tmp_path / "class.txt").write_text(f"# week 3\n{ben} Ben\n{cat}\n{tmp_path / 'not-a-repo'}\n"
                                        f"file://{tmp_path / 'nowhere.git'} Nobody\n")
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, str(ROOT / "phases" / "report.py"), str(ada), "--list",
                           str(tmp_path / "class.txt"), "--phases", "0-5", "--csv", str(out / "report.csv"),
                           "--html", str(out / "report.html"), "--jobs", "3"],
                          cwd=out, capture_output=True, text=True, env=clean_env(), timeout=900)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    rows = list(csv.DictReader((out / "report.csv").open(encoding="utf-8")))
    assert [row["learner"] for row in rows] == ["ada", "Ben", "cat", "not-a-repo", "Nobody"]
    ref, fail = ("pass", "", "reference"), ("fail", "", "")
    expected = {
        "ada": [ref, ref, ref, ref, ("pass", "1 2", f"2026-03-02 10:00 {ada_4}"), fail],
        "Ben": [("pass", "", f"2026-03-01 09:00 {ben_0}"), ("pass", "", f"2026-03-01 11:00 {ben_1}"), *[fail] * 4],
        "cat": [ref, ref, *[fail] * 4]}
    for row in rows[:3]:
        seen = [(row[f"phase {p}"], row[f"phase {p} exercises"], row[f"phase {p} first green"]) for p in range(6)]
        assert seen == expected[row["learner"]], (row["learner"], seen, done.stdout)
        assert row["problem"] == "", row
    assert [row["tampered"] for row in rows[:3]] == ["", "", "tests/checkpoints/test_phase2_guardrails.py (edited)"]
    assert (rows[0]["commit"], rows[0]["committed"]) == (git(ada, "rev-parse", "--short=7", "HEAD"), "2026-03-02 11:00")
    assert "not a git repository" in rows[3]["problem"] and rows[3]["phase 0"] == ""
    assert rows[4]["problem"].startswith("could not clone") and rows[4]["phase 0"] == ""
    progress = [(row["furthest"], row["points"]) for row in rows]
    assert progress == [("4", "50"), ("1", "20"), ("1", "20"), ("", "0"), ("", "0")]
    wrong = [row["what is wrong"] for row in rows]
    assert wrong[0].startswith("phase 5: expected: ") and wrong[1].startswith("phase 2: expected: ")
    assert wrong[2].startswith("tampered: tests/checkpoints/test_phase2_guardrails.py (edited) · "
                               "phase 2: expected: "), wrong
    assert wrong[3:] == [rows[3]["problem"], rows[4]["problem"]]

    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and not re.search(r"""(src|href)=|url\(|@import""", page), "self-contained"
    tables = Page()
    tables.feed(page)
    by_progress = [rows[n] for n in (0, 1, 2, 4, 3)]  # furthest, points, name: Nobody, not-a-repo
    for cells, row in zip(tables.tables["summary"], by_progress, strict=True):
        statuses = [row[f"phase {p}"] or "none" for p in range(6)]
        assert cells[0]["learner"] == row["learner"] and cells[1]["boxes"] == statuses, cells
        assert cells[2]["furthest"] == (f"phase {row['furthest']}" if row["furthest"] else "none")
        assert (cells[3]["points"], cells[3]["small"]) == (f"{row['points']} ", "of 60")
        commit_cell = (cells[4]["commit"].strip(), cells[4].get("small", ""))
        assert commit_cell == (row["committed"], row["commit"])
        assert cells[5].get("wrong", "") == row["what is wrong"]
        assert f"<dd>{html.escape(row['what is wrong'])}</dd>" in page, "in full, at the bottom"
    for cells, row in zip(tables.tables["grid"], by_progress, strict=True):
        assert cells[0]["learner"] == row["learner"]
        for p, cell in enumerate(cells[1:]):
            green, done = row[f"phase {p} first green"], row[f"phase {p} exercises"]
            shown = (cell.get("b", ""), cell.get("ex", ""), cell.get("green", ""))
            assert shown == (row[f"phase {p}"], "ex " * bool(done) + done,
                             green[5:16] if green[:1].isdigit() else green), (row["learner"], p)


def test_the_report_watches_every_file_the_checks_load():
    """The tamper column covers the course's files that a check imports or starts: a change to any of them could
    make a learner's own check pass."""
    probe = ("import sys, pytest; from pathlib import Path; root = Path(sys.argv[1])\n"
             "class Seen:\n"
             "    def pytest_collection_finish(self, session):\n"
             "        print('\\n'.join(str(Path(m.__file__).resolve().relative_to(root)) for m in list(sys.modules."
             "values()) if getattr(m, '__file__', None) and Path(m.__file__).resolve().is_relative_to(root)))\n"
             "pytest.main([str(root / 'tests' / 'checkpoints'), '--co', '-q', '-o', 'addopts=', '-p', "
             "'no:cacheprovider'], plugins=[Seen()])\n")
    done = subprocess.run([sys.executable, "-c", probe, str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    code = {p.name for c in checkpoints() for p in c.glob("*.py")}  # the learner's, checked, not checking
    tracked = set(git(ROOT, "ls-files").splitlines())  # the course's files, not a virtual environment inside it
    loaded = {line for line in done.stdout.splitlines() if line in tracked} - code
    assert "tests/helpers.py" in loaded, done.stdout[-2000:]
    started = set(re.findall(r'"((?:tests/)?\w+\.py)', (ROOT / "tests/checkpoints/test_phase11_mcp.py").read_text()))
    for path in (loaded | {p for p in started if (ROOT / p).exists()}) - code:
        assert report.is_check_file(path) or not (ROOT / path).exists(), f"{path} is not in report.CHECK_FILES"


# What a learner's code tries when the report checks it: read the instructor's key and the course's
# .env, write the course's check and a file outside its folders, reach a port the instructor's
# machine listens on. It says what happened as its failure, which the report shows in words, with the
# pytest plugins of the environment that the check process loaded.
PROBE = '''import errno, socket, sys
from importlib.metadata import entry_points
seen = ["plugins: " + (" ".join(sorted(e.value for e in entry_points(group="pytest11") if e.value in sys.modules))
                       or "none")]
for name, path in (("home", {key!r}), (".env", {env!r})):
    try:
        seen.append(f"read {{name}}: " + open(path).read().strip())
    except OSError as error:
        seen.append(f"read {{name}}: " + errno.errorcode[error.errno])
for name, path in (("course", {check!r}), ("outside", {outside!r})):
    try:
        with open(path, "a") as file:
            file.write("# written by a learner\\n")
        seen.append(f"wrote {{name}}")
    except OSError as error:
        seen.append(f"wrote {{name}}: " + errno.errorcode[error.errno])
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    seen.append("port: reached")
except OSError as error:
    seen.append("port: " + errno.errorcode[error.errno])
raise SystemExit("probe: " + "; ".join(seen) + "; end")
'''


def probe_report(tmp_path, path=None):
    """A course of its own (the probe may write in it), an instructor's home with a key, the
    course's .env, and one learner whose backend.py is PROBE; the report run on phase 0, with PATH
    when given. Returns what the report printed on stderr, the probe's words, phase 0's check."""
    course = course_clone(tmp_path / "course")
    home = tmp_path / "instructor"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("the instructor's private key\n")
    (course / ".env").write_text("GROQ_API_KEY=gsk_the_instructors_own_key_0123456789\n")
    listener = socket.create_server(("127.0.0.1", 0))
    eve = learner(course, tmp_path / "eve", 0)
    check = course / "tests" / "checkpoints" / "test_phase0_hello.py"
    probe = PROBE.format(key=str(home / ".ssh" / "id_ed25519"), env=str(course / ".env"),
                         check=str(check), outside=str(tmp_path / "outside.txt"),
                         port=listener.getsockname()[1])
    (eve / "backend.py").write_text(probe + (checkpoints()[0] / "backend.py").read_text())
    commit(eve, "Phase 0: hello", "2026-03-01T09:00:00Z")
    env = clean_env(HOME=str(home), **({"PATH": path} if path else {}))
    command = [sys.executable, str(course / "phases" / "report.py"), str(eve), "--phases", "0",
               "--no-history", "--csv", str(tmp_path / "report.csv")]
    with listener:
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env,
                              timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    row = next(csv.DictReader((tmp_path / "report.csv").open(encoding="utf-8")))
    words = re.search(r"probe: (.*?); end", row["what is wrong"])
    assert words, row["what is wrong"]
    return done.stderr, words.group(1), check


@needs_bubblewrap
def test_learners_code_run_by_the_report_reaches_only_its_own_folders(tmp_path):
    """With bubblewrap, a learner's code the report runs reads nothing of the instructor's (a key in
    the home, the course's .env: not there), cannot write the course's checks (read-only, or not its
    own when the report runs as root and the code as nobody), and reaches no port of the machine.
    What it wrote outside its folders went nowhere: the course's check file and the folder outside
    are as they were. No sandbox note."""
    said, seen, check = probe_report(tmp_path)
    tried = dict(part.split(": ", 1) if ": " in part else (part, "done")
                 for part in seen.split("; "))
    reads = (tried["read home"], tried["read .env"], tried["port"])
    assert reads == ("ENOENT", "ENOENT", "ECONNREFUSED") and tried["wrote course"] in (
        "EROFS", "EACCES"), seen
    assert check.read_text() == (ROOT / "tests/checkpoints/test_phase0_hello.py").read_text()
    assert not (tmp_path / "outside.txt").exists() and "no sandbox" not in said, said
    assert tried["plugins"] == "none", seen  # see the next test


def test_without_bubblewrap_the_report_says_so_in_one_line_before_it_starts(tmp_path):
    """Without bubblewrap (a PATH without it), the first thing the report prints is one line saying
    that the learners' code runs as the instructor; and so it does: the probe reads the key. With a
    sandbox or without, the checks load none of the environment's pytest plugins (xdist, which
    requirements.txt installs, and here LangSmith's and anyio's): none can change a verdict, and none
    costs every check a second, as LangSmith's did."""
    assert "xdist.plugin" in {e.value for e in metadata.entry_points(group="pytest11")}
    said, seen, _ = probe_report(tmp_path, path_without_bubblewrap(tmp_path))
    assert said.splitlines()[0] == (
        "note: no sandbox (bubblewrap is not installed (Debian and Ubuntu: sudo apt install "
        "bubblewrap)): the learners' code runs as you, able to read and change your files"), said
    assert len([line for line in said.splitlines() if "sandbox" in line]) == 1
    assert seen.startswith("plugins: none; read home: the instructor's private key; read .env: GROQ_API_KEY="), (
        seen)


@needs_bubblewrap
def test_a_check_that_starts_bubblewrap_passes_inside_the_reports_sandbox():
    """Phase 3's check starts bubblewrap for its sandbox tests: run by the report, in the report's
    own sandbox, it passes on phase 3's checkpoint (rather than skipping those tests, which the
    report would count as not passed)."""
    sandbox, why = report.find_sandbox()
    assert sandbox, why
    assert report.run_checks(checkpoints()[3], [3], False, sandbox) == {(3, None): (True, "")}


# ---- the page, in a browser ------------------------------------------------------------------

CHROMIUM = shutil.which("chromium")
WIDTH = 1400  # the window the page must fit: a laptop's browser, not maximised
# Reads the laid-out page: its width, and the height of each line of the summary, into an attribute
# --dump-dom prints. Added to a copy of the page only: the report's own page has no script.
MEASURE = ('<script>var rows = document.querySelectorAll("table.summary tbody tr");'
           'document.body.setAttribute("data-measured", JSON.stringify({width: '
           "document.documentElement.scrollWidth, lines: Array.from(rows, "
           "r => r.getBoundingClientRect().height), "
           "line: parseFloat(getComputedStyle(document.body).lineHeight)}));</script></body>")


def chromium(tmp_path, *args):
    """Headless Debian chromium at WIDTH x 900, its own profile, nothing fetched: its output."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", f"--user-data-dir={profile}", f"--window-size={WIDTH},900", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env=clean_env(HOME=str(tmp_path)))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def class_of_thirty():
    """Thirty rows as check_learner() makes them, of every kind: finished, half-way, failing with a
    long reason, tampered, unreachable; long names and long URLs."""
    reason = ("expected: A command past shell.TIMEOUT is stopped with everything it started, and "
              "its result says it timed out;\noutput past MAX_OUTPUT stops it too.\nthe first "
              "result should say `timed out`: \"exit code 0\\nstill running after the timeout\"")
    rows = []
    for n in range(30):
        reached = [13, 4, 7, 2, 9, 0][n % 6] if n % 10 != 9 else -1
        row = {"learner": f"Learner {n:02d} Maximiliane Oberhauser-Lindqvist", "checks": {},
               "repository": "https://github.com/course-2026-spring/harness-assignment-learner-"
                             f"{n:02d}-long-name", "exercises": {}, "green": {}, "tampered": [],
               "problem": ""}
        if reached < 0:
            row["problem"] = f"could not clone {row['repository']}: repository not found"
        else:
            row["commit"], row["committed"] = f"{n:07x}", f"2026-03-{1 + n % 9:02d} 1{n % 10}:00"
        for phase in range(14) if reached >= 0 else []:
            row["checks"][(phase, None)] = (phase <= reached, "" if phase <= reached else reason)
            if phase <= reached:
                when = f"2026-03-0{1 + phase % 9} 1{phase % 10}:00 1a2b3c4"
                row["green"][phase] = "reference" if phase < 2 else when
                row["exercises"][phase] = [1, 2] if phase % 3 == 0 else []
        if n % 7 == 3:
            row["tampered"] = ["tests/checkpoints/test_phase6_clock.py (edited)",
                               "conftest.py (added)"]
        rows.append(row)
    return rows


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (Debian: apt install chromium)")
def test_the_page_for_a_class_of_thirty_fits_1400_pixels_in_chromium(tmp_path):
    """The page for thirty learners, laid out by headless chromium in a window 1400 px wide: nothing
    wider than the window, every learner's summary one line tall; a screenshot of it is a PNG of the
    window's size."""
    points = report.points_of_phases()
    page = report.page(class_of_thirty(), list(range(14)), points, "2026-03-02 12:00")
    assert "<script" not in page
    (tmp_path / "report.html").write_text(page, encoding="utf-8")
    (tmp_path / "measured.html").write_text(page.replace("</body>", MEASURE), encoding="utf-8")
    dom = chromium(tmp_path, "--dump-dom", (tmp_path / "measured.html").as_uri())
    measured = json.loads(html.unescape(re.search(r'data-measured="([^"]*)"', dom).group(1)))
    assert measured["width"] <= WIDTH, f"the page is {measured['width']} px wide"
    assert len(measured["lines"]) == 30 and max(measured["lines"]) < 2 * measured["line"], measured
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", (tmp_path / "report.html").as_uri())
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (WIDTH, 900)
