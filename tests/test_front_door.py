"""The front door: harness.py holds the loop and what it decides, and touches no person and no terminal;
cli.py does (flags, what is printed, the question, signals, exit codes, the trace file). Checked on every
checkpoint's harness.py and on the top-level one, by reading its syntax tree and by running it from Python
with no terminal at all."""
import ast
import subprocess
import sys

import pytest
from helpers import ROOT, checkpoints, clean_env, copy_code

MAX_LINES = 450  # of the finished harness.py: the loop and its ideas, not the terminal's code
# What talks to a person or the process: the loop reaches them only through the hooks run() is given.
TERMINAL_MODULES = {"cli", "signal", "argparse", "readline", "termios", "tty", "getpass", "curses", "msvcrt"}
TERMINAL_CALLS = {"print", "input", "breakpoint", "exit", "quit"}
TERMINAL_NAMES = {"sys.stdout", "sys.stderr", "sys.stdin", "sys.exit", "sys.argv", "os._exit", "os.isatty"}
LOOPS = [ROOT / "harness.py", *(folder / "harness.py" for folder in checkpoints()
                                if (folder / "harness.py").exists())]


def terminal_uses(source):
    """What a module does with the terminal or the process outside its `if __name__ == "__main__":` block.
    Example: terminal_uses("import cli\\nprint(1)") -> ["import cli", "print()"]"""
    tree = ast.parse(source)
    body = [node for node in tree.body
            if not (isinstance(node, ast.If) and "__main__" in ast.unparse(node.test))]
    found = []
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in TERMINAL_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in TERMINAL_MODULES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TERMINAL_CALLS:
            found.append(f"{node.func.id}()")
        elif isinstance(node, ast.Attribute) and ast.unparse(node) in TERMINAL_NAMES:
            found.append(ast.unparse(node))
    return found


def test_terminal_uses_finds_each_kind():
    """The reader above finds what it must, and leaves the __main__ block (the way to cli.py) alone."""
    source = ("import signal\nfrom cli import say\nimport sys\n\ndef f():\n    print('x')\n    sys.stdout.write('y')\n"
              "    return input()\n\nif __name__ == '__main__':\n    import cli\n    cli.main()\n")
    assert sorted(terminal_uses(source)) == ["from cli import ...", "import signal", "input()", "print()", "sys.stdout"]
    assert terminal_uses("import json\n\nif __name__ == '__main__':\n    import cli\n    print(1)\n") == []


@pytest.mark.parametrize("path", LOOPS, ids=lambda path: path.parent.name if path.parent != ROOT else "top")
def test_the_loop_imports_nothing_that_talks_to_a_person(path):
    """harness.py reaches a person only through run()'s hooks (on_call, approve, record...): it imports no
    terminal or signal code, and prints, reads and exits nowhere but in its __main__ block."""
    assert terminal_uses(path.read_text(encoding="utf-8")) == [], f"{path.relative_to(ROOT)}: move these to cli.py"


def test_the_finished_loop_fits_in_450_lines():
    lines = len((ROOT / "harness.py").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"harness.py has {lines} lines; the loop's file holds at most {MAX_LINES}"


@pytest.mark.parametrize("path", LOOPS, ids=lambda path: path.parent.name if path.parent != ROOT else "top")
def test_run_from_python_needs_no_terminal(path, tmp_path):
    """harness.run(task) from a program, with no terminal and stdin closed, on the offline model: it returns,
    and the only thing printed is what the program itself printed."""
    copy_code(path.parent, tmp_path)
    program = ("import harness\nresult = harness.run('List the files here, then read backend.py and tell me "
               "which model it calls.')\nprint('returned', type(result).__name__)\n")
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    returns = "str" if path.parent != ROOT and int(path.parent.name[:2]) <= 4 else "Result"  # the answer
    assert done.stdout.splitlines() == [f"returned {returns}"], done.stdout[-2000:]
    assert done.stderr == "", done.stderr[-2000:]
