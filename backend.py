"""Talk to a chat model through any OpenAI-compatible server: Groq, OpenAI, Ollama or the offline demo.

Run:  python backend.py                  (sends a short prompt and prints the reply)
      python backend.py "Why is the sky blue? One sentence."
Settings come from .env or the environment: BACKEND, MODEL, BASE_URL and the API keys (see .env.example).
Failures that may pass (rate limits, server errors, timeouts, broken replies) are retried here, and only here;
every try is bounded in total time, not only between bytes, so a deadline is a deadline.
"""
import functools
import json
import math
import os
import queue
import random
import sys
import urllib.parse
import threading
import time
from pathlib import Path

from dotenv import load_dotenv

# name: where the server is, which variable holds its key, the model to ask for by default, and whether it takes
# a JSON schema for the answer (response_format) in the same request as tools
BACKENDS = {
    "groq": {"base_url": "https://api.groq.com/openai/v1", "key_var": "GROQ_API_KEY", "model": "openai/gpt-oss-120b",
             "schema_with_tools": False},
    "openai": {"base_url": "https://api.openai.com/v1", "key_var": "OPENAI_API_KEY", "model": "gpt-5-mini",
               "schema_with_tools": True},
    "ollama": {"base_url": "http://localhost:11434/v1", "key_var": None, "model": "qwen3", "schema_with_tools": False},
    "demo": {"base_url": None, "key_var": None, "model": "demo", "schema_with_tools": False},  # demo_model.py
}
ENV_FILE = Path(__file__).with_name(".env")
TIMEOUT = 60  # seconds one try may take in all, connecting, waiting and reading included
RETRIES = 3  # tries after the first, for failures that may pass
MAX_WAIT = 60  # seconds; a provider asking for a longer wait gets no retry
MAX_REPLY_CHARS = 1_000_000  # a reply longer than this is cut and counts as incomplete
MAX_REPLY_CALLS = 128  # and so is one with more tool calls: no turn needs them, and each costs a check and a record
# finish_reason as servers send it -> as the SDK's type knows it. TGI says eos_token and stop_sequence for a
# finished answer; any other reason not here ("error", Mistral's "model_length") means not finished: length.
FINISH_REASONS = {"stop": "stop", "eos_token": "stop", "stop_sequence": "stop", "end_turn": "stop",
                  "tool_calls": "tool_calls", "function_call": "tool_calls"}
PROMPT = "Say hello in one short sentence."

load_dotenv(ENV_FILE)  # variables already set in the environment win over .env


class BackendError(Exception):
    """A configuration or provider problem, with a message that says how to fix it."""


class OutOfTime(Exception):
    """The run's deadline passed while waiting for the model, or before a retry could be made."""


class BrokenReply(Exception):
    """A reply that is not one: a stream that stopped early or sent garbage, a body that is no response."""


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
            f"Put {key_var}=... in .env (see README.md for a free Groq key), or unset BACKEND to use the offline demo "
            "model.")
    base_url = usable_url(base_url or os.environ.get("BASE_URL"))
    return {
        "name": name,
        "base_url": base_url or BACKENDS[name]["base_url"] or start_demo(),
        "api_key": api_key or "none",  # keyless servers still need some string
        "model": model or os.environ.get("MODEL") or BACKENDS[name]["model"],
        "url_given": bool(base_url),  # for messages: the user's own URL, or the backend's
    }


def usable_url(url):
    """The URL, without the spaces or line end a copy and paste leaves around it, if requests can go to it; else a
    BackendError saying what one looks like. None (or nothing) stays None: the backend's own URL is used."""
    url = (url or "").strip()
    if not url:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0  # .port checks it
    except ValueError:  # a port that is no number ("PORT") or too big, a broken [IPv6] address
        usable = False
    if not usable or not url.isprintable() or " " in url:
        raise BackendError(f"BASE_URL={url!r} is not a URL I can send requests to: it needs http:// or https://, a "
                           "host, and a port number if any, as in http://localhost:1234/v1.")
    return url


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
    here = Path(__file__).resolve().parent
    # demo_model.py lies beside this file, or in the repository root when this is a phase folder's copy
    sys.path.append(str(next(folder for folder in (here, *here.parents) if (folder / "demo_model.py").exists())))
    import demo_model  # the standard library only, so it costs nothing when unused

    return demo_model.start().url


@functools.cache
def sdk():
    """The openai package, imported on first use: importing it takes most of a second, which
    `python harness.py --help` should not wait for."""
    import openai
    import openai.types.chat  # noqa: F401 (the response types, reached as openai.types.chat.ChatCompletion)

    return openai


CLIENTS = {}  # (base_url, api_key) -> an open client: it keeps the connection alive between requests
IDLE = []  # helper threads' job queues, waiting for the next request (see within)


def client(base_url, api_key):
    # The client's own retries are off, because chat() retries: two layers of retries would multiply (3 x 4
    # tries) and know nothing of the deadline.
    if (base_url, api_key) not in CLIENTS:
        CLIENTS[base_url, api_key] = sdk().OpenAI(base_url=base_url, api_key=api_key, timeout=TIMEOUT, max_retries=0)
    return CLIENTS[base_url, api_key]


def chat(messages, tools=None, backend=None, deadline=None, options=None, on_text=None, on_note=None):
    """Send the conversation, and the tools the model may call; return the whole response. The reply is
    response.choices[0].message, with its finish_reason beside it and the tokens used in response.usage.
    deadline (a time.monotonic()) is when it must all be done, retries included; without one, each try gets
    TIMEOUT. options (temperature, ...) go into the request, but never replace the loop's own model, messages and
    tools. on_text streams the reply: each piece of text goes to it as it arrives. on_note hears of each retry."""
    openai = sdk()
    backend = backend or choose()
    # options first, so that the loop's own model, messages and tools replace any of theirs
    options = {key: value for key, value in (options or {}).items() if key not in ("stream", "stream_options")}
    request = {**options, "model": backend["model"], "messages": messages}  # streaming is on_text's to decide
    if tools:
        request["tools"] = tools  # some servers reject an empty tools list
    once = Once(on_text) if on_text else None
    for attempt in range(RETRIES + 1):
        until = min(deadline or math.inf, time.monotonic() + TIMEOUT)
        try:
            response = within(until, send, backend, request, once and once.for_try(attempt))
            if once:
                once.end()
            return response
        except (openai.APIError, BrokenReply, TimeoutError) as error:
            if isinstance(error, TimeoutError) and until == deadline:
                raise OutOfTime("the deadline passed while the model was still answering") from None
            wait = retry_wait(error, attempt)
            if wait is None:
                raise BackendError(explain(error, backend, streamed=bool(on_text))) from None
            if deadline and time.monotonic() + wait >= deadline:  # no time for another try
                raise OutOfTime(f"the deadline came before a retry: {explain(error, backend, bool(on_text))}") from None
            shown = once.restart() if once else ""
            if on_note:
                on_note(f"{reason(error)}; trying again {f'in {wait:.1f} s' if wait else 'now'} "
                        f"({attempt + 1} of {RETRIES}){shown}")
            time.sleep(wait)


def within(until, function, *args):
    """function(*args), waited for until time.monotonic() reaches `until`, then given up on with TimeoutError. It
    runs on a helper thread, because a socket read has no total timeout: a server sending a byte a second would
    hold it for ever. A helper that is given up on is left to end at its next byte, the clients closed under it."""
    jobs = IDLE.pop() if IDLE else helper()
    box, done = {}, threading.Event()
    jobs.put((function, args, box, done))
    if not done.wait(max(until - time.monotonic(), 0)):
        stop_clients()
        raise TimeoutError
    IDLE.append(jobs)  # kept for the next request: starting a thread costs more than a fast model's reply
    if "error" in box:
        raise box["error"]
    return box["value"]


def helper():
    """A thread that runs the jobs put on its queue, one at a time; returns the queue."""
    jobs = queue.SimpleQueue()

    def serve():
        while True:
            function, args, box, done = jobs.get()
            try:
                box["value"] = function(*args)
            except BaseException as error:  # handed to the caller, who decides
                box["error"] = error
            done.set()

    threading.Thread(target=serve, daemon=True).start()
    return jobs


def stop_clients():
    """Close every open client, so a request still reading on another thread fails and ends."""
    for api in CLIENTS.values():
        api.close()
    CLIENTS.clear()


def send(backend, request, once):
    """One try, no retries: the response, or an exception saying what went wrong."""
    api = client(backend["base_url"], backend["api_key"])
    if once is None:
        return checked(post_chat(api, request))
    stream = post_chat(api, {**request, "stream": True, "stream_options": {"include_usage": True}})
    return assemble(stream, once)


def post_chat(api, request):
    """client.chat.completions.create(**request), without the SDK's work on each message: create() walks through
    every message to transform it, about 0.25 ms a message (100 ms a request at 400 messages, measured with
    tests/bench.py), while this posts the body as it is. The same request; a reply comes back as its JSON
    (cast_to=object), which checked() makes a ChatCompletion once it has checked it, or as a stream."""
    openai = sdk()
    stream = request.get("stream", False)
    try:
        return api.post("/chat/completions", body=request, cast_to=object, stream=stream,
                        stream_cls=openai.Stream[openai.types.chat.ChatCompletionChunk] if stream else None)
    except (ValueError, RecursionError) as error:  # a body that is not JSON, or JSON nested too deep; or ours
        unsendable(request)
        raise BrokenReply(f"the server's reply is not JSON ({str(error)[:100]})") from None


def unsendable(request):
    """Raise BackendError when the request itself is no JSON (a NaN in the options or in a schema): it is ours to
    fix, and retrying would only send it again. Asked only after a failure, so a good request costs nothing."""
    try:
        json.dumps(request, allow_nan=False)
    except (ValueError, TypeError, RecursionError) as error:
        raise BackendError(f"the request cannot be sent as JSON ({error}): check the options and the output "
                           "schema for NaN, Infinity or values that are not JSON") from None


def checked(data):
    """A non-streamed reply, as the server's JSON (see post_chat), checked and mended by completion(): its first
    choice's message, finish_reason and usage."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        said = data.get("error") if isinstance(data, dict) else None
        raise BrokenReply(f"the server answered without a reply: {str(said or data)[:200] or 'an empty body'}")
    choice = next((c for c in choices if isinstance(c, dict) and c.get("index") == 0), choices[0])
    return completion(choice.get("message"), choice.get("finish_reason"), data.get("usage"))


def completion(message, finish, usage):
    """The reply as the SDK's ChatCompletion, if it is one: a message with text content and tool calls of type
    function; else BrokenReply, saying what is wrong. What some servers send differently is mended first:
    content as a list of parts, arguments as an object, lone surrogates, a missing or number id (the harness
    gives it one), usage that does not count; a finish_reason the SDK does not know ("error", "model_length")
    counts as length, not finished; a reply longer than MAX_REPLY_CHARS is cut and marked length."""
    if not isinstance(message, dict):
        raise BrokenReply(f"the server answered without a message: {str(message)[:200]}")
    message = {**message, "role": "assistant", "content": text(message.get("content"))}
    calls = listed(message.get("tool_calls"), "tool_calls")
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if (not isinstance(function, dict) or call.get("type") != "function"
                or not isinstance(function.get("name"), str)):
            raise BrokenReply(f"a tool call that is not a function call: {str(call)[:200]}")
        arguments = function.get("arguments")
        function["arguments"] = text(arguments if isinstance(arguments, str) or arguments is None
                                     else json.dumps(arguments)) or ""
        call["id"] = call.get("id") if isinstance(call.get("id"), str) else ""
    size = len(message["content"] or "") + sum(len(call["function"]["arguments"]) for call in calls)
    if size > MAX_REPLY_CHARS or len(calls) > MAX_REPLY_CALLS:
        message["content"], calls, finish = (message["content"] or "")[:MAX_REPLY_CHARS], [], "length"
    counted = isinstance(usage, dict) and all(isinstance(usage.get(key), int) for key in
                                              ("prompt_tokens", "completion_tokens", "total_tokens"))
    finish = FINISH_REASONS.get(finish, finish if finish in (None, "length", "content_filter") else "length")
    try:
        return sdk().types.chat.ChatCompletion.model_validate({
            "id": "reply", "object": "chat.completion", "created": 0, "model": "",
            "choices": [{"index": 0, "message": {**message, "tool_calls": calls or None},
                         "finish_reason": finish or "stop"}],
            "usage": usage if counted else None})
    except ValueError as error:  # pydantic's ValidationError: a field of the wrong type
        raise BrokenReply(f"the reply is not a chat completion: {str(error)[:300]}") from None


def listed(value, field):
    """A field that must be a list (or absent: then []); anything else is a BrokenReply."""
    if not isinstance(value or [], list):
        raise BrokenReply(f"{field} is not a list: {str(value)[:200]}")
    return value or []


def text(content):
    """Content as a str (or None): a list of text parts joined, a lone surrogate replaced.

    Example: [{"type": "text", "text": "hi"}] -> "hi";  "a\\ud800b" -> "a?b"
    """
    if isinstance(content, list):
        content = "".join(str(part.get("text") or "") if isinstance(part, dict) else str(part) for part in content)
    if content is None or isinstance(content, str) and content.isascii():
        return content
    return str(content).encode("utf-8", errors="replace").decode("utf-8")


class Once:
    """Passes streamed text on, and across retries shows each piece once: a retry that repeats what is on screen
    already passes on only what is new; one that says something else starts on a new, marked line. A try that
    was given up on (it ran out of time) may still be reading: its pieces are dropped."""

    def __init__(self, on_text):
        self.on_text, self.shown, self.at, self.current = on_text, "", 0, 0

    def for_try(self, attempt):
        self.current = attempt
        return lambda piece: self.show(attempt, piece)

    def show(self, attempt, piece):
        if attempt != self.current:
            return
        if self.at < len(self.shown):  # a retry, still going over what was shown
            same = self.shown[self.at:self.at + len(piece)]
            if piece.startswith(same):
                self.at, piece = self.at + len(same), piece[len(same):]
            else:
                self.on_text("\n[the reply starts again]\n")
                self.shown, self.at = "", 0
        if piece:
            self.on_text(piece)
            self.shown, self.at = self.shown + piece, self.at + len(piece)

    def end(self):
        """After the try that counts: if it said less than was on screen, show what it said again, whole."""
        if self.at < len(self.shown):
            self.on_text("\n[the reply starts again]\n" + self.shown[:self.at])
            self.shown = self.shown[:self.at]

    def restart(self):
        """Before a retry: what was shown is kept, to compare with what comes next. Returns a note saying so."""
        self.at = 0
        return f"; {len(self.shown)} characters of it are on screen already" if self.shown else ""


def assemble(stream, on_text):
    """Build one whole response from a stream. Text goes to on_text as it arrives; each tool call is put together from
    its pieces (see add_piece: servers send them differently); usage comes on the finish chunk (Groq) or a chunk of
    its own (OpenAI), so the last one seen wins; only the first choice (index 0) counts. A stream that breaks after
    its finish chunk is complete; one that breaks before it, or sends a chunk that is no chunk, is a BrokenReply."""
    if "json" in stream.response.headers.get("content-type", ""):  # an error sent as JSON, not as a stream
        said = stream.response.read().decode("utf-8", errors="replace")
        raise BrokenReply(f"the server answered the stream request with JSON: {said[:300]}")
    parts, calls, finish, usage, size = {"content": "", "refusal": ""}, [], None, None, 0
    try:
        for chunk in chunks(stream):
            if size > MAX_REPLY_CHARS or len(calls) > MAX_REPLY_CALLS:
                finish = "length"  # enough: completion() cuts it, and reading on would only fill memory and time
                break
            usage = chunk.get("usage") or usage
            for choice in listed(chunk.get("choices"), "choices"):
                if not isinstance(choice, dict) or not isinstance(choice.get("delta") or {}, dict):
                    raise BrokenReply(f"a stream chunk that is no chunk: {str(chunk)[:200]}")
                if choice.get("index", 0) != 0:
                    continue  # another choice (a request for several): only the first counts
                delta = choice.get("delta") or {}
                for field in parts:
                    piece = text(delta.get(field)) or ""
                    parts[field], size = parts[field] + piece, size + len(piece)
                    if field == "content" and piece:
                        on_text(piece)
                for part in listed(delta.get("tool_calls"), "tool_calls"):
                    size += add_piece(calls, part)
                finish = choice.get("finish_reason") or finish
    except BrokenReply:
        if finish is None:
            raise
    if finish is None:  # the SDK ends quietly when a stream stops early: only a finish_reason proves it ended
        raise BrokenReply("the stream ended before the model finished")
    return completion({"role": "assistant", "content": parts["content"] or None, "refusal": parts["refusal"] or None,
                       "tool_calls": [{"id": c["id"], "type": "function", "function": c["function"]} for c in calls]},
                      finish, usage)


def chunks(stream):
    """The stream's chunks, as JSON objects, read from its events (see events()) rather than through the SDK,
    which takes the blank line after an `id:` line for an event and fails on it. Whatever breaks the stream (a
    dropped connection, bad JSON, a chunk that is no object) is a BrokenReply; an error the provider sends in
    the stream is an APIError, as the SDK raises it, with the provider's own words."""
    try:
        for data in events(stream.response.iter_lines()):
            if data == "[DONE]":
                return
            try:
                chunk = json.loads(data)
            except (ValueError, RecursionError) as error:
                raise BrokenReply(f"a stream chunk that is not JSON ({str(error)[:100]})") from None
            if not isinstance(chunk, dict):
                raise BrokenReply(f"a stream chunk that is no chunk: {str(chunk)[:200]}")
            if chunk.get("error"):
                said = chunk["error"].get("message") if isinstance(chunk["error"], dict) else chunk["error"]
                raise sdk().APIError(str(said), stream.response.request, body=chunk["error"])
            yield chunk
    finally:
        stream.response.close()


def events(lines):
    """The data of each server-sent event, read as the SSE standard says: the `data:` lines up to a blank line are
    one event (joined by line breaks); comments and `id:`, `event:` and `retry:` lines carry no data, and an
    event without data is none. A reading that breaks (a dropped connection) is a BrokenReply."""
    data = []
    while True:
        try:
            line = next(lines, None)
        except Exception as error:  # the HTTP library raises whatever it met
            raise BrokenReply(f"the stream broke off: {str(error)[:200]}") from None
        if line is None or not line:  # the end, or a blank line: an event is complete
            if data:
                yield "\n".join(data)
            data = []
            if line is None:
                return
        elif line.lstrip("\ufeff").startswith("data:"):  # a byte order mark may come first
            data.append(line.lstrip("\ufeff")[5:].removeprefix(" "))


def add_piece(calls, part):
    """Add one streamed tool-call piece (JSON) to calls (a list of {"index", "id", "function"} dicts), and return how
    many characters of arguments it added. A piece belongs to the call with its id; without an id, to the call with
    its index; without either, to the latest call, unless it names a tool once that call's arguments are whole (then
    it starts the next call). Servers differ: OpenAI sends a call's id once and its index always, Ollama index 0 for
    every call with its own id, some servers neither, and some a call's name in every piece."""
    if not isinstance(part, dict) or not isinstance(part.get("function") or {}, dict):
        raise BrokenReply(f"a tool call piece that is no piece: {str(part)[:200]}")
    index, call_id, function = part.get("index"), part.get("id") or "", part.get("function") or {}
    name, arguments = text(function.get("name")) or "", function.get("arguments") or ""
    if call_id:
        same = [call for call in calls if call["id"] == call_id]
    elif index is not None:
        same = [call for call in calls if call["index"] == index]
    else:
        same = calls[-1:] if calls and not (name and whole(calls[-1]["function"]["arguments"])) else []
    if same:
        call = same[-1]
    else:
        call = {"index": index, "id": call_id, "function": {"name": "", "arguments": ""}}
        calls.append(call)
    if name and not name.startswith(call["function"]["name"]):  # a name sent again whole is not added twice
        name = call["function"]["name"] + name
    call["function"]["name"] = name or call["function"]["name"]
    arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call["function"]["arguments"] += arguments
    return len(arguments)


def whole(arguments):
    """True when a call's arguments so far are one whole JSON object."""
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False


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
    asked = asked_wait(getattr(getattr(error, "response", None), "headers", None) or {})
    if asked is not None:
        return asked if asked <= MAX_WAIT else None
    return min(0.5 * 2 ** attempt, 8) * random.uniform(0.75, 1)  # backoff, with jitter so clients spread out


def asked_wait(headers):
    """The wait a provider asks for, in seconds, or None when it asks for none that makes sense.

    Example: {"retry-after-ms": "300"} -> 0.3;  {"retry-after": "2"} -> 2.0;
             {"retry-after": "<an HTTP date 2 s ahead>"} -> about 2.0;  {"retry-after": "-1"} -> None
    """
    for name, unit in (("retry-after-ms", 0.001), ("retry-after", 1)):
        value = headers.get(name)
        if not value:
            continue
        try:
            seconds = float(value) * unit
        except ValueError:
            from email.utils import parsedate_to_datetime  # rare: imported when a date comes

            try:
                seconds = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError, OverflowError):  # OverflowError: a year or zone too big
                continue
        if 0 < seconds < math.inf:
            return seconds
    return None


def reason(error):
    """A few words on a failure, for the retry note. Example: "429 Rate limit reached ..." """
    body = getattr(error, "body", None)  # the provider's JSON error, or the text of an HTML page
    said = body.get("message") if isinstance(body, dict) else body if isinstance(body, str) else str(error)
    words = f"{getattr(error, 'status_code', '') or ''} {said or type(error).__name__}".strip().rstrip(".")
    if isinstance(body, dict) and body.get("failed_generation") is not None:
        words += f" (the model wrote: {str(body['failed_generation'])[:120]!r})"
    return words[:300]


def complete(prompt, backend=None):
    """Send one prompt and return the reply text."""
    return chat([{"role": "user", "content": prompt}], backend=backend).choices[0].message.content


def where(backend):
    """The server, as the user configured it. Example: "the groq backend at https://api.groq.com/openai/v1" """
    if backend.get("url_given"):
        return f"the server at {backend['base_url']} (your BASE_URL, as the {backend['name']} backend)"
    if backend["name"] == "demo":
        return f"the offline demo model at {backend['base_url']}"
    return f"the {backend['name']} backend at {backend['base_url']}"


def explain(error, backend, streamed=False):
    """Turn a failure into one paragraph: what went wrong, where, and what to change."""
    openai = sdk()
    key_var = BACKENDS.get(backend["name"], {}).get("key_var") or "API_KEY"
    if isinstance(error, (openai.APITimeoutError, TimeoutError)):  # it answered too slowly, or not at all
        return (f"{where(backend)} did not finish answering within {TIMEOUT} s. A local model can be that slow: "
                "raise TIMEOUT in backend.py, or try a smaller model; else check that the server is running and "
                "that BASE_URL is right.")
    if isinstance(error, openai.APIConnectionError):
        said = getattr(error, "message", None) or "the connection failed"
        return (f"Could not reach {where(backend)}: {said.rstrip('.')}. Check that the server is running, that "
                "BASE_URL is right (or unset it), and your network.")
    if isinstance(error, BrokenReply) or not hasattr(error, "status_code"):  # no HTTP status: a broken reply
        return (f"{where(backend)} sent a broken reply ({reason(error)}), and retrying did not help. Try again later"
                + (", or without --stream." if streamed else "."))
    status = error.status_code
    body = error.body if isinstance(error.body, dict) else {}  # the provider's own words, if it sent JSON
    fix = {
        401: f"The API key was refused: check {key_var} in .env, or make a new key.",
        403: "The key may not use this model or endpoint: check the key's permissions and MODEL.",
        404: f"Check MODEL ({backend['model']!r}) against the models the server lists at "
             f"{backend['base_url']}/models, and check BASE_URL.",
        429: "You hit the provider's rate limit, and retrying did not help: wait a minute, or use a smaller model.",
    }.get(status, "The provider had a problem: try again in a minute." if status >= 500
          else "The server did not accept the request as it was built: see Troubleshooting in the lesson.")
    asked = asked_wait(getattr(getattr(error, "response", None), "headers", None) or {})
    if asked is not None and asked > MAX_WAIT:  # the provider's own wish, too long to wait here
        fix = (f"The provider asked for a wait of {asked:.0f} s, longer than MAX_WAIT ({MAX_WAIT} s), so this run "
               "did not wait: try again after that.")
    if body.get("code") == "tool_use_failed":  # Groq: the model wrote a call it could not parse
        fix = (f"The model wrote: {body.get('failed_generation')!r}. Run again or try another model, and send the "
               "tools on every request.")
    return f"{where(backend)} answered {status}: {body.get('message') or error.message} {fix}"


if __name__ == "__main__":
    try:
        print(complete(" ".join(sys.argv[1:]) or PROMPT))
    except (BackendError, OutOfTime) as error:
        sys.exit(f"error: {error}")
