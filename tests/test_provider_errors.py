"""A server that cannot be reached says why and what to do, in one paragraph: the cause, read from the exceptions
under the openai package's own (connection refused, name not found, no network, timed out), and the one fix for the
backend in use (`ollama serve` for Ollama, BASE_URL for your own server, the network for Groq and OpenAI). The
openai package's retries of a failing request are one note, not a line each; no traceback, ever. Real requests to
127.0.0.1 (a port nothing listens on, a socket that never answers), a name under the reserved .invalid domain,
real processes; each test runs on the checkpoint that introduced what it checks and on the last one."""
import re
import shutil
import socket
import subprocess
import sys

import pytest
from helpers import PROVIDER_VARS, clean_env, groq_env, run_python

PHASE = 0
FILES = ("backend.py",)
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")
NOWHERE = "no-such-host.invalid"  # RFC 6761: never a real host
SHORT = 0.5  # the TIMEOUT the timed-out cases get: seconds a silent server is waited for
# the one fix each backend's message must give: Groq's and OpenAI's servers are out there; Ollama runs here
FIXES = {"groq": ["Check your network connection"], "openai": ["Check your network connection"],
         "ollama": ["ollama serve", "ollama pull qwen3"], "base_url": ["Check BASE_URL"]}
CAUSES = {"refused": "refused", "name_not_found": "name not found (DNS)", "timed_out": "timed out"}
NOTED = {"refused": "Connection refused", "timed_out": "timed out"}  # as the retry note starts


@pytest.fixture
def backend(load, monkeypatch):
    """backend.py of the code under test, with no provider settings and no proxy in the environment."""
    for name in (*PROVIDER_VARS, *PROXY_VARS, *[name.lower() for name in PROXY_VARS]):
        monkeypatch.delenv(name, raising=False)
    return load("backend")


@pytest.fixture
def silent_port():
    """A port on 127.0.0.1 where connections are taken (the system does that) and never answered."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def resolver_says_no_such_name():
    """Whether this machine's resolver answers that a .invalid name does not exist (it needs a resolver that
    answers at all: with no network, the lookup fails as "no network" instead)."""
    try:
        socket.getaddrinfo(NOWHERE, 80)
    except socket.gaierror as error:
        return error.errno != socket.EAI_AGAIN
    return False


def url_for(cause, unused_port, silent_port):
    return {"refused": f"http://127.0.0.1:{unused_port}/v1", "name_not_found": f"http://{NOWHERE}/v1",
            "timed_out": f"http://127.0.0.1:{silent_port}/v1"}[cause]


def real_failure(url):
    """The exception the openai package raises for one request to url, tried once, waiting SHORT seconds."""
    import openai

    api = openai.OpenAI(base_url=url, api_key="none", timeout=SHORT, max_retries=0)
    with pytest.raises(openai.APIConnectionError) as caught:
        api.post("/chat/completions", body={"model": "m", "messages": []}, cast_to=object)
    return caught.value


def short_timeout(workspace):
    """The code under test with TIMEOUT = SHORT, as a learner would set it to try this."""
    code = (workspace / "backend.py").read_text()
    (workspace / "backend.py").write_text(re.sub(r"(?m)^TIMEOUT = \d+", f"TIMEOUT = {SHORT}", code, count=1))


def lines(text):
    """The lines a run printed, but the one that says there is no sandbox (on a machine without bubblewrap)."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith("note: no sandbox (")]


@pytest.mark.parametrize("name", FIXES)
@pytest.mark.parametrize("cause", CAUSES)
def test_each_cause_is_named_with_the_one_fix_for_the_backend(backend, cause, name, unused_port, silent_port):
    """explain() of a real failure names its cause, the server, and the fix for the backend in use; an OpenAI user
    is never sent to Groq."""
    if cause == "name_not_found" and not resolver_says_no_such_name():
        pytest.skip(f"this machine's resolver does not answer for {NOWHERE} (no network?)")
    url = url_for(cause, unused_port, silent_port)
    settings = {"name": "demo" if name == "base_url" else name, "base_url": url, "api_key": "none",
                "model": "qwen3" if name == "ollama" else "m", "url_given": name == "base_url"}
    said = backend.explain(real_failure(url), settings)
    assert CAUSES[cause] in said and url in said, said
    assert all(fix in said for fix in FIXES[name]) and "\n" not in said, said
    assert name != "openai" or "Groq" not in said, said


@pytest.mark.parametrize("cause", CAUSES)
def test_backend_py_says_it_in_one_error_line(workspace, cause, unused_port, silent_port):
    """`python backend.py` with a BASE_URL that cannot be reached: the note that no key was found, then one
    `error:` line naming the cause and BASE_URL; exit 1, no traceback, whatever the package retried."""
    if cause == "name_not_found" and not resolver_says_no_such_name():
        pytest.skip(f"this machine's resolver does not answer for {NOWHERE} (no network?)")
    short_timeout(workspace)
    url = url_for(cause, unused_port, silent_port)
    result = run_python(workspace, "backend.py", env={"BASE_URL": url})
    said = lines(result.stderr)
    assert result.returncode == 1 and len(said) == 2 and "Traceback" not in result.stderr, result.stderr
    assert said[0].startswith("note: no API key found") and said[1].startswith("error: "), said
    assert all(words in said[1] for words in (CAUSES[cause], url, "Check BASE_URL")), said[1]


def test_ollama_not_running_is_told_to_start(workspace):
    """BACKEND=ollama with no Ollama on its port: `ollama serve`, and the model to pull, in one error line."""
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", 11434)) == 0:
            pytest.skip("something listens on Ollama's port 11434 here")
    result = run_python(workspace, "backend.py", env={"BACKEND": "ollama"})
    assert result.returncode == 1 and lines(result.stderr) == [
        "error: Could not reach the ollama backend at http://localhost:11434/v1: Connection refused. Start Ollama: "
        "ollama serve (and once: ollama pull qwen3)."], result.stderr


def test_no_network_is_named_and_sends_you_to_it(workspace):
    """A Groq key and no network at all (a network namespace of its own, under bubblewrap): the lookup of
    api.groq.com fails, and the one error line says it is the network."""
    bwrap = shutil.which("bwrap")
    if not bwrap or subprocess.run([bwrap, "--dev-bind", "/", "/", "--unshare-net", "true"]).returncode:
        pytest.skip("no bubblewrap that can make a network namespace here")
    result = subprocess.run([bwrap, "--dev-bind", "/", "/", "--unshare-net", sys.executable, "backend.py"],
                            cwd=workspace, env=clean_env(GROQ_API_KEY="gsk_none"), capture_output=True, text=True,
                            timeout=60)
    said = lines(result.stderr)
    assert result.returncode == 1 and len(said) == 1 and "Traceback" not in result.stderr, result.stderr
    assert said[0].startswith("error: Could not reach the groq backend at https://api.groq.com/openai/v1: ")
    cause = said[0].split("/v1: ")[1]
    assert "network" in cause.lower() and cause.endswith("Check your network connection."), said[0]


def test_a_socks_proxy_without_socksio_names_the_package_to_install(workspace, unused_port):
    """ALL_PROXY=socks5://... needs socksio, which neither httpx (openai 2) nor httpx2 (openai 3) brings:
    the one error line says `pip install socksio`."""
    if subprocess.run([sys.executable, "-c", "import socksio"], capture_output=True).returncode == 0:
        pytest.skip("socksio is installed here, so a SOCKS proxy works")
    result = run_python(workspace, "backend.py", env={"GROQ_API_KEY": "gsk_none",
                                                      "ALL_PROXY": f"socks5://127.0.0.1:{unused_port}"})
    assert result.returncode == 1 and lines(result.stderr) == [
        "error: A proxy in your environment cannot be used: a SOCKS proxy needs the socksio package. Run pip "
        "install socksio, or unset ALL_PROXY (and HTTPS_PROXY)."], result.stderr


def test_openai_without_a_key_names_its_own_variable_not_groq(workspace):
    """BACKEND=openai with no key: the message names OPENAI_API_KEY, and sends nobody to a Groq key."""
    result = run_python(workspace, "backend.py", env={"BACKEND": "openai"})
    assert result.returncode == 1 and "OPENAI_API_KEY=..." in result.stderr, result.stderr
    assert "Groq" not in result.stderr and len(lines(result.stderr)) == 1, result.stderr


@pytest.mark.phase(7)
@pytest.mark.files("backend.py", "harness.py")
@pytest.mark.parametrize("cause", ["refused", "timed_out"])
def test_a_run_that_cannot_reach_the_server_prints_one_retry_note(workspace, cause, unused_port, silent_port):
    """`python harness.py` against a server that refuses, or never answers: the openai package tries 3 times,
    and stderr holds the no-key note, one note of the retries naming the cause and the tries, the error, the
    summary: four lines, no traceback."""
    short_timeout(workspace)
    result = run_python(workspace, "harness.py", "Say hi", env={"BASE_URL": url_for(cause, unused_port, silent_port)})
    said = lines(result.stderr)
    assert result.returncode == 1 and result.stdout == "stopped: provider error\n", result.stdout + result.stderr
    assert len(said) == 4 and "Traceback" not in result.stderr, result.stderr
    assert said[1].startswith(f"note: {NOTED[cause]}; "), said[1]
    assert "3 tries" in said[1] and "Retrying request" in said[1], said[1]
    assert said[2].startswith("error: ") and CAUSES[cause] in said[2] and "BASE_URL" in said[2], said[2]
    assert said[3].startswith("provider_error: "), said[3]


@pytest.mark.phase(7)
@pytest.mark.files("backend.py", "harness.py")
def test_a_server_error_every_time_is_one_retry_note_and_one_error(workspace, server):
    """A 500 on each of the package's 3 tries: one note naming the 500 and the tries, then one error, then the
    summary; the server got 3 requests."""
    server.push(*[{"status": 500, "body": {"error": {"message": "boom", "type": "internal_server_error"}}}] * 3)
    result = run_python(workspace, "harness.py", "Say hi", env=groq_env(server))
    said = lines(result.stderr)
    assert result.returncode == 1 and len(said) == 3 and len(server.requests) == 3, result.stderr
    assert "500" in said[0] and "3 tries" in said[0] and said[0].count("Retrying request") == 1, said[0]
    assert said[1].startswith("error: ") and "answered 500: boom" in said[1], said[1]
