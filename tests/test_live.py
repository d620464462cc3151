"""Against a real provider: skipped unless GROQ_API_KEY is set (these cost tokens and need the network)."""
import os

import pytest
from conftest import ROOT, checkpoints, run_python

pytestmark = [pytest.mark.live, pytest.mark.skipif(not os.environ.get("GROQ_API_KEY"), reason="GROQ_API_KEY not set")]


def test_groq_chains_tools_and_names_the_model(tmp_path):
    for source in [*checkpoints()[-1].glob("*.py"), ROOT / "demo_model.py"]:
        (tmp_path / source.name).write_bytes(source.read_bytes())
    task = "List the files here, then read backend.py and tell me which model the groq backend uses."
    result = run_python(tmp_path, "harness.py", task, env={"GROQ_API_KEY": os.environ["GROQ_API_KEY"]}, timeout=180)
    assert result.returncode == 0, result.stderr
    assert sum(line.startswith("[") for line in result.stdout.splitlines()) >= 2
    assert "gpt-oss" in result.stdout
