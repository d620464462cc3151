"""Keep the Traditional Chinese lessons in step with the English ones.

Each translated section starts, under its heading, with `<!-- en: DIGEST -->`: the digest of the English
section it was made from (the sections are the `## ` headings, in order; the text before the first one is
the first section). When the English changes, its translation is behind until someone brings it up to date,
or marks it: `mark` puts a note at the top of each section that is behind, which says so to its reader,
so the English never waits on the translation.

Run:  python tests/translations.py             (each translation: in step, or the sections behind)
      python tests/translations.py mark        (marks each section that is behind, for its reader)
      python tests/translations.py digests phases/01-loop/README.md   (the digests to put under headings)
"""
import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = ".zh-TW.md"
FENCED = re.compile(r"^([ \t]*)```.*?^\1```", re.M | re.S)  # a block, indented or not
SOURCE = re.compile(r"<!-- en: ([0-9a-f]{12}) -->")
BEHIND = re.compile(r"> \*\*譯文落後：\*\*.*?<!-- behind: ([0-9a-f]{12}) -->\n", re.S)
BEHIND_NOTE = ("> **譯文落後：** 這一節的英文版在這份譯文之後改過，譯文還沒跟上；請以英文版"
               "（[English]({english})）為準。 <!-- behind: {digest} -->\n")
SWITCH = "[English](README.md) · [繁體中文](README.zh-TW.md)"


def pairs():
    """[(English lesson, its translation)] for every translated file of the course, the README included."""
    found = [(ROOT / "README.md", ROOT / f"README{SUFFIX}")]
    found += [(folder / "README.md", folder / f"README{SUFFIX}")
              for folder in sorted((ROOT / "phases").iterdir()) if folder.is_dir() and folder.name[:2].isdigit()]
    return [(english, translated) for english, translated in found if translated.exists()]


def sections(text):
    """[(heading, body)]: the text before the first `## ` heading (heading ""), then each `## ` section. A
    heading inside a code block is no heading."""
    found, heading, lines, fenced = [], "", [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("## ") and not fenced:
            found.append((heading, "".join(lines)))
            heading, lines = line.strip(), []
        else:
            lines.append(line)
    return found + [(heading, "".join(lines))]


def digest(body):
    """The digest of an English section: its words, whatever the blank space between them (a paragraph
    wrapped again is the same text)."""
    text = " ".join(body.split())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def blocks(text):
    """Every fenced code block of a lesson, in order, as written (commands, code, output), those
    indented inside a list item too."""
    return [found.group(0) for found in FENCED.finditer(text)]


def behind(english, translated):
    """[(English heading, why)] for each section of the translation that is not in step and not marked."""
    ours, theirs = sections(english.read_text(encoding="utf-8")), sections(translated.read_text(encoding="utf-8"))
    if len(ours) != len(theirs):
        return [("(every section)", f"the English has {len(ours)} sections, the translation {len(theirs)}")]
    found = []
    for (heading, body), (_, translation) in zip(ours, theirs):
        source, marked = SOURCE.search(translation), BEHIND.search(translation)
        now = digest(body)
        if not source:
            found.append((heading or "(the start)", "no <!-- en: ... --> line under its heading"))
        elif source.group(1) != now and not (marked and marked.group(1) == now):
            found.append((heading or "(the start)", f"the English changed since ({source.group(1)} -> {now})"))
    return found


def stale(english, translated):
    """[English heading] of each section whose translation is marked as behind (its reader is told)."""
    ours, theirs = sections(english.read_text(encoding="utf-8")), sections(translated.read_text(encoding="utf-8"))
    return [heading or "(the start)" for (heading, body), (_, translation) in zip(ours, theirs)
            if BEHIND.search(translation) and (SOURCE.search(translation) or [None, None])[1] != digest(body)]


def mark(english, translated):
    """Put the reader's note at the top of every section that is behind; drop the notes of sections in step."""
    ours = sections(english.read_text(encoding="utf-8"))
    theirs = sections(translated.read_text(encoding="utf-8"))
    if len(ours) != len(theirs):
        raise SystemExit(f"{translated.relative_to(ROOT)}: {len(theirs)} sections for the English's {len(ours)}: "
                         "the translation needs its sections first")
    out = []
    for (_, body), (heading, translation) in zip(ours, theirs):
        translation = BEHIND.sub("", translation)
        source, now = SOURCE.search(translation), digest(body)
        if source and source.group(1) != now:
            note = BEHIND_NOTE.format(english=english.name, digest=now)
            translation = translation[:source.end()] + "\n" + note + translation[source.end():].lstrip("\n")
        out.append((heading + "\n" if heading else "") + translation)
    translated.write_text("".join(out), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] == ["digests"] and len(sys.argv) == 3:
        for heading, body in sections(Path(sys.argv[2]).read_text(encoding="utf-8")):
            print(f"<!-- en: {digest(body)} -->  {heading or '(the start)'}")
    elif sys.argv[1:] == ["mark"]:
        for english, translated in pairs():
            mark(english, translated)
            print(f"{translated.relative_to(ROOT)}: {len(stale(english, translated))} section(s) marked behind")
    elif not sys.argv[1:]:
        for english, translated in pairs():
            late, marked = behind(english, translated), stale(english, translated)
            status = "in step" if not late and not marked else \
                f"{len(late)} behind, unmarked; {len(marked)} marked behind"
            print(f"{translated.relative_to(ROOT)}: {status}")
            for heading, why in late:
                print(f"    {heading}: {why}")
    else:
        sys.exit("usage: python tests/translations.py [mark | digests LESSON.md]")
