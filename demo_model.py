r"""The offline demo model: a tiny rule-based "model" behind a real Chat Completions endpoint.

It speaks the Groq/OpenAI wire format (JSON, and SSE when "stream" is true), rejects what Groq or
OpenAI would reject, and answers simple file tasks with tool calls. Tests script its replies.

Run it:  python demo_model.py [--port 8000] [--key KEY] [--script replies.json]
Try it:  curl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \
           -d '{"model": "demo", "messages": [{"role": "user", "content": "hi"}]}'
"""
import argparse
import difflib
import hashlib
import json
import re
import sys
import threading
import time
import uuid
from collections import deque
from http.client import responses as STATUS_TEXT
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DEFAULT_PORT = 8000
MODEL = "demo"                  # always served; start(models=[...]) adds more names
FINGERPRINT = "fp_demo"
POLL_SECONDS = 0.01             # stop() waits up to this long: short, so each test stops its server fast
WORDS_PER_PIECE = 4             # a streamed answer arrives a few words at a time
MAX_ENTRIES = 30                # directory entries named in an answer
MAX_MATCHES = 8                 # matching lines quoted from a file
FIRST_LINES = 5                 # lines quoted from a file when none matches the task
SHELL_LINES = 15                # lines quoted from a command's output
KNOWN_TOOLS = ("run_shell", "list_dir", "read_file", "write_file")  # the harness's tools

# Request fields Groq accepts; anything else is a 400 that names it.
TOP_LEVEL_KEYS = (
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "max_completion_tokens",
    "max_tokens", "stream", "stream_options", "temperature", "top_p", "stop", "seed", "n",
    "response_format", "user", "reasoning_effort", "reasoning_format", "include_reasoning",
    "service_tier", "frequency_penalty", "presence_penalty", "metadata", "store",
)
# Keys each role may carry. Note what is missing: reasoning, name, index...
MESSAGE_KEYS = {
    "system": {"role", "content"},
    "developer": {"role", "content"},
    "user": {"role", "content"},
    "assistant": {"role", "content", "tool_calls"},
    "tool": {"role", "tool_call_id", "content"},
}
# The SDK's message.model_dump() adds these as null/[]; tolerated only while they are empty.
SDK_EMPTY_FIELDS = ("refusal", "annotations", "audio", "function_call")
ROLES_TEXT = "'system', 'assistant', 'user', 'function', 'tool', and 'developer'"

LIST_WORDS = re.compile(r"\b(list|files|directory|folder|ls)\b", re.IGNORECASE)
WRITE_WORDS = re.compile(r"\b(write|create|save)\b", re.IGNORECASE)
NOT_FILE_NAMES = {"e.g", "i.e"}
STOPWORDS = set(
    "list files file here then read tell which what that this with from show please about does there "
    "directory folder contents give could would should into them they have some each line lines "
    "answer look find want where when your also just only command output print open need know "
    "whole entire".split()
)

HELLO = ("Hello! I am the offline demo model: I run on your machine, with no network and no API key. "
         "I only understand simple file tasks: give me tools and ask me to list the files, read a file "
         "by name, or run a command written in backticks.")
HELP = ("I am the offline demo model, so I only understand simple file tasks: ask me to list the files, "
        "read a file by name (for example README.md), or run a command written in backticks. "
        "For a real model, set GROQ_API_KEY (see README.md).")


# ---------------------------------------------------------------------------------------------
# Errors and strict validation: the same 400s Groq and OpenAI send, so buggy loops fail here too.

def error(status, message, param=None, code=None, **extra):
    """A reply spec for an error. Example: error(404, "gone") -> {"status": 404, "body": {"error": ...}}"""
    err = {"message": message, "type": "invalid_request_error"}
    if param is not None:
        err["param"] = param
    if code is not None:
        err["code"] = code
    err.update(extra)
    return {"status": status, "body": {"error": err}}


def check_top_level(body):
    for key in body:
        if key not in TOP_LEVEL_KEYS:
            close = difflib.get_close_matches(key, TOP_LEVEL_KEYS, n=1)
            hint = f", did you mean '{close[0]}'?" if close else ""
            return error(400, f"property '{key}' is unsupported{hint}")
    if body.get("n", 1) != 1:
        return error(400, "'n' : only n=1 is supported", param="n")
    if "messages" not in body:
        return error(400, "property 'messages' is missing", param="messages")
    if not isinstance(body["messages"], list) or not body["messages"]:
        return error(400, "'messages' : value must be a non-empty array", param="messages")
    if not body.get("tools"):
        for key in ("tool_choice", "parallel_tool_calls"):
            if body.get(key) is not None:
                return error(400, f"Invalid value for '{key}': '{key}' is only allowed when 'tools' "
                                  "are specified.", param=key)
    return None


def check_tools(tools):
    if tools is None:
        return None
    if not isinstance(tools, list):
        return error(400, "'tools' : value must be an array", param="tools")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            return error(400, f"tools[{i}].type must be one of [function, mcp]")
        fn = tool.get("function")
        if not isinstance(fn, dict):
            return error(400, f"tools[{i}].function must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name):
            return error(400, f"tools[{i}].function.name must be 1 to 64 letters, digits, _ or -, "
                              f"got {json.dumps(name)}")
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            return error(400, f"tools[{i}].function.parameters must be a JSON Schema object")
    return None


def exact_keys(at, value, keys):
    """The first problem with an object that must have exactly these keys, or None."""
    if not isinstance(value, dict):
        return f"('{at}' : value must be an object)"
    extra = [k for k in value if k not in keys]
    if extra:
        return f"('{at}' : property '{extra[0]}' is unsupported)"
    missing = [k for k in keys if k not in value]
    if missing:
        return f"('{at}.{missing[0]}' : property '{missing[0]}' is missing)"
    return None


def check_tool_calls(where, calls):
    """The first problem with an assistant message's tool_calls, in Groq's words, or None."""
    if not isinstance(calls, list):
        return f"('{where}.tool_calls' : value must be an array)"
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls.{j}"
        problem = (exact_keys(at, call, ("id", "type", "function"))  # an SDK-echoed "index" fails here
                   or exact_keys(f"{at}.function", call["function"], ("name", "arguments")))
        if problem:
            return problem
        if not isinstance(call["id"], str) or not call["id"]:
            return f"('{at}.id' : value must be a non-empty string)"
        if call["id"] in [other.get("id") for other in calls[:j] if isinstance(other, dict)]:
            return f"('{at}.id' : duplicate tool call id '{call['id']}' in one message)"  # the demo's words
        if call["type"] != "function":
            return f"('{at}.type' : value must be 'function')"
        arguments = call["function"]["arguments"]
        if not isinstance(arguments, str):
            return f"('{at}.function.arguments' : value must be a string)"
        try:
            json.loads(arguments)
        except ValueError:
            return f"('{at}.function.arguments' : value must be a string containing valid JSON)"
    return None


def check_fields(where, role, msg):
    """The first problem with a message's fields, in Groq's words, or None."""
    content = msg.get("content")
    if role == "tool":
        if "tool_call_id" not in msg:
            return f"('{where}.tool_call_id' : property 'tool_call_id' is missing)"
        if not isinstance(msg["tool_call_id"], str):
            return f"('{where}.tool_call_id' : value must be a string)"
    if role in ("system", "developer", "tool") and not isinstance(content, str):
        return f"('{where}.content' : value must be a string)"
    if role == "user":
        parts = isinstance(content, list) and all(isinstance(p, dict) and "type" in p for p in content)
        if not isinstance(content, str) and not parts:
            return f"('{where}.content' : value must be a string or an array of content parts)"
    if role == "assistant":
        calls = msg.get("tool_calls")
        if calls is not None:
            problem = check_tool_calls(where, calls)
            if problem:
                return problem
        if not isinstance(content, str) and not (content is None and calls):
            return f"('{where}.content' : value must be a string)"
    return None


def check_message(i, msg):
    where = f"messages.{i}"
    if not isinstance(msg, dict):
        return error(400, f"'{where}' : value must be an object")
    role = msg.get("role")
    if role is None:
        return error(400, f"'{where}' : property 'role' is missing")
    if role == "function":
        return error(400, f"'{where}' : role 'function' is the old form of 'tool': send a 'tool' message")
    if role not in MESSAGE_KEYS:
        return error(400, f"Invalid value: '{role}'. Supported values are: {ROLES_TEXT}.",
                     param=f"messages.[{i}].role", code="invalid_value")
    if role == "assistant" and msg.get("tool_calls") == []:
        # OpenAI's rule: leave tool_calls out rather than sending an empty list
        return error(400, f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array with "
                          "minimum length 1, but got an empty array instead.",
                     param=f"messages[{i}].tool_calls", code="empty_array")
    unsupported = [k for k in msg if k not in MESSAGE_KEYS[role]
                   and not (k in SDK_EMPTY_FIELDS and not msg[k])]
    # Groq lists every unsupported key of the message; past those, the first problem is enough.
    problems = [f"('{where}' : property '{k}' is unsupported)" for k in unsupported]
    if not problems:
        problem = check_fields(where, role, msg)
        problems = [problem] if problem else []
    if problems:
        return error(400, f"'{where}' : for 'role:{role}' the following must be satisfied"
                          f"[{', '.join(problems)}]")
    return None


def check_pairing(messages):
    """OpenAI's rules: each tool call answered by tool messages right after it, and nothing else."""
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg["role"] == "tool":
            return error(400, "Invalid parameter: messages with role 'tool' must be a response to a "
                              "preceeding message with 'tool_calls'.", param=f"messages.[{i}].role")
        i += 1
        if msg["role"] != "assistant" or not msg.get("tool_calls"):
            continue
        ids = [call["id"] for call in msg["tool_calls"]]
        answered = set()
        while i < len(messages) and messages[i]["role"] == "tool":
            call_id = messages[i]["tool_call_id"]
            if call_id not in ids:
                return error(400, f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                                  "'tool_calls' of previous message.",
                             param=f"messages.[{i}].tool_call_id")
            answered.add(call_id)
            i += 1
        missing = [call_id for call_id in dict.fromkeys(ids) if call_id not in answered]
        if missing:
            return error(400, "An assistant message with 'tool_calls' must be followed by tool messages "
                              "responding to each 'tool_call_id'. The following tool_call_ids did not "
                              f"have response messages: {', '.join(missing)}",
                         param=f"messages.[{i}].role" if i < len(messages) else "messages")
    return None


def validate(body):
    """The first reason to reject a chat request (as an error reply spec), or None."""
    problem = check_top_level(body) or check_tools(body.get("tools"))
    if problem:
        return problem
    for i, msg in enumerate(body["messages"]):
        problem = check_message(i, msg)
        if problem:
            return problem
    return check_pairing(body["messages"])


# ---------------------------------------------------------------------------------------------
# The demo policy: deterministic rules over the task and the tool results so far.

def text_of(content):
    """Message content as plain text. Example: [{"type": "text", "text": "hi"}] -> "hi" """
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def parse_arguments(arguments):
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def tool_history(messages):
    """The calls made so far, paired with their results: [(name, arguments dict, result text), ...]."""
    results = {m.get("tool_call_id"): text_of(m.get("content")) for m in messages if m.get("role") == "tool"}
    done = []
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            if call.get("id") in results:
                done.append((fn.get("name"), parse_arguments(fn.get("arguments")), results[call["id"]]))
    return done


def file_names(text):
    """Paths mentioned in text: names with an extension, dotfiles, anything with a slash.

    Example: "read a.txt, .env and ../b, not 3.5 or e.g." -> ["a.txt", ".env", "../b"]
    """
    names = []
    for word in text.split():
        name = word.rstrip(",;:!?)").rstrip(".").lstrip("(")
        looks_like_a_path = "/" in name or re.fullmatch(r"\.?[\w-]*\.[\w.-]*[A-Za-z][\w.-]*", name)
        if looks_like_a_path and name not in NOT_FILE_NAMES and name not in names:
            names.append(name)
    return names


def prose(task):
    """The task with commands, quoted text and URLs blanked out, keeping positions: their words are not requests."""
    return re.sub(r'`[^`]*`|"[^"]*"|\w+://\S+', lambda m: " " * len(m.group()), task)


def plan(task, tools):
    """The tool calls the task asks for, in the order the task mentions them, as (name, arguments)."""
    commands = re.finditer(r"`([^`]+)`", task)
    steps = [(m.start(), "run_shell", {"command": m.group(1).strip()}) for m in commands]
    outside = prose(task)
    listing = LIST_WORDS.search(outside)
    if listing:
        steps.append((listing.start(), "list_dir", {"path": "."}))
    text = re.search(r'"([^"]*)"', task)
    for name in file_names(outside):
        if WRITE_WORDS.search(outside) and text and "write_file" in tools:
            # "text" is a first guess, as real models make; the harness's error shows the right name
            steps.append((outside.index(name), "write_file", {"path": name, "text": text.group(1) + "\n"}))
        else:
            steps.append((outside.index(name), "read_file", {"path": name}))
    return [(name, args) for _, name, args in sorted(steps, key=lambda s: s[0]) if name in tools]


def listed_names(done):
    """The names in the latest directory listing, or None when there is none to trust."""
    results = [result for name, _, result in done if name == "list_dir" and not is_error(result)]
    if not results:
        return None
    return {word.rstrip("/") for line in results[-1].splitlines() for word in line.split()}


def corrected(args, error):
    """The arguments an error asks for with "Call it as {...}": its shape, filled in from ours.

    Example: {"path": "a", "text": "hi"}, 'Call it as {"path": "x", "content": "..."}' -> {"path": "a", "content": "hi"}
    """
    shape = json.loads(re.search(r"Call it as (\{.*\})", error).group(1))
    spare = [value for key, value in args.items() if key not in shape]  # the wrongly named ones
    return {key: args[key] if key in args else (spare.pop(0) if spare else value) for key, value in shape.items()}


def next_calls(steps, done, sequential):
    """The calls to make this turn, and the reads skipped because the listing lacks the file."""
    made = [(name, args) for name, args, _ in done]
    pending = []
    for name, args in steps:
        for made_name, made_args, result in done:
            if (made_name, made_args) == (name, args) and "Call it as {" in result:
                args = corrected(made_args, result)  # read the error, fix the call
        if (name, args) not in made:
            pending.append((name, args))
    if not sequential:
        return pending, []
    listing, skipped = listed_names(done), []
    for name, args in pending:
        path = args.get("path", "")
        if name == "read_file" and "/" not in path and listing is not None and path not in listing:
            skipped.append(path)  # a chained step: the listing said this file is not there
            continue
        return [(name, args)], skipped
    return [], skipped


def next_page(task, done):
    """When the task wants a whole file and the last read says how to read on: that call."""
    if not re.search(r"\b(all|whole|entire)\b", prose(task), re.IGNORECASE):
        return None
    for name, args, result in reversed(done):
        if name == "read_file":
            hint = re.search(r"offset=(\d+) to read on\]$", result.strip())
            return ("read_file", {**args, "offset": int(hint.group(1))}) if hint else None
    return None


def is_error(result):
    return result.strip().lower().startswith("error")


def describe_listing(args, result, keywords):
    if is_error(result):
        return f"I could not list {args.get('path', '.')}: {result.strip()}"
    names = [line.strip() for line in result.splitlines() if line.strip() not in ("", "(empty directory)")]
    shown = names[:MAX_ENTRIES] + (["..."] if len(names) > MAX_ENTRIES else [])
    entries = f"{len(names)} entr" + ("y" if len(names) == 1 else "ies")
    return f"The directory holds {entries}: {', '.join(shown)}."


def describe_file(args, result, keywords):
    path = args.get("path", "the file")
    if is_error(result):
        return f"I could not read {path}: {result.strip()}"
    page = re.search(r"\n*\[lines (\d+)-(\d+) of (\d+);[^\]]*\]\s*$", result)  # a paged read_file
    lines = (result[:page.start()] if page else result).splitlines()
    first = int(args.get("offset") or 1)
    hits = [(n, line.strip()) for n, line in enumerate(lines, first) if any(k in line.lower() for k in keywords)]
    if not hits:
        hits = [(n, line.strip()) for n, line in enumerate(lines, first) if line.strip()][:FIRST_LINES]
    quoted = [f"  line {n}: {text[:200]}" for n, text in hits[:MAX_MATCHES]]
    if page:
        said = f"I read lines {page[1]}-{page[2]} of {path}, which has {page[3]} lines."
    else:
        cut = ", then the tool cut it off" if lines and "cut" in lines[-1].lower() else ""
        said = f"I read {len(lines)} line{'s' if len(lines) != 1 else ''} of {path}{cut}."
    return "\n".join([said] + quoted)


def describe_command(args, result, keywords):
    command = args.get("command", "")
    if is_error(result):
        return f"`{command}` did not run: {result.strip()}"
    lines = result.rstrip().splitlines()
    more = ["  ..."] if len(lines) > SHELL_LINES else []
    return "\n".join([f"`{command}` printed:"] + [f"  {line}" for line in lines[:SHELL_LINES]] + more)


def describe_write(args, result, keywords):
    if is_error(result):
        return f"My call write_file {json.dumps(args)} came back with: {result.strip()}"
    return result.strip().capitalize() + "."


# One describer per tool: adding a tool means adding one entry.
DESCRIBE = {"list_dir": describe_listing, "read_file": describe_file, "run_shell": describe_command,
            "write_file": describe_write}


def keywords_of(task):
    """Words to look for in files. Example: "read backend.py and tell me which model" -> ["model"]"""
    in_names = {w.lower() for name in file_names(prose(task)) for w in re.findall(r"[A-Za-z]+", name)}
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", prose(task))]
    return list(dict.fromkeys(w for w in words if w not in STOPWORDS and w not in in_names))


def final_answer(task, done, skipped):
    keywords = keywords_of(task)
    paragraphs = [DESCRIBE[name](args, result, keywords) if name in DESCRIBE
                  else f"{name} returned: {result.strip()[:300]}" for name, args, result in done]
    paragraphs += [f"There is no {path} in the listing, so I did not read it." for path in skipped]
    return "\n\n".join(paragraphs)


def why(calls, skipped):
    """The short `reasoning` a gpt-oss model would send with its calls."""
    said = "".join(f"{path} is not in the listing, so I skip reading it. " for path in skipped)
    if len(calls) > 1:
        return said + f"The task asks for {len(calls)} independent things, so I make all the calls at once."
    name, args = calls[0]
    asks = {"list_dir": "asks for the files here", "read_file": f"names the file {args.get('path')}",
            "run_shell": f"gives the command `{args.get('command')}`",
            "write_file": f"asks me to write {args.get('path')}"}.get(name, f"needs {name}")
    return said + f"The task {asks}, so I call {name}."


def policy(body):
    """The demo policy: a request body -> a reply spec (content, tool_calls, reasoning, or an error)."""
    messages = body.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    task = text_of(users[-1].get("content")) if users else ""
    done = tool_history(messages)
    offered = [tool["function"].get("name") for tool in body.get("tools") or []]
    can_call = bool(offered) and body.get("tool_choice") != "none"
    called_before = any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages)
    if not can_call and not called_before:
        return {"reasoning": "A plain chat with no tools, so I say who I am.", "content": HELLO}

    steps = plan(task, offered if can_call else KNOWN_TOOLS)
    calls, skipped = next_calls(steps, done, sequential=bool(re.search(r"\bthen\b", task, re.IGNORECASE)))
    if not calls and can_call and next_page(task, done):
        calls = [next_page(task, done)]  # the file came back cut, and the task wants all of it
    if calls and not can_call:
        # What Groq does when a learner stops sending tools mid-conversation: the model calls one anyway.
        name, args = calls[0]
        return error(400, "Tool choice is none, but model called a tool", code="tool_use_failed",
                     failed_generation=json.dumps({"name": name, "arguments": args}))
    if calls:
        return {"reasoning": why(calls, skipped),
                "tool_calls": [{"name": name, "arguments": args} for name, args in calls]}
    if not steps and not done:
        return {"reasoning": "The task asks for nothing my tools can do, so I say what I understand.",
                "content": HELP}
    return {"reasoning": "Every step is done, so I answer from the tool results.",
            "content": final_answer(task, done, skipped)}


# ---------------------------------------------------------------------------------------------
# Building replies: a reply spec (scripted item or policy output) -> Groq-style JSON or SSE.

def call_id(messages, position):
    """A Groq-style id (9 lowercase letters/digits), the same for the same conversation and call."""
    digest = hashlib.sha256(f"{json.dumps(messages, sort_keys=True)}#{position}".encode()).digest()
    return "".join("abcdefghijklmnopqrstuvwxyz0123456789"[b % 36] for b in digest[:9])


def build_message(spec, messages):
    if "message" in spec:
        return spec["message"]  # a raw message, sent exactly as scripted
    calls = []
    for position, call in enumerate(spec.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)  # a str is sent verbatim, even when it is not valid JSON
        calls.append({"id": call["id"] if "id" in call else call_id(messages, position), "type": "function",
                      "function": {"name": call["name"], "arguments": arguments}})
    message = {"role": "assistant"}
    if spec.get("content") is not None or not calls:  # like Groq: no content key on a pure tool call
        message["content"] = spec.get("content") or ""
    if spec.get("reasoning"):
        message["reasoning"] = spec["reasoning"]
    if calls:
        message["tool_calls"] = calls
    return message


def estimate_usage(body, message):
    """About four characters a token: enough for token budgets to work offline."""
    prompt = len(json.dumps(body["messages"]) + json.dumps(body.get("tools") or [])) // 4 + 1
    completion = len(json.dumps(message)) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def finish_reason(spec, message):
    return spec.get("finish_reason") or ("tool_calls" if message.get("tool_calls") else "stop")


def completion(spec, body, request_id):
    message = build_message(spec, body["messages"])
    return {"id": f"chatcmpl-{uuid.uuid4()}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish_reason(spec, message)}],
            "usage": spec.get("usage") or estimate_usage(body, message),
            "system_fingerprint": FINGERPRINT, "x_groq": {"id": request_id}}


def pieces(text):
    """Text cut into a few words a piece. Example: "a b c d e" -> ["a b c d ", "e"] (4 a piece)"""
    words = re.split(r"(?<=\s)(?=\S)", text) if text else []
    return ["".join(words[i:i + WORDS_PER_PIECE]) for i in range(0, len(words), WORDS_PER_PIECE)]


def sse(data):
    return f"data: {json.dumps(data)}\n\n"


def stream_events(spec, body, request_id):
    """The SSE events for a reply, and whether the stream ends normally with [DONE]."""
    message = build_message(spec, body["messages"])
    usage = spec.get("usage") or estimate_usage(body, message)
    head = {"id": f"chatcmpl-{uuid.uuid4()}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body["model"], "system_fingerprint": FINGERPRINT}

    def chunk(delta, finish=None, **extra):
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse({**head, "choices": [choice], **extra})

    events = [chunk({"role": "assistant", "content": ""}, x_groq={"id": request_id})]
    if message.get("reasoning"):
        events.append(chunk({"reasoning": message["reasoning"]}))
    events += [chunk({"content": piece}) for piece in pieces(message.get("content") or "")]
    split = spec.get("split_arguments")
    for index, call in enumerate(message.get("tool_calls") or []):
        if not split:  # Groq style: the whole call in one delta
            events.append(chunk({"tool_calls": [{"index": index, **call}]}))
            continue
        # OpenAI style: id and name once, then the arguments in fragments
        fn, arguments = call["function"], call["function"]["arguments"]
        events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": fn["name"], "arguments": ""}}]}))
        for i in range(0, len(arguments), split):
            fragment = {"index": index, "function": {"arguments": arguments[i:i + split]}}
            events.append(chunk({"tool_calls": [fragment]}))
    if spec.get("error_event") is not None:
        events.append(f"event: error\ndata: {json.dumps({'error': spec['error_event']})}\n\n")
        return events, False
    # Groq puts usage on the finish chunk; include_usage adds OpenAI's usage-only chunk as well.
    finish = finish_reason(spec, message)
    events.append(chunk({}, finish, usage=usage, x_groq={"id": request_id, "usage": usage}))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(sse({**head, "choices": [], "usage": usage}))
    return events, True


def parse_json(raw):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def respond(server, method, path, headers, body):
    """Decide the reply spec for one request: auth, route, JSON, model, validation, script or policy."""
    path = path.split("?")[0]
    if server.api_key is not None and headers.get("Authorization") != f"Bearer {server.api_key}":
        return error(401, "Invalid API Key", code="invalid_api_key")
    if method == "GET" and path.endswith("/models"):
        names = [MODEL] + [m for m in server.models or [] if m != MODEL]
        return {"status": 200, "body": {"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "demo"} for name in names]}}
    if method != "POST" or not path.endswith("/chat/completions"):
        return error(404, f"Unknown request URL: {method} {path}. Please check the URL for typos.",
                     code="unknown_url")
    if not isinstance(body, dict):
        return error(400, "We could not parse the JSON body of your request: the API expects a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return error(400, "property 'model' is missing", param="model")
    if server.models is not None and model not in [MODEL, *server.models]:
        return error(404, f"The model `{model}` does not exist or you do not have access to it.",
                     code="model_not_found")
    return validate(body) or server.next_reply() or {"policy": True}


# ---------------------------------------------------------------------------------------------
# The HTTP server.

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: the openai client reuses its connection
    disable_nagle_algorithm = True  # small replies go out at once, without 40 ms delayed-ACK stalls

    def log_message(self, format, *args):
        pass  # a line per request would drown the lesson's output

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.answer()

    def answer(self):
        try:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = parse_json(raw)
            self.server.record(self.command, self.path, self.headers, body)
            self.request_id = "req_" + uuid.uuid4().hex[:26]
            reply = respond(self.server, self.command, self.path, self.headers, body)
            time.sleep(reply.get("delay", 0))
            if reply.get("drop"):
                self.close_connection = True  # hang up without a word, like a crashed proxy
                return
            spec = policy(body) if reply.get("policy") else reply
            if "status" in spec:
                self.send_body(spec["status"], spec.get("body"), spec.get("headers"))
            elif body.get("stream"):
                self.send_stream(spec, body)
            else:
                self.send_body(200, completion(spec, body, self.request_id))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up; there is no one left to tell

    def send_body(self, status, body, headers=None):
        if body is None:
            body = {"error": {"message": STATUS_TEXT.get(status, "Error"),
                              "type": "server_error" if status >= 500 else "invalid_request_error"}}
        if isinstance(body, (dict, list)):
            data, kind = json.dumps(body).encode(), "application/json"
        else:
            data, kind = str(body).encode(), "text/html; charset=utf-8"  # e.g. a proxy's 502 page
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", self.request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def send_stream(self, spec, body):
        events, complete = stream_events(spec, body, self.request_id)
        if spec.get("cut_after") is not None:
            events, complete = events[:spec["cut_after"]], False
        # An SSE body has no length: closing the connection is what ends it.
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("x-request-id", self.request_id)
        self.end_headers()
        for event in events:
            self.wfile.write(event.encode())
        if complete:
            self.wfile.write(b"data: [DONE]\n\n")


class DemoServer(ThreadingHTTPServer):
    """The running server and its state: the scripted replies still to send and the requests received."""
    daemon_threads = True  # a client that never hangs up must not keep Python running

    def __init__(self, script=None, api_key=None, models=None, host="127.0.0.1", port=0):
        super().__init__((host, port), Handler)
        self.api_key, self.models = api_key, models
        self.port = self.server_address[1]
        self.url = f"http://{host}:{self.port}/v1"
        self.requests = []
        self.script = deque()
        self.lock = threading.Lock()  # handler threads share the queue and the record
        self.thread = None
        self.push(*(script or []))

    def push(self, *replies):
        """Queue scripted replies; a bare string means {"content": that string}."""
        with self.lock:
            self.script.extend({"content": r} if isinstance(r, str) else dict(r) for r in replies)

    def next_reply(self):
        with self.lock:
            return self.script.popleft() if self.script else None

    def record(self, method, path, headers, body):
        entry = {"method": method, "path": path, "headers": {k.lower(): v for k, v in headers.items()},
                 "body": body, "time": time.monotonic()}  # the arrival time, for tests/bench.py
        with self.lock:
            self.requests.append(entry)

    def stop(self):
        if self.thread is not None:
            self.shutdown()
            self.thread.join()
            self.thread = None
        self.server_close()

    def __exit__(self, *exc_info):
        self.stop()

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client hanging up between requests is normal, not worth a traceback
        super().handle_error(request, client_address)


def start(script=None, api_key=None, models=None, host="127.0.0.1", port=0):
    """Start the server on a background daemon thread and return at once."""
    server = DemoServer(script, api_key, models, host, port)
    server.thread = threading.Thread(target=server.serve_forever, args=(POLL_SECONDS,), daemon=True)
    server.thread.start()
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run the offline demo model on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on (0: any free port)")
    parser.add_argument("--key", help="require this API key (default: accept any)")
    parser.add_argument("--script", metavar="FILE.json", help="a JSON list of scripted replies to send first")
    args = parser.parse_args(argv)
    try:
        script = json.loads(Path(args.script).read_text(encoding="utf-8")) if args.script else None
        server = DemoServer(script, args.key, port=args.port)
    except (OSError, ValueError) as e:
        parser.error(str(e))
    print(f"demo model listening on {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
