"""The Traditional Chinese course: every lesson and the README translated, in step with the English (or saying
to its reader that it is behind), with the English's commands, code and output unchanged, in the glossary's words
and in Taiwan's characters; and the lesson runner runs a translated lesson as it runs the English."""
import re
import shutil
import subprocess
import sys

import pytest
from helpers import ROOT, checkpoints
from translations import FENCED, SUFFIX, SWITCH, behind, blocks, mark, sections, stale

GLOSSARY = ROOT / "phases" / "GLOSSARY.zh-TW.md"
ENGLISH = [ROOT / "README.md", *(folder / "README.md" for folder in checkpoints())]
# Characters only simplified Chinese writes (each has another traditional form): a translation holds none.
SIMPLIFIED = set("这个们说时为来对会过还发没从动问题据务实现应经开关页认设调试运进线网软数类错误码"
                 "输读写储库录确带让给样种长门间见觉机电话语请谢总结标边该当么处两将无专业东丝严丢"
                 "乐习书买乱争亏产亲仅仓仪价众优传伤举义乌乔乡币师帐庆废异弃张弹强归彻态恶悬惊惯戏"
                 "战户扩扫扬护报担拟拥择挂挤挥损换掷摄摆携断旧显晓暂术杀杂权条杨极构枪栏树桥检椭档"
                 "梦")
IDENTIFIER = re.compile(r"`[^`\n]*`|<!--.*?-->|\]\([^)]*\)|https?://\S+")


def translation(english):
    return english.with_name(english.name.replace(".md", SUFFIX))


def prose(text):
    """A lesson's words without its code: fenced blocks, `inline code`, comments, link targets and URLs."""
    return IDENTIFIER.sub(" ", FENCED.sub(" ", text))


def glossary():
    """[(English term, rendering, [words not to use], enforced)]: the first table's terms are enforced where
    the English uses them; every table's 'not to use' words hold everywhere."""
    rows, enforced = [], False
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            enforced = line.strip() == "## 術語"
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("English", "---"):
            rows.append((cells[0], cells[1], [word for word in cells[2].split("、") if word], enforced))
    return rows


def test_every_lesson_and_the_readme_has_its_translation_and_a_switch():
    missing = [str(translation(english).relative_to(ROOT)) for english in ENGLISH if not translation(english).exists()]
    assert not missing, f"not translated: {missing}"
    for english in ENGLISH:
        for text in (english.read_text(encoding="utf-8"), translation(english).read_text(encoding="utf-8")):
            assert SWITCH in "\n".join(text.splitlines()[:4]), f"{english.relative_to(ROOT)}: the switch on top"


@pytest.mark.parametrize("english", ENGLISH, ids=lambda path: path.parent.name if path.parent != ROOT else "README")
def test_a_translation_is_in_step_or_tells_its_reader_it_is_behind(english):
    """Each section records the digest of the English it was made from; a section whose English changed since
    fails here until it is brought up to date, or marked (python tests/translations.py mark): then its reader
    is told, and the English never waits on the translation."""
    late = behind(english, translation(english))
    assert not late, (f"{translation(english).relative_to(ROOT)} is behind the English in: "
                      + "; ".join(f"{heading} ({why})" for heading, why in late)
                      + ". Bring these sections up to date, or run: python tests/translations.py mark")


@pytest.mark.parametrize("english", ENGLISH, ids=lambda path: path.parent.name if path.parent != ROOT else "README")
def test_a_translation_keeps_every_command_code_block_and_output(english):
    """Only the prose is translated: the fenced blocks (commands, their output, code) are the English's own."""
    ours, theirs = blocks(english.read_text(encoding="utf-8")), blocks(translation(english).read_text(encoding="utf-8"))
    assert ours == theirs, next(f"block {n + 1} differs:\n{a}\n---\n{b}" for n, (a, b) in enumerate(zip(ours, theirs))
                                if a != b) if len(ours) == len(theirs) else f"{len(ours)} blocks, {len(theirs)}"


@pytest.mark.parametrize("english", ENGLISH, ids=lambda path: path.parent.name if path.parent != ROOT else "README")
def test_a_translation_follows_the_glossary_in_taiwan_s_characters(english):
    """Where an English section uses a term of the glossary, its translation uses the glossary's rendering; the
    words the glossary says not to use, and characters only simplified Chinese writes, appear nowhere."""
    terms, problems = glossary(), []
    assert len(terms) > 40
    pairs = zip(sections(english.read_text(encoding="utf-8")),
                sections(translation(english).read_text(encoding="utf-8")))
    for (heading, ours), (_, theirs) in pairs:
        ours, theirs = prose(ours), prose(theirs)
        for term, rendering, avoid, enforced in terms:
            used = re.search(rf"(?<![\w-]){re.escape(term.split(' (')[0])}(e?s)?(?![\w-])", ours, re.I)
            if enforced and used and rendering.split("（")[0] not in theirs:
                problems.append(f"{heading or '(the start)'}: '{term}' is {rendering} here")
            problems += [f"{heading or '(the start)'}: {word} (the glossary says {rendering})"
                         for word in avoid if word in theirs]
        problems += [f"{heading or '(the start)'}: simplified {char}" for char in sorted(SIMPLIFIED & set(theirs))]
    assert not problems, f"{translation(english).relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_sync_check_names_the_section_where_one_sentence_changed(tmp_path):
    """One sentence of an English lesson changes: the check names that section (and only it); marking it puts
    the note at its top for its reader, and the check passes; translating it again clears the note."""
    english, translated = tmp_path / "README.md", tmp_path / f"README{SUFFIX}"
    source = ROOT / "phases" / "01-loop"
    shutil.copy(source / "README.md", english)
    shutil.copy(source / f"README{SUFFIX}", translated)
    assert behind(english, translated) == []
    text = english.read_text(encoding="utf-8")  # a paragraph wrapped again is the same text
    english.write_text(text.replace(" the ", "\n   the ", 3), encoding="utf-8")
    assert behind(english, translated) == []
    english.write_text(text, encoding="utf-8")
    number, heading, sentence = next((number, heading, found.group(0)) for number, (heading, body)
                                     in enumerate(sections(english.read_text(encoding="utf-8")))
                                     if number and (found := re.search(r"[A-Z][^.\n`]{20,}\.", body)))
    english.write_text(english.read_text(encoding="utf-8").replace(sentence, sentence[:-1] + ", now.", 1),
                       encoding="utf-8")
    assert [name for name, _ in behind(english, translated)] == [heading]
    mark(english, translated)
    assert behind(english, translated) == [] and stale(english, translated) == [heading]
    assert "譯文落後" in sections(translated.read_text(encoding="utf-8"))[number][1]
    told = subprocess.run([sys.executable, str(ROOT / "tests" / "translations.py")], capture_output=True,
                          text=True, cwd=ROOT)
    assert told.returncode == 0 and "README.zh-TW.md" in told.stdout


def test_the_lesson_runner_runs_a_translated_lesson():
    """python tests/lessons.py runs a translated lesson's commands and compares their output, as the English."""
    lesson = checkpoints()[0] / f"README{SUFFIX}"
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "lessons.py"), "--reference", str(lesson)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


CHINESE = re.compile(r"[\u4e00-\u9fff，。：；、（）「」]")
NEW_BLOCK = re.compile(r"\s*([-*+] |\d+\. |\||#|>|<!--|\[English\])")  # a line that starts a block of its own
ONE_LINE = re.compile(r"\s*(\||#|<!--|\[English\])")  # a block one line long: a row, a heading, a note


def renderings(heading):
    """{English: 繁體中文} of one table of the glossary, by its heading."""
    table = GLOSSARY.read_text(encoding="utf-8").split(f"## {heading}\n")[1].split("\n## ")[0]
    return {cells[0]: cells[1] for line in table.splitlines() if line.startswith("|")
            for cells in [[cell.strip() for cell in line.strip().strip("|").split("|")]]
            if cells[0] not in ("English", "---")}


@pytest.mark.parametrize("english", ENGLISH[1:], ids=lambda path: path.parent.name)
def test_a_lesson_s_headings_and_its_phase_line_read_as_in_every_other(english):
    """The same heading is the same words in every lesson, and so is the line of phases at the top."""
    names = renderings("標題與階段名稱")
    ours = sections(english.read_text(encoding="utf-8"))
    text = translation(english).read_text(encoding="utf-8")
    theirs = sections(text)
    for (heading, _), (rendered, _) in zip(ours[1:], theirs[1:]):
        assert heading not in names or rendered == names[heading], f"{english.parent.name}: ## {names[heading]}"
    folders = [folder.name for folder in sorted(english.parent.parent.glob("[0-9][0-9]-*")) if folder.is_dir()]
    number = folders.index(english.parent.name)
    phases = [f"{n} {names[name.split('-', 1)[1]]}" for n, name in enumerate(folders)]
    phases[number] = f"`[ {phases[number]} ]`"
    assert "\n" + " > ".join(phases) + "\n" in text, f"{english.parent.name}: the line of phases, " + " > ".join(phases)


@pytest.mark.parametrize("english", ENGLISH, ids=lambda path: path.parent.name if path.parent != ROOT else "README")
def test_a_chinese_paragraph_is_one_line(english):
    """A browser shows a line break inside a paragraph as a space, which Chinese does not put between words:
    each paragraph, list item and quote of a translation is one line."""
    lines = FENCED.sub("", translation(english).read_text(encoding="utf-8")).splitlines()
    wrapped = [(line, after) for line, after in zip(lines, lines[1:]) if line.strip() and after.strip()
               and CHINESE.search(line + after) and not NEW_BLOCK.match(after) and not ONE_LINE.match(line)]
    assert not wrapped, f"{translation(english).relative_to(ROOT)}: a paragraph broken inside, at {wrapped[:2]}"
