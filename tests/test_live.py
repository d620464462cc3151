"""Against a real provider: these run when GROQ_API_KEY is set, in the environment or in .env (where the README
says to put it), and are skipped otherwise (they cost tokens and need the network)."""
import os

import pytest
from dotenv import dotenv_values
from helpers import ROOT, checkpoints, copy_code, run_python

KEY = os.environ.get("GROQ_API_KEY") or dotenv_values(ROOT / ".env").get("GROQ_API_KEY")
pytestmark = [pytest.mark.live, pytest.mark.skipif(not KEY, reason="GROQ_API_KEY is not set (environment or .env)")]


def test_groq_chains_tools_and_names_the_model(tmp_path):
    copy_code(checkpoints()[-1], tmp_path)
    task = "List the files here, then read backend.py and tell me which model the groq backend uses."
    result = run_python(tmp_path, "harness.py", task, env={"GROQ_API_KEY": KEY}, timeout=180)
    assert result.returncode == 0, result.stderr
    assert sum(line.startswith("[") for line in result.stdout.splitlines()) >= 2
    assert "gpt-oss" in result.stdout


def test_groq_gives_an_answer_with_a_shape(tmp_path):
    copy_code(checkpoints()[-1], tmp_path)
    (tmp_path / "schema.json").write_text('{"type": "object", "properties": {"count": {"type": "integer"}}, '
                                          '"required": ["count"]}')
    result = run_python(tmp_path, "harness.py", "--output-schema", "schema.json", "How many .py files are here?",
                        env={"GROQ_API_KEY": KEY}, timeout=180)
    assert result.returncode == 0, result.stderr
    assert '"count"' in result.stdout.splitlines()[-1]
