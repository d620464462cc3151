"""Shared fixtures: the offline model in scripted mode, a scratch workspace holding the code under test,
and the --phase option (`python -m pytest tests/checkpoints --phase 1` checks the repository root)."""
import ast
import importlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_model  # noqa: E402

# Variables that would point a child process at a real provider: never inherited by tests.
PROVIDER_VARS = ("GROQ_API_KEY", "OPENAI_API_KEY", "API_KEY", "BACKEND", "MODEL", "BASE_URL")


def checkpoints():
    """The phase folders, in order: [Path('phases/00-hello'), Path('phases/01-loop'), ...]."""
    return sorted(p for p in (ROOT / "phases").iterdir() if p.is_dir() and p.name[:2].isdigit())


def pytest_addoption(parser):
    parser.addoption("--phase", type=int, metavar="N",
                     help="check the code in the repository root against phase N's 'Done when'")


def pytest_collection_modifyitems(config, items):
    phase = config.getoption("--phase")
    if phase is None:
        return
    if phase not in range(len(checkpoints())):
        raise pytest.UsageError(f"--phase {phase}: the phases are 0 to {len(checkpoints()) - 1}")
    chosen = [item for item in items if getattr(item.module, "PHASE", None) == phase]
    config.hook.pytest_deselected(items=[item for item in items if item not in chosen])
    items[:] = chosen


@pytest.fixture
def code_dir(request):
    """The code under test: the repository root with --phase, else the checkpoint of the test's PHASE."""
    if request.config.getoption("--phase") is not None:
        return ROOT
    return checkpoints()[request.module.PHASE]


@pytest.fixture
def workspace(tmp_path, code_dir):
    """A scratch directory holding a copy of the code under test, where the tools can do no harm."""
    work = tmp_path / "work"
    work.mkdir()
    for source in [*code_dir.glob("*.py"), ROOT / "demo_model.py"]:
        if not (work / source.name).exists():
            shutil.copy(source, work / source.name)
    return work


@pytest.fixture
def server():
    """The offline model, scripted: push replies, then read server.requests."""
    with demo_model.start() as running:
        yield running


def groq_env(server, key="gsk_test"):
    """Settings that point the code at a server imitating Groq."""
    return {"BACKEND": "groq", "GROQ_API_KEY": key, "BASE_URL": server.url.replace("/v1", "/openai/v1"),
            "MODEL": "openai/gpt-oss-120b"}


def run_python(workspace, *args, env=None, input="", timeout=60):
    """Run `python ARGS...` in the workspace with no provider settings but those given."""
    clean = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    clean.update(env or {}, PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, *args], cwd=workspace, env=clean, input=input,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def unused_port():
    """A port on 127.0.0.1 that nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def constant(path, name):
    """The value of a top-level constant in a Python file, read without running the file.

    Example: constant(Path("harness.py"), "MAX_STEPS") -> 10
    """
    for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"{path} has no constant {name}")


@pytest.fixture
def load(workspace, monkeypatch):
    """Import modules of the code under test (tools, harness, ...) fresh from the workspace, run there."""
    code = [p.stem for p in workspace.glob("*.py")]

    def forget():
        for name in code:
            sys.modules.pop(name, None)

    forget()
    monkeypatch.syspath_prepend(str(workspace))
    monkeypatch.chdir(workspace)
    yield importlib.import_module
    forget()


@pytest.fixture
def tools(load, workspace):
    """tools.py of the code under test, confined to the scratch workspace."""
    module = load("tools")
    module.WORKSPACE = workspace
    return module


def scripted_backend(server):
    """The settings run() takes, pointing at a scripted server."""
    return {"name": "groq", "base_url": server.url, "api_key": "gsk_test", "model": "openai/gpt-oss-120b"}


def running_commands(command):
    """Live processes (zombies left out) whose command line is exactly command, e.g. "sleep 61.25"."""
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 1) for line in ps.splitlines() if line.strip()]
    return [row for row in rows if len(row) == 2 and row[1] == command and not row[0].startswith("Z")]
