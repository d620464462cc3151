"""Phase 0, hello: `python backend.py` prints the model's reply, the backend is chosen as the lesson says, and
each failure is one message that names the server (or proxy) really used and what to change. Checked through
the command line, choose() and complete(), and what the offline model receives."""
import pytest
from helpers import PROVIDER_VARS, groq_env, run_python

PHASE = 0
FILES = ("backend.py",)


PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")


def shown(result):
    return f"\n--- python backend.py printed ---\n{result.stdout}{result.stderr}---"


def dead_proxies(port):
    """Every proxy variable, upper and lower case, naming a proxy on a port where nothing listens (no exceptions)."""
    proxy = f"http://127.0.0.1:{port}"
    return {**{name: proxy for name in PROXY_VARS[:3]}, **{name.lower(): proxy for name in PROXY_VARS[:3]},
            "NO_PROXY": "", "no_proxy": ""}


@pytest.fixture
def backend(load, monkeypatch):
    """backend.py of the code under test, in an environment with no provider settings and no proxy."""
    for name in (*PROVIDER_VARS, *PROXY_VARS, *[name.lower() for name in PROXY_VARS]):
        monkeypatch.delenv(name, raising=False)
    return load("backend")


def test_backend_prints_a_reply_offline_with_a_one_line_notice(workspace):
    """With no key anywhere, `python backend.py` answers from the demo model and says so in one line on stderr."""
    result = run_python(workspace, "backend.py")
    assert result.returncode == 0, f"it should exit 0; it exited {result.returncode}.{shown(result)}"
    assert "demo model" in result.stdout, f"the demo model's hello should be on stdout.{shown(result)}"
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and "no API key found" in notes[0] and ".env" in notes[0], (
        f"stderr should hold one line saying no API key was found and where you looked (step 3).{shown(result)}")


def test_a_base_url_without_a_key_is_where_the_prompt_goes_and_the_note_says_so(workspace, server):
    """With BASE_URL and no key, `python backend.py` sends the prompt to that server, and the one-line note on
    stderr names its URL, where the run really goes (step 3)."""
    server.push("Hello from your server.")
    result = run_python(workspace, "backend.py", env={"BASE_URL": server.url})
    assert result.returncode == 0 and "Hello from your server." in result.stdout, shown(result)
    assert server.requests, f"the prompt should go to BASE_URL ({server.url}).{shown(result)}"
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and server.url in notes[0], (
        f"one line on stderr naming {server.url}, where the run really goes.{shown(result)}")


def test_a_groq_key_sends_the_prompt_to_groq_with_its_default_model(workspace, server):
    """`python backend.py "question"` with only GROQ_API_KEY set: the question goes to groq as the one user
    message, with the key and groq's default model, and the reply is printed; no notice."""
    server.push("Paris.")
    env = groq_env(server)
    del env["BACKEND"], env["MODEL"]
    result = run_python(workspace, "backend.py", "Capital of France?", env=env)
    assert result.returncode == 0 and result.stdout.strip() == "Paris.", f"it should print Paris.{shown(result)}"
    assert result.stderr == "", f"no notice when a key is set.{shown(result)}"
    request = server.requests[-1]
    assert request["body"]["messages"] == [{"role": "user", "content": "Capital of France?"}], (
        f"the question should go as the one user message; the server got {request['body']['messages']}")
    assert request["headers"]["authorization"] == f"Bearer {env['GROQ_API_KEY']}", (
        "send the key as the client's api_key")
    assert request["body"]["model"] == "openai/gpt-oss-120b", f"groq's default model, not {request['body']['model']}"


def test_openai_key_chooses_openai_when_there_is_no_groq_key(backend, server, monkeypatch):
    """OPENAI_API_KEY chooses openai when there is no Groq key, with openai's own default model."""
    key = "sk-test"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("BASE_URL", server.url)
    server.push("hi")
    chosen = backend.choose()
    assert chosen.get("name") == "openai" and chosen.get("api_key") == key, f"choose() returned {chosen}"
    assert backend.complete("Hi", backend=chosen) == "hi"
    assert server.requests[-1]["headers"]["authorization"] == f"Bearer {key}", "send the key as the client's api_key"
    assert server.requests[-1]["body"]["model"] not in ("demo", "openai/gpt-oss-120b"), (
        f"openai's own default model, not {server.requests[-1]['body']['model']}")


def test_backend_variable_wins_over_the_keys_and_model_overrides(backend, server, monkeypatch):
    """BACKEND wins over the keys found, MODEL replaces the backend's default model, BASE_URL its server."""
    settings = {"GROQ_API_KEY": "gsk_unused", "BACKEND": "ollama", "BASE_URL": server.url,
                "MODEL": "llama-3.1-8b-instant"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    server.push("hi")
    assert backend.complete("Hi") == "hi"
    assert server.requests[-1]["body"]["model"] == settings["MODEL"], (
        f"MODEL should replace the model: the server was asked for {server.requests[-1]['body']['model']}")
    assert settings["GROQ_API_KEY"] not in server.requests[-1]["headers"]["authorization"], "ollama takes no Groq key"


def test_groq_without_a_key_is_one_message_and_exit_1(workspace):
    """BACKEND=groq with no key: `python backend.py` exits 1 with one message naming GROQ_API_KEY, no traceback."""
    result = run_python(workspace, "backend.py", env={"BACKEND": "groq"})
    assert result.returncode == 1 and "GROQ_API_KEY" in result.stderr, shown(result)
    assert "Traceback" not in result.stderr, f"explain() the error instead of a traceback (step 5).{shown(result)}"


def refusal(backend, *words, **settings):
    """The BackendError complete() raises, checked to name each of words."""
    with pytest.raises(backend.BackendError) as caught:
        backend.complete("Hi", backend=backend.choose(**settings) if settings else None)
    said = str(caught.value)
    assert all(word in said for word in words), f"the message {said!r} should name {words}"
    return said


def test_an_unknown_backend_lists_the_choices(backend, monkeypatch):
    """An unknown BACKEND: a BackendError listing the backends there are."""
    monkeypatch.setenv("BACKEND", "gorq")
    refusal(backend, "groq", "demo")


def test_a_base_url_that_is_no_url_is_refused_before_anything_is_sent(backend, monkeypatch):
    """A BASE_URL with no http:// is a BackendError that names BASE_URL (step 3)."""
    monkeypatch.setenv("BASE_URL", "localhost:1234/v1")
    with pytest.raises(backend.BackendError) as caught:
        backend.choose()
    assert "BASE_URL" in str(caught.value), f"the message {str(caught.value)!r} should name BASE_URL"


def test_unreachable_server_gives_one_clear_message(backend, unused_port, monkeypatch):
    """A BASE_URL where nothing listens: the message says the server could not be reached, and names BASE_URL and
    the URL."""
    monkeypatch.setattr(backend, "RETRIES", 0, raising=False)  # from phase 7 on: the message, not the retries
    url = f"http://127.0.0.1:{unused_port}/v1"
    for name, value in {"BACKEND": "groq", "GROQ_API_KEY": "gsk_x", "BASE_URL": url}.items():
        monkeypatch.setenv(name, value)
    refusal(backend, "reach", "BASE_URL", url)


def test_a_proxy_that_does_not_answer_is_named(backend, unused_port, monkeypatch):
    """A proxy from the environment that does not answer: the message names the proxy and its URL (step 5). The
    server is far away (.invalid), so the request must go through the proxy; nothing leaves this machine."""
    monkeypatch.setattr(backend, "RETRIES", 0, raising=False)
    settings = {"BACKEND": "groq", "GROQ_API_KEY": "gsk_x", "BASE_URL": "https://api.groq.invalid/openai/v1",
                **dead_proxies(unused_port)}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    refusal(backend, "proxy", settings["HTTPS_PROXY"])


def test_a_server_on_this_machine_is_reached_past_a_proxy(workspace, unused_port):
    """With HTTPS_PROXY, HTTP_PROXY and ALL_PROXY naming a proxy that does not answer, the demo model on 127.0.0.1
    still answers `python backend.py` (step 4: a server on this machine is reached directly)."""
    result = run_python(workspace, "backend.py", env=dead_proxies(unused_port))
    assert result.returncode == 0 and "demo model" in result.stdout, (
        f"reach localhost, 127.0.0.1 and ::1 without the proxy (trust_env=False).{shown(result)}")


@pytest.mark.parametrize("status, message, fix", [
    (401, "Invalid API Key", "GROQ_API_KEY"),
    (404, "The model `gpt-oss-120b` does not exist or you do not have access to it.", "MODEL")])
def test_a_refusal_from_the_provider_says_what_to_check(backend, server, monkeypatch, status, message, fix):
    """A 401 or a 404 from the provider: its status, its words, the server's URL, and the setting to check."""
    settings = groq_env(server)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    server.push({"status": status, "body": {"error": {"message": message, "type": "invalid_request_error"}}})
    refusal(backend, str(status), message, settings["BASE_URL"], fix)
