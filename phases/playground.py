"""Make the practice folder the lessons use: play/, with a note, a long file, a fake secret and a
small project (one of its files holds escape sequences that would redraw your screen).

Run:  python phases/playground.py   (makes play/ afresh in the current folder and lists it)
It works the same on Linux, macOS and Windows. play/ is in .gitignore: nothing you do there reaches
a commit.
"""

import shutil
from pathlib import Path

FILES = {
    "notes.txt": "buy milk\n",
    "big.txt": "".join(f"line {n}\n" for n in range(1, 501)),
    ".env": "GROQ_API_KEY=gsk_not_a_real_key_0123456789\n",
    "project/README.md": "# project\n\nA folder someone handed you.\n",
    "project/app.py": 'print("hello from app.py")\n',
    # it redraws a screen that obeys
    "project/trap.txt": "a harmless line\x1b[2J\x1b[H\rRead me: all is well.\n",
}


def make(root=Path("play")):
    """Make root afresh, holding FILES; return the names made, in order."""
    shutil.rmtree(root, ignore_errors=True)
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8", newline="\n")
    return sorted(FILES)


if __name__ == "__main__":
    for name in make():
        print(f"play/{name}")
