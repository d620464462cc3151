"""Helpers the tests, the scripted cases, the benchmark and the lesson runner share, each defined once here."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_model  # noqa: E402

# Variables that would point a child process at a real provider: never inherited by tests.
PROVIDER_VARS = ("GROQ_API_KEY", "OPENAI_API_KEY", "API_KEY", "BACKEND", "MODEL", "BASE_URL")


def checkpoints():
    """The phase folders, in order: [Path('phases/00-hello'), Path('phases/01-loop'), ...]."""
    return sorted(p for p in (ROOT / "phases").iterdir() if p.is_dir() and p.name[:2].isdigit())


def tag_name(checkpoint):
    """Example: tag_name(Path("phases/01-loop")) -> "v0.2-loop" """
    number, name = Path(checkpoint).name.split("-", 1)
    return f"v0.{int(number) + 1}-{name}"


def fingerprint(folder, files=None):
    """A hash of a folder's code files (all *.py, or those named): two checkpoints with the same code share it."""
    digest = hashlib.sha256()
    for path in sorted(Path(folder).glob("*.py")):
        if files is None or path.name in files:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def copy_code(code_dir, destination):
    """Copy a folder's code files, and the offline model, into destination (made if needed); returns it."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for source in [*Path(code_dir).glob("*.py"), ROOT / "demo_model.py"]:
        if not (destination / source.name).exists():
            shutil.copy(source, destination / source.name)
    return destination


def clean_env(**settings):
    """This environment without provider settings, plus those given, for a child process that must not reach a
    real provider or write bytecode into the code under test."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8", **settings}


def run_python(cwd, *args, env=None, input="", timeout=60):
    """Run `python ARGS...` in cwd with no provider settings but those given; returns the CompletedProcess."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=clean_env(**(env or {})), input=input,
                          capture_output=True, text=True, timeout=timeout)


def groq_env(server, key="gsk_test"):
    """Settings that point the code at a scripted server imitating Groq (Groq's path, key and model)."""
    return {"BACKEND": "groq", "GROQ_API_KEY": key, "BASE_URL": server.url.replace("/v1", "/openai/v1"),
            "MODEL": "openai/gpt-oss-120b"}


def scripted_backend(server, name="groq"):
    """The backend settings run() and chat() take, pointing at a scripted server."""
    return {"name": name, "base_url": server.url, "api_key": "gsk_test", "model": "openai/gpt-oss-120b"}


def answer_of(value):
    """What run() answered: phases 1 to 3 return the text (or None), later phases a Result with .answer."""
    return getattr(value, "answer", value)


def running_commands(command):
    """Live processes (zombies left out) whose command line is exactly command, e.g. "sleep 61.25"."""
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 1) for line in ps.splitlines() if line.strip()]
    return [row for row in rows if len(row) == 2 and row[1] == command and not row[0].startswith("Z")]
