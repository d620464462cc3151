"""Talk to a chat model through any OpenAI-compatible server: Groq, OpenAI, Ollama or the offline demo.

Run:  python backend.py                  (sends a short prompt and prints the reply)
      python backend.py "Why is the sky blue? One sentence."
Settings come from .env or the environment: BACKEND, MODEL, BASE_URL and the API keys (see .env.example).
Failures that may pass (rate limits, server errors, timeouts, broken streams, a model's unparsable tool call)
are retried here, and only here: the openai client's own retries are turned off. The openai package is
imported only when a request is made, so `python harness.py --help` does not wait for it.
"""
import functools
import os
import random
import sys
import time
from pathlib import Path

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
RETRIES = 3  # tries after the first, for failures that may pass
MAX_WAIT = 60  # seconds; a provider asking for a longer wait gets no retry
PROMPT = "Say hello in one short sentence."

load_dotenv(ENV_FILE)  # variables already set in the environment win over .env


class BackendError(Exception):
    """A configuration or provider problem, with a message that says how to fix it."""


class BrokenReply(Exception):
    """A reply that arrived broken: a stream that stopped early or sent garbage, a response with no choices."""


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
    # one client per server: it keeps the connection open between requests. Its own retries are off,
    # because chat() retries: two layers of retries would multiply (3 x 4 tries) and ignore the deadline.
    import openai  # here, not at the top: importing it takes most of a second

    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=TIMEOUT, max_retries=0)


def chat(messages, tools=None, backend=None, timeout=None, options=None, on_text=None):
    """Send the conversation, and the tools the model may call; return the whole response. The reply is
    response.choices[0].message, with its finish_reason beside it and the tokens used in response.usage.
    options (temperature, reasoning_effort, ...) go into the request, but never replace the loop's own
    model, messages and tools. timeout, when given, is all the time this request may take, retries
    included. on_text, when given, streams the reply: each piece of text goes to on_text as it arrives."""
    import openai

    backend = backend or choose()
    # options first, so that the loop's own model, messages and tools replace any of theirs
    request = {**(options or {}), "model": backend["model"], "messages": messages}
    if tools:
        request["tools"] = tools  # some servers reject an empty tools list
    deadline = time.monotonic() + (timeout if timeout is not None else TIMEOUT * (RETRIES + 1))
    for attempt in range(RETRIES + 1):
        try:
            left = min(TIMEOUT, deadline - time.monotonic())
            return send(backend, request, left, on_text)
        except (openai.APIError, BrokenReply) as error:
            wait = retry_wait(error, attempt)
            if wait is None or time.monotonic() + wait >= deadline:  # no use trying again, or no time
                raise BackendError(explain(error, backend)) from None
            when = f"in {wait:.1f} s" if wait else "now"
            print(f"note: {reason(error)}; trying again {when} ({attempt + 1} of {RETRIES})", file=sys.stderr)
            time.sleep(wait)


def send(backend, request, timeout, on_text):
    """One request, no retries: the response, or an exception saying what went wrong.
    It posts the body as it is (client.post): client.chat.completions.create() would first walk through
    every message to transform it, about 0.25 ms a message, which is 100 ms a request at 400 messages."""
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    api, options = client(backend["base_url"], backend["api_key"]), {"timeout": max(timeout, 0.01)}
    if on_text is None:
        response = api.post("/chat/completions", body=request, cast_to=ChatCompletion, options=options)
        if not getattr(response, "choices", None) or not response.choices[0].message:  # e.g. a 200 carrying {"error": ...}
            said = (getattr(response, "model_extra", None) or {}).get("error") or str(response)[:200]
            raise BrokenReply(f"the server answered without a reply: {said}")
        message = response.choices[0].message
        if not isinstance(message.content, (str, type(None))):  # some servers send a list of parts
            message.content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in message.content)
        return response
    stream = api.post("/chat/completions", body={**request, "stream": True, "stream_options": {"include_usage": True}},
                      cast_to=ChatCompletion, options=options, stream=True, stream_cls=openai.Stream[ChatCompletionChunk])
    try:
        return assemble(stream, on_text)
    except openai.APIError:
        raise  # an error event inside the stream, with the provider's own words
    except Exception as error:  # bad JSON, a dropped connection: the SDK raises whatever it met
        raise BrokenReply(f"the stream broke off: {error}") from None


def assemble(stream, on_text):
    """Build one whole response from a stream. Text goes to on_text as it arrives; each tool call is put
    together from its pieces, found by index (id and name come once, arguments may come in fragments);
    usage comes on the finish chunk (Groq) or a last chunk of its own (OpenAI), so the last one seen wins."""
    from openai.types.chat import ChatCompletion

    text, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            if choice.delta.content:
                text += choice.delta.content
                on_text(choice.delta.content)
            for part in choice.delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                call["id"] = part.id or call["id"]
                call["function"]["name"] += (part.function and part.function.name) or ""
                call["function"]["arguments"] += (part.function and part.function.arguments) or ""
            finish = choice.finish_reason or finish
    if finish is None:  # the SDK ends quietly when a stream stops early: only a finish_reason proves it ended
        raise BrokenReply("the stream ended before the model finished")
    message = {"role": "assistant", "content": text or None, "tool_calls": [calls[i] for i in sorted(calls)] or None}
    return ChatCompletion.model_validate({
        "id": "streamed", "object": "chat.completion", "created": 0, "model": "",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish if finish in ("length", "tool_calls", "content_filter") else "stop"}],
        "usage": usage and usage.model_dump()})


def retry_wait(error, attempt):
    """Seconds to wait before trying again, or None when trying again cannot help.

    Example: a 429 with retry-after: 2 -> 2.0;  a 503, first time -> about 0.5;  a 401 -> None
    """
    status = getattr(error, "status_code", None)
    if attempt >= RETRIES:
        return None
    if getattr(error, "code", None) == "tool_use_failed":
        return 0  # the model wrote a call the provider could not parse: asking again usually works
    if status is not None and status < 500 and status not in (408, 409, 429, 498):
        return None  # 400, 401, 403, 404, 413, 422: the same request will fail the same way
    headers = getattr(getattr(error, "response", None), "headers", {})
    if headers.get("retry-after-ms") or headers.get("retry-after"):  # the provider says how long
        try:
            asked = float(headers.get("retry-after-ms") or 0) / 1000 or float(headers["retry-after"])
        except ValueError:  # an HTTP date: rare enough to treat as "a while"
            asked = MAX_WAIT
        return asked if asked <= MAX_WAIT else None
    return min(0.5 * 2 ** attempt, 8) * random.uniform(0.75, 1)  # backoff, with jitter so clients spread out


def reason(error):
    """A few words on a failure, for the retry note. Example: "429 Rate limit reached ..." """
    body = getattr(error, "body", None)  # the provider's JSON error, or the text of an HTML page
    said = body.get("message") if isinstance(body, dict) else body if isinstance(body, str) else str(error)
    words = f"{getattr(error, 'status_code', '') or ''} {said}".strip()
    if isinstance(body, dict) and body.get("failed_generation") is not None:
        words += f" (the model wrote: {body['failed_generation'][:120]!r})"
    return words[:300]


def complete(prompt, backend=None):
    """Send one prompt and return the reply text."""
    return chat([{"role": "user", "content": prompt}], backend=backend).choices[0].message.content


def explain(error, backend):
    """Turn an openai exception into one paragraph: what went wrong, and what to change."""
    import openai

    where = f"the {backend['name']} server at {backend['base_url']}"
    key_var = BACKENDS[backend["name"]]["key_var"] or "API_KEY"
    if isinstance(error, openai.APIConnectionError):  # timeouts included
        return (f"Could not reach {where} ({error.message}). Check that the server is running, "
                "that BASE_URL is right (or unset it), and your network.")
    if isinstance(error, BrokenReply) or not hasattr(error, "status_code"):  # no HTTP status: a broken stream
        return (f"{where} sent a broken reply ({reason(error)}), and retrying did not help. "
                "Try again later, or without --stream.")
    status = getattr(error, "status_code", None)
    body = error.body if isinstance(error.body, dict) else {}  # the provider's own words, if it sent JSON
    fix = {
        401: f"The API key was refused: check {key_var} in .env, or make a new key.",
        403: "The key may not use this model or endpoint: check the key's permissions and MODEL.",
        404: f"Check MODEL ({backend['model']!r}) against the models the server lists at "
             f"{backend['base_url']}/models, and check BASE_URL.",
        429: "You hit the provider's rate limit, and retrying did not help: wait a minute, or use a smaller model.",
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
