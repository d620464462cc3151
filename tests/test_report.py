"""The instructor's report (phases/report.py): learners' repositories, made here with phases/tags.py, read into
exactly their states, as CSV and as one HTML page that needs no network and no script; and the files it watches
for a check someone edited are every file the checks load."""
import csv
import html.parser
import re
import shutil
import subprocess
import sys

import pytest
from helpers import ROOT, apply_solution, checkpoints, clean_env, copy_code

sys.path.insert(0, str(ROOT / "phases"))
import report  # noqa: E402

LEARNER = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "ada@example.invalid"}


def git(cwd, *args, when=None):
    dates = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env=clean_env(**LEARNER, **dates)).stdout.strip()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A clone of this course, with its tags built (python phases/tags.py)."""
    path = tmp_path_factory.mktemp("course") / "course"
    git(path.parent, "clone", "--quiet", str(ROOT), str(path))
    subprocess.run([sys.executable, "phases/tags.py"], cwd=path, check=True, capture_output=True)
    return path


def learner(course, folder, phase):
    """A learner's clone of the course, on the branch `python phases/tags.py start PHASE` makes."""
    git(course.parent, "clone", "--quiet", str(course), str(folder))
    subprocess.run([sys.executable, "phases/tags.py", "start", str(phase)], cwd=folder, check=True,
                   capture_output=True)
    return folder


def commit(folder, message, when, *code):
    """Copy the code of these checkpoints' folders (later ones win) to the top of folder and commit it."""
    for checkpoint in code:
        for source in checkpoint.glob("*.py"):
            shutil.copy(source, folder / source.name)
    git(folder, "add", "-A")
    git(folder, "commit", "--quiet", "-m", message, when=when)
    return git(folder, "rev-parse", "--short=7", "HEAD")


class Table(html.parser.HTMLParser):
    """The report page's table read back: a list of rows, each a list of cells, each {element class: its text}."""

    def __init__(self):
        super().__init__()
        self.rows, self.where, self.tags = [], None, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if "tbody" not in self.tags:
            return
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self.rows[-1].append({})
        if tag in ("td", "th", "b", "span"):
            self.where = dict(attrs).get("class") or tag

    def handle_endtag(self, tag):
        self.tags.pop()

    def handle_data(self, data):
        if self.rows and self.rows[-1] and "tbody" in self.tags:
            cell = self.rows[-1][-1]
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

    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and not re.search(r"""(src|href)=|url\(|@import""", page), "self-contained"
    table = Table()
    table.feed(page)
    assert [cells[0]["learner"] for cells in table.rows] == [row["learner"] for row in rows]
    for cells, row in zip(table.rows, rows):
        assert cells[1].get("commit", "") == row["commit"]
        for p in range(6):
            cell = cells[2 + p]
            assert (cell.get("b", ""), cell.get("ex", ""), cell.get("green", "")) == (
                row[f"phase {p}"], row[f"phase {p} exercises"], row[f"phase {p} first green"]), (row["learner"], p)
        assert (cells[8].get("bad") or cells[8].get("tampered", ""), cells[9].get("problem", "")) == (
            row["tampered"], row["problem"])


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
