"""Talk to a chat model through any OpenAI-compatible server: Groq, OpenAI, Ollama or the offline
demo.

Run:  python backend.py                  (sends a short prompt and prints the reply)
      python backend.py "Why is the sky blue? One sentence."
Settings come from .env or the environment: BACKEND, MODEL, BASE_URL and the API keys (see
.env.example).
"""
import functools
import json
import os
import socket
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import openai
from dotenv import load_dotenv

# name: where the server is, which variable holds its key, and the model to ask for by default
BACKENDS = {
    "groq": {"base_url": "https://api.groq.com/openai/v1", "key_var": "GROQ_API_KEY",
             "model": "openai/gpt-oss-120b"},
    "openai": {"base_url": "https://api.openai.com/v1", "key_var": "OPENAI_API_KEY",
               "model": "gpt-5-mini"},
    "ollama": {"base_url": "http://localhost:11434/v1", "key_var": None, "model": "qwen3"},
    # demo_model.py, started on demand
    "demo": {"base_url": None, "key_var": None, "model": "demo"},
}
ENV_FILE = Path(__file__).with_name(".env")
TIMEOUT = 60  # seconds to wait for the server at each step (connecting, each piece of the reply)
PROMPT = "Say hello in one short sentence."

load_dotenv(ENV_FILE)  # variables already set in the environment win over .env


class BackendError(Exception):
    """A configuration or provider problem, with a message that says how to fix it."""


def choose(name=None, model=None, base_url=None):
    """Pick a backend: the name given, else $BACKEND, else the first API key found, else the demo.
    Returns its settings: {"name": "groq", "base_url": ..., "api_key": "gsk_...", "model": ...,
    "url_given": False, "note": ""}; the note, when there is one, is for the front door to show."""
    base_url = usable_url(base_url or os.environ.get("BASE_URL"))
    name, note = name or os.environ.get("BACKEND"), ""
    if not name:
        name, note = first_backend_with_a_key(base_url)
    if name not in BACKENDS:
        raise BackendError(f"BACKEND={name!r} is not a backend I know. Use one of: "
                           f"{', '.join(BACKENDS)}.")
    key_var = BACKENDS[name]["key_var"]
    api_key = os.environ.get(key_var or "API_KEY") or os.environ.get("API_KEY")
    if key_var and not api_key:
        raise BackendError(
            f"The {name} backend needs an API key, but {key_var} is not set in {ENV_FILE} or the "
            f"environment. Put {key_var}=... in .env, or unset BACKEND to use the "
            "offline demo model.")
    return {
        "name": name,
        "base_url": base_url or BACKENDS[name]["base_url"] or start_demo(),
        "api_key": api_key or "none",  # keyless servers still need some string
        "model": model or os.environ.get("MODEL") or BACKENDS[name]["model"],
        "url_given": bool(base_url),  # for messages: your own server, or the backend's
        "note": note,  # why this backend, when no key was found
    }


def usable_url(url):
    """The URL stripped of what a paste leaves around it, or None; BackendError when requests cannot
    go to it.
    Example: usable_url(" http://localhost:1234/v1\\n") -> "http://localhost:1234/v1";
             "localhost:1234" -> error"""
    url = (url or "").strip()
    if not url:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        # .port checks it
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is no number ("PORT") or too big, a broken [IPv6] address
        usable = False
    if not usable or not url.isprintable() or " " in url:
        raise BackendError(f"BASE_URL={url!r} is not a URL I can send requests to: it needs "
                           "http:// or https://, a host, and a port number if any, as in "
                           "http://localhost:1234/v1.")
    return url


def first_backend_with_a_key(base_url=None):
    """(the first backend whose API key is set, ""), else ("demo", the note that says so)."""
    for name in ("groq", "openai"):
        if os.environ.get(BACKENDS[name]["key_var"]):
            return name, ""
    goes_to = f"the server at {base_url} (your BASE_URL), with no key" if base_url else \
        "the offline demo model, which only understands simple file tasks"
    return "demo", (f"no API key found (looked for GROQ_API_KEY and OPENAI_API_KEY in {ENV_FILE} "
                    f"and the environment), so this runs on {goes_to}.")


@functools.cache
def start_demo():
    """Start the offline demo model on a free port of 127.0.0.1 (once) and return its URL."""
    here = Path(__file__).resolve().parent
    # demo_model.py lies beside this file, or in the repository root when this is a phase folder's
    # copy
    folder = (next((folder for folder in (here, *here.parents)
                    if (folder / "demo_model.py").exists()), None))
    if folder is None:  # this file was copied out of the course
        raise BackendError("No API key is set, and the offline model (demo_model.py) is neither "
                           f"beside {here} nor above it. Set GROQ_API_KEY in {ENV_FILE}, or run "
                           "from the course's folder.")
    sys.path.append(str(folder))
    import demo_model  # the standard library only, so it costs nothing when unused

    return demo_model.start().url


@functools.cache
def client(base_url, api_key):
    """One client per server: it keeps the connection open between requests. A server on this
    machine is reached directly: a proxy from HTTP_PROXY or ALL_PROXY is for the network outside."""
    local = urllib.parse.urlsplit(base_url).hostname in ("localhost", "127.0.0.1", "::1")
    try:
        http = openai.DefaultHttpxClient(trust_env=not local)
    except ImportError:
        # socks5:// needs socksio, which httpx (openai 2) and httpx2 (openai 3) come without
        raise BackendError("A proxy in your environment cannot be used: a SOCKS proxy needs the "
                           "socksio package. Run pip install socksio, or unset "
                           "ALL_PROXY (and HTTPS_PROXY).") from None
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=TIMEOUT, http_client=http)


def chat(messages, tools=None, backend=None):
    """Send the conversation, and the tools the model may call; return the whole response. The reply
    is response.choices[0].message: its text, and the tool calls it asks for."""
    backend = backend or choose()
    options = {"tools": tools} if tools else {}  # some servers reject an empty tools list
    try:
        return client(backend["base_url"], backend["api_key"]).chat.completions.create(
            model=backend["model"], messages=messages, **options)
    except openai.APIError as error:
        raise BackendError(explain(error, backend)) from None


def assistant_message(message):
    """Rebuild the model's reply with only the fields every server accepts back (no 'reasoning' and
    such)."""
    reply = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        reply["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name,
                          "arguments": valid_json(call.function.arguments)}}
            for call in message.tool_calls]
    return reply


def valid_json(text):
    """The arguments to send back: the model's own if they parse, else "{}" (servers reject broken
    JSON)."""
    try:
        json.loads(text)
        return text
    except (TypeError, ValueError):
        return "{}"


def complete(prompt, backend=None):
    """Send one prompt and return the reply text."""
    return chat([{"role": "user", "content": prompt}], backend=backend).choices[0].message.content


def where(backend):
    """The server, as you configured it. Example: "the groq backend at
    https://api.groq.com/openai/v1" """
    if backend.get("url_given"):
        return f"the server at {backend['base_url']} (your BASE_URL)"
    if backend["name"] == "demo":
        return f"the offline demo model at {backend['base_url']}"
    return f"the {backend['name']} backend at {backend['base_url']}"


def proxy_for(url):
    """The proxy your environment sends requests for url through, or None. Example:
    "http://proxy:3128" """
    parts = urllib.parse.urlsplit(url)
    if parts.hostname in ("localhost", "127.0.0.1",
                          "::1") or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


def cause(error):
    """Why a connection failed, in the words of the exception under the openai package's and the
    HTTP library's: the system's. Example: APIConnectionError <- ConnectError <-
    ConnectionRefusedError -> "Connection refused" """
    while error.__cause__ or error.__context__:
        error = error.__cause__ or error.__context__
    if isinstance(error, socket.gaierror):
        # each system words it its own way; EAI_AGAIN: no DNS server answered
        return ("no network (no DNS server answered)" if error.errno == socket.EAI_AGAIN
                else "name not found (DNS)")
    return getattr(error, "strerror", None) or str(error).split("\n")[0]


def explain(error, backend):
    """Turn an openai exception into one paragraph: what went wrong, where, and what to change."""
    key_var = BACKENDS.get(backend["name"], {}).get("key_var") or "API_KEY"
    body, proxy = getattr(error, "body", None), proxy_for(backend["base_url"])
    # what to do when the server cannot be reached: Groq, OpenAI
    reach = "Check your network connection."
    if backend["name"] == "ollama":
        reach = f"Start Ollama: ollama serve (and once: ollama pull {backend['model']})."
    if backend.get("url_given"):
        reach = "Check BASE_URL (or unset it), and that your server is running there."
    if proxy and (isinstance(error, openai.APIConnectionError) or not isinstance(body, dict)):
        said = getattr(error, "status_code", None) or cause(error)  # a provider answers in JSON
        return (f"The proxy {proxy} (from your environment) did not pass the request on to "
                f"{where(backend)}: {said}. Check the proxy, or unset HTTPS_PROXY, "
                "HTTP_PROXY and ALL_PROXY.")
    if isinstance(error, openai.APIConnectionError):  # timeouts included
        return f"Could not reach {where(backend)}: {cause(error)}. {reach}"
    status = getattr(error, "status_code", None)
    if status is None:  # an answer, but not one the package could read as a chat completion
        return (f"{where(backend)} sent a reply that is not a chat completion: "
                f"{error.message}. Check BASE_URL.")
    fix = {
        401: f"The API key was refused: check {key_var} in .env, or make a new key.",
        403: "The key may not use this model or endpoint: check the key's permissions and MODEL.",
        404: f"Check MODEL ({backend['model']!r}) against the models the server lists at "
             f"{backend['base_url']}/models, and check BASE_URL.",
        429: "You hit the provider's rate limit: wait a minute, or use a smaller model.",
    }.get(status, "The provider had a problem: try again in a minute." if status >= 500
          else "The server did not accept the request as it was built: see "
               "Troubleshooting in the lesson.")
    # the provider's own words
    said = body.get("message") if isinstance(body, dict) else error.message
    if isinstance(body, dict) and body.get("code") == "tool_use_failed":
        # Groq: a call it could not parse
        fix = (f"The model wrote: {body.get('failed_generation')!r}. Run again or try another "
               "model, and send the tools on every request.")
    return f"{where(backend)} answered {status}: {said} {fix}"


if __name__ == "__main__":
    try:
        chosen = choose()
        if chosen["note"]:
            print(f"note: {chosen['note']}", file=sys.stderr)
        print(complete(" ".join(sys.argv[1:]) or PROMPT, chosen))
    except BackendError as error:
        sys.exit(f"error: {error}")
