"""What each phase's code changed from the phase before: the "What changed" table of its lesson.

Run:  python tests/changed.py 6      (prints phase 6's table, to paste into phases/06-clock/README.md)
A definition is a function, a class, a method or a CONSTANT; it changed when its code did (its
docstring is prose, and rewording it changes no code). The loop is named when it is unchanged.
"""
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkpoints():
    return sorted(path for path in (ROOT / "phases").iterdir() if path.is_dir() and path.name[:2].isdigit())


def definitions(folder):
    """{(file, name): its code, docstrings left out} for a checkpoint's functions, classes, their methods, and
    CONSTANTS: what a lesson explains."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            named = [(node.name, node)] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else \
                [(n.id, node) for target in getattr(node, "targets", [getattr(node, "target", None)]) if target
                 for n in ast.walk(target) if isinstance(n, ast.Name) and n.id.isupper()]
            if isinstance(node, ast.ClassDef):
                named += [(f"{node.name}.{item.name}", item) for item in node.body
                          if isinstance(item, ast.FunctionDef) and not item.name.startswith("__")]
            for name, definition in named:
                for inner in ast.walk(definition):  # a docstring is prose: rewording it changes no code
                    body = getattr(inner, "body", None)
                    if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                            isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                        inner.body = body[1:] or [ast.Pass()]
                found[(path.name, name)] = ast.dump(definition)
    return found


def shown(name, code):
    """A definition as the table names it: f() for a function or method, the name for the rest."""
    return f"`{name}()`" if code.startswith("FunctionDef(") else f"`{name}`"


def what_changed(number):
    """The "What changed" section of phase `number`'s lesson, as markdown (phase 0: everything is new)."""
    folders = checkpoints()
    now = definitions(folders[number])
    before = definitions(folders[number - 1]) if number else {}
    files = sorted({file for file, _ in now} | {file for file, _ in before})
    rows, unchanged = [], []
    for file in files:
        added = [shown(name, code) for (f, name), code in now.items() if f == file and (f, name) not in before]
        changed = [shown(name, code) for (f, name), code in now.items()
                   if f == file and (f, name) in before and before[(f, name)] != code]
        removed = [shown(name, code) for (f, name), code in before.items() if f == file and (f, name) not in now]
        if added or changed or removed:
            rows.append((file, added, changed, removed))
        else:
            unchanged.append(f"`{file}`")
    with_removed = any(removed for *_, removed in rows)
    lines = ["## What changed", "",
             "| File | Added | Changed |" + (" Removed |" if with_removed else ""),
             "|---|---|---|" + ("---|" if with_removed else "")]
    for file, added, changed, removed in rows:
        cells = [", ".join(added), ", ".join(changed)] + ([", ".join(removed)] if with_removed else [])
        lines.append(f"| `{file}` | " + " | ".join(cells) + " |")
    loop = ("harness.py", "loop") if ("harness.py", "loop") in now else ("harness.py", "run")
    kept = []
    if loop in now and loop in before and now[loop] == before[loop]:
        kept.append(f"the loop, `{loop[1]}()`")
    kept += unchanged
    if kept:
        lines += ["", "Unchanged: " + ", ".join(kept) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) >= len(checkpoints()):
        sys.exit(f"usage: python tests/changed.py PHASE   (0 to {len(checkpoints()) - 1})")
    print(what_changed(int(sys.argv[1])), end="")
