"""Talk to a chat model through any OpenAI-compatible server: Groq, OpenAI, Ollama or the offline demo.

Run:  python backend.py                  (sends a short prompt and prints the reply)
      python backend.py "Why is the sky blue? One sentence."
Settings come from .env or the environment: BACKEND, MODEL, BASE_URL and the API keys (see .env.example).
"""
import functools
import os
import sys
from pathlib import Path

import openai
from dotenv import load_dotenv

# name: where the server is, which variable holds its key, and the model to ask for by default
BACKENDS = {
    "groq": {"base_url": "https://api.groq.com/openai/v1", "key_var": "GROQ_API_KEY", "model": "openai/gpt-oss-120b"},
    "openai": {"base_url": "https://api.openai.com/v1", "key_var": "OPENAI_API_KEY", "model": "gpt-5-mini"},
    "ollama": {"base_url": "http://localhost:11434/v1", "key_var": None, "model": "qwen3"},
    "demo": {"base_url": None, "key_var": None, "model": "demo"},  # demo_model.py, started on demand
}
ENV_FILE = Path(__file__).with_name(".env")
TIMEOUT = 60  # seconds to wait for one reply
PROMPT = "Say hello in one short sentence."

load_dotenv(ENV_FILE)  # variables already set in the environment win over .env


class BackendError(Exception):
    """A configuration or provider problem, with a message that says how to fix it."""


def choose(name=None, model=None, base_url=None):
    """Pick a backend: the name given, else $BACKEND, else the first API key found, else the demo.

    Returns its settings, e.g. {"name": "groq", "base_url": "https://api.groq.com/openai/v1",
    "api_key": "gsk_...", "model": "openai/gpt-oss-120b"}.
    """
    name = name or os.environ.get("BACKEND") or first_backend_with_a_key()
    if name not in BACKENDS:
        raise BackendError(f"BACKEND={name!r} is not a backend I know. Use one of: {', '.join(BACKENDS)}.")
    key_var = BACKENDS[name]["key_var"]
    api_key = os.environ.get(key_var or "API_KEY") or os.environ.get("API_KEY")
    if key_var and not api_key:
        raise BackendError(
            f"The {name} backend needs an API key, but {key_var} is not set in {ENV_FILE} or the environment. "
            f"Put {key_var}=... in .env (see README.md for a free Groq key), or unset BACKEND to use the offline demo model.")
    return {
        "name": name,
        "base_url": base_url or os.environ.get("BASE_URL") or BACKENDS[name]["base_url"] or start_demo(),
        "api_key": api_key or "none",  # keyless servers still need some string
        "model": model or os.environ.get("MODEL") or BACKENDS[name]["model"],
    }


def first_backend_with_a_key():
    for name in ("groq", "openai"):
        if os.environ.get(BACKENDS[name]["key_var"]):
            return name
    print(f"note: no API key found (looked for GROQ_API_KEY and OPENAI_API_KEY in {ENV_FILE} and the environment), "
          "so this runs on the offline demo model, which only understands simple file tasks.", file=sys.stderr)
    return "demo"


@functools.cache
def start_demo():
    """Start the offline demo model on a free port of 127.0.0.1 (once) and return its URL."""
    import demo_model  # the standard library only, so it costs nothing when unused

    return demo_model.start().url


@functools.cache
def client(base_url, api_key):
    # one client per server: it keeps the connection open between requests
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=TIMEOUT)


def chat(messages, tools=None, backend=None, timeout=None, options=None):
    """Send the conversation, and the tools the model may call; return the whole response. The reply is
    response.choices[0].message, with its finish_reason beside it and the tokens used in response.usage.
    options (temperature, reasoning_effort, ...) go into the request, but never replace the loop's own
    model, messages and tools. timeout, when given, is all the time this request may take."""
    backend = backend or choose()
    request = {"model": backend["model"], "messages": messages, **({"tools": tools} if tools else {})}
    extra = {key: value for key, value in (options or {}).items() if key not in ("model", "messages", "tools")}
    api = client(backend["base_url"], backend["api_key"])
    if timeout is not None:  # a deadline: no time to wait for the client's own retries either
        api = api.with_options(timeout=max(timeout, 0.01), max_retries=0)
    try:
        return api.chat.completions.create(**request, extra_body=extra or None)
    except openai.APIError as error:
        raise BackendError(explain(error, backend)) from None


def complete(prompt, backend=None):
    """Send one prompt and return the reply text."""
    return chat([{"role": "user", "content": prompt}], backend=backend).choices[0].message.content


def explain(error, backend):
    """Turn an openai exception into one paragraph: what went wrong, and what to change."""
    where = f"the {backend['name']} server at {backend['base_url']}"
    key_var = BACKENDS[backend["name"]]["key_var"] or "API_KEY"
    if isinstance(error, openai.APIConnectionError):  # timeouts included
        return (f"Could not reach {where} ({error.message}). Check that the server is running, "
                "that BASE_URL is right (or unset it), and your network.")
    status = getattr(error, "status_code", None)
    body = error.body if isinstance(error.body, dict) else {}  # the provider's own words, if it sent JSON
    fix = {
        401: f"The API key was refused: check {key_var} in .env, or make a new key.",
        403: "The key may not use this model or endpoint: check the key's permissions and MODEL.",
        404: f"Check MODEL ({backend['model']!r}) against the models the server lists at "
             f"{backend['base_url']}/models, and check BASE_URL.",
        429: "You hit the provider's rate limit: wait a minute and try again, or use a smaller model.",
    }.get(status, "The provider had a problem: try again in a minute." if (status or 0) >= 500
          else "The server did not accept the request as it was built: see Troubleshooting in the lesson.")
    if body.get("code") == "tool_use_failed":  # Groq: the model wrote a call it could not parse
        fix = f"The model wrote: {body.get('failed_generation')!r}. Run again or try another model, and send the tools on every request."
    return f"{where} answered {status}: {body.get('message') or error.message} {fix}"


if __name__ == "__main__":
    try:
        print(complete(" ".join(sys.argv[1:]) or PROMPT))
    except BackendError as error:
        sys.exit(f"error: {error}")
