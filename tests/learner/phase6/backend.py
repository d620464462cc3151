"""Phase 1 (learner's version): complete() sends one prompt, chat() a conversation with tools.

Run:  python backend.py ["your prompt"]   (harness.py uses chat(), and sends each reply back as assistant_message())
Picks Groq, OpenAI, Ollama or any OpenAI-compatible server from BACKEND / keys / MODEL / BASE_URL (see
.env.example); with no key it starts the offline demo model (demo_model.py in the repository) and says so.
"""
import json
import functools
import os
import socket
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import openai
from dotenv import load_dotenv

HERE = Path(__file__).resolve().parent
ENV_FILE = HERE / ".env"
load_dotenv(ENV_FILE)  # variables already in the environment win

BACKENDS = {
    "groq": {"base_url": "https://api.groq.com/openai/v1", "key_var": "GROQ_API_KEY", "model": "openai/gpt-oss-120b"},
    "openai": {"base_url": "https://api.openai.com/v1", "key_var": "OPENAI_API_KEY", "model": "gpt-5-mini"},
    "ollama": {"base_url": "http://localhost:11434/v1", "key_var": None, "model": "qwen3"},
    "demo": {"base_url": None, "key_var": None, "model": "demo"},  # demo_model.py, launched when needed
}
KEYED = [name for name, spec in BACKENDS.items() if spec["key_var"]]
TIMEOUT = 60  # seconds to wait for the server at each step (connecting, each piece of the reply)
PROMPT = "Say hello in one short sentence."  # what python backend.py sends with no words
THIS_MACHINE = {"localhost", "127.0.0.1", "::1"}  # reached directly, whatever proxy the environment names


class BackendError(Exception):
    """A problem with the model server, already worded for the person at the keyboard."""


def setting(name):
    """An environment variable, with "" counted as unset (.env.example leaves them empty)."""
    return os.environ.get(name) or None


def start_demo():
    """Start demo_model.py (found in this folder or a parent) on 127.0.0.1 and return its base URL."""
    for folder in (HERE, *HERE.parents):
        if (folder / "demo_model.py").is_file():
            sys.path.insert(0, str(folder))
            break
    try:
        import demo_model
    except ImportError:
        raise BackendError(f"No API key is set and demo_model.py was not found beside {HERE} or above it. "
                           f"Set GROQ_API_KEY in {ENV_FILE}, or run from the course repository.") from None
    return demo_model.start().url


def usable_url(url):
    """BASE_URL as given (spaces around it dropped), or None when unset; a BackendError when it is no http(s) URL."""
    url = (url or "").strip() or None
    if url and (urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc):
        raise BackendError(f"BASE_URL={url!r} is not a URL I can send requests to: it needs to start with "
                           "http:// or https://, for example http://localhost:1234/v1.")
    return url


def first_backend_with_a_key(base_url=None):
    """(the first backend whose API key is set, ""), else ("demo", the note that says so, for the front door)."""
    name = next((n for n in KEYED if setting(BACKENDS[n]["key_var"])), "demo")
    if name != "demo":
        return name, ""
    looked = " and ".join(BACKENDS[n]["key_var"] for n in KEYED)
    target = (f"the server at {base_url} (your BASE_URL), with no key" if base_url else
              "the offline demo model, which only understands simple file tasks")
    return name, (f"note: no API key found (looked for {looked} in {ENV_FILE} and the environment), so this runs "
                  f"on {target}.")


def choose(name=None, model=None, base_url=None):
    """Decide which server, key and model to use; the arguments win over the environment."""
    base_url = usable_url(base_url or setting("BASE_URL"))
    name, note = name or setting("BACKEND"), ""
    if not name:
        name, note = first_backend_with_a_key(base_url)
    if name not in BACKENDS:
        raise BackendError(f"BACKEND={name!r} is not a backend I know. Use one of: {', '.join(BACKENDS)} "
                           "(or leave BACKEND unset to pick by the key you have).")
    spec = BACKENDS[name]
    key_var = spec["key_var"]
    api_key = (setting(key_var) if key_var else None) or setting("API_KEY")
    if key_var and not api_key:
        raise BackendError(f"The {name} backend needs an API key, but {key_var} is not set in {ENV_FILE} or the "
                           f"environment. Put {key_var}=... in .env (README.md tells where to get one), "
                           "or unset BACKEND to fall back on the offline demo model.")
    return {
        "name": name,
        "base_url": base_url or spec["base_url"] or start_demo(),
        "api_key": api_key or "none",  # servers without keys still want some string
        "model": model or setting("MODEL") or spec["model"],
        "url_given": bool(base_url),
        "note": note,  # why this backend, when no key was found ("" otherwise)
    }


def where(backend):
    """How to name the server in a message: whose it is and where."""
    url, name = backend["base_url"], backend["name"]
    if backend.get("url_given"):
        return f"the server at {url} (your BASE_URL)"
    if name == "demo":
        return f"the offline demo model at {url}"
    return f"the {name} server at {url}"


def provider_words(error):
    """The provider's own error message from an APIStatusError."""
    body = error.body
    words = str(body or error.message)
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        words = str(inner.get("message") or words)
        if inner.get("failed_generation"):  # Groq: the tool call the model tried to make
            words = f"{words.rstrip('.')}. The model wrote: {inner['failed_generation']}"
    return words if words.rstrip().endswith((".", "!", "?")) else words.rstrip() + "."


def proxy_for(url):
    """The proxy the environment routes url through (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY), or None."""
    host, scheme = urlparse(url).hostname, urlparse(url).scheme
    if host in THIS_MACHINE or urllib.request.proxy_bypass(host):
        return None
    found = urllib.request.getproxies()
    return found.get(scheme) or found.get("all")


def cause(error):
    """Why a connection failed, in a few words, from the exceptions under the package's."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, ConnectionRefusedError):
            return "Connection refused"
        if isinstance(error, socket.gaierror):
            return "name not found (DNS)"
        if isinstance(error, (TimeoutError, socket.timeout)) or "timeout" in type(error).__name__.lower():
            return "timed out"
        if isinstance(error, OSError) and error.errno in (101, 113):  # ENETUNREACH, EHOSTUNREACH
            return "no network"
        response = getattr(error, "response", None)
        if response is not None and getattr(response, "status_code", None):
            return f"the server answered {response.status_code}"
        error, seen = error.__cause__ or error.__context__, seen + 1
    return "the connection failed"


def explain(error, backend):
    """One paragraph: which server (or proxy), what went wrong, what to change."""
    place = where(backend)
    proxy = proxy_for(backend["base_url"])
    if proxy and not isinstance(getattr(error, "body", None), dict):  # providers answer in JSON, proxies do not
        return (f"The proxy {proxy} from your environment did not pass the request on to {place} ({cause(error)}). "
                "Fix the proxy, or unset HTTPS_PROXY, HTTP_PROXY and ALL_PROXY.")
    if isinstance(error, openai.APIConnectionError):
        fix = ("Check or unset BASE_URL." if backend.get("url_given") else
               "Check your network, or for Ollama start `ollama serve`.")
        return f"Could not reach {place}: {cause(error)}. {fix}"
    if isinstance(error, openai.APIStatusError):
        status, said = error.status_code, provider_words(error)
        key_var = BACKENDS.get(backend["name"], {}).get("key_var") or "API_KEY"
        hints = {401: f"Check {key_var}: copy the key again, without quotes or spaces.",
                 403: f"The key in {key_var} is not allowed to do this; check your account.",
                 404: f"Check MODEL (now {backend['model']!r}) against the server's /models list, and BASE_URL.",
                 429: "You are sending too much; wait a little and try again."}
        fix = hints.get(status, "The server refused this request; the request itself needs fixing."
                        if status < 500 else "The server had trouble; try again later.")
        return f"{place} answered {status}: {said} {fix}"
    return f"{place} sent something that is not a chat completion ({error}). Check BASE_URL."


@functools.cache
def client(base_url, api_key):
    """An OpenAI client for any compatible server, one a server: it keeps its connection. A proxy from the
    environment is for the outside world: a server on this machine is reached directly."""
    try:
        http = openai.DefaultHttpxClient(trust_env=urlparse(base_url).hostname not in THIS_MACHINE)
    except ImportError as missing:  # ALL_PROXY=socks5://... without the socksio package
        raise BackendError(f"The proxy in your environment needs a package that is not installed: {missing}") from None
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=TIMEOUT, http_client=http)


def chat(messages, tools=None, backend=None):
    """Send the conversation and the tools the model may call; return the whole response (the reply itself is
    response.choices[0].message)."""
    backend = backend or choose()
    extra = {"tools": tools} if tools else {}  # some servers refuse an empty tools list
    try:
        return client(backend["base_url"], backend["api_key"]).chat.completions.create(
            model=backend["model"], messages=messages, **extra)
    except openai.APIError as error:
        raise BackendError(explain(error, backend)) from None


def complete(prompt, backend=None):
    """Send one prompt and return the reply's text."""
    return chat([{"role": "user", "content": prompt}], backend=backend).choices[0].message.content


def valid_json(arguments):
    """The call's arguments as JSON text the server will accept back ("{}" if they are not JSON)."""
    try:
        json.loads(arguments)
        return arguments
    except (TypeError, ValueError):
        return "{}"


def assistant_message(message):
    """The model's reply rebuilt by hand, as every server takes it back: SDK extras such as `reasoning` or
    `refusal` are refused by Groq."""
    plain = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        plain["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.function.name, "arguments": valid_json(c.function.arguments)}} for c in message.tool_calls]
    return plain


def main(argv):
    prompt = " ".join(argv) or PROMPT
    try:
        backend = choose()
        if backend["note"]:
            print(backend["note"], file=sys.stderr)
        print(complete(prompt, backend))
    except BackendError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
