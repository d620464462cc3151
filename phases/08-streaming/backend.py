"""Talk to a chat model through any OpenAI-compatible server: Groq, OpenAI, Ollama or the offline
demo.

Run:  python backend.py                  (sends a short prompt and prints the reply)
      python backend.py "Why is the sky blue? One sentence."
Settings come from .env or the environment: BACKEND, MODEL, BASE_URL and the API keys (see
.env.example). The openai package retries what may pass (rate limits, server errors, dropped
connections); chat() retries what only it can see: a reply that is no reply, a stream cut short, and
a tool call the provider could not parse.
"""
import functools
import json
import logging
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
RETRIES = 2  # tries after the first, for failures that may pass (the openai package's own default)
MAX_REPLY_CHARS = 1_000_000  # a reply longer than this is cut, and counts as unfinished
# and so is one with more tool calls: no turn needs them, and each costs a check
MAX_REPLY_CALLS = 128
# finish_reason as servers send it -> as the openai package knows it; any other means the answer is
# not finished
FINISHED = {"stop": "stop", "eos_token": "stop", "stop_sequence": "stop", "end_turn": "stop",
            "tool_calls": "tool_calls", "function_call": "tool_calls",
            "content_filter": "content_filter"}
PROMPT = "Say hello in one short sentence."

load_dotenv(ENV_FILE)  # variables already set in the environment win over .env


class BackendError(Exception):
    """A configuration or provider problem, with a message that says how to fix it."""


class BrokenReply(Exception):
    """An answer that is not a chat completion: no choices, a message of the wrong shape, missing
    calls."""


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
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=TIMEOUT, http_client=http,
                         max_retries=RETRIES)


def chat(messages, tools=None, backend=None, on_note=None, on_text=None):
    """Send the conversation and the tools; return the checked response (the reply:
    .choices[0].message). on_note hears of each retry; with on_text the reply streams to it."""
    backend = backend or choose()
    request = {"model": backend["model"], "messages": messages}
    if tools:
        request["tools"] = tools  # some servers reject an empty tools list
    api, shown = client(backend["base_url"], backend["api_key"]), []
    for attempt in range(RETRIES + 1):
        try:
            return send(api, request,
                        on_text and (lambda piece: (shown.append(piece), on_text(piece))), on_note)
        except (openai.APIError, BrokenReply) as error:
            body = getattr(error, "body", None)
            tool_use_failed = isinstance(body, dict) and body.get("code") == "tool_use_failed"
            if attempt == RETRIES or not (tool_use_failed or isinstance(error, BrokenReply)):
                raise BackendError(explain(error, backend)) from None
            if on_note:  # Groq says what the model wrote, in failed_generation
                said = (f"{error} (the model wrote: {body.get('failed_generation')!r})"
                        if tool_use_failed else error)
                on_note(f"{str(said)[:300]}; asking again ({attempt + 1} of {RETRIES})")
            if shown:  # the text on screen came from a reply that did not count
                on_text("\n[the reply starts again]\n")
                shown.clear()


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


def send(api, request, on_text=None, on_note=None):
    """One try: the checked response, or an exception that says what went wrong."""
    # the package logs its retries: on_note hears of the first
    heard = functools.partial(retried, on_note, [])
    logging.getLogger("openai._base_client").addFilter(heard)
    try:  # the JSON itself (cast_to=object), so that checked() sees what the server really sent
        if on_text:
            return streamed(api, request, on_text)
        return checked(api.post("/chat/completions", body=request, cast_to=object))
    except (ValueError, RecursionError) as error:  # a body that is no JSON, or JSON nested too deep
        raise BrokenReply(f"the reply is not JSON ({str(error)[:100]})") from None
    finally:
        logging.getLogger("openai._base_client").removeFilter(heard)


def retried(on_note, heard, record):
    """The first "Retrying request" the openai package logs in a send(): one note, naming what
    failed and the tries."""
    if on_note and not heard and record.getMessage().startswith("Retrying request"):
        heard.append(record)
        # it logs while it handles the failure: sys.exc_info() is that
        on_note(f"{cause(sys.exc_info()[1])}; the openai package makes {RETRIES + 1} tries in all: "
                f"{record.getMessage()}")
    return True  # shown too, where logging is set up to show the package's INFO


def streamed(api, request, on_text):
    """The reply to a streamed request, put together from the `data:` lines (read by hand: the
    openai package's reader fails on an event with no data, a `ping`); its text goes to on_text. No
    finish_reason: cut short."""
    # usage in the last chunk
    request = {**request, "stream": True, "stream_options": {"include_usage": True}}
    stream = api.post("/chat/completions", body=request, cast_to=object, stream=True,
                      stream_cls=openai.Stream[object])
    content, calls, finish, usage = "", [], None, None
    try:
        if "json" in stream.response.headers.get("content-type", ""):
            # an error, sent as JSON and not as a stream
            raise BrokenReply("the server answered with JSON: "
                              f"{stream.response.read()[:300].decode(errors='replace')}")
        for line in lines(stream.response):
            if len(content) > MAX_REPLY_CHARS or len(calls) > MAX_REPLY_CALLS:
                finish = "length"  # enough: reading on would only fill memory and time
                break
            # a byte order mark may come first
            data = line.lstrip("\ufeff").removeprefix("data:").strip()
            if data == line.strip() or data == "[DONE]":
                continue  # a comment, an id, an event name: no data
            chunk = json.loads(data)
            usage = chunk.get("usage") or usage
            if chunk.get("error"):  # the provider's own error, sent inside the stream
                raise BrokenReply(f"the stream sent an error: {chunk['error']}")
            for choice in [c for c in chunk.get("choices") or [] if c.get("index", 0) == 0]:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    content += delta["content"]
                    on_text(delta["content"])
                for piece in delta.get("tool_calls") or []:
                    add_piece(calls, piece)
                finish = choice.get("finish_reason") or finish
    except (ValueError, AttributeError, TypeError) as error:  # JSON that is no chunk
        raise BrokenReply(f"a stream chunk that is no chunk ({str(error)[:100]})") from None
    except BrokenReply:
        if finish is None:  # one that broke off after its finish_reason is whole
            raise
    finally:
        stream.response.close()
    if finish is None:
        raise BrokenReply("the stream ended before the model finished")
    return checked({"choices": [{"message": {"content": content or None,
                                             "tool_calls": calls or None},
                                 "finish_reason": finish}], "usage": usage})


def lines(response):
    """The response's lines as they arrive; the HTTP library's own errors mid-reply become
    BrokenReply."""
    reading = response.iter_lines()
    while True:
        try:
            yield next(reading)
        except StopIteration:
            return
        except Exception as error:  # whatever the HTTP library met
            raise BrokenReply(f"the stream broke off: {str(error)[:200]}") from None


def add_piece(calls, piece):
    """Add a streamed piece of a tool call to calls: to the call with its id, else its index, else
    the last call (OpenAI sends the id once and the index always, Ollama index 0 and new ids, some
    servers neither)."""
    function = piece.get("function") or {}
    name, arguments = function.get("name") or "", function.get("arguments") or ""
    by_id = [c for c in calls if piece.get("id") and c["id"] == piece["id"]]
    by_index = [c for c in calls if not piece.get("id") and piece.get("index") is not None and
                c["index"] == piece["index"]]
    last = (calls[-1:]
            if not piece.get("id") and piece.get("index") is None and not (name and whole(calls))
            else [])
    call = (by_id or by_index or last or [None])[-1]
    if call is None:
        call = {"id": piece.get("id") or "", "index": piece.get("index"), "type": "function",
                "function": {"name": "", "arguments": ""}}
        calls.append(call)
    if name != call["function"]["name"]:  # some servers send the whole name in every piece
        call["function"]["name"] += name
    call["function"]["arguments"] += (
        arguments if isinstance(arguments, str) else json.dumps(arguments)
    )


def whole(calls):
    """True when the last call's arguments so far are one whole JSON object."""
    try:
        return bool(calls) and isinstance(json.loads(calls[-1]["function"]["arguments"]), dict)
    except ValueError:
        return False


def checked(data):
    """The server's JSON as a ChatCompletion, else BrokenReply saying what is wrong; mended first:
    content as a list of parts, arguments as an object, a missing id, usage that does not count, an
    unknown finish_reason."""
    try:
        choice = next(c for c in data["choices"] if c.get("index", 0) == 0)
        # a str, or a list of parts: [{"type": "text", "text": "hi"}]
        content = choice["message"].get("content")
        if isinstance(content, list):
            content = "".join(str(part.get("text") or "") if isinstance(part, dict) else str(part)
                              for part in content)
        message = {**choice["message"], "role": "assistant", "content": content}
        for n, call in enumerate(message.get("tool_calls") or []):
            if call.get("type", "function") != "function":
                # ChatCompletion takes "custom" calls too: no tool here is
                raise KeyError("type")  # one, so the reply is no chat completion we can answer
            arguments = call["function"].get("arguments")
            call["function"]["arguments"] = (
                arguments if isinstance(arguments, str) else json.dumps(arguments or {})
            )
            call["id"] = str(call.get("id") or f"call_{n}")
    except (KeyError, TypeError, AttributeError, StopIteration):
        # an error sent with status 200
        said = data.get("error") if isinstance(data, dict) else None
        raise BrokenReply("the reply is not a chat completion: "
                          f"{str(said or data)[:200]}") from None
    finish = FINISHED.get(choice.get("finish_reason"), "length")
    if finish == "tool_calls" and not message.get("tool_calls"):
        raise BrokenReply("the reply announced tool calls and carries none")
    if len(message.get("content") or "") > MAX_REPLY_CHARS or len(message.get("tool_calls")
                                                                  or []) > MAX_REPLY_CALLS:
        message = {**message, "content": (message.get("content") or "")[:MAX_REPLY_CHARS],
                   "tool_calls": None}
        finish = "length"
    usage = data.get("usage")
    counted = (isinstance(usage, dict)
               and all(type(usage.get(n)) is int for n in ("prompt_tokens", "completion_tokens")))
    try:
        return openai.types.chat.ChatCompletion.model_validate({
            "id": "reply", "object": "chat.completion", "created": 0, "model": "",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
            if counted
            else None})
    except ValueError as error:  # pydantic's ValidationError: a field of the wrong type
        raise BrokenReply(f"the reply is not a chat completion: {str(error)[:300]}") from None


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
    if isinstance(error, BrokenReply):
        return (f"{where(backend)} sent a broken reply ({error}), and asking again did not "
                "help. Try again later.")
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
    if isinstance(error, openai.APITimeoutError):
        # it answers, only too slowly: a local model warming up
        return (f"{where(backend)} timed out: no answer within {TIMEOUT} s. A model can be that "
                "slow (a local one loading): raise TIMEOUT in backend.py, or try a smaller "
                f"MODEL. Else: {reach}")
    if isinstance(error, openai.APIConnectionError):
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
    wait = error.response.headers.get("retry-after")
    if status == 429 and wait:
        # the provider's own wait: too long for the openai package, or longer than its tries
        fix = (f"The provider asked for a wait of {wait} s (retry-after) before a new try: "
               "try again after that.")
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
