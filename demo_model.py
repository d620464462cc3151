r"""The offline demo model: a rule-based "model" behind a Chat Completions and a Responses endpoint.

It speaks the Groq/OpenAI wire format (JSON, and SSE when "stream" is true), rejects what Groq
rejects for the model asked for, answers simple file tasks with tool calls, and calls a client's own
tools when the task names them. Tests script its replies.

Run it:  python demo_model.py [--port 8000] [--key KEY] [--script replies.json] [--model NAME ...]
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
from urllib.parse import unquote

DEFAULT_PORT = 8000
# the demo's own name: always served, and it reasons like openai/gpt-oss-120b
MODEL = "demo"
# What the demo serves when start() names no models (GET /v1/models lists them; any other name gets
# Groq's 404): itself, Groq's chat models (console.groq.com/docs/models) and backend.py's defaults
# for OpenAI and Ollama.
MODELS = (MODEL, "openai/gpt-oss-120b", "openai/gpt-oss-20b", "openai/gpt-oss-safeguard-20b",
          "qwen/qwen3-32b", "llama-3.3-70b-versatile", "llama-3.1-8b-instant",
          "meta-llama/llama-4-scout-17b-16e-instruct", "moonshotai/kimi-k2-instruct",
          "moonshotai/kimi-k2-instruct-0905", "gpt-5-mini", "qwen3")
# Models that reason: they send `reasoning`, and take it back on assistant messages. Groq's
# reasoning models are gpt-oss and qwen3 (console.groq.com/docs/reasoning, "Supported models"); the
# demo is one too.
REASONING_MODELS = re.compile(rf"^{MODEL}$|gpt-oss|qwen3")
FINGERPRINT = "fp_demo"
# stop() waits up to this long: short, so each test stops its server fast
POLL_SECONDS = 0.01
WORDS_PER_PIECE = 4             # a streamed answer arrives a few words at a time
MAX_ENTRIES = 30                # directory entries named in an answer
MAX_MATCHES = 8                 # matching lines quoted from a file
FIRST_LINES = 5                 # lines quoted from a file when none matches the task
SHELL_LINES = 15                # lines quoted from a command's output
# the usage estimate's rule of thumb; max_tokens cuts text at this rate too
CHARS_PER_TOKEN = 4
TOKENS_PER_SECOND = 500         # for Groq's usage timings: completion_time = tokens / this
PROMPT_SECONDS_PER_TOKEN = 1e-5  # prompt_time per prompt token (Groq reads prompts fast)
QUEUE_SECONDS = 0.01            # queue_time in usage: a quiet day
# 413 past this: Groq's documented request limit with a base64 image (4 MB)
MAX_BODY_BYTES = 4 * 1024 * 1024
# of a too-large body, read (and drop) at most this much before hanging up
MAX_DRAIN_BYTES = 64 * 1024 * 1024
MAX_LINE = 65536                # longest chunk-size line read from a chunked request body
# server.requests keeps the last this many when run from the command line
KEEP_REQUESTS = 100
# nesting followed when filling a JSON schema (schemas can refer to themselves)
MAX_DEPTH = 8
KNOWN_TOOLS = ("run_shell", "list_dir", "read_file", "write_file")  # the harness's tools
# Summing up (phase 13). A careful model asked to sum up its work ("Sum up the work so far...", or
# any request that begins by asking to sum up or summarise) writes what it found, and later carries
# on from that summary in whatever words the harness wraps it: the demo finds its own summary's
# lines in any message, never a marker.
SUMMING_UP = re.compile(r"^\W*(please\W+)?(sum\s+up|summari[sz]e)\b", re.IGNORECASE)
# - read_file {"path": "a.txt"}: a fact
SUMMARY_LINE = re.compile(r"^- (\S+) (\{.*?\}):(?: (.*))?$", re.M)
SUMMARY_CHARS = 160  # of a line kept in a summary
GROQ_DOCS = "https://console.groq.com/docs/"
OPENAI_REFERENCE = "https://platform.openai.com/docs/api-reference."
KEEP_ALIVE = ": keep-alive\n\n"  # an SSE comment line: clients skip it
# Prompt caching as OpenAI documents it (developers.openai.com/api/docs/guides/prompt-caching):
# "Cache hits are only possible for exact prefix matches", for "prompts that are 1024 tokens or
# longer". The 128-token steps are from the guide's first (2024) version, not in the copy read here.
# Same model only.
CACHE_MIN_TOKENS = 1024
CACHE_BLOCK_TOKENS = 128
CACHE_PROMPTS = 256             # earlier prompts remembered, per server: memory stays bounded

# Request fields Groq accepts (groq SDK 1.7.0); anything else is a 400 that names it.
TOP_LEVEL_KEYS = (
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "max_completion_tokens",
    "max_tokens", "stream", "stream_options", "temperature", "top_p", "stop", "seed", "n",
    "response_format", "user", "reasoning_effort", "reasoning_format", "include_reasoning",
    "service_tier", "frequency_penalty", "presence_penalty", "metadata", "store",
    "citation_options", "compound_custom", "disable_tool_validation", "documents",
    "search_settings", "exclude_domains", "include_domains", "functions", "function_call",
    "logprobs", "logit_bias", "top_logprobs",
)
# Accepted by name but not with a value: Groq's docs say these give a 400.
NOT_SUPPORTED = ("logprobs", "logit_bias", "top_logprobs")
# The values some fields may take (groq SDK 1.7.0).
ALLOWED = {
    "reasoning_format": ["hidden", "raw", "parsed"],
    "reasoning_effort": ["none", "default", "low", "medium", "high"],
    "service_tier": ["auto", "on_demand", "flex", "performance"],
}
RANGES = {"temperature": (0, 2), "top_p": (0, 1), "frequency_penalty": (-2, 2),
          "presence_penalty": (-2, 2)}
COUNTS = ("max_tokens", "max_completion_tokens")  # positive integers
TOOL_CHOICES = ("none", "auto", "required")
# Keys each role may carry: the fields of groq 1.7.0's
# types/chat/chat_completion_{system,user,assistant,tool, function}_message_param.py (developer
# shares the system type), less `name`: those types allow it on every role but tool, and Groq's
# validator suggests it ("did you mean 'name'?" [run-llama/llama_index#14701]), but
# console.groq.com/docs/openai lists messages[].name among the fields that "will result in a 400
# error": where the documentation and the SDK disagree, the documentation wins. The deprecated
# function role keeps the `name` its type requires. Not there either: the SDK's model_dump() extras
# refusal, annotations and audio, which Groq refuses even when null ("property 'refusal' is
# unsupported", quoted in several codebases), and reasoning_content on every model
# [agentjido/req_llm#772].
MESSAGE_KEYS = {
    "system": {"role", "content"},
    "developer": {"role", "content"},
    "user": {"role", "content"},
    "assistant": {"role", "content", "function_call", "tool_calls"},
    "tool": {"role", "tool_call_id", "content"},
    "function": {"role", "content", "name"},
}
# ...and `reasoning` on an assistant message, for a reasoning model only: the assistant type's
# docstring says it "is supported on models that support reasoning"; kimi-k2 answers "property
# 'reasoning' is unsupported" [musistudio/llms#64].
REASONING_KEY = "reasoning"
# What OpenAI documents on a message besides (openai 3.63 types/chat/
# chat_completion_{system,developer,user,assistant}_message_param.py): a `name` on every role but
# tool; on an assistant message `refusal`, `audio` and a null `function_call`; and `annotations`,
# which OpenAI returns on every assistant message and its guide appends back as it came. Taken on
# OpenAI's path (/v1) for OpenAI's own models only: the demo and Groq's models keep Groq's rules
# everywhere, so a loop that sends model_dump() back fails offline as it would on Groq.
OPENAI_MESSAGE_KEYS = {"system": {"name"}, "developer": {"name"}, "user": {"name"},
                       "assistant": {"name", "refusal", "audio", "annotations"}}
OPENAI_MODELS = re.compile(r"^(gpt-|o\d|chatgpt-)")  # Groq names its copies "openai/gpt-oss-..."
# Fields the openai SDK's .parse() and .stream() helpers leave on what they return: in no server's
# message type (OpenAI's older models answered "Additional properties are not allowed ('parsed'
# ... were unexpected)" [openai/openai-node#1161]). A 400 that names one says how to send it back.
SDK_FIELDS = ("parsed", "parsed_arguments", "index")
SEND_BACK = ("'parsed', 'parsed_arguments' and a tool call's 'index' are the openai SDK's own "
             "fields (its .parse() and .stream() helpers add them), not the API's: send back only "
             "what the API documents (a chat message as a dict of role, content and tool_calls, "
             "each with id, type and function: name and arguments), or drop them with "
             "model_dump(exclude=...).")
# Content arrays each role takes, by part type (the same type files; system arrays hold text parts
# only).
PART_TYPES = {"system": ["text"], "developer": ["text"], "user": ["text", "image_url", "document"],
              "assistant": ["text"], "tool": ["text", "image_url", "document"]}
ROLES_TEXT = "'system', 'assistant', 'user', 'function', 'tool', and 'developer'"
ROUTE = re.compile(r"(?:/openai)?/v1/(chat/completions|responses|models)(?:/(.+))?")

# The Responses API: POST /v1/responses (Groq serves it under /openai/v1 too,
# console.groq.com/docs/responses-api). Its request fields: openai 3.63
# types/responses/response_create_params.py; any other is OpenAI's 400 "Unknown parameter"
# [pydantic/pydantic-ai#3653].
RESPONSES_KEYS = (
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
    "max_output_tokens", "max_tool_calls", "stream", "stream_options", "temperature", "top_p",
    "top_logprobs", "store", "previous_response_id", "conversation", "metadata", "user",
    "safety_identifier", "reasoning", "text", "include", "truncation", "service_tier", "background",
    "prompt", "prompt_cache_key", "prompt_cache_retention", "context_management",
)
# The input items the demo reads: the keys each takes, and those it must have (openai 3.63
# types/responses/: easy_input_message_param.py, response_output_message_param.py,
# response_function_tool_call_param.py, response_input_param.py, response_reasoning_item_param.py).
# A message may leave out its type.
ITEM_KEYS = {
    "message": ({"type", "role", "content", "id", "status", "phase"}, ("role", "content")),
    "function_call": ({"type", "call_id", "name", "arguments", "id", "status", "namespace",
                       "caller"}, ("call_id", "name", "arguments")),
    "function_call_output": ({"type", "call_id", "output", "id", "status", "name", "namespace",
                              "caller"}, ("call_id", "output")),
    "reasoning": ({"type", "id", "summary", "content", "encrypted_content", "status"},
                  ("id", "summary")),
}
ITEM_ROLES = ("user", "assistant", "system", "developer")
MIN_OUTPUT_TOKENS = 16  # OpenAI's floor for max_output_tokens [vectorize-io/hindsight#58]
KEEP_RESPONSES = 256    # responses a previous_response_id can name, per server: bounded memory

LIST_WORDS = re.compile(r"\b(list|files|directory|folder|ls)\b", re.IGNORECASE)
WRITE_WORDS = re.compile(r"\b(write|create|save)\b", re.IGNORECASE)
PATH_NAMES = re.compile(r"path|file|name", re.IGNORECASE)     # properties that want a file name
# integer properties that want a count
COUNT_NAMES = re.compile(r"count|number|total", re.IGNORECASE)
FINAL_TOOLS = re.compile(r"final|submit|answer", re.IGNORECASE)  # tools that take the final answer
NOT_FILE_NAMES = {"e.g", "i.e"}
# ids as tasks write them: DEMO-42, #1234
ID_WORDS = re.compile(r"\b[A-Za-z][A-Za-z0-9]*-\d+\b|\b\d+\b")
# A capitalised word inside a sentence: "Use get_weather for Paris" -> Paris. Not one that starts
# a line or follows a colon: smolagents sends "New task:\nUse get_weather for Paris", no request
# about "Use".
PROPER_NOUN = re.compile(r"(?<=[^\S\n])(?<![.!?:]\s)[A-Z][a-z]+\b")
# Properties for the answer itself: they take what the model says before a guess from the task.
SAYING_NAMES = re.compile(r"answer|summary|result|response|reply|text|message|explanation",
                          re.IGNORECASE)
# Tools that only look, named by their first word: safe to call first for a value a tool needs
# ("get_ticket").
READ_VERBS = ("get", "read", "fetch", "show", "describe", "view", "lookup")
MCP_SEPARATOR = "__"            # a tool offered from an MCP server is named <server>__<tool>
ARTICLES = {"a", "an", "the", "this", "that", "my", "your", "its", "their", "new"}
STOPWORDS = set(
    "list files file here then read tell which what that this with from show please about does "
    "there directory folder contents give could would should into them they have some each line "
    "lines answer look find want where when your also just only command output print open "
    "need know whole entire".split()
)

HELLO = ("Hello! I am the offline demo model: I run on your machine, with no network and no API "
         "key. I only understand simple file tasks: give me tools and ask me to list the files, "
         "read a file by name, or run a command written in backticks.")
HELP = ("I am the offline demo model, so I only understand simple file tasks: ask me to list the "
        "files, read a file by name (for example README.md), or run a command written in "
        "backticks. For a real model, set GROQ_API_KEY (see README.md).")


# ---------------------------------------------------------------------------------------------
# Errors and strict validation: the same 400s Groq and OpenAI send, so buggy loops fail here too.

def error(status, message, param=None, code=None, **extra):
    """A reply spec for an error. Example: error(404, "gone") -> {"status": 404, "body": {"error":
    ...}}"""
    err = {"message": message, "type": "invalid_request_error"}
    if param is not None:
        err["param"] = param
    if code is not None:
        err["code"] = code
    err.update(extra)
    return {"status": status, "body": {"error": err}}


def is_number(value):
    # JSON true is not a number
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


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
                return error(400, f"Invalid value for '{key}': '{key}' is only allowed when "
                                  "'tools' are specified.", param=key)
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


def check_tool_choice(body):
    """Groq's words for a bad string (null included), OpenAI's for a bad object or an unknown
    function."""
    if "tool_choice" not in body:
        return None
    choice = body["tool_choice"]
    if not isinstance(choice, dict):
        if choice in TOOL_CHOICES:
            return None
        return error(400, "Only allowed string values for 'tool_choice' are [none, auto, required]")
    fn = choice.get("function")
    if (
        choice.get("type") != "function"
        or not isinstance(fn, dict)
        or not isinstance(fn.get("name"), str)
    ):
        return (error(400, "'$.tool_choice' is invalid. Please check the API "
                           f"reference: {OPENAI_REFERENCE}"))
    if fn["name"] not in [tool["function"]["name"] for tool in body["tools"]]:
        return error(400, f"Tool choice '{fn['name']}' not found in 'tools' parameter.",
                     param="tool_choice")
    return None


def check_ranges(body):
    """Sampling numbers of the right type (Groq's words) and in their ranges (OpenAI's words)."""
    for key, (low, high) in RANGES.items():
        value = body.get(key)
        if value is None:
            continue
        if not is_number(value):
            return error(400, f"'{key}' : value must be a number", param=key)
        if value < low:
            return error(400, f"Invalid '{key}': decimal below minimum value. Expected a value >= "
                              f"{low}, but "
                              f"got {value} instead.", param=key, code="decimal_below_min_value")
        if value > high:
            return error(400, f"Invalid '{key}': decimal above maximum value. Expected a value <= "
                              f"{high}, but "
                              f"got {value} instead.", param=key, code="decimal_above_max_value")
    return None


def check_counts(body):
    """max_tokens and max_completion_tokens are positive integers, seed an integer, stop at most 4
    strings."""
    for key in COUNTS + ("seed",):
        value = body.get(key)
        if value is not None and not is_integer(value):
            return error(400, f"'{key}' : value must be an integer", param=key)
        if key in COUNTS and value is not None and value < 1:
            return error(400, f"Invalid '{key}': integer below minimum value. Expected a value >= "
                              f"1, but got {value} "
                              "instead.", param=key, code="integer_below_min_value")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop)):
        return error(400, "stop : one of the following must be satisfied\n  stop : value must be a "
                          "string\n  stop : maximum number of items is 4", param="stop")
    return None


def check_values(body):
    """Fields with a fixed set of values, and the ones Groq names but does not support."""
    for key, allowed in ALLOWED.items():
        if body.get(key) is not None and body[key] not in allowed:
            return error(400, f"'{key}' : value is not one of the allowed values {allowed}",
                         param=key)
    for key in NOT_SUPPORTED:
        if body.get(key) not in (None, False):
            return error(400, f"`{key}` is not supported", param=key)
    if body.get("include_reasoning") is not None and not isinstance(body["include_reasoning"],
                                                                    bool):
        return error(400, "'include_reasoning' : value must be a boolean",
                     param="include_reasoning")
    if body.get("stream_options") is not None and not body.get("stream"):
        return error(400, "The 'stream_options' parameter is only allowed when "
                          "'stream' is enabled.",
                     param="stream_options")
    return None


def mentions_json(messages):
    return any("json" in text_of(m.get("content")).lower() for m in messages if isinstance(m, dict))


def check_response_format(body):
    """text, json_object (only when some message says "json") or json_schema with a name and a
    schema."""
    form = body.get("response_format")
    if form is None:
        return None
    kind = form.get("type") if isinstance(form, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return error(400, "'response_format.type' : value is not one of the allowed values "
                          "['text', 'json_object', 'json_schema']", param="response_format")
    if kind == "text":
        return None
    if kind == "json_object" and not mentions_json(body["messages"]):
        return error(400, "'messages' must contain the word 'json' in some form, to use "
                          "'response_format' of type 'json_object'.", param="messages")
    spec = form.get("json_schema")
    if kind == "json_schema" and (not isinstance(spec, dict)
                                  or not isinstance(spec.get("name"), str)):
        return error(400, "'response_format.json_schema.name' : property 'name' is missing",
                     param="response_format")
    if kind == "json_schema" and not isinstance(spec.get("schema", {}), dict):
        return error(400, "'response_format.json_schema.schema' : value must be an object",
                     param="response_format")
    return None


def check_groq_json_mode(body):
    """Groq's limits on JSON mode, which OpenAI does not have: no tools with it, and json_schema not
    streamed."""
    kind = (body.get("response_format") or {}).get("type")
    if kind in ("json_object", "json_schema") and body.get("tools"):
        return error(400, "json mode cannot be combined with tool/function calling",
                     param="response_format")
    if kind == "json_schema" and body.get("stream"):
        return error(400, "`response_format` of type `json_schema` is not supported with streaming",
                     param="response_format")
    return None


def check_reasoning(body):
    """Groq's reasoning rules: one of include_reasoning and reasoning_format; raw neither with tools
    nor JSON."""
    form = body.get("reasoning_format")
    if form is None:
        return None
    if body.get("include_reasoning") is not None:
        return error(400, "cannot specify both `include_reasoning` and `reasoning_format`")
    # a model that does not reason has no reasoning to format [0xPlaygrounds/rig#1134]; gpt-oss
    # keeps its reasoning out of the content, so not raw
    if not reasons(body["model"]) or (form == "raw" and "gpt-oss" in body["model"]):
        return error(400, "`reasoning_format` is not supported with this model",
                     param="reasoning_format")
    json_mode = (body.get("response_format") or {}).get("type") in ("json_object", "json_schema")
    if form == "raw" and (body.get("tools") or json_mode):
        return error(400, "`reasoning_format` `raw` is not supported with tool use or JSON mode; "
                          "use `parsed` or `hidden`", param="reasoning_format")
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
        # an SDK-echoed "index" fails here
        problem = (exact_keys(at, call, ("id", "type", "function"))
                   or exact_keys(f"{at}.function", call["function"], ("name", "arguments")))
        if problem:
            return problem
        if not isinstance(call["id"], str) or not call["id"]:
            return f"('{at}.id' : value must be a non-empty string)"
        if call["id"] in [other.get("id") for other in calls[:j] if isinstance(other, dict)]:
            # the demo's words
            return f"('{at}.id' : duplicate tool call id '{call['id']}' in one message)"
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


def check_parts(at, parts, kinds):
    """The first problem with a content array, or None. Example: [{"type": "text", "text": "hi"}] ->
    None"""
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") not in kinds:
            return f"('{at}.{j}.type' : value is not one of the allowed values {kinds})"
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            return f"('{at}.{j}.text' : value must be a string)"
    return None


def check_content(where, role, msg):
    """The first problem with a message's content, in Groq's words, or None."""
    content, at = msg.get("content"), f"{where}.content"
    if isinstance(content, str):
        return None
    if role in PART_TYPES and isinstance(content, list):
        return check_parts(at, content, PART_TYPES[role])
    if role == "user":
        return f"('{at}' : value must be a string or an array of content parts)"
    if content is None and "content" in msg and role == "function":
        return None  # Required[Optional[str]] in the function message type
    if role == "assistant" and content is None and (msg.get("tool_calls")
                                                    or msg.get("function_call")):
        return None  # the type: "Required unless `tool_calls` or `function_call` is specified"
    return f"('{at}' : value must be a string)"


def check_openai_fields(where, msg):
    """The first problem with the fields OpenAI documents on a message, or None."""
    if msg.get("refusal") is not None and not isinstance(msg["refusal"], str):
        return f"('{where}.refusal' : value must be a string)"
    if msg.get("annotations") is not None and not isinstance(msg["annotations"], list):
        return f"('{where}.annotations' : value must be an array)"
    audio = msg.get("audio")
    if audio is not None and not (isinstance(audio, dict) and list(audio) == ["id"]
                                  and isinstance(audio["id"], str)):
        return f"('{where}.audio' : value must be an object with a string 'id')"
    return None


def check_fields(where, role, msg, openai=False):
    """The first problem with a message's fields, in Groq's words, or None. openai: OpenAI's own
    rules, where a null function_call is allowed (its type is Optional there)."""
    if role == "tool":
        if "tool_call_id" not in msg:
            return f"('{where}.tool_call_id' : property 'tool_call_id' is missing)"
        if not isinstance(msg["tool_call_id"], str):
            return f"('{where}.tool_call_id' : value must be a string)"
    if role == "function" and "name" not in msg:
        return f"('{where}.name' : property 'name' is missing)"
    if "name" in msg and not isinstance(msg["name"], str):
        return f"('{where}.name' : value must be a string)"
    if msg.get(REASONING_KEY) is not None and not isinstance(msg[REASONING_KEY], str):
        return f"('{where}.reasoning' : value must be a string)"  # Optional[str]
    call = msg.get("function_call", {})
    if call is None and openai:
        call = {}
    if not isinstance(call, dict) or any(k not in ("name", "arguments") or not isinstance(v, str)
                                         for k, v in call.items()):
        # null too: the type is not Optional
        return f"('{where}.function_call' : value must be an object)"
    if role == "assistant" and msg.get("tool_calls") is not None:
        problem = check_tool_calls(where, msg["tool_calls"])
        if problem:
            return problem
    return (openai and check_openai_fields(where, msg)) or check_content(where, role, msg)


def reasons(model):
    """Whether a model reasons (sends `reasoning` and takes it back). Example: "openai/gpt-oss-20b"
    -> True"""
    return bool(REASONING_MODELS.search(model))


def check_message(i, msg, reasoning=False, openai=False):
    """The first problem with messages[i] as Groq words it, or None; reasoning: the model takes
    `reasoning` back; openai: the message also takes what OpenAI documents on it."""
    where = f"messages.{i}"
    if not isinstance(msg, dict):
        return error(400, f"'{where}' : value must be an object")
    role = msg.get("role")
    if role is None:
        return error(400, f"'{where}' : property 'role' is missing")
    if role not in MESSAGE_KEYS:
        return error(400, f"Invalid value: '{role}'. Supported values are: {ROLES_TEXT}.",
                     param=f"messages.[{i}].role", code="invalid_value")
    if role == "assistant" and msg.get("tool_calls") == []:
        # OpenAI's rule: leave tool_calls out rather than sending an empty list
        return error(400, f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array "
                          "with minimum length 1, but got an empty array instead.",
                     param=f"messages[{i}].tool_calls", code="empty_array")
    keys = MESSAGE_KEYS[role] | ({REASONING_KEY} if reasoning and role == "assistant" else set())
    keys |= OPENAI_MESSAGE_KEYS.get(role, set()) if openai else set()
    # Groq lists every unsupported key of the message; past those, the first problem is enough.
    problems = [f"('{where}' : property '{k}' is unsupported)" for k in msg if k not in keys]
    if not problems:
        problem = check_fields(where, role, msg, openai)
        problems = [problem] if problem else []
    if not problems:
        return None
    said = f"'{where}' : for 'role:{role}' the following must be satisfied[{', '.join(problems)}]"
    sdk = any(f"property '{field}' is unsupported" in problem
              for problem in problems for field in SDK_FIELDS)
    return error(400, f"{said} {SEND_BACK}" if sdk else said)


def check_pairing(messages):
    """OpenAI's rules: each tool call answered by tool messages right after it, and nothing else."""
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg["role"] == "tool":
            return error(400, "Invalid parameter: messages with role 'tool' must be a response to "
                              "a preceeding "
                              "message with 'tool_calls'.", param=f"messages.[{i}].role")
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
            return error(400, "An assistant message with 'tool_calls' must be followed by tool "
                              "messages responding to each 'tool_call_id'. The following "
                              f"tool_call_ids did not have response messages: {', '.join(missing)}",
                         param=f"messages.[{i}].role" if i < len(messages) else "messages")
    return None


# Request-wide checks, in order; each returns an error reply or None.
CHECKS = (check_tool_choice, check_ranges, check_counts, check_values, check_response_format,
          check_reasoning)
# Where Groq rejects what OpenAI takes, the path decides: /openai/v1 is Groq's, /v1 is OpenAI's.
GROQ_CHECKS = (check_groq_json_mode,)


def validate(body, groq=False):
    """The first reason to reject a chat request (as an error reply spec), or None. groq: sent to
    Groq's path."""
    problem = check_top_level(body) or check_tools(body.get("tools"))
    if problem:
        return problem
    for check in CHECKS + GROQ_CHECKS if groq else CHECKS:
        problem = check(body)
        if problem:
            return problem
    openai = not groq and bool(OPENAI_MODELS.match(body["model"]))
    for i, msg in enumerate(body["messages"]):
        problem = check_message(i, msg, reasons(body["model"]), openai)
        if problem:
            return problem
    return check_pairing(body["messages"])


# --------------------------------------------------------------------------------------------- JSON
# Schema, the small part the demo needs: fill a schema from what the conversation has, and check a
# value against it. Tool arguments (tool_choice, a learner's own tool) and structured answers use
# both.

def resolve(schema, root):
    """The schema a "$ref" points at. Example: {"$ref": "#/$defs/Item"} -> root["$defs"]["Item"]"""
    while isinstance(schema, dict) and "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema = node
    return schema if isinstance(schema, dict) else {}


def schema_type(schema):
    """The JSON type a schema asks for: the first that is not null, else guessed from its keys.
    Example: {"type": ["null", "integer"]} -> "integer" """
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind:
        return kind
    return "object" if "properties" in schema else "array" if "items" in schema else "string"


def has_value(schema, name, facts):
    """Whether an optional property has something worth sending: an example, a default, a file from
    the task."""
    wants_file = schema_type(schema) == "string" and PATH_NAMES.search(name) and facts["files"]
    return any(key in schema for key in ("examples", "default", "const")) or bool(wants_file)


def fill(schema, name, facts, root=None, depth=0):
    """A value for `schema` (the value of property `name`), taken from what the conversation has
    (facts): the first of `examples`, else `default`, else a file the task names for a path-like
    string, else the `enum` value the task or a result gives (else the first), else a value of the
    type. Example: {"properties": {"path": {"type": "string"}}, "required": ["path"]}, facts with
    files ["a.txt"] -> {"path": "a.txt"}"""
    root = schema if root is None else root
    schema = resolve(schema, root)
    if schema.get("examples"):
        return schema["examples"][0]
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):  # the first choice that is not null
            choice = next((s for s in schema[key] if resolve(s, root).get("type") != "null"),
                          schema[key][0])
            return fill(choice, name, facts, root, depth)
    kind = schema_type(schema)
    if kind == "string" and PATH_NAMES.search(name) and facts["files"]:
        return facts["files"][0]
    if schema.get("enum"):  # the value the task or a result gives, if it is allowed
        return next((value for value in [fact(name, kind, facts)] if value in schema["enum"]),
                    schema["enum"][0])
    return FILL.get(kind, fill_string)(schema, name, facts, root, depth)


def fill_object(schema, name, facts, root, depth):
    required = schema.get("required") or []
    value = {}
    for key, sub in (schema.get("properties") or {}).items():
        if depth < MAX_DEPTH and (key in required or has_value(resolve(sub, root), key, facts)):
            value[key] = fill(sub, key, facts, root, depth + 1)
    return value  # nothing beyond the properties, so additionalProperties: false holds


def fill_array(schema, name, facts, root, depth):
    """Names for an array of strings (the last listing's, else the task's files), else the fewest
    items allowed."""
    items = resolve(schema.get("items") or {}, root)
    value = []
    if schema_type(items) == "string" and not items.get("enum"):
        value = list(facts["names"])
    while len(value) < schema.get("minItems", 0) and depth < MAX_DEPTH:
        value.append(fill(items, name, facts, root, depth + 1))
    return value[:schema.get("maxItems", len(value))]


def fill_string(schema, name, facts, root, depth):
    """A result line that names this property, else what the task says it is ("the city is
    Paris"), else the answer from the results, else a fact the task or a result gives for it, else
    quoted text from the task, else a capitalised word of it ("Paris"), else what the model said.
    A property for the answer itself ("answer", "summary"...) takes what the model said before
    any guess."""
    words = [w for w in re.split(r"[\W_]+", name.lower()) if len(w) > 2]
    line = next((line for line in facts["lines"] if any(w in line.lower() for w in words)), None)
    noun = PROPER_NOUN.search(prose(facts["task"]))
    guesses = [line, phrase_for(name, facts["task"]), facts["answer"], fact(name, "string", facts),
               facts["quoted"], noun and noun.group()]
    if SAYING_NAMES.search(name):
        guesses.insert(3, facts["said"])
    text = next((guess for guess in guesses + [facts["said"]] if guess), "example")
    return text[:schema["maxLength"]] if "maxLength" in schema else text


def phrase_for(name, task):
    """What the task says a property is, a few words on from its name.
    Example: "capital", "The capital of France is Paris and ..." -> "Paris" """
    words = r"[\s_-]+".join(re.escape(w) for w in re.split(r"[\W_]+", name) if w)
    said = r"(?:\s+\w+){0,3}?\s+(?:is|are|was|were)\s+|\s*[:=]\s*"
    found = words and re.search(rf"\b{words}\b(?:{said})([^.,;!?\n]+)", task, re.IGNORECASE)
    return re.split(r"\s+and\s+", found.group(1).strip())[0] if found else None


def number_near(name, texts):
    """A number written next to a property's name in the first text that has one, or None.
    Example: "population", ["The population of Paris is 2,100,000."] -> 2100000"""
    words = r"[\s_-]+".join(re.escape(w) for w in re.split(r"[\W_]+", name) if w)
    number = r"(-?\d[\d,]*(?:\.\d+)?)"
    for text in texts if words else []:
        after, before = rf"\b{words}\b(?:\W+\w+){{0,3}}?\W+{number}", rf"{number}\s+{words}\b"
        found = re.search(f"{after}|{before}", text, re.IGNORECASE)
        if found:
            value = (found.group(1) or found.group(2)).replace(",", "")
            return float(value) if "." in value else int(value)
    return None


def fill_number(schema, name, facts, root, depth):
    """A fact the task or a result gives for this property, else a number written next to its name
    in the task or a result, else a count from the results for a property named like one, else 0;
    kept within minimum and maximum."""
    kind = schema_type(schema)
    value = fact(name, kind, facts)
    if value is None:
        value = number_near(name, [facts["task"], *facts["results"]])
    if value is None:
        value = facts["count"] if COUNT_NAMES.search(name) and facts["count"] is not None else 0
    value = int(value) if kind == "integer" else value
    low, high = schema.get("minimum", value), schema.get("maximum", value)
    return min(max(value, low), max(high, low))


FILL = {"object": fill_object, "array": fill_array, "string": fill_string, "integer": fill_number,
        "number": fill_number, "boolean": lambda *args: True, "null": lambda *args: None}
TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float),
         "boolean": bool, "null": type(None)}


def is_type(value, kind):
    if kind in ("integer", "number") and isinstance(value, bool):
        return False  # Python's True is an int; JSON's true is not a number
    return isinstance(value, TYPES.get(kind, object))


def schema_problem(value, schema, root=None, at="$"):
    """The first way `value` breaks `schema` (the part of JSON Schema fill() writes), or None.
    Example: 3, {"type": "string"} -> "$: expected string, got int" """
    root = schema if root is None else root
    schema = resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        if schema.get(key) and all(schema_problem(value, s, root, at) for s in schema[key]):
            return f"{at}: matches none of its {key}"
    for sub in schema.get("allOf") or []:
        problem = schema_problem(value, sub, root, at)
        if problem:
            return problem
    if "const" in schema and value != schema["const"]:
        return f"{at}: expected {json.dumps(schema['const'])}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{at}: {json.dumps(value)} is not one of {json.dumps(schema['enum'])}"
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds and not any(is_type(value, kind) for kind in kinds):
        return f"{at}: expected {' or '.join(kinds)}, got {type(value).__name__}"
    if isinstance(value, dict):
        return object_problem(value, schema, root, at)
    if isinstance(value, list):
        return array_problem(value, schema, root, at)
    return bounds_problem(value, schema, at)


def object_problem(value, schema, root, at):
    properties, extra = schema.get("properties") or {}, schema.get("additionalProperties", True)
    for key in schema.get("required") or []:
        if key not in value:
            return f"{at}: missing required property {key!r}"
    for key, item in value.items():
        if key not in properties and extra is False:
            return f"{at}: property {key!r} is not allowed"
        sub = properties.get(key, extra if isinstance(extra, dict) else {})
        problem = schema_problem(item, sub, root, f"{at}.{key}")
        if problem:
            return problem
    return None


def array_problem(value, schema, root, at):
    if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
        return f"{at}: {len(value)} items is outside minItems/maxItems"
    for i, item in enumerate(value):
        problem = schema_problem(item, schema.get("items") or {}, root, f"{at}[{i}]")
        if problem:
            return problem
    return None


def bounds_problem(value, schema, at):
    if is_type(value, "number") and not schema.get("minimum", value) <= value <= schema.get(
        "maximum", value
    ):
        return f"{at}: {value} is outside minimum/maximum"
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        return f"{at}: longer than maxLength"
    return None


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
    """The calls made so far, paired with their results: [(name, arguments dict, result text),
    ...]."""
    results = {m.get("tool_call_id"): text_of(m.get("content")) for m in messages
               if m.get("role") == "tool"}
    done = []
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            if call.get("id") in results:
                done.append((fn.get("name"), parse_arguments(fn.get("arguments")),
                             results[call["id"]]))
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
    """The task with commands, quoted text and URLs blanked out, keeping positions: their words are
    not requests."""
    return re.sub(r'`[^`]*`|"[^"]*"|\w+://\S+', lambda m: " " * len(m.group()), task)


def mention(task, name):
    """Where the task names a tool, by its name or by its words. Example: "count lines of a.txt",
    "count_lines" -> 0"""
    words = r"[\s_-]+".join(re.escape(word) for word in re.split(r"[_-]+", name) if word)
    found = re.search(rf"(?<![\w-]){words}(?![\w-])", task, re.IGNORECASE)
    return found.start() if found else None


def asked_for(task, name):
    """Where the task asks for a tool: by its name, by its name less an MCP server's prefix, or by
    every word of that name somewhere in it. Example: "Propose the billing label",
    "tickets__propose_label" -> 0"""
    own = name.split(MCP_SEPARATOR)[-1]
    for said in (name, own):
        if mention(task, said) is not None:
            return mention(task, said)
    found = [mention(task, word) for word in re.split(r"[_-]+", own) if word]
    return min(found) if found and None not in found else None


def task_fact(name, kind, task):
    """A value the task gives for property `name`: the word before the name ("the billing label"),
    or for an id an id-like word. Example: "ticket_id", "string", "Propose the billing label for
    DEMO-42" -> "DEMO-42" """
    words = [w for w in re.split(r"[\W_]+", name.lower()) if w]
    if kind != "string" or not words:
        return None
    before = re.search(r"([\w-]+)\s+" + r"[\s_-]*".join(map(re.escape, words)) + r"\b", task,
                       re.IGNORECASE)
    if before and before.group(1).lower() not in ARTICLES:
        return before.group(1)
    found = ID_WORDS.search(task) if words[-1] == "id" else None
    return found.group() if found else None


def result_fact(name, kind, records):
    """The field of the latest result object named like property `name` (or like its last word), as
    (field, value), or None. Example: "expected_version", "integer", [{"id": "DEMO-42", "version":
    3}] -> ("version", 3)"""
    for record in records:
        for key in dict.fromkeys((name, re.split(r"[\W_]+", name)[-1])):
            if key in record and is_type(record[key], kind):
                return key, record[key]
    return None


def fact(name, kind, facts):
    """A value the task gives for property `name`, else one a result gives, else None."""
    value = task_fact(name, kind, facts["task"])
    found = result_fact(name, kind, facts["records"]) if value is None else None
    return found[1] if found else value


def required_kinds(parameters):
    """The required properties of a parameters schema with their JSON types. Example: ->
    {"ticket_id": "string"}"""
    properties, required = parameters.get("properties") or {}, parameters.get("required") or []
    return {key: schema_type(resolve(properties.get(key) or {}, parameters)) for key in required}


def reader_for(name, tools, facts):
    """A tool that reads what tool `name` needs: one of the same MCP server that only looks
    (READ_VERBS) and whose required arguments the facts already give. Example: "s__propose_label" ->
    "s__get_ticket" """
    server = name.split(MCP_SEPARATOR)[0] if MCP_SEPARATOR in name else None
    for other, parameters in tools.items():
        same = (other.split(MCP_SEPARATOR)[0] if MCP_SEPARATOR in other else None) == server
        verb = re.split(r"[_-]+", other.split(MCP_SEPARATOR)[-1])[0].lower()
        known = all(fact(key, kind, facts) is not None for key,
                    kind in required_kinds(parameters).items())
        if other != name and other not in KNOWN_TOOLS and same and verb in READ_VERBS and known:
            return other
    return None


def stale(result, parameters, facts):
    """Whether a tool's error names an argument that came from a result (say a version read
    earlier): then reading again may fix it. Example: "error: stale version 3, the ticket is at 4"
    with expected_version -> True"""
    keys = [result_fact(key, kind, facts["records"]) for key,
            kind in required_kinds(parameters).items()
            if task_fact(key, kind, facts["task"]) is None]
    return is_error(result) and any(found and found[0] in result.lower() for found in keys)


def own_tool_step(task, name, tools, done):
    """The next call the task's tool `name` needs, or None once it has answered: a reader first when
    a required argument is known from nothing yet, then the tool; after an error naming a value read
    earlier, the reader again and the tool once more."""
    facts, parameters = facts_for(task, done), tools[name]
    reader = reader_for(name, tools, facts)
    made = [i for i, (called, _, _) in enumerate(done) if called == name]
    if not made:
        needs = any(fact(key, kind, facts) is None for key,
                    kind in required_kinds(parameters).items())
        if needs and reader and reader not in [called for called, _, _ in done]:
            return reader, arguments_for(reader, tools[reader], facts)
    elif len(made) == 1 and reader and stale(done[made[0]][2], parameters,
                                             facts_for(task, done[:made[0]])):
        if reader not in [called for called, _, _ in done[made[0]:]]:
            return reader, arguments_for(reader, tools[reader], facts)
    else:
        return None
    answer = final_answer(task, done, []) if done and FINAL_TOOLS.search(name) else None
    return name, arguments_for(name, parameters, facts_for(task, done, answer))


def own_tool_steps(task, tools, done):
    """The next calls to the tools a learner or an MCP server added (any not in KNOWN_TOOLS) that
    the task asks for, as (position, name, arguments); a tool that takes the final answer gets the
    answer so far."""
    steps = []
    for name in tools:
        where = asked_for(task, name) if name not in KNOWN_TOOLS else None
        step = own_tool_step(task, name, tools, done) if where is not None else None
        if step:
            steps.append((where, *step))
    return steps


def plan(task, tools, done=()):
    """The tool calls the task asks for, in the order the task mentions them, as (name, arguments).
    tools maps each offered tool's name to its parameters schema; done is the calls made so far."""
    steps = own_tool_steps(task, tools, done)
    # `count_lines` names that tool: not a command
    named = {name for name in tools if name not in KNOWN_TOOLS}
    mine = [args for _, _, args in steps] + [args for name, args, _ in done
                                             if name not in KNOWN_TOOLS]
    taken = {value for args in mine for value in args.values() if isinstance(value, str)}
    commands = [m for m in re.finditer(r"`([^`]+)`", task) if m.group(1).strip() not in named]
    steps += [(m.start(), "run_shell", {"command": m.group(1).strip()}) for m in commands]
    outside = prose(task)
    listing = LIST_WORDS.search(outside)
    if listing:
        steps.append((listing.start(), "list_dir", {"path": "."}))
    text = re.search(r'"([^"]*)"', task)
    for name in file_names(outside):
        if name in taken:
            continue  # a learner's tool already takes this file
        if WRITE_WORDS.search(outside) and text and "write_file" in tools:
            # "text" is a first guess, as real models make; the harness's error shows the right name
            steps.append((outside.index(name), "write_file",
                          {"path": name, "text": text.group(1) + "\n"}))
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

    Example: {"path": "a", "text": "hi"}, 'Call it as {"path": "x", "content": "..."}' -> {"path":
    "a", "content": "hi"}
    """
    shape = json.loads(re.search(r"Call it as (\{.*\})", error).group(1))
    spare = [value for key, value in args.items() if key not in shape]  # the wrongly named ones
    return {key: args[key] if key in args else (spare.pop(0) if spare else value) for key,
            value in shape.items()}


def next_calls(steps, done, sequential):
    """The calls to make this turn, and the reads skipped because the listing lacks the file."""
    made = [(name, args) for name, args, _ in done]
    pending = []
    for name, args in steps:
        for made_name, made_args, result in done:
            if (made_name, made_args) == (name, args) and "Call it as {" in result:
                args = corrected(made_args, result)  # read the error, fix the call
        if (name, args) not in made or name not in KNOWN_TOOLS:
            # own_tool_steps asks only for calls still due
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


def entries(result):
    """The names in a list_dir result. Example: "a.txt\ntests/\n" -> ["a.txt", "tests/"]"""
    return [line.strip() for line in result.splitlines()
            if line.strip() not in ("", "(empty directory)")]


def describe_listing(args, result, keywords):
    if is_error(result):
        return f"I could not list {args.get('path', '.')}: {result.strip()}"
    names = entries(result)
    shown = names[:MAX_ENTRIES] + (["..."] if len(names) > MAX_ENTRIES else [])
    count = f"{len(names)} entr" + ("y" if len(names) == 1 else "ies")
    return f"The directory holds {count}: {', '.join(shown)}."


def describe_file(args, result, keywords):
    path = args.get("path", "the file")
    if is_error(result):
        return f"I could not read {path}: {result.strip()}"
    page = re.search(r"\n*\[lines (\d+)-(\d+) of (\d+);[^\]]*\]\s*$", result)  # a paged read_file
    lines = (result[:page.start()] if page else result).splitlines()
    first = int(args.get("offset") or 1)
    hits = [(n, line.strip()) for n, line in enumerate(lines, first)
            if any(k in line.lower() for k in keywords)]
    if not hits:
        hits = [(n, line.strip()) for n, line in enumerate(lines, first)
                if line.strip()][:FIRST_LINES]
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
    return ("\n".join([f"`{command}` printed:"] + [f"  {line}"
                                                   for line in lines[:SHELL_LINES]] + more))


def describe_write(args, result, keywords):
    if is_error(result):
        return f"My call write_file {json.dumps(args)} came back with: {result.strip()}"
    return result.strip().capitalize() + "."


# One describer per tool: adding a tool means adding one entry.
DESCRIBE = {"list_dir": describe_listing, "read_file": describe_file, "run_shell": describe_command,
            "write_file": describe_write}


def keywords_of(task):
    """Words to look for in files. Example: "read backend.py and tell me which model" ->
    ["model"]"""
    in_names = {w.lower() for name in file_names(prose(task))
                for w in re.findall(r"[A-Za-z]+", name)}
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", prose(task))]
    return list(dict.fromkeys(w for w in words if w not in STOPWORDS and w not in in_names))


def reported(task, done):
    """The calls an answer reports: all, less the readers called for a tool the task asked for (a
    means, not what was asked) once such a tool has answered."""
    asked = {name for name, _, _ in done
             if name not in KNOWN_TOOLS and asked_for(task, name) is not None}
    return [(name, args, result) for name, args, result in done
            if not asked or name in KNOWN_TOOLS or name in asked]


def final_answer(task, done, skipped):
    keywords = keywords_of(task)
    # a call the summary kept nothing of: no news
    paragraphs = [f"From my summary, {name} {json.dumps(args)}: {result}"
                  if isinstance(result, Remembered)
                  else DESCRIBE[name](args, result, keywords) if name in DESCRIBE
                  else f"{name} returned: {result.strip()[:300]}" for name, args,
                  result in reported(task, done)
                  if result or not isinstance(result, Remembered)]
    paragraphs += [f"There is no {path} in the listing, so I did not read it." for path in skipped]
    return "\n\n".join(paragraphs)


def why(calls, skipped, task=""):
    """The short `reasoning` a gpt-oss model would send with its calls."""
    said = "".join(f"{path} is not in the listing, so I skip reading it. " for path in skipped)
    if len(calls) > 1:
        return (said + f"The task asks for {len(calls)} independent things, so I make "
                       "all the calls at once.")
    name, args = calls[0]
    if name not in KNOWN_TOOLS and asked_for(task, name) is None:
        return (said + "The tool the task asks for needs a value I have not seen yet, so "
                       f"I call {name} first.")
    asks = {"list_dir": "asks for the files here",
            "read_file": f"names the file {args.get('path')}",
            "run_shell": f"gives the command `{args.get('command')}`",
            "write_file": f"asks me to write {args.get('path')}"}.get(name, "names the tool "
                                                                            f"{name}")
    return said + f"The task {asks}, so I call {name}."




def last_listing(done):
    """The entries of the latest list_dir that worked, or None."""
    for name, _, result in reversed(done):
        if name == "list_dir" and not is_error(result):
            return entries(result)
    return None


def count_of(done, listed):
    """A count found in the results: the size of the last listing, else the first number in the last
    result."""
    if not done:
        return None
    name, _, result = done[-1]
    if name == "list_dir" and listed is not None:
        return len(listed)
    number = re.search(r"\d+", result)
    return int(number.group()) if number else None


def facts_for(task, done, answer=None, said=None):
    """What fill() takes values from: the task, its files and quoted text, the last listing, a
    count, the results (and their objects, newest first) and, for an answer, the result lines (a
    property named like a word in a line gets it). said: the words of a reply with nothing to
    report, for a field that wants an answer."""
    listed, files = last_listing(done), file_names(prose(task))
    quoted = re.search(r'"([^"]*)"', task)
    lines = [line.strip() for _, _, result in done for line in result.splitlines() if line.strip()]
    records = [record for _, _, result in reversed(done) for record in [parse_arguments(result)]
               if record]
    return {"task": task, "files": files, "quoted": quoted.group(1) if quoted else None,
            "answer": answer, "said": said, "names": files if listed is None else listed,
            "count": count_of(done, listed), "lines": lines if answer is not None else [],
            "records": records, "results": [result for _, _, result in done]}


def arguments_for(name, parameters, facts):
    """Arguments for a call the task did not spell out: list_dir lists here; any other tool fills
    its schema."""
    if name == "list_dir":
        return {"path": "."}
    return fill({"type": "object", **parameters}, "", facts)


def fitting_tool(tools):
    """The tool to call when a call is required: one that takes the final answer, else list_dir,
    else the first."""
    final = [name for name in tools if FINAL_TOOLS.search(name)]
    return final[0] if final else "list_dir" if "list_dir" in tools else next(iter(tools))


def situation(body):
    """The task, the calls made so far with their results (first those only a summary in the
    conversation lists, with what it kept of them), and the tools offered (name -> parameters
    schema)."""
    messages = body.get("messages") or []
    tools = {tool["function"]["name"]: tool["function"].get("parameters") or {}
             for tool in body.get("tools") or []}
    history = tool_history(messages)
    made = [(name, args) for name, args, _ in history]
    return task_of(messages), [c for c in summarized(messages)
                               if c[:2] not in made] + history, tools


def task_of(messages):
    """The task: the last user message that is no summary. Example: [task, a summary] -> the task's
    text"""
    users = [m for m in messages
             if isinstance(m, dict) and m.get("role") == "user" and not is_summary(m)]
    return text_of(users[-1].get("content")) if users else ""


def is_summary(message):
    """Whether a message holds the lines of a summary the model wrote, whatever words the harness
    put around it and whatever its role (a tool's result is something read, not the model's own
    summary)."""
    return isinstance(message, dict) and message.get("role") != "tool" and \
        SUMMARY_LINE.search(text_of(message.get("content"))) is not None


def asks_to_sum_up(messages):
    """Whether the last message asks the model to sum up its work: a user message, after some work,
    that begins by asking to sum up or summarise, names no file ("Summarize notes.txt" is a task)
    and is no summary itself."""
    asked = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    text = text_of(asked.get("content"))
    worked = any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages)
    return asked.get("role") == "user" and worked and bool(SUMMING_UP.search(text)) and \
        not file_names(prose(text)) and not is_summary(asked)


class Remembered(str):
    """A call's result as a summary kept it: only the lines it kept, maybe none."""


def summarized(messages):
    """The calls the summaries in the conversation list, with the lines each kept: [(name,
    arguments, text), ...]."""
    kept = {}
    for message in filter(is_summary, messages):
        for name, arguments, line in SUMMARY_LINE.findall(text_of(message["content"])):
            lines = kept.setdefault((name, json.dumps(parse_arguments(arguments))), [])
            if line and line not in lines:
                lines.append(line)
    return [(name, json.loads(arguments), Remembered("\n".join(lines))) for (name, arguments),
            lines in kept.items()]


def kept_lines(task, arguments, result):
    """The lines of a result a summary keeps: those that hold a word the task asks about; when none
    does, the first line of a call the task names, or of an error. Example: "Read a.txt, then tell
    me the code word", {"path": "a.txt"}, "x\nThe code word is EMU.\ny" -> ["The code word is
    EMU."]"""
    keywords = keywords_of(task)
    found = [line.strip() for line in result.splitlines()
             if any(k in line.lower() for k in keywords)]
    named = any(isinstance(value, str) and value in task for value in arguments.values())
    if not found and (named or is_error(result)):
        found = result.strip().splitlines()[:1]
    return list(dict.fromkeys(found))[:MAX_MATCHES]


def summary(messages):
    """What a careful model asked to sum up its work writes, from the text it was sent and nothing
    else: the task, then each call made with the lines of its result the task needs (kept_lines());
    the calls an earlier summary lists keep what it kept. Example: -> "Task: ...\nThe calls made,
    with what the task needs from them:\n
    - read_file {"path": "a.txt"}: The code word is EMU.\n- read_file {"path": "b.txt"}:" """
    task = task_of(messages[:-1])
    lines = [f"Task: {task}", "The calls made, with what the task needs from them:"]
    for name, arguments, result in summarized(messages[:-1]) + tool_history(messages):
        found = (result.splitlines() if isinstance(result, Remembered)
                 else kept_lines(task, arguments, result))
        call = f"- {name} {json.dumps(arguments)}:"
        lines += [f"{call} {line[:SUMMARY_CHARS]}" for line in found] or [call]
    return "\n".join(dict.fromkeys(lines))  # a call listed by two summaries is listed once


def next_step(body, task, done, tools):
    """What the task needs next: tool calls, a text answer, or Groq's 400 when the tools are gone
    but a call is due."""
    called_before = any(m.get("role") == "assistant" and m.get("tool_calls")
                        for m in body["messages"])
    if not tools and not called_before:
        return {"reasoning": "A plain chat with no tools, so I say who I am.", "content": HELLO}
    steps = plan(task, tools or dict.fromkeys(KNOWN_TOOLS, {}), done)
    calls, skipped = next_calls(steps, done,
                                sequential=bool(re.search(r"\bthen\b", task, re.IGNORECASE)))
    if not calls and tools and next_page(task, done):
        calls = [next_page(task, done)]  # the file came back cut, and the task wants all of it
    if calls and not tools:
        # What Groq does when a learner stops sending tools mid-conversation: the model calls one
        # anyway.
        name, args = calls[0]
        return error(400, "Tool choice is none, but model called a tool", code="tool_use_failed",
                     failed_generation=json.dumps({"name": name, "arguments": args}))
    if calls:
        # the rest on later turns
        calls = calls[:1] if body.get("parallel_tool_calls") is False else calls
        return {"reasoning": why(calls, skipped, task),
                "tool_calls": [{"name": name, "arguments": args} for name, args in calls]}
    if not steps and not done:
        return {"reasoning": "The task asks for nothing my tools can do, so I "
                             "say what I understand.",
                "content": HELP}
    return {"reasoning": "Every step is done, so I answer from the tool results.",
            "content": final_answer(task, done, skipped)}


def obey(reply, choice, tools, task, done):
    """The reply as tool_choice "required" (some call) or a named function (exactly that call) makes
    it."""
    named = choice["function"]["name"] if isinstance(choice, dict) else None
    calls = reply.get("tool_calls") or []
    if calls and named is None:
        return reply  # a call was required, and the policy makes some anyway
    mine = [call for call in calls if call["name"] == named]
    if mine:
        return {"reasoning": f"The request names {named}, so I call it.", "tool_calls": mine[:1]}
    if "status" in reply:
        return reply  # an error stays an error
    name = named or fitting_tool(tools)
    said = reply.get("content") if FINAL_TOOLS.search(name) else None
    why_this = f"names {name}" if named else f"requires a tool call, and {name} fits best"
    # an answer from the results when there are some; else what the model said is no fact
    facts = facts_for(task, done, said if done else None, said)
    arguments = arguments_for(name, tools[name], facts)
    return {"reasoning": f"The request {why_this}, so I call it.",
            "tool_calls": [{"name": name, "arguments": arguments}]}


def schema_in(messages):
    """The first JSON schema written out in a message, or None: JSON mode with the shape in the
    prompt, as instructor sends it.
    Example: 'Answer in json like {"properties": {"a": {}}}' -> {"properties": {"a": {}}}"""
    for message in messages:
        text = text_of(message.get("content")) if isinstance(message, dict) else ""
        for start in [m.start() for m in re.finditer(r"\{", text)]:
            try:
                value = json.JSONDecoder().raw_decode(text, start)[0]
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("properties"), dict):
                return value
    return None


def structured(reply, body, task, done):
    """A text reply in the shape response_format asks for: for json_schema the schema, and for
    json_object a schema the prompt writes out (else {"answer": text}), filled from the task and
    the tool results (and checked against the schema: a mismatch is a bug here)."""
    form = body.get("response_format") or {}
    if "content" not in reply or form.get("type") not in ("json_object", "json_schema"):
        return reply
    if form["type"] == "json_schema":
        schema = form["json_schema"].get("schema") or {}
    else:
        schema = schema_in(body["messages"])
    if schema is None:
        return {**reply, "content": json.dumps({"answer": reply["content"]})}
    # an answer from the results when there are some; else what the model said is no fact
    said = reply["content"]
    value = fill(schema, "", facts_for(task, done, said if done else None, said))
    problem = schema_problem(value, schema)
    assert problem is None, f"fill() wrote {value!r}, which breaks the schema: {problem}"
    return {**reply, "content": json.dumps(value)}


def policy(body):
    """The demo policy: a request body -> a reply spec (content, tool_calls, reasoning, or an
    error)."""
    task, done, tools = situation(body)
    choice = body.get("tool_choice", "auto")
    if choice == "none" and not done:
        reply = {"reasoning": "A plain chat with no tools, so I say who I am.", "content": HELLO}
    elif choice == "none":  # no call, whatever the task still wants: answer from what there is
        reply = {"reasoning": "tool_choice is none, so I answer from the results I have.",
                 "content": final_answer(task, done, [])}
    else:
        reply = next_step(body, task, done, tools)
    if choice not in ("none", "auto"):
        reply = obey(reply, choice, tools, task, done)
    return structured(reply, body, task, done)


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
            # a str is sent verbatim, even when it is not valid JSON
            arguments = json.dumps(arguments)
        calls.append({"id": call["id"] if "id" in call else call_id(messages, position),
                      "type": "function",
                      "function": {"name": call["name"], "arguments": arguments}})
    message = {"role": "assistant"}
    if spec.get("content") is not None or not calls:
        # like Groq: no content key on a pure tool call
        message["content"] = spec.get("content") or ""
    if spec.get("reasoning"):
        message["reasoning"] = spec["reasoning"]
    if calls:
        message["tool_calls"] = calls
    return message


def show_reasoning(message, body):
    """The reasoning as the request wants it: a field (parsed, the default), gone (include_reasoning
    false, hidden, or a model that does not reason), or in the content between <think> tags
    (raw)."""
    if "reasoning" not in message:
        return message
    form = body.get("reasoning_format")
    if body.get("include_reasoning") is False or form == "hidden" or not reasons(body["model"]):
        return {key: value for key, value in message.items() if key != "reasoning"}
    if form == "raw":
        shown = {key: value for key, value in message.items() if key != "reasoning"}
        return {
            **shown,
            "content": (
                f"<think>\n{message['reasoning']}\n</think>\n\n{message.get('content') or ''}"
            ),
        }
    return message


def cut_to(message, limit):
    """The message cut to `limit` tokens of text and tool arguments (reasoning is free), and whether
    it was cut.
    Example: content "abcdefghij", limit 2 -> content "abcdefgh", True (4 characters a token)"""
    budget = limit * CHARS_PER_TOKEN
    content = message.get("content") or ""
    if len(content) > budget:  # the text ran out of tokens: no tool call comes after it
        return {**{k: v for k, v in message.items() if k != "tool_calls"},
                "content": content[:budget]}, True
    budget -= len(content)
    calls = message.get("tool_calls") or []
    for i, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        if len(arguments) > budget:
            # this call's arguments stop mid-way: invalid JSON, as real models send
            cut = {**call, "function": {**call["function"], "arguments": arguments[:budget]}}
            return {**message, "tool_calls": calls[:i] + [cut]}, True
        budget -= len(arguments)
    return message, False


def timed(prompt, completion):
    """Token counts with Groq's usage timings (seconds) beside them, in Groq's order."""
    prompt_time = round(prompt * PROMPT_SECONDS_PER_TOKEN, 6)
    completion_time = round(completion / TOKENS_PER_SECOND, 6)
    return {"queue_time": QUEUE_SECONDS, "prompt_tokens": prompt, "prompt_time": prompt_time,
            "completion_tokens": completion, "completion_time": completion_time,
            "total_tokens": prompt + completion,
            "total_time": round(prompt_time + completion_time, 6)}


def prompt_text(body):
    """What the model reads, as the demo counts it: the tools first (as real prompts put them), then
    the messages."""
    return json.dumps(body.get("tools") or []) + json.dumps(body["messages"])


class PromptCache:
    """The prompts served lately, each as chained hashes of its 128-token blocks, so that a block's
    hash stands for the whole prefix up to it: how much of a new prompt an earlier one (same model)
    began with."""

    def __init__(self, keep=CACHE_PROMPTS):
        # blocks: prefix hash -> prompts holding it
        self.keep, self.prompts, self.blocks = keep, deque(), {}
        self.lock = threading.Lock()

    def cached_tokens(self, model, text):
        """The tokens of this prompt an earlier one began with, as OpenAI reports them, then
        remember this one.
        Example: the same 5000-character prompt twice -> 0, then 1152 (9 whole blocks of 128
        tokens)."""
        step, chain, digests = (
            CACHE_BLOCK_TOKENS * CHARS_PER_TOKEN,
            hashlib.blake2b(model.encode()),
            [],
        )
        for start in range(0, len(text) - step + 1, step):
            chain.update(text[start:start + step].encode())
            digests.append(chain.digest()[:8])
        with self.lock:
            hit = next((i for i, digest in enumerate(digests) if digest not in self.blocks),
                       len(digests))
            self.prompts.append(digests)
            for digest in digests:
                self.blocks[digest] = self.blocks.get(digest, 0) + 1
            if len(self.prompts) > self.keep:
                for digest in self.prompts.popleft():
                    self.blocks[digest] -= 1
                    if not self.blocks[digest]:
                        del self.blocks[digest]
        tokens = hit * CACHE_BLOCK_TOKENS
        return tokens if tokens >= CACHE_MIN_TOKENS else 0


def estimate_usage(body, message, limit=None, cut=False, cached=0):
    """About four characters a token: enough for token budgets to work offline. A limit caps the
    completion; cached is the prompt's cached part, reported in OpenAI's prompt_tokens_details
    (Groq's SDK reads it too)."""
    prompt = len(prompt_text(body)) // CHARS_PER_TOKEN + 1
    completion = len(json.dumps(message)) // CHARS_PER_TOKEN + 1
    if limit:
        completion = limit if cut else min(completion, limit)
    return {**timed(prompt, completion), "prompt_tokens_details": {"cached_tokens": cached}}


def assemble(spec, body, cached=0):
    """The assistant message for a reply spec as the request shapes it (reasoning shown or not, max
    tokens), with its finish_reason and usage (cached: the prompt tokens an earlier prompt began
    with)."""
    message, cut = build_message(spec, body["messages"]), False
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if "message" not in spec:
        message = show_reasoning(message, body)
        if limit:
            message, cut = cut_to(message, limit)
    finish = (spec.get("finish_reason")
              or ("length" if cut else "tool_calls" if message.get("tool_calls") else "stop"))
    if spec.get("usage") is False:  # a server that counts nothing: the harness must estimate
        return message, finish, None
    return message, finish, spec.get("usage") or estimate_usage(body, message, limit, cut, cached)


def completion(spec, body, request_id, cached=0):
    message, finish, usage = assemble(spec, body, cached)
    return {"id": f"chatcmpl-{uuid.uuid4()}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            **({"usage": usage} if usage else {}), "system_fingerprint": FINGERPRINT,
            "x_groq": {"id": request_id}, "service_tier": "on_demand"}


def pieces(text):
    """Text cut into a few words a piece. Example: "a b c d e" -> ["a b c d ", "e"] (4 a piece)"""
    words = re.split(r"(?<=\s)(?=\S)", text) if text else []
    return ["".join(words[i:i + WORDS_PER_PIECE]) for i in range(0, len(words), WORDS_PER_PIECE)]


def sse(data):
    return f"data: {json.dumps(data)}\n\n"


def call_deltas(message, split):
    """The tool-call deltas: each call whole (Groq), or with split, id and name once and then the
    arguments in fragments of that many characters (OpenAI)."""
    deltas = []
    for index, call in enumerate(message.get("tool_calls") or []):
        if not split:
            deltas.append({"tool_calls": [{"index": index, **call}]})
            continue
        fn, arguments = call["function"], call["function"]["arguments"]
        deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                       "function": {"name": fn["name"], "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": index,
                                    "function": {"arguments": arguments[i:i + split]}}]}
                   for i in range(0, len(arguments), split)]
    return deltas


def stream_events(spec, body, request_id, cached=0):
    """The SSE events for a reply, and whether the stream ends normally with [DONE]."""
    message, finish, usage = assemble(spec, body, cached)
    head = {"id": f"chatcmpl-{uuid.uuid4()}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": body["model"], "system_fingerprint": FINGERPRINT}

    def chunk(delta, finish=None, **extra):
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse({**head, "choices": [choice], **extra})

    events = [chunk({"role": "assistant", "content": ""}, x_groq={"id": request_id})]
    if message.get("reasoning"):
        events.append(chunk({"reasoning": message["reasoning"]}))
    events += [chunk({"content": piece}) for piece in pieces(message.get("content") or "")]
    events += [chunk(delta) for delta in call_deltas(message, spec.get("split_arguments"))]
    if spec.get("error_event") is not None:
        events.append(f"event: error\ndata: {json.dumps({'error': spec['error_event']})}\n\n")
        return events, False
    # Groq puts usage on the finish chunk; include_usage adds OpenAI's usage-only chunk as well.
    events.append(chunk({}, finish,
                        **({"usage": usage, "x_groq": {"id": request_id, "usage": usage}} if usage
                           else {"x_groq": {"id": request_id}})))
    if usage and (body.get("stream_options") or {}).get("include_usage"):
        events.append(sse({**head, "choices": [], "usage": usage}))
    return events, True


def scripted_events(spec, body, request_id, cached=0):
    """A stream's events: exactly the scripted "events" if there are any, else the reply's own."""
    if "events" not in spec:
        return stream_events(spec, body, request_id, cached)
    return [event if isinstance(event, str) else sse(event)
            for event in spec["events"]], spec.get("done", True)


def parse_json(raw):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# The Responses API: the same policy, reached through chat messages. Input items become messages
# (function_call items an assistant message's tool_calls, function_call_output items tool
# messages); the reply goes back as output items.

def unknown(at, key):
    """OpenAI's 400 for a field it does not take [pydantic/pydantic-ai#3653]; for one the openai
    SDK adds, the demo also says how to send the item back."""
    hint = f" {SEND_BACK}" if key in SDK_FIELDS else ""
    return error(400, f"Unknown parameter: '{at}'.{hint}", param=at, code="unknown_parameter")


def missing(at):
    """OpenAI's 400 for a field left out [openai/codex#6725]."""
    return error(400, f"Missing required parameter: '{at}'.", param=at,
                 code="missing_required_parameter")


def wrong_type(at, expected, value):
    """OpenAI's words [Jeffser/Alpaca#904].
    Example: "top_p", "a number", "1" -> "Invalid type for 'top_p': expected a number, but got
    a string instead." """
    got = {bool: "a boolean", int: "an integer", float: "a decimal number", str: "a string",
           list: "an array", dict: "an object"}.get(type(value), "null")
    return error(400, f"Invalid type for '{at}': expected {expected}, but got {got} instead.",
                 param=at, code="invalid_type")


def invalid_value(at, value, allowed):
    """Example: "input[0].role", "bot", ITEM_ROLES -> "Invalid value: "bot". Supported values
    are: 'user', 'assistant', 'system', 'developer'." """
    said = ", ".join(map(repr, allowed))
    return error(400, f"Invalid value: {json.dumps(value)}. Supported values are: {said}.",
                 param=at, code="invalid_value")


def check_item(i, item):
    """The first problem with input[i]: its type, its keys (ITEM_KEYS) and their types, or None."""
    at = f"input[{i}]"
    if not isinstance(item, dict):
        return wrong_type(at, "an object", item)
    kind = item.get("type", "message")
    if kind not in ITEM_KEYS:  # the demo names the kinds it reads, not every kind OpenAI has
        return invalid_value(f"{at}.type", kind, ITEM_KEYS)
    keys, required = ITEM_KEYS[kind]
    extra = [key for key in item if key not in keys]
    if extra:
        return unknown(f"{at}.{extra[0]}", extra[0])
    absent = [key for key in required if key not in item]
    if absent:
        return missing(f"{at}.{absent[0]}")
    if kind == "message" and item["role"] not in ITEM_ROLES:
        return invalid_value(f"{at}.role", item["role"], ITEM_ROLES)
    for key in ("content", "output"):
        if key in item and kind != "reasoning" and not isinstance(item[key], (str, list)):
            return wrong_type(f"{at}.{key}", "a string or an array of content parts", item[key])
    for key in ("call_id", "name", "arguments"):
        if key in item and not isinstance(item[key], str):
            return wrong_type(f"{at}.{key}", "a string", item[key])
    return None


def check_outputs(items):
    """OpenAI's rules: a function_call_output answers a function_call before it
    [continuedev/continue#10092], and every function_call is answered [anomalyco/opencode#16717]."""
    calls, answered = [], set()
    for item in items:
        if item["type"] == "function_call":
            calls.append(item["call_id"])
        elif item["type"] == "function_call_output" and item["call_id"] not in calls:
            return error(400, "No tool call found for function call output with call_id "
                              f"{item['call_id']}.", param="input")
        elif item["type"] == "function_call_output":
            answered.add(item["call_id"])
    for call in calls:
        if call not in answered:
            return error(400, f"No tool output found for function call {call}.", param="input")
    return None


def check_function_tools(body):
    """Function tools as the Responses API takes them, name and parameters at the top: a tool in
    the chat shape, {"type": "function", "function": {...}}, has no name
    [diegosouzapw/OmniRoute#1914]. Then tool_choice: none, auto, required, or
    {"type": "function", "name": ...} naming a tool given."""
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        return wrong_type("tools", "an array", tools)
    for i, tool in enumerate(tools):
        at = f"tools[{i}]"
        if not isinstance(tool, dict):
            return wrong_type(at, "an object", tool)
        if tool.get("type") != "function":  # the demo runs no built-in tool (web_search...)
            return invalid_value(f"{at}.type", tool.get("type"), ["function"])
        if "name" not in tool:
            return missing(f"{at}.name")
        if not isinstance(tool["name"], str) or not re.fullmatch(r"[a-zA-Z0-9_-]+", tool["name"]):
            # [openai/openai-dotnet#441]
            return error(400, f"Invalid '{at}.name': string does not match pattern. Expected a "
                              "string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                         param=f"{at}.name", code="invalid_value")
        if tool.get("parameters") is not None and not isinstance(tool["parameters"], dict):
            return wrong_type(f"{at}.parameters", "an object", tool["parameters"])
    choice = body.get("tool_choice", "auto")
    if choice not in ("auto", "none") and not tools:  # a call is required, but of no tool
        return error(400, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when "
                          "'tools' are specified.", param="tool_choice")  # chat's words
    if choice in TOOL_CHOICES:
        return None
    named = isinstance(choice, dict) and isinstance(choice.get("name"), str)
    if not named or choice.get("type") != "function":
        return invalid_value("tool_choice", choice, TOOL_CHOICES + ("a function",))
    if choice["name"] not in [tool["name"] for tool in tools]:
        return error(400, f"Tool choice '{choice['name']}' not found in 'tools' parameter.",
                     param="tool_choice")
    return None


def check_settings(body):
    """max_output_tokens (16 at least); text.format: text, json_object or a named json_schema."""
    limit = body.get("max_output_tokens")
    if limit is not None and not is_integer(limit):
        return wrong_type("max_output_tokens", "an integer", limit)
    if limit is not None and limit < MIN_OUTPUT_TOKENS:
        return error(400, "Invalid 'max_output_tokens': integer below minimum value. Expected a "
                          f"value >= {MIN_OUTPUT_TOKENS}, but got {limit} instead.",
                     param="max_output_tokens", code="integer_below_min_value")
    text = body.get("text") or {}
    if not isinstance(text, dict):
        return wrong_type("text", "an object", text)
    form = text.get("format") or {"type": "text"}
    if not isinstance(form, dict):
        return wrong_type("text.format", "an object", form)
    kinds = ("text", "json_object", "json_schema")
    if form.get("type") not in kinds:
        return invalid_value("text.format.type", form.get("type"), kinds)
    for key in ("name", "schema") if form["type"] == "json_schema" else ():
        if key not in form:
            return missing(f"text.format.{key}")
    return None


def responses_items(server, body, groq):
    """The request's whole conversation as input items (first a stored response's, when it names
    one), and the first problem with the request, or None."""
    for key in body:
        if key not in RESPONSES_KEYS:
            return None, unknown(key, key)
    given = body.get("input")
    if given is None:
        return None, missing("input")
    if not isinstance(given, (str, list)):
        return None, wrong_type("input", "a string or an array of input items", given)
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    for i, item in enumerate(items):
        problem = check_item(i, item)
        if problem:
            return None, problem
    earlier = body.get("previous_response_id")
    if earlier is not None and groq:
        # "The Responses API on Groq doesn't support stateful conversations yet"
        # (console.groq.com/docs/responses-api); the words are the demo's
        return None, error(400, "previous_response_id is not supported: Groq's Responses API "
                                "keeps no conversation, so send all of it in `input`.",
                           param="previous_response_id")
    if earlier is not None and earlier not in server.stored:
        # OpenAI's words [maximhq/bifrost#2441]
        return None, error(400, f"Previous response with id '{earlier}' not found.",
                           param="previous_response_id", code="previous_response_not_found")
    items = server.stored.get(earlier, []) + [{"type": "message", **item} for item in items]
    return items, check_outputs(items) or check_function_tools(body) or check_settings(body)


def chat_messages(items, instructions=None):
    """The chat messages the input items stand for, after the instructions as a system message.
    Example: [user "hi", function_call c1, function_call_output c1] -> [user "hi", assistant with
    tool_calls [c1], tool c1]"""
    messages = [{"role": "system", "content": instructions}] if instructions else []
    for item in items:
        if item["type"] == "message":
            messages.append({"role": item["role"], "content": text_of(item["content"])})
        elif item["type"] == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
                messages[-1]["tool_calls"].append(call)  # calls side by side are one turn
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item["type"] == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": text_of(item["output"])})
    return messages


def chat_request(body, items):
    """The chat request a Responses request stands for: what the policy and the usage read."""
    fields = ("name", "description", "parameters")
    tools = [{"type": "function", "function": {key: tool[key] for key in fields if key in tool}}
             for tool in body.get("tools") or []]
    choice = body.get("tool_choice", "auto")
    if isinstance(choice, dict):  # {"type": "function", "name": ...}: the chat shape nests the name
        choice = {"type": "function", "function": {"name": choice["name"]}}
    chat = {"model": body["model"], "messages": chat_messages(items, body.get("instructions")),
            "tools": tools, "tool_choice": choice,
            "max_completion_tokens": body.get("max_output_tokens")}
    form = (body.get("text") or {}).get("format") or {"type": "text"}
    if form["type"] == "json_schema":  # name and schema at the top: the chat shape nests them
        chat["response_format"] = {"type": "json_schema", "json_schema": form}
    elif form["type"] == "json_object":
        chat["response_format"] = form
    if body.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    return chat


def output_items(message, status):
    """The output items for an assistant message: its text as a message item, a function_call item
    for each call (openai 3.63 response_output_message.py, response_function_tool_call.py)."""
    items = []
    if message.get("content"):
        text = {"type": "output_text", "text": message["content"], "annotations": [],
                "logprobs": []}
        items.append({"id": f"msg_{uuid.uuid4().hex}", "type": "message", "status": status,
                      "role": "assistant", "content": [text]})
    for call in message.get("tool_calls") or []:
        items.append({"id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": status,
                      "call_id": call["id"], "name": call["function"]["name"],
                      "arguments": call["function"]["arguments"]})
    return items


def response_object(spec, body, chat, cached=0):
    """The response for a reply spec (openai 3.63 types/responses/response.py): incomplete when
    max_output_tokens cut it short, with usage in the Responses API's words."""
    message, finish, usage = assemble(spec, chat, cached)
    status = "incomplete" if finish == "length" else "completed"
    if usage:
        usage = {"input_tokens": usage["prompt_tokens"],
                 "input_tokens_details": {"cached_tokens": cached},
                 "output_tokens": usage["completion_tokens"],
                 "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": usage["total_tokens"]}
    cut = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
            "status": status, "error": None, "incomplete_details": cut,
            "instructions": body.get("instructions"), "model": body["model"],
            "output": output_items(message, status), "usage": usage,
            "max_output_tokens": body.get("max_output_tokens"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "store": body.get("store", True),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "metadata": body.get("metadata") or {}}


def response_events(response):
    """A response as the Responses API streams it: response.created and .in_progress; each output
    item added, its text or arguments in deltas, done; then response.completed (or .incomplete).
    Each event says its type and sequence_number, and no [DONE] ends the stream (OpenAI's streaming
    events reference; openai 3.63 types/responses/*_event.py)."""
    events = []

    def event(kind, **fields):
        data = {"type": kind, "sequence_number": len(events), **fields}
        events.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n")

    started = {**response, "status": "in_progress", "output": [], "usage": None,
               "incomplete_details": None}
    event("response.created", response=started)
    event("response.in_progress", response=started)
    for index, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            part, text = item["content"][0], item["content"][0]["text"]
            event("response.output_item.added", output_index=index,
                  item={**item, "status": "in_progress", "content": []})
            event("response.content_part.added", **at, content_index=0, part={**part, "text": ""})
            for piece in pieces(text):
                event("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
            event("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
            event("response.content_part.done", **at, content_index=0, part=part)
        else:
            event("response.output_item.added", output_index=index,
                  item={**item, "status": "in_progress", "arguments": ""})
            for piece in pieces(item["arguments"]):
                event("response.function_call_arguments.delta", **at, delta=piece)
            event("response.function_call_arguments.done", **at, name=item["name"],
                  arguments=item["arguments"])
        event("response.output_item.done", output_index=index, item=item)
    event(f"response.{response['status']}", response=response)
    return events


def responses_reply(server, body, groq):
    """A Responses request's reply: a 400 or 404 for a bad request, else the next scripted reply
    or the policy's, with the chat request that stands for it and the conversation to store."""
    if not isinstance(body, dict):
        return error(400, "We could not parse the JSON body of your request: the API expects a "
                          "JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return missing("model")
    if model not in server.models:
        return model_not_found(model, server.models)
    items, problem = responses_items(server, body, groq)
    if problem:
        return problem
    stored = items if body.get("store", True) is not False and not groq else None
    reply = server.next_reply() or {"policy": True}
    return {**reply, "chat": chat_request(body, items), "items": stored}


# ---------------------------------------------------------------------------------------------
# Routes: the real paths only, as Groq serves them under /openai/v1 and OpenAI under /v1.

def unknown_url(method, path):
    return error(404, f"Unknown request URL: {method} {path}. Please check the URL for typos, or "
                      f"see the docs at {GROQ_DOCS}", code="unknown_url")


def nearest(name, names):
    """The name most like `name`, letter case aside.
    Example: "gpt-oss-120b", MODELS -> "openai/gpt-oss-120b" """
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), lowered, n=1, cutoff=0)
    return lowered[close[0]] if close else None


def model_not_found(name, models):
    """Groq's and OpenAI's 404 (tests/wire.md 6), ending with the demo's own hint: the model it
    serves that is nearest to the name asked for."""
    return error(404, f"The model `{name}` does not exist or you do not have access to it. "
                      f"Did you mean `{nearest(name, models)}`?", code="model_not_found")


def model_object(name):
    return {"id": name, "object": "model", "created": 0, "owned_by": "demo"}


def models_reply(server, name):
    """GET {prefix}/models (every model served) or {prefix}/models/{name} (one of them, or Groq's
    404). The name arrives URL-encoded when a client quotes its slash: openai%2Fgpt-oss-120b is
    openai/gpt-oss-120b."""
    if name is None:
        return {"status": 200,
                "body": {"object": "list", "data": [model_object(n) for n in server.models]}}
    name = unquote(name)
    return {"status": 200, "body": model_object(name)} if name in server.models else \
        model_not_found(name, server.models)


def chat_reply(server, body, groq):
    """A chat request's reply: a 400 or 404 for a bad request, else the next scripted reply or the
    policy."""
    if not isinstance(body, dict):
        return (error(400, "We could not parse the JSON body of your request: the API "
                           "expects a JSON object."))
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return error(400, "property 'model' is missing", param="model")
    if model not in server.models:
        return model_not_found(model, server.models)
    if isinstance(body.get("messages"), list) and asks_to_sum_up(body["messages"]):
        # scripted or not: the demo sums up
        return validate(body, groq) or {"content": summary(body["messages"])}
    return validate(body, groq) or server.next_reply() or {"policy": True}


def respond(server, method, path, headers, body):
    """Decide the reply spec for one request: auth, route, then the route's own reply."""
    path = path.split("?")[0]
    if server.api_key is not None and headers.get("Authorization") != f"Bearer {server.api_key}":
        return error(401, "Invalid API Key", code="invalid_api_key")
    route = ROUTE.fullmatch(path)
    endpoint, rest = route.groups() if route else (None, None)
    if method == "POST" and endpoint == "chat/completions" and rest is None:
        return chat_reply(server, body, groq=path.startswith("/openai/"))
    if method == "POST" and endpoint == "responses" and rest is None:
        return responses_reply(server, body, groq=path.startswith("/openai/"))
    if method == "GET" and endpoint == "models":
        return models_reply(server, rest)
    return unknown_url(method, path)  # Groq's answer for a wrong path and for a wrong method alike


# ---------------------------------------------------------------------------------------------
# The HTTP server.

def too_large(size):
    return error(413, f"Request Entity Too Large: the body is {size} bytes, and the limit "
                      f"is {MAX_BODY_BYTES}.",
                 code="request_too_large")


def chunk_size(line):
    """The size a chunked body's size line gives, or None. Example: b"1a;name=x\r\n" -> 26"""
    try:
        size = int(line.split(b";")[0], 16)
    except ValueError:
        return None
    return size if size >= 0 else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: the openai client reuses its connection
    disable_nagle_algorithm = True  # small replies go out at once, without 40 ms delayed-ACK stalls

    def log_message(self, format, *args):
        pass  # a line per request would drown the lesson's output

    def do_GET(self):
        self.answer()

    # Every method is answered the same way: the routes decide what is served (a 404 for the rest).
    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def answer(self):
        self.request_id = "req_" + uuid.uuid4().hex[:26]
        self.faults = {}
        try:
            raw, problem = self.read_body()
            body = parse_json(raw)
            self.server.record(self.command, self.path, self.headers, body)
            self.send_reply(problem or respond(self.server, self.command, self.path, self.headers,
                                               body), body)
        except ConnectionError:
            self.close_connection = True  # the client hung up; there is no one left to tell

    def read_body(self):
        """The request body, and an error reply instead when it cannot or must not be read."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self.read_chunked()
        length = (self.headers.get("Content-Length") or "0").strip()
        if not (length.isascii() and length.isdigit()):
            self.close_connection = True  # where this body ends is anyone's guess
            return None, error(400, f"Invalid Content-Length header: {length!r}")
        if int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            # read it, so the client is listening for the 413
            self.skip(min(int(length), MAX_DRAIN_BYTES))
            return None, too_large(int(length))
        return self.rfile.read(int(length)), None

    def read_chunked(self):
        """A body sent as chunks: a hex size line, that many bytes and a line end, until a size of
        0."""
        data, size = bytearray(), 0
        while True:
            length = chunk_size(self.rfile.readline(MAX_LINE))
            if length is None:
                self.close_connection = True
                return (None, error(400, "Invalid chunked request body: a chunk size line "
                                         "is not a hex number."))
            size += length
            if length == 0 or size > MAX_DRAIN_BYTES:
                break
            if size > MAX_BODY_BYTES:
                self.skip(length)  # too large already: read on, keep nothing
            else:
                data += self.rfile.read(length)
            self.rfile.readline(MAX_LINE)  # the line end after each chunk
        while length == 0 and self.rfile.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):
            pass  # trailer lines, up to the blank line that ends the request
        if size > MAX_BODY_BYTES:
            self.close_connection = True
            return None, too_large(size)
        return bytes(data), None

    def skip(self, size):
        while size > 0:
            got = self.rfile.read(min(size, 65536))
            if not got:
                return
            size -= len(got)

    def send_reply(self, reply, body):
        """Send a reply spec: wait or hang up if it says so, then a status reply, a stream, a
        completion or a response."""
        # the scripted item's transport keys (trickle, keepalive...) hold for the policy too
        self.faults = reply
        time.sleep(reply.get("delay", 0))
        if reply.get("drop"):
            self.close_connection = True  # hang up without a word, like a crashed proxy
            return
        chat = reply.get("chat", body)  # a Responses request: the chat request it stands for
        spec = policy(chat) if reply.get("policy") else reply
        if "status" in spec:
            self.send_body(spec["status"], spec.get("body"), spec.get("headers"),
                           spec.get("content_type"))
            return
        # a prompt read: cached
        cached = self.server.cache.cached_tokens(chat["model"], prompt_text(chat))
        if "chat" in reply:
            response = response_object(spec, body, chat, cached)
            self.server.store(response["id"], reply["items"], response["output"])
            if not body.get("stream"):
                self.send_body(200, response)
            elif "events" in spec:
                self.send_stream(*scripted_events(spec, chat, self.request_id))
            else:
                self.send_stream(response_events(response), complete=False)  # no [DONE]
        elif body.get("stream"):
            self.send_stream(*scripted_events(spec, body, self.request_id, cached))
        else:
            self.send_body(200, completion(spec, body, self.request_id, cached))

    def send_body(self, status, body, headers=None, kind=None):
        if body is None:
            body = {"error": {"message": STATUS_TEXT.get(status, "Error"),
                              "type": "server_error" if status >= 500 else "invalid_request_error"}}
        if isinstance(body, (dict, list)):
            data, default = json.dumps(body).encode(), "application/json"
        else:
            # e.g. a proxy's 502 page
            data, default = str(body).encode(), "text/html; charset=utf-8"
        forever = self.faults.get("trickle_forever")
        self.send_response(status)
        self.send_header("Content-Type", kind or default)
        self.send_header(*(("Connection", "close") if forever
                           else ("Content-Length", str(len(data)))))
        self.send_header("x-request-id", self.request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        if forever:
            self.hold(b" ", forever)  # JSON whitespace: the body never ends
        elif self.command != "HEAD":
            self.write(data)

    def send_stream(self, events, complete):
        """Send SSE events, then data: [DONE] if complete (a Chat Completions stream that ended)."""
        if self.faults.get("cut_after") is not None:
            events, complete = events[:self.faults["cut_after"]], False
        events = [KEEP_ALIVE] * self.faults.get("keepalive", 0) + events
        # An SSE body has no length: closing the connection is what ends it.
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("x-request-id", self.request_id)
        self.end_headers()
        if self.faults.get("trickle_forever"):
            return self.hold(KEEP_ALIVE.encode(), self.faults["trickle_forever"])
        for event in events:
            self.write(event.encode())
        if complete:
            self.write(b"data: [DONE]\n\n")

    def write(self, data):
        """Send bytes: at once, or with the script's "trickle" one byte at a time, that many seconds
        apart."""
        pause = self.faults.get("trickle")
        if not pause:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            self.wfile.write(data[i:i + 1])
            if self.server.stopping.wait(pause):
                # ends this handler like a hang-up
                raise ConnectionAbortedError("the server is stopping")

    def hold(self, beat, pause):
        """Send `beat` every `pause` seconds until the client hangs up (a write fails) or the server
        stops."""
        self.close_connection = True
        while not self.server.stopping.is_set():
            self.wfile.write(beat)
            self.server.stopping.wait(pause)


class DemoServer(ThreadingHTTPServer):
    """The running server and its state: the scripted replies still to send and the requests
    received."""
    daemon_threads = True  # a client that never hangs up must not keep Python running

    def __init__(self, script=None, api_key=None, models=None, host="127.0.0.1", port=0, keep=None):
        super().__init__((host, port), Handler)
        self.api_key = api_key
        # the names served: the built-in list, or the demo and the names given
        self.models = MODELS if models is None else tuple(dict.fromkeys([MODEL, *models]))
        self.port = self.server_address[1]
        self.url = f"http://{host}:{self.port}/v1"
        # keep: how many requests to remember (None: all, as tests want; a long-running server keeps
        # a few)
        self.requests = [] if keep is None else deque(maxlen=keep)
        self.script = deque()
        self.cache = PromptCache()
        self.stored = {}  # response id -> its conversation as input items (previous_response_id)
        self.lock = threading.Lock()  # handler threads share the queue and the record
        self.stopping = threading.Event()  # set by stop(): ends trickles and held-open replies
        self.thread = None
        self.push(*(script or []))

    def push(self, *replies):
        """Queue scripted replies, sent one a request in order; a bare string means {"content": that
        string}.

        What a reply says (any mix):
          {"content": "hi", "reasoning": "r"}           a text answer
          {"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}, "id": "c1"}]}
                                                        calls ("id" optional; "arguments" as a str
                                                        is sent verbatim)
          {"finish_reason": "length", "usage": {...}}   override what the demo would compute
          {"usage": False}                              send no usage at all, as some servers do
          {"message": {...}}                            this exact message, nothing added
          {"policy": True}                              let the demo policy answer this one
          {"status": 429, "body": {...}, "headers": {"retry-after": "1"}}
                                                        any status and body; a str body is sent
                                                        verbatim ("" too)
          {"status": 200, "body": "data: [DONE]\\n\\n", "content_type": "text/event-stream"}
                                                        its Content-Type
        How it travels:
          {"delay": 0.5}                wait this long first
          {"drop": True}                hang up without answering
          {"trickle": 0.05}             send the body one byte at a time, this many seconds apart
          {"trickle_forever": 1}        headers, then forever a byte a second: a space (JSON), or a
                                        ": keep-alive" line (stream), until the client hangs up
        For a stream request:
          {"split_arguments": 3}        tool-call arguments in 3-character fragments (OpenAI style)
          {"cut_after": 2}              only the first 2 events, then hang up (no [DONE])
          {"error_event": {"message": "x", "type": "server_error"}}
                                        an error event instead of the finish
          {"keepalive": 3}              3 ": keep-alive" comment lines before the first event
          {"events": [{"choices": []}, "data: raw\\n\\n"], "done": False}
                                        exactly these events (a dict as "data: <json>", a str as it
                                        is), then [DONE] unless "done" is False
        """
        with self.lock:
            self.script.extend({"content": r} if isinstance(r, str) else dict(r) for r in replies)

    def next_reply(self):
        with self.lock:
            return self.script.popleft() if self.script else None

    def store(self, response_id, items, output):
        """Keep a response's conversation (None: not stored), the latest KEEP_RESPONSES of them."""
        if items is None:
            return
        with self.lock:
            self.stored[response_id] = items + output
            while len(self.stored) > KEEP_RESPONSES:
                del self.stored[next(iter(self.stored))]  # dicts keep their order: the oldest goes

    def record(self, method, path, headers, body):
        entry = {"method": method, "path": path,
                 "headers": {k.lower(): v for k, v in headers.items()},
                 "body": body, "time": time.monotonic()}  # the arrival time, for tests/bench.py
        with self.lock:
            self.requests.append(entry)

    def stop(self):
        self.stopping.set()
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
    """Start the server on a background daemon thread and return at once. models: the names it
    serves besides demo (default: MODELS)."""
    server = DemoServer(script, api_key, models, host, port)
    server.thread = threading.Thread(target=server.serve_forever, args=(POLL_SECONDS,), daemon=True)
    server.thread.start()
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run the offline demo model on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="port to listen on (0: any free port)")
    parser.add_argument("--key", help="require this API key (default: accept any)")
    parser.add_argument("--script", metavar="FILE.json",
                        help="a JSON list of scripted replies to send first")
    parser.add_argument("--model", action="append", dest="models", metavar="NAME",
                        help="serve this model name besides demo (repeatable; "
                             "default: the built-in list)")
    args = parser.parse_args(argv)
    try:
        script = json.loads(Path(args.script).read_text(encoding="utf-8")) if args.script else None
        server = DemoServer(script, args.key, args.models, port=args.port, keep=KEEP_REQUESTS)
    except (OSError, ValueError) as e:
        parser.error(str(e))
    print(f"demo model listening on {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.stopping.set()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
