"""Phase 0, hello: `python backend.py` prints the model's reply; the backend is chosen as the lesson says."""
from conftest import groq_env, run_python

PHASE = 0


def test_backend_prints_a_reply_offline_with_a_one_line_notice(workspace):
    result = run_python(workspace, "backend.py")
    assert result.returncode == 0, result.stderr
    assert "demo model" in result.stdout
    notice = result.stderr.strip().splitlines()
    assert len(notice) == 1 and "no API key found" in notice[0] and ".env" in notice[0]


def test_backend_sends_the_prompt_given_on_the_command_line(workspace, server):
    server.push("Paris.")
    result = run_python(workspace, "backend.py", "Capital of France?", env=groq_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Paris."
    assert server.requests[-1]["body"]["messages"] == [{"role": "user", "content": "Capital of France?"}]


def test_groq_key_chooses_groq_with_its_key_and_default_model(workspace, server):
    server.push("hi")
    env = groq_env(server)
    del env["BACKEND"], env["MODEL"]
    result = run_python(workspace, "backend.py", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no fallback notice
    request = server.requests[-1]
    assert request["path"] == "/openai/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer gsk_test"
    assert request["body"]["model"] == "openai/gpt-oss-120b"


def test_openai_key_chooses_openai_when_there_is_no_groq_key(workspace, server):
    server.push("hi")
    result = run_python(workspace, "backend.py", env={"OPENAI_API_KEY": "sk-test", "BASE_URL": server.url})
    assert result.returncode == 0, result.stderr
    assert server.requests[-1]["headers"]["authorization"] == "Bearer sk-test"
    assert server.requests[-1]["body"]["model"] != "demo"


def test_backend_variable_wins_over_the_keys_and_model_overrides(workspace, server):
    server.push("hi")
    env = {"GROQ_API_KEY": "gsk_unused", "BACKEND": "ollama", "BASE_URL": server.url, "MODEL": "qwen3:8b"}
    result = run_python(workspace, "backend.py", env=env)
    assert result.returncode == 0, result.stderr
    assert server.requests[-1]["body"]["model"] == "qwen3:8b"
    assert server.requests[-1]["headers"]["authorization"] != "Bearer gsk_unused"


def test_groq_without_a_key_says_which_variable_to_set(workspace):
    result = run_python(workspace, "backend.py", env={"BACKEND": "groq"})
    assert result.returncode == 1
    assert "GROQ_API_KEY" in result.stderr and "Traceback" not in result.stderr


def test_unknown_backend_name_lists_the_choices(workspace):
    result = run_python(workspace, "backend.py", env={"BACKEND": "gorq"})
    assert result.returncode == 1
    assert "groq" in result.stderr and "demo" in result.stderr and "Traceback" not in result.stderr


def test_unreachable_server_gives_one_clear_message(workspace, unused_port):
    env = {"BACKEND": "groq", "GROQ_API_KEY": "gsk_x", "BASE_URL": f"http://127.0.0.1:{unused_port}/v1"}
    result = run_python(workspace, "backend.py", env=env)
    assert result.returncode == 1
    assert "Could not reach" in result.stderr and "BASE_URL" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_refused_key_names_the_key_variable(workspace, server):
    server.push({"status": 401, "body": {"error": {"message": "Invalid API Key", "type": "invalid_request_error",
                                                   "code": "invalid_api_key"}}})
    result = run_python(workspace, "backend.py", env=groq_env(server))
    assert result.returncode == 1
    assert "401" in result.stderr and "Invalid API Key" in result.stderr and "GROQ_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unknown_model_says_to_check_MODEL(workspace, server):
    server.push({"status": 404, "body": {"error": {"message": "The model `gpt-oss-120b` does not exist or you do "
                                                   "not have access to it.", "type": "invalid_request_error",
                                                   "code": "model_not_found"}}})
    result = run_python(workspace, "backend.py", env=groq_env(server))
    assert result.returncode == 1
    assert "does not exist" in result.stderr and "MODEL" in result.stderr and "Traceback" not in result.stderr
