"""The offline demo model over real HTTP: routes, strict validation, scripted replies, the demo policy."""
import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import openai
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_model  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": name, "description": f"the {name} tool",
                                           "parameters": {"type": "object", "properties": {}}}}
         for name in ("read_file", "list_dir", "run_shell", "write_file")]
CHAINED_TASK = "List the files here, then read backend.py and tell me which model it calls."
LISTED = "backend.py\nharness.py\ntests/\n"


@pytest.fixture
def demo():
    with demo_model.start() as server:
        yield server


def client(server, key="any"):
    return openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=5)


def request(server, method, path, body=None, raw=None, headers=None):
    """Send one request; return (status, headers, JSON body or text)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    try:
        return response.status, response.headers, json.loads(text)
    except ValueError:
        return response.status, response.headers, text


def post(server, body, **kwargs):
    return request(server, "POST", "/v1/chat/completions", body, **kwargs)


def chat(*messages, **fields):
    return {"model": "demo", "messages": list(messages), **fields}


def user(text):
    return {"role": "user", "content": text}


def calls(*pairs, content=""):
    """An assistant message with tool calls, built the clean way: calls(("id1", "list_dir", {"path": "."}))"""
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for id_, name, args in pairs]}


def result(call_id, text):
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def rejection(server, body):
    status, _, reply = post(server, body)
    assert status == 400, reply
    return reply["error"]


def reply_message(server, body):
    status, _, reply = post(server, body)
    assert status == 200, reply
    return reply["choices"][0]["message"]


def sse_events(text):
    return [block for block in text.split("\n\n") if block]


# --- routes, auth, model ---------------------------------------------------------------------

def test_models_lists_demo_and_the_configured_models():
    with demo_model.start(models=["openai/gpt-oss-120b"]) as server:
        status, _, reply = request(server, "GET", "/v1/models")
    assert status == 200
    assert reply == {"object": "list", "data": [
        {"id": "demo", "object": "model", "created": 0, "owned_by": "demo"},
        {"id": "openai/gpt-oss-120b", "object": "model", "created": 0, "owned_by": "demo"}]}


def test_models_lists_every_built_in_model_by_default(demo):
    """With no models given, the demo serves its built-in list (itself, Groq's chat models, backend.py's defaults)
    and the listing names exactly those."""
    status, _, reply = request(demo, "GET", "/v1/models")
    assert status == 200 and [m["id"] for m in reply["data"]] == list(demo_model.MODELS)
    assert {"demo", "openai/gpt-oss-120b", "llama-3.3-70b-versatile", "qwen/qwen3-32b"} <= set(demo_model.MODELS)


# Groq's and OpenAI's 404 [wire.md 4.1.5, E12], its message ending with the demo's own hint: the
# nearest name the server lists (tests/wire.md 6)
NOT_FOUND = {"message": "The model `gpt-oss-120b` does not exist or you do not have access to it. "
                        "Did you mean `openai/gpt-oss-120b`?",
             "type": "invalid_request_error", "code": "model_not_found"}


def test_a_model_outside_the_listing_gets_404_on_every_route(demo):
    """The listing and the 404 agree: a name the listing lacks (Groq's names carry a prefix) is refused by chat
    and by GET /models/{id} alike, with Groq's model_not_found body [wire.md 4.1.5, E12]."""
    listed = [m["id"] for m in request(demo, "GET", "/v1/models")[2]["data"]]
    assert "gpt-oss-120b" not in listed
    status, _, reply = post(demo, chat(user("hi"), model="gpt-oss-120b"))
    assert (status, reply["error"]) == (404, NOT_FOUND)
    assert request(demo, "GET", "/v1/models/gpt-oss-120b")[2]["error"] == NOT_FOUND
    for name in listed:
        assert request(demo, "GET", "/v1/models/" + name.replace("/", "%2F"))[2]["id"] == name
        assert post(demo, chat(user("hi"), model=name))[0] == 200, name


def test_a_model_id_is_url_decoded(demo):
    """openai%2Fgpt-oss-120b is openai/gpt-oss-120b: clients that quote the slash get the model, not a 404."""
    status, _, reply = request(demo, "GET", "/openai/v1/models/openai%2Fgpt-oss-120b")
    assert status == 200 and reply["id"] == "openai/gpt-oss-120b"
    assert client(demo).models.retrieve("openai/gpt-oss-120b").id == "openai/gpt-oss-120b"


def test_groq_style_path_is_served(demo):
    status, _, reply = request(demo, "POST", "/openai/v1/chat/completions", chat(user("hi")))
    assert status == 200 and reply["object"] == "chat.completion"


def test_unknown_path_is_404_with_json_error(demo):
    status, _, reply = request(demo, "GET", "/v1/nothing")
    assert status == 404 and "Unknown request URL" in reply["error"]["message"]


def test_wrong_api_key_gets_groq_401():
    with demo_model.start(api_key="gsk_right") as server:
        status, _, reply = post(server, chat(user("hi")), headers={"Authorization": "Bearer gsk_wrong"})
        assert status == 401
        assert reply == {"error": {"message": "Invalid API Key", "type": "invalid_request_error",
                                   "code": "invalid_api_key"}}
        with pytest.raises(openai.AuthenticationError):
            client(server, key="gsk_wrong").chat.completions.create(model="demo", messages=[user("hi")])
        assert client(server, key="gsk_right").models.list().data[0].id == "demo"


def test_unknown_model_gets_404_model_not_found_naming_the_nearest_model_served():
    """The nearest name the server lists: a Groq name without its prefix, a name in other case."""
    with demo_model.start(models=["openai/gpt-oss-120b", "llama-3.3-70b-versatile"]) as server:
        status, _, reply = post(server, chat(user("hi"), model="gpt-oss-120b"))
        assert (status, reply["error"]) == (404, NOT_FOUND)
        with pytest.raises(openai.NotFoundError) as caught:
            client(server).chat.completions.create(model="Llama-3.3-70B-Versatile",
                                                   messages=[user("hi")])
    assert caught.value.body["message"].endswith("Did you mean `llama-3.3-70b-versatile`?")


def test_every_response_carries_a_request_id(demo):
    for status, headers, _ in [post(demo, chat(user("hi"))), post(demo, {"model": "demo"}),
                               request(demo, "GET", "/nope"), post(demo, chat(user("hi"), stream=True))]:
        assert re.fullmatch(r"req_[0-9a-f]{26}", headers["x-request-id"]), status


# --- strict validation -----------------------------------------------------------------------

def test_body_that_is_not_json_is_400(demo):
    status, _, reply = post(demo, None, raw=b"{not json")
    assert status == 400 and "could not parse the JSON body" in reply["error"]["message"]


def test_unknown_top_level_key_is_named_with_a_suggestion(demo):
    error = rejection(demo, chat(user("hi"), tool=[]))
    assert error == {"message": "property 'tool' is unsupported, did you mean 'tools'?",
                     "type": "invalid_request_error"}


def test_n_other_than_one_is_rejected(demo):
    assert "n=1" in rejection(demo, chat(user("hi"), n=2))["message"]


def test_empty_messages_are_rejected(demo):
    assert rejection(demo, chat())["message"] == "'messages' : value must be a non-empty array"


def test_parallel_tool_calls_without_tools_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), parallel_tool_calls=True))
    assert error["message"] == ("Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only "
                                "allowed when 'tools' are specified.")
    assert error["param"] == "parallel_tool_calls"


def test_tool_choice_without_tools_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), tool_choice="auto", tools=[]))
    assert "'tool_choice' is only allowed when 'tools' are specified" in error["message"]


def test_tool_with_wrong_type_is_rejected(demo):
    tools = [{"type": "func", "function": {"name": "read_file"}}]
    assert rejection(demo, chat(user("hi"), tools=tools))["message"] == "tools[0].type must be one of [function, mcp]"


def test_tool_with_bad_name_is_rejected(demo):
    tools = [TOOLS[0], {"type": "function", "function": {"name": "web.run"}}]
    assert "tools[1].function.name must be 1 to 64 letters" in rejection(demo, chat(user("hi"), tools=tools))["message"]


REASONING_TEXT = "I list first."


def echoed(model, key="reasoning"):
    """A conversation whose assistant turn carries `key`, as a client that appends the returned message sends it."""
    assistant = {**calls(("c1", "list_dir", {"path": "."})), key: REASONING_TEXT}
    return chat(user("list"), assistant, result("c1", "a.txt"), tools=TOOLS, model=model)


@pytest.mark.parametrize("model", ["demo", "openai/gpt-oss-120b", "openai/gpt-oss-20b", "qwen/qwen3-32b"])
def test_reasoning_sent_back_is_accepted_on_a_reasoning_model(demo, model):
    """groq 1.7.0 types/chat/chat_completion_assistant_message_param.py has `reasoning`, "supported on models that
    support reasoning"; console.groq.com/docs/reasoning lists gpt-oss and qwen3. The demo reasons like them."""
    assert post(demo, echoed(model))[0] == 200


@pytest.mark.parametrize("model", ["llama-3.3-70b-versatile", "moonshotai/kimi-k2-instruct"])
def test_reasoning_sent_back_to_a_model_that_does_not_reason_gets_format_a(demo, model):
    """Groq's Format A body for an assistant key the model does not take [wire.md 4.1.2, E7; kimi-k2:
    musistudio/llms#64 "property 'reasoning' is unsupported"]."""
    assert rejection(demo, echoed(model)) == {
        "message": "'messages.1' : for 'role:assistant' the following must be satisfied"
                   "[('messages.1' : property 'reasoning' is unsupported)]",
        "type": "invalid_request_error"}


@pytest.mark.parametrize("model", ["demo", "openai/gpt-oss-120b", "llama-3.3-70b-versatile"])
def test_reasoning_content_is_rejected_on_every_model(demo, model):
    """reasoning_content (the DeepSeek/vLLM name) is in no Groq type, and Groq refuses it on gpt-oss-120b too
    [wire.md 4.1.2: agentjido/req_llm#772, janhq/jan#8136]."""
    assert rejection(demo, echoed(model, "reasoning_content"))["message"] == (
        "'messages.1' : for 'role:assistant' the following must be satisfied"
        "[('messages.1' : property 'reasoning_content' is unsupported)]")


def test_only_reasoning_models_send_reasoning(demo):
    """gpt-oss sends `reasoning` by default [wire.md 6.5]; llama's replies have none [wire.md 2.5, S3]."""
    assert reply_message(demo, chat(user("Read a.txt"), tools=TOOLS, model="openai/gpt-oss-120b"))["reasoning"]
    assert "reasoning" not in reply_message(demo, chat(user("Read a.txt"), tools=TOOLS,
                                                         model="llama-3.3-70b-versatile"))
    chunks = stream_chunks(post(demo, chat(user("hi"), model="llama-3.1-8b-instant", stream=True))[2])
    assert not any("reasoning" in c["choices"][0]["delta"] for c in chunks if c["choices"])


def test_reasoning_format_on_a_model_that_does_not_reason_is_rejected(demo):
    """`reasoning_format` is not supported with this model [wire.md 4.1.2, 0xPlaygrounds/rig#1134]."""
    error = rejection(demo, chat(user("hi"), model="llama-3.3-70b-versatile", reasoning_format="parsed"))
    assert error == {"message": "`reasoning_format` is not supported with this model",
                     "type": "invalid_request_error", "param": "reasoning_format"}


def test_echoing_the_sdk_model_dump_fails_on_its_empty_fields(demo):
    """model_dump() adds refusal, annotations, audio and function_call as null [wire.md 5.6]; the first three are
    in no groq 1.7.0 message type, and Groq refuses them even when null (codebases quote "property 'refusal' is
    unsupported"); the `reasoning` it also carries is fine on this reasoning model."""
    sdk = client(demo)
    first = sdk.chat.completions.create(model="demo", messages=[user(CHAINED_TASK)], tools=TOOLS)
    echoed_message = first.choices[0].message.model_dump()
    tool_id = echoed_message["tool_calls"][0]["id"]
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="demo", tools=TOOLS,
                                    messages=[user(CHAINED_TASK), echoed_message, result(tool_id, "backend.py")])
    assert caught.value.body["message"] == (
        "'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : property 'refusal' is "
        "unsupported), ('messages.1' : property 'annotations' is unsupported), ('messages.1' : property 'audio' "
        "is unsupported)]")


def test_function_call_null_is_rejected(demo):
    """groq 1.7.0 chat_completion_assistant_message_param.py: function_call is a FunctionCall, not Optional."""
    assistant = {**calls(("c1", "list_dir", {})), "function_call": None}
    error = rejection(demo, chat(user("ls"), assistant, result("c1", "a.txt"), tools=TOOLS))
    assert "('messages.1.function_call' : value must be an object)" in error["message"]


def test_all_unsupported_keys_of_a_message_are_listed(demo):
    """Groq names every key a role's type lacks [wire.md 4.1.2: ServiceStack/llms#17 'timestamp', 'cacheable']."""
    message = {"role": "user", "content": "hi", "timestamp": 1, "cacheable": True}
    assert rejection(demo, chat(message))["message"] == (
        "'messages.0' : for 'role:user' the following must be satisfied[('messages.0' : property 'timestamp' is "
        "unsupported), ('messages.0' : property 'cacheable' is unsupported)]")


def test_system_content_is_a_string_or_text_parts(demo):
    """groq 1.7.0 chat_completion_system_message_param.py: content is str or text parts, nothing else."""
    parts = {"role": "system", "content": [{"type": "text", "text": "be brief"}]}
    assert post(demo, chat(parts, user("hi")))[0] == 200
    image = {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}
    assert "('messages.0.content.0.type' : value is not one of the allowed values ['text'])" in rejection(
        demo, chat(image, user("hi")))["message"]
    assert "('messages.0.content' : value must be a string)" in rejection(
        demo, chat({"role": "system", "content": 7}, user("hi")))["message"]


def test_assistant_null_content_without_tool_calls_is_rejected(demo):
    messages = [user("hi"), {"role": "assistant", "content": None}, user("again")]
    assert "('messages.1.content' : value must be a string)" in rejection(demo, chat(*messages))["message"]


def test_tool_message_without_tool_call_id_is_rejected(demo):
    messages = [user("ls"), calls(("c1", "list_dir", {})), {"role": "tool", "content": "a.txt"}]
    assert rejection(demo, chat(*messages, tools=TOOLS))["message"] == (
        "'messages.2' : for 'role:tool' the following must be satisfied"
        "[('messages.2.tool_call_id' : property 'tool_call_id' is missing)]")


def test_tool_call_arguments_as_an_object_are_rejected(demo):
    assistant = calls(("c1", "read_file", {}))
    assistant["tool_calls"][0]["function"]["arguments"] = {"path": "a.txt"}
    error = rejection(demo, chat(user("read a.txt"), assistant, result("c1", "x"), tools=TOOLS))
    assert "('messages.1.tool_calls.0.function.arguments' : value must be a string)" in error["message"]


def test_tool_call_arguments_that_are_not_json_are_rejected(demo):
    assistant = calls(("c1", "read_file", {}))
    assistant["tool_calls"][0]["function"]["arguments"] = ""
    error = rejection(demo, chat(user("read a.txt"), assistant, result("c1", "x"), tools=TOOLS))
    assert "value must be a string containing valid JSON" in error["message"]


def test_tool_call_item_with_index_is_rejected(demo):
    assistant = calls(("c1", "read_file", {}))
    assistant["tool_calls"][0]["index"] = 0
    error = rejection(demo, chat(user("read a.txt"), assistant, result("c1", "x"), tools=TOOLS))
    assert "('messages.1.tool_calls.0' : property 'index' is unsupported)" in error["message"]


def test_tool_call_ids_must_be_present_and_distinct(demo):
    empty = calls(("", "list_dir", {}))
    assert "non-empty string" in rejection(demo, chat(user("hi"), empty, result("", "x")))["message"]
    twice = calls(("a", "list_dir", {}), ("a", "read_file", {"path": "x"}))
    body = chat(user("hi"), twice, result("a", "x"), result("a", "y"))
    assert "duplicate tool call id 'a'" in rejection(demo, body)["message"]


def test_empty_tool_calls_list_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), {"role": "assistant", "content": "hi", "tool_calls": []}, user("x")))
    assert error["code"] == "empty_array"


def test_unknown_role_is_rejected(demo):
    error = rejection(demo, chat({"role": "bot", "content": "hi"}))
    assert error == {"message": "Invalid value: 'bot'. Supported values are: 'system', 'assistant', 'user', "
                                "'function', 'tool', and 'developer'.",
                     "type": "invalid_request_error", "param": "messages.[0].role", "code": "invalid_value"}


def test_unanswered_tool_calls_are_rejected(demo):
    messages = [user("read"), calls(("c1", "read_file", {"path": "a"}), ("c2", "read_file", {"path": "b"}),
                                    ("c3", "list_dir", {})), result("c2", "b"), user("and?")]
    error = rejection(demo, chat(*messages, tools=TOOLS))
    assert error["message"] == ("An assistant message with 'tool_calls' must be followed by tool messages "
                                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                                "response messages: c1, c3")
    assert error["param"] == "messages.[3].role"


def test_unanswered_tool_call_at_the_end_points_at_messages(demo):
    error = rejection(demo, chat(user("read"), calls(("c1", "read_file", {"path": "a"})), tools=TOOLS))
    assert "did not have response messages: c1" in error["message"] and error["param"] == "messages"


def test_tool_message_without_a_preceding_call_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), result("c1", "x"), tools=TOOLS))
    assert error["message"] == ("Invalid parameter: messages with role 'tool' must be a response to a "
                                "preceeding message with 'tool_calls'.")
    assert error["param"] == "messages.[1].role"


def test_tool_call_id_that_answers_no_call_is_rejected(demo):
    messages = [user("ls"), calls(("c1", "list_dir", {})), result("c9", "x")]
    error = rejection(demo, chat(*messages, tools=TOOLS))
    assert error["message"] == ("Invalid parameter: 'tool_call_id' of 'c9' not found in 'tool_calls' of "
                                "previous message.")


def test_a_well_formed_conversation_is_accepted(demo):
    assistant = calls(("c1", "list_dir", {"path": "."}), content=None)
    messages = [{"role": "system", "content": "Use tools."}, user("List the files"), assistant,
                result("c1", "a.txt")]
    assert post(demo, chat(*messages, tools=TOOLS, tool_choice="auto", parallel_tool_calls=True,
                           max_completion_tokens=100))[0] == 200


@pytest.mark.parametrize("field, value", [("refusal", None), ("annotations", []), ("audio", None)])
def test_sdk_empty_fields_are_rejected_even_when_empty(demo, field, value):
    """refusal, annotations, audio: in no groq 1.7.0 message type (types/chat/chat_completion_assistant_message_
    param.py); Groq refuses `refusal` as unsupported (quoted in several codebases)."""
    assistant = {**calls(("c1", "list_dir", {"path": "."})), field: value}
    error = rejection(demo, chat(user("List the files"), assistant, result("c1", "a.txt"), tools=TOOLS))
    assert error["message"] == ("'messages.1' : for 'role:assistant' the following must be satisfied"
                                f"[('messages.1' : property '{field}' is unsupported)]")


OPENAI_MODEL = "gpt-5-mini"  # a model OpenAI serves, by OpenAI's name


def assistant_refused(*fields, where="messages.1"):
    """Groq's format A for an assistant message that carries these fields."""
    listed = ", ".join(f"('{where}' : property '{field}' is unsupported)" for field in fields)
    return f"'{where}' : for 'role:assistant' the following must be satisfied[{listed}]"


def documented(**extra):
    """A conversation whose assistant message carries what OpenAI documents on it, null or empty
    as SDKs send it."""
    assistant = {**calls(("c1", "list_dir", {"path": "."})), "refusal": None, "annotations": [],
                 "audio": None, "function_call": None, "name": "helper", **extra}
    system = {"role": "system", "content": "Use tools.", "name": "setup"}
    return chat(system, user("List the files"), assistant, result("c1", "a.txt"),
                model=OPENAI_MODEL, tools=TOOLS)


def test_what_openai_documents_on_a_message_is_taken_on_its_path_for_its_models(demo):
    """openai 3.63 chat_completion_{system,assistant}_message_param.py: name, refusal, audio, a
    null function_call, and the annotations OpenAI returns: taken on /v1 for an OpenAI model.
    Groq's path refuses them (format A), and so does /v1 for the demo and Groq's models, so that
    model_dump() sent back fails offline as it would on Groq."""
    assert post(demo, documented())[0] == 200
    status, _, reply = request(demo, "POST", "/openai/v1/chat/completions", documented())
    assert status == 400 and reply["error"]["message"] == (
        "'messages.0' : for 'role:system' the following must be satisfied[('messages.0' : "
        "property 'name' is unsupported)]")
    demos = {**documented(), "messages": documented()["messages"][1:], "model": "demo"}
    status, _, reply = post(demo, demos)
    assert (status, reply["error"]["message"]) == (
        400, assistant_refused("refusal", "annotations", "audio", "name"))


def test_openai_documented_fields_must_have_their_types(demo):
    refused = rejection(demo, documented(refusal=5))["message"]
    assert "('messages.2.refusal' : value must be a string)" in refused
    refused = rejection(demo, documented(audio={"data": "x"}))["message"]
    assert "('messages.2.audio' : value must be an object with a string 'id')" in refused
    assert post(demo, documented(audio={"id": "audio_1"}, refusal="no"))[0] == 200


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the SDK's, sending `parsed`
def test_a_parse_message_sent_back_gets_a_400_naming_parsed_and_how_to_send_it_back(demo):
    """.parse() returns a message with `parsed`, which no server's message type has: the 400 names
    it and says how to send the message back; the message without it (its documented fields) is
    taken."""
    from pydantic import BaseModel

    class City(BaseModel):
        capital: str
        population: int

    sdk = client(demo)
    parsed = sdk.chat.completions.parse(model=OPENAI_MODEL, messages=[user(CAPITAL)],
                                        response_format=City)
    message = parsed.choices[0].message
    history = [user(CAPITAL), message, user("Thanks. Which city was it?")]
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model=OPENAI_MODEL, messages=history)
    assert caught.value.body["message"] == f"{assistant_refused('parsed')} {demo_model.SEND_BACK}"
    history[1] = message.model_dump(exclude={"parsed"})
    assert set(history[1]) == {"role", "content", "refusal", "annotations", "audio",
                               "function_call", "tool_calls"}
    answer = sdk.chat.completions.create(model=OPENAI_MODEL, messages=history)
    assert answer.choices[0].message.content == demo_model.HELLO


def test_a_stream_message_sent_back_names_the_sdk_fields_and_is_taken_without_them(demo):
    """.stream()'s final message carries parsed, and on each tool call index and parsed_arguments:
    each is named in a 400 that says how to send the message back. Without them it is taken on
    OpenAI's path; on Groq's the SDK's empty refusal, annotations and audio are refused too
    (format A), with the same advice."""
    sdk = client(demo)
    task = user("List the files here")
    with sdk.chat.completions.stream(model=OPENAI_MODEL, messages=[task], tools=TOOLS) as stream:
        message = stream.get_final_completion().choices[0].message
    answer = result(message.tool_calls[0].id, LISTED)
    history = [task, message, answer]
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model=OPENAI_MODEL, messages=history, tools=TOOLS)
    assert "('messages.1' : property 'parsed' is unsupported)]" in caught.value.body["message"]
    history[1] = message.model_dump(exclude={"parsed"})
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model=OPENAI_MODEL, messages=history, tools=TOOLS)
    assert caught.value.body["message"] == (
        "'messages.1' : for 'role:assistant' the following must be satisfied"
        f"[('messages.1.tool_calls.0' : property 'index' is unsupported)] {demo_model.SEND_BACK}")
    leftovers = {"parsed": True,
                 "tool_calls": {"__all__": {"index": True, "function": {"parsed_arguments"}}}}
    history[1] = message.model_dump(exclude=leftovers)
    reply = sdk.chat.completions.create(model=OPENAI_MODEL, messages=history, tools=TOOLS)
    assert reply.choices[0].message.content == (
        "The directory holds 3 entries: backend.py, harness.py, tests/.")
    groq = openai.OpenAI(base_url=demo.url.replace("/v1", "/openai/v1"), api_key="gsk_x",
                         max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        groq.chat.completions.create(model=OPENAI_MODEL, messages=[task, message, answer],
                                     tools=TOOLS)
    refused = assistant_refused("refusal", "annotations", "audio", "parsed")
    assert caught.value.body["message"] == f"{refused} {demo_model.SEND_BACK}"


def test_failed_validation_does_not_consume_a_scripted_reply(demo):
    demo.push("scripted")
    assert post(demo, chat(user("hi"), n=3))[0] == 400
    assert reply_message(demo, chat(user("hi")))["content"] == "scripted"


def test_every_request_is_recorded_in_order(demo):
    post(demo, None, raw=b"oops", headers={"Authorization": "Bearer k1"})
    post(demo, chat(user("hi")))
    request(demo, "GET", "/v1/models")
    assert [(r["method"], r["path"], r["body"]) for r in demo.requests] == [
        ("POST", "/v1/chat/completions", None),
        ("POST", "/v1/chat/completions", chat(user("hi"))),
        ("GET", "/v1/models", None)]
    assert demo.requests[0]["headers"]["authorization"] == "Bearer k1"


# --- scripted replies ------------------------------------------------------------------------

def test_scripted_string_is_the_reply_content(demo):
    demo.push("Hello from the script.")
    reply = client(demo).chat.completions.create(model="demo", messages=[user("hi")])
    assert reply.choices[0].message.content == "Hello from the script."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens > 0


def test_scripted_tool_calls_send_string_arguments_verbatim(demo):
    demo.push({"tool_calls": [{"name": "read_file", "arguments": '{"path": ', "id": "dup"},
                              {"name": "list_dir", "arguments": "", "id": "dup"},
                              {"name": "read_file", "arguments": {"path": "a.txt"}}]})
    message = reply_message(demo, chat(user("hi"), tools=TOOLS))
    assert "content" not in message
    assert [(c["id"], c["function"]["arguments"]) for c in message["tool_calls"][:2]] == [
        ("dup", '{"path": '), ("dup", "")]
    assert message["tool_calls"][2]["function"]["arguments"] == '{"path": "a.txt"}'
    assert re.fullmatch(r"[a-z0-9]{9}", message["tool_calls"][2]["id"])


def test_scripted_reasoning_finish_reason_and_usage(demo):
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    demo.push({"content": "cut sh", "reasoning": "thinking", "finish_reason": "length", "usage": usage})
    status, _, reply = post(demo, chat(user("hi")))
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "cut sh", "reasoning": "thinking"}
    assert reply["choices"][0]["finish_reason"] == "length" and reply["usage"] == usage


def test_scripted_raw_message_is_sent_verbatim(demo):
    raw = {"role": "assistant", "content": [], "tool_calls": [{"id": None, "type": "function",
                                                                "function": {"name": "x", "arguments": {}}}]}
    demo.push({"message": raw})
    assert reply_message(demo, chat(user("hi"))) == raw


def test_scripted_error_status_with_headers(demo):
    body = {"error": {"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"}}
    demo.push({"status": 429, "body": body, "headers": {"retry-after": "1"}})
    with pytest.raises(openai.RateLimitError) as caught:
        client(demo).chat.completions.create(model="demo", messages=[user("hi")])
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.request_id.startswith("req_")


def test_scripted_text_error_body_is_sent_as_html(demo):
    demo.push({"status": 502, "body": "<html>Bad Gateway</html>"})
    status, headers, text = post(demo, chat(user("hi")))
    assert (status, headers["Content-Type"], text) == (502, "text/html; charset=utf-8", "<html>Bad Gateway</html>")


def test_scripted_error_on_a_stream_request_comes_before_any_event(demo):
    demo.push({"status": 503})
    with pytest.raises(openai.InternalServerError):
        client(demo).chat.completions.create(model="demo", messages=[user("hi")], stream=True)


def test_scripted_delay_holds_the_reply(demo):
    demo.push({"content": "late", "delay": 0.2})
    started = time.monotonic()
    assert reply_message(demo, chat(user("hi")))["content"] == "late"
    assert time.monotonic() - started >= 0.2


def test_scripted_drop_closes_the_connection_without_a_reply(demo):
    demo.push({"drop": True}, "after the drop")
    with pytest.raises(openai.APIConnectionError):
        client(demo).chat.completions.create(model="demo", messages=[user("hi")])
    assert reply_message(demo, chat(user("hi")))["content"] == "after the drop"


def test_scripted_policy_item_lets_the_policy_answer(demo):
    demo.push({"policy": True}, "second")
    assert reply_message(demo, chat(user("hi")))["content"] == demo_model.HELLO
    assert reply_message(demo, chat(user("hi")))["content"] == "second"


def test_script_given_at_start_is_used_first():
    with demo_model.start(script=["one", {"content": "two"}]) as server:
        assert [reply_message(server, chat(user("hi")))["content"] for _ in range(3)] == [
            "one", "two", demo_model.HELLO]


# --- streaming -------------------------------------------------------------------------------

def test_streamed_text_arrives_in_pieces_with_usage_on_the_finish_chunk(demo):
    text = "one two three four five six seven eight nine"
    demo.push({"content": text, "reasoning": "short"})
    status, headers, body = post(demo, chat(user("hi"), stream=True))
    assert headers["Content-Type"] == "text/event-stream" and headers["Connection"] == "close"
    events = sse_events(body)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
    assert len({c["id"] for c in chunks}) == 1 and all(c["object"] == "chat.completion.chunk" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""} and deltas[1] == {"reasoning": "short"}
    assert "".join(d.get("content", "") for d in deltas) == text and len(deltas) > 4
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["usage"]["total_tokens"] > 0


def test_stream_sends_each_tool_call_whole_by_default(demo):
    demo.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}, "id": "abc"}]})
    status, _, body = post(demo, chat(user("hi"), tools=TOOLS, stream=True))
    deltas = [json.loads(e[6:])["choices"][0]["delta"] for e in sse_events(body)[:-1]]
    assert {"tool_calls": [{"index": 0, "id": "abc", "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]} in deltas


def test_split_arguments_stream_is_reassembled_by_the_openai_client(demo):
    demo.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "backend.py"}},
                              {"name": "list_dir", "arguments": {"path": "."}}], "split_arguments": 3})
    stream = client(demo).chat.completions.create(model="demo", messages=[user("hi")], tools=TOOLS, stream=True)
    calls_by_index, fragments, finish = {}, 0, None
    for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls_by_index.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = delta.id or call["id"]
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
                fragments += 1
            finish = choice.finish_reason or finish
    assert [(c["name"], json.loads(c["arguments"])) for c in calls_by_index.values()] == [
        ("read_file", {"path": "backend.py"}), ("list_dir", {"path": "."})]
    assert fragments > 6 and finish == "tool_calls" and all(c["id"] for c in calls_by_index.values())


def test_cut_after_ends_the_stream_without_done(demo):
    demo.push({"content": "one two three four five six seven eight nine ten", "cut_after": 2})
    events = sse_events(post(demo, chat(user("hi"), stream=True))[2])
    assert len(events) == 2 and "[DONE]" not in events[-1]
    demo.push({"content": "one two three four five six seven eight nine ten", "cut_after": 2})
    chunks = list(client(demo).chat.completions.create(model="demo", messages=[user("hi")], stream=True))
    assert len(chunks) == 2 and all(c.choices[0].finish_reason is None for c in chunks)


def test_error_event_raises_api_error_while_iterating(demo):
    failure = {"message": "Invalid tool_call: tool \"x\" does not exist.", "type": "invalid_request_error",
               "code": "invalid_tool_call"}
    demo.push({"content": "partial answer", "error_event": failure})
    stream = client(demo).chat.completions.create(model="demo", messages=[user("hi")], stream=True)
    text = ""
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            text += chunk.choices[0].delta.content or ""
    assert not isinstance(caught.value, openai.APIStatusError)
    assert caught.value.code == "invalid_tool_call" and text == "partial answer"


def test_include_usage_adds_a_usage_only_chunk(demo):
    demo.push("counted")
    body = post(demo, chat(user("hi"), stream=True, stream_options={"include_usage": True}))[2]
    last = json.loads(sse_events(body)[-2][6:])
    assert last["choices"] == [] and last["usage"]["total_tokens"] > 0
    demo.push("counted")
    chunks = list(client(demo).chat.completions.create(model="demo", messages=[user("hi")], stream=True,
                                                       stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


# --- the demo policy -------------------------------------------------------------------------

def test_usage_is_estimated_from_the_request_and_the_reply(demo):
    body = chat(user(CHAINED_TASK), tools=TOOLS)
    reply = post(demo, body)[2]
    prompt = len(json.dumps(body["messages"]) + json.dumps(TOOLS)) // 4 + 1
    completion = len(json.dumps(reply["choices"][0]["message"])) // 4 + 1
    counts = {key: reply["usage"][key] for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert counts == {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def test_plain_chat_without_tools_gets_the_demo_greeting(demo):
    reply = client(demo).chat.completions.create(model="demo", messages=[user("Say hello in one short sentence.")])
    assert reply.choices[0].message.content == demo_model.HELLO


def test_task_with_no_recognisable_step_gets_the_help_text(demo):
    assert reply_message(demo, chat(user("What is the capital of France?"), tools=TOOLS))["content"] == demo_model.HELP


def test_policy_chains_list_then_read_then_answers(demo):
    """Turn 1 lists, turn 2 reads backend.py (it is in the listing), turn 3 answers from both results,
    quoting the lines of backend.py that contain the task's keywords "model" and "calls"."""
    messages = [{"role": "system", "content": "You are a helpful agent."}, user(CHAINED_TASK)]
    first = reply_message(demo, chat(*messages, tools=TOOLS))
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in first["tool_calls"]] == [
        ("list_dir", '{"path": "."}')]
    assert first["reasoning"] and "content" not in first
    list_id = first["tool_calls"][0]["id"]
    messages += [calls((list_id, "list_dir", {"path": "."})), result(list_id, "backend.py\nharness.py\ntests/\n")]

    second = reply_message(demo, chat(*messages, tools=TOOLS))
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in second["tool_calls"]] == [
        ("read_file", '{"path": "backend.py"}')]
    read_id = second["tool_calls"][0]["id"]
    source = 'import openai\n\nMODEL = "openai/gpt-oss-120b"\ndef chat():\n    return send(model=MODEL)\n'
    messages += [calls((read_id, "read_file", {"path": "backend.py"})), result(read_id, source)]

    third = reply_message(demo, chat(*messages, tools=TOOLS))
    assert "tool_calls" not in third and third["reasoning"]
    assert third["content"] == ("The directory holds 3 entries: backend.py, harness.py, tests/.\n\n"
                                "I read 5 lines of backend.py.\n"
                                '  line 3: MODEL = "openai/gpt-oss-120b"\n'
                                "  line 5: return send(model=MODEL)")


def test_policy_skips_a_read_when_the_listing_lacks_the_file(demo):
    messages = [user(CHAINED_TASK), calls(("l1", "list_dir", {"path": "."})), result("l1", "harness.py\ntools.py")]
    message = reply_message(demo, chat(*messages, tools=TOOLS))
    assert message["content"] == ("The directory holds 2 entries: harness.py, tools.py.\n\n"
                                  "There is no backend.py in the listing, so I did not read it.")


def test_policy_makes_independent_reads_in_parallel(demo):
    task = user("Read a.txt and b.txt")
    first = reply_message(demo, chat(task, tools=TOOLS))
    assert [c["function"]["arguments"] for c in first["tool_calls"]] == ['{"path": "a.txt"}', '{"path": "b.txt"}']
    a, b = [call["id"] for call in first["tool_calls"]]
    assert a != b
    answer = reply_message(demo, chat(task, calls((a, "read_file", {"path": "a.txt"}),
                                                  (b, "read_file", {"path": "b.txt"})),
                                      result(a, "alpha"), result(b, "Error: b.txt does not exist"), tools=TOOLS))
    assert answer["content"] == ("I read 1 line of a.txt.\n  line 1: alpha\n\n"
                                 "I could not read b.txt: Error: b.txt does not exist")


def test_policy_reports_a_declined_command(demo):
    task = user("Run `rm -rf build` for me")
    first = reply_message(demo, chat(task, tools=TOOLS))
    call_id = first["tool_calls"][0]["id"]
    assert first["tool_calls"][0]["function"]["arguments"] == '{"command": "rm -rf build"}'
    messages = [task, calls((call_id, "run_shell", {"command": "rm -rf build"})),
                result(call_id, "Error: the user declined to run this command")]
    assert reply_message(demo, chat(*messages, tools=TOOLS))["content"] == (
        "`rm -rf build` did not run: Error: the user declined to run this command")


def test_policy_tool_call_ids_are_reproducible(demo):
    body = chat(user("Read a.txt and b.txt"), tools=TOOLS)
    assert reply_message(demo, body)["tool_calls"] == reply_message(demo, body)["tool_calls"]


def test_forgetting_tools_after_a_tool_call_gets_tool_use_failed(demo):
    messages = [user(CHAINED_TASK), calls(("l1", "list_dir", {"path": "."})), result("l1", "backend.py")]
    error = rejection(demo, chat(*messages))
    assert error == {"message": "Tool choice is none, but model called a tool", "type": "invalid_request_error",
                     "code": "tool_use_failed",
                     "failed_generation": '{"name": "read_file", "arguments": {"path": "backend.py"}}'}


# --- standalone ------------------------------------------------------------------------------

def test_policy_guesses_a_write_then_fixes_the_call_from_the_error(demo):
    task = user('Write "hello" to notes.txt')
    guess = reply_message(demo, chat(task, tools=TOOLS))["tool_calls"][0]
    assert json.loads(guess["function"]["arguments"]) == {"path": "notes.txt", "text": "hello\n"}
    error = ('error: write_file: missing required argument "content" (string). '
             'Call it as {"path": "notes.txt", "content": "hello\\n"}')
    history = [task, calls(("w1", "write_file", {"path": "notes.txt", "text": "hello\n"})), result("w1", error)]
    fixed = reply_message(demo, chat(*history, tools=TOOLS))["tool_calls"][0]
    assert json.loads(fixed["function"]["arguments"]) == {"path": "notes.txt", "content": "hello\n"}
    history += [calls(("w2", "write_file", {"path": "notes.txt", "content": "hello\n"})),
                result("w2", "wrote 6 characters to notes.txt")]
    answer = reply_message(demo, chat(*history, tools=TOOLS))["content"]
    assert answer.endswith("Wrote 6 characters to notes.txt.")


def test_policy_reads_on_when_the_task_wants_the_whole_file(demo):
    task = user("Read all of big.txt")
    page = "1\n2\n\n[lines 1-2 of 3; call read_file with offset=3 to read on]"
    history = [task, calls(("r1", "read_file", {"path": "big.txt"})), result("r1", page)]
    more = reply_message(demo, chat(*history, tools=TOOLS))["tool_calls"][0]
    assert json.loads(more["function"]["arguments"]) == {"path": "big.txt", "offset": 3}
    history += [calls(("r2", "read_file", {"path": "big.txt", "offset": 3})), result("r2", "3\n")]
    answer = reply_message(demo, chat(*history, tools=TOOLS))["content"]
    assert answer == ("I read lines 1-2 of big.txt, which has 3 lines.\n  line 1: 1\n  line 2: 2\n\n"
                      "I read 1 line of big.txt.\n  line 3: 3")


def test_standalone_server_prints_its_url_and_serves(tmp_path):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["scripted hello"]))
    process = subprocess.Popen([sys.executable, str(ROOT / "demo_model.py"), "--port", "0", "--script", str(script),
                                "--model", "bench"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        url = re.fullmatch(r"demo model listening on (http://127\.0\.0\.1:\d+/v1) \(Ctrl-C to stop\)\n", line)[1]
        with urllib.request.urlopen(url + "/models", timeout=5) as response:
            assert [model["id"] for model in json.load(response)["data"]] == ["demo", "bench"]
        if sys.platform != "win32":
            process.send_signal(signal.SIGINT)  # Ctrl-C: a clean exit, no traceback
            assert process.wait(timeout=5) == 0
            assert process.stderr.read() == ""
    finally:
        process.terminate()
        process.wait(timeout=5)
        process.stdout.close()
        process.stderr.close()


def test_standalone_bad_flag_prints_usage():
    done = subprocess.run([sys.executable, str(ROOT / "demo_model.py"), "--bogus"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("usage:")


# --- helpers for the tests below -------------------------------------------------------------

def tool(name, properties=None, required=()):
    return {"type": "function", "function": {"name": name, "description": f"the {name} tool", "parameters": {
        "type": "object", "properties": properties or {}, "required": list(required)}}}


def listed(task, listing=LISTED):
    """A conversation where the task was given and list_dir has answered."""
    return [user(task), calls(("l1", "list_dir", {"path": "."})), result("l1", listing)]


def call_pairs(message):
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]


def stream_chunks(text):
    return [json.loads(e[len("data: "):]) for e in sse_events(text) if e.startswith("data: {")]


def raw_http(server, data):
    """Send raw bytes on a fresh connection; return everything the server sends until it hangs up."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(data)
        received = b""
        while True:
            got = sock.recv(65536)
            if not got:
                return received
            received += got


def handler_threads():
    return {t for t in threading.enumerate() if "process_request_thread" in t.name}


def eventually(check, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


# --- tool_choice and parallel_tool_calls -----------------------------------------------------

def test_tool_choice_none_answers_in_text_from_the_results(demo):
    message = reply_message(demo, chat(*listed(CHAINED_TASK, "backend.py"), tools=TOOLS, tool_choice="none"))
    assert "tool_calls" not in message
    assert message["content"] == "The directory holds 1 entry: backend.py."


def test_tool_choice_required_calls_the_final_answer_tool_instead_of_answering(demo):
    final = tool("final_answer", {"answer": {"type": "string"}}, required=["answer"])
    body = chat(user("What is the capital of France?"), tools=TOOLS + [final], tool_choice="required")
    assert call_pairs(reply_message(demo, body)) == [("final_answer", {"answer": demo_model.HELP})]


def test_tool_choice_required_falls_back_to_list_dir_then_the_first_tool(demo):
    body = chat(user("What is the capital of France?"), tools=TOOLS, tool_choice="required")
    assert call_pairs(reply_message(demo, body)) == [("list_dir", {"path": "."})]
    shout = tool("shout", {"text": {"type": "string"}}, required=["text"])
    body = chat(user('What is "hello" in French?'), tools=[shout], tool_choice="required")
    assert call_pairs(reply_message(demo, body)) == [("shout", {"text": "hello"})]


def test_tool_choice_required_keeps_the_calls_the_policy_makes(demo):
    body = chat(user("Read a.txt and b.txt"), tools=TOOLS, tool_choice="required")
    assert call_pairs(reply_message(demo, body)) == [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})]


def test_named_tool_choice_calls_exactly_that_tool(demo):
    named = {"type": "function", "function": {"name": "list_dir"}}
    body = chat(user("Read a.txt and b.txt"), tools=TOOLS, tool_choice=named)
    assert call_pairs(reply_message(demo, body)) == [("list_dir", {"path": "."})]
    named["function"]["name"] = "read_file"
    assert call_pairs(reply_message(demo, body)) == [("read_file", {"path": "a.txt"})]


def test_invalid_tool_choice_string_is_rejected_in_groqs_words(demo):
    for choice in ("sometimes", None, 7):
        error = rejection(demo, chat(user("hi"), tools=TOOLS, tool_choice=choice))
        assert error == {"message": "Only allowed string values for 'tool_choice' are [none, auto, required]",
                         "type": "invalid_request_error"}


def test_tool_choice_object_without_type_or_name_is_rejected_in_openais_words(demo):
    for choice in ({"function": {"name": "list_dir"}}, {"type": "function", "function": {}}):
        error = rejection(demo, chat(user("hi"), tools=TOOLS, tool_choice=choice))
        assert error["message"] == ("'$.tool_choice' is invalid. Please check the API reference: "
                                    "https://platform.openai.com/docs/api-reference.")


def test_named_tool_choice_not_in_tools_is_rejected(demo):
    choice = {"type": "function", "function": {"name": "web_search"}}
    error = rejection(demo, chat(user("hi"), tools=TOOLS, tool_choice=choice))
    assert error["message"] == "Tool choice 'web_search' not found in 'tools' parameter."
    assert error["param"] == "tool_choice"


def test_parallel_tool_calls_false_makes_one_call_a_turn(demo):
    task = user("Read a.txt and b.txt")
    first = reply_message(demo, chat(task, tools=TOOLS, parallel_tool_calls=False))
    assert call_pairs(first) == [("read_file", {"path": "a.txt"})]
    history = [task, calls(("r1", "read_file", {"path": "a.txt"})), result("r1", "alpha")]
    second = reply_message(demo, chat(*history, tools=TOOLS, parallel_tool_calls=False))
    assert call_pairs(second) == [("read_file", {"path": "b.txt"})]
    history += [calls(("r2", "read_file", {"path": "b.txt"})), result("r2", "beta")]
    assert "line 1: beta" in reply_message(demo, chat(*history, tools=TOOLS, parallel_tool_calls=False))["content"]


# --- a tool the learner adds ------------------------------------------------------------------

COUNT_LINES = tool("count_lines", {"path": {"type": "string"}}, required=["path"])


def test_policy_calls_a_tool_the_learner_added_when_the_task_names_it(demo):
    task = user("How many lines has notes.txt? Use count_lines.")
    first = reply_message(demo, chat(task, tools=TOOLS + [COUNT_LINES]))
    assert call_pairs(first) == [("count_lines", {"path": "notes.txt"})]  # and no read_file of notes.txt
    history = [task, calls(("c1", "count_lines", {"path": "notes.txt"})), result("c1", "12")]
    assert reply_message(demo, chat(*history, tools=TOOLS + [COUNT_LINES]))["content"] == "count_lines returned: 12"


def test_a_tool_is_named_by_its_words_too(demo):
    body = chat(user("Please count lines in notes.txt"), tools=TOOLS + [COUNT_LINES])
    assert call_pairs(reply_message(demo, body)) == [("count_lines", {"path": "notes.txt"})]


def test_own_tool_arguments_come_from_examples_defaults_files_enums_and_types(demo):
    search = tool("search", {"query": {"type": "string", "examples": ["needle"]},
                             "limit": {"type": "integer", "default": 5},
                             "file": {"type": "string"},
                             "mode": {"type": "string", "enum": ["fast", "slow"]},
                             "strict": {"type": "boolean"},
                             "tags": {"type": "array", "items": {"type": "integer"}},
                             "verbose": {"type": "boolean"}},
                  required=["query", "file", "mode", "strict", "tags"])
    body = chat(user("search notes.txt"), tools=[search])
    assert call_pairs(reply_message(demo, body)) == [("search", {
        "query": "needle", "limit": 5, "file": "notes.txt", "mode": "fast", "strict": True, "tags": []})]


# --- token limits ----------------------------------------------------------------------------

def test_max_tokens_cuts_text_with_finish_reason_length(demo):
    demo.push("abcdefghijklmnopqrstuvwxyz")
    reply = post(demo, chat(user("hi"), max_tokens=3))[2]
    assert reply["choices"][0]["message"]["content"] == "abcdefghijkl"  # 3 tokens of 4 characters
    assert reply["choices"][0]["finish_reason"] == "length" and reply["usage"]["completion_tokens"] == 3


def test_max_completion_tokens_cuts_tool_arguments_mid_json(demo):
    reply = post(demo, chat(user("Read a.txt"), tools=TOOLS, max_completion_tokens=2))[2]
    assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"path":'
    assert reply["choices"][0]["finish_reason"] == "length" and reply["usage"]["completion_tokens"] == 2


def test_a_reply_within_the_limit_is_whole_and_counts_no_more_than_the_limit(demo):
    demo.push("short")
    reply = post(demo, chat(user("hi"), max_completion_tokens=100))[2]
    assert reply["choices"][0]["message"]["content"] == "short" and reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] <= 100


def test_streamed_reply_is_cut_at_max_tokens_too(demo):
    demo.push("one two three four five six")
    chunks = stream_chunks(post(demo, chat(user("hi"), max_tokens=2, stream=True))[2])
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "one two "
    assert chunks[-1]["choices"][0]["finish_reason"] == "length" and chunks[-1]["usage"]["completion_tokens"] == 2


# --- structured output -----------------------------------------------------------------------

def test_json_object_answers_with_a_json_object(demo):
    message = reply_message(demo, chat(user("Say hello, as JSON."), response_format={"type": "json_object"}))
    assert json.loads(message["content"]) == {"answer": demo_model.HELLO}


def test_json_object_needs_the_word_json_in_a_message(demo):
    error = rejection(demo, chat(user("Say hello"), response_format={"type": "json_object"}))
    assert error == {"message": "'messages' must contain the word 'json' in some form, to use 'response_format' "
                                "of type 'json_object'.", "type": "invalid_request_error", "param": "messages"}


def test_text_response_format_changes_nothing(demo):
    assert reply_message(demo, chat(user("hi"), response_format={"type": "text"}))["content"] == demo_model.HELLO


REPORT = {"type": "object", "additionalProperties": False,
          "required": ["files", "file_count", "backend", "done", "kind"],
          "properties": {"files": {"type": "array", "items": {"type": "string"}},
                         "file_count": {"type": "integer"},
                         "backend": {"type": "string"},
                         "done": {"type": "boolean"},
                         "kind": {"type": "string", "enum": ["listing", "other"]},
                         "note": {"type": "string"}}}


def structured_body(schema, messages=None):
    form = {"type": "json_schema", "json_schema": {"name": "report", "schema": schema, "strict": True}}
    return chat(*(messages or listed("List the files here")), response_format=form)


def test_json_schema_answer_is_built_from_the_tool_results(demo):
    answer = json.loads(reply_message(demo, structured_body(REPORT))["content"])
    assert answer == {"files": ["backend.py", "harness.py", "tests/"], "file_count": 3, "backend": "backend.py",
                      "done": True, "kind": "listing"}  # no "note": it is optional and nothing fills it


SCHEMAS = [
    REPORT,
    {"type": "string"},
    {"type": "array", "minItems": 2, "items": {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "minimum": 3, "maximum": 9}}, "additionalProperties": False}},
    {"$defs": {"Item": {"type": "object", "required": ["name", "size"], "additionalProperties": False,
                        "properties": {"name": {"type": "string"}, "size": {"type": ["integer", "null"]}}}},
     "type": "object", "required": ["items", "best", "total"], "additionalProperties": False,
     "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1},
                    "best": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Item"}]},
                    "total": {"type": "number", "minimum": 10}}},
    {"type": "object", "required": ["mode", "version", "meta"], "properties": {
        "mode": {"const": "fast"}, "version": {"type": "string", "maxLength": 5},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}}}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_generated_answer_validates_against_its_schema(demo, schema):
    answer = json.loads(reply_message(demo, structured_body(schema))["content"])
    assert demo_model.schema_problem(answer, schema) is None, answer


def test_schema_validator_finds_what_breaks_a_schema():
    problem = demo_model.schema_problem
    assert problem(3, {"type": "string"}) == "$: expected string, got int"
    assert problem(True, {"type": "integer"}) == "$: expected integer, got bool"
    assert problem({"a": 1}, REPORT) == "$: missing required property 'files'"
    answer = {"files": [], "file_count": 1, "backend": "", "done": True, "kind": "listing", "extra": 1}
    assert problem(answer, REPORT) == "$: property 'extra' is not allowed"
    assert problem({**answer, "extra": None, "kind": "x"} | {"extra": 0}, {**REPORT, "additionalProperties": True}) == (
        '$.kind: "x" is not one of ["listing", "other"]')
    assert problem([{"n": 1}, {"n": 4}], SCHEMAS[2]) == "$[0].n: 1 is outside minimum/maximum"
    assert problem({"items": [], "best": None, "total": 10}, SCHEMAS[3]) == (
        "$.items: 0 items is outside minItems/maxItems")
    assert problem({"items": [{"name": "a", "size": "big"}], "best": None, "total": 10}, SCHEMAS[3]) == (
        "$.items[0].size: expected integer or null, got str")


def test_response_format_with_tools_is_rejected_on_groqs_path_only(demo):
    """Groq 400s JSON mode with tools, and json_schema with stream; OpenAI takes both: the path says which."""
    for form in ({"type": "json_object"}, structured_body(REPORT)["response_format"]):
        body = chat(user("List the files as JSON"), tools=TOOLS, response_format=form)
        status, _, reply = request(demo, "POST", "/openai/v1/chat/completions", body)
        assert status == 400 and reply["error"] == {
            "message": "json mode cannot be combined with tool/function calling",
            "type": "invalid_request_error", "param": "response_format"}
        assert call_pairs(reply_message(demo, body)) == [("list_dir", {"path": "."})]  # /v1: OpenAI's rules
    streamed = {**structured_body(REPORT), "stream": True}
    status, _, reply = request(demo, "POST", "/openai/v1/chat/completions", streamed)
    assert status == 400 and "streaming" in reply["error"]["message"]
    assert post(demo, streamed)[0] == 200


def test_unknown_response_format_type_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), response_format={"type": "yaml"}))
    assert error["message"] == ("'response_format.type' : value is not one of the allowed values "
                                "['text', 'json_object', 'json_schema']")


def test_openai_parse_returns_a_parsed_object(demo):
    from pydantic import BaseModel

    class Listing(BaseModel):
        files: list[str]
        total: int
        summary: str

    history = listed("List the files here")
    reply = client(demo).chat.completions.parse(model="demo", messages=history, response_format=Listing)
    assert reply.choices[0].message.parsed == Listing(
        files=["backend.py", "harness.py", "tests/"], total=3,
        summary="The directory holds 3 entries: backend.py, harness.py, tests/.")


CAPITAL = "The capital of France is Paris; its population is 2,100,000."
CITY = {"type": "object", "additionalProperties": False,
        "required": ["capital", "population", "summary"],
        "properties": {"capital": {"type": "string"}, "population": {"type": "integer"},
                       "summary": {"type": "string"}}}


def test_a_shaped_answer_with_no_tool_results_takes_its_fields_from_the_task(demo):
    """Before any tool ran: a string from what the task says the property is ("the capital ... is
    Paris"), a number written next to the property's name, and for a field that holds the answer
    itself what the model said (what it can do: there is nothing else to report)."""
    form = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}}
    answer = json.loads(reply_message(demo, chat(user(CAPITAL), response_format=form))["content"])
    assert answer == {"capital": "Paris", "population": 2100000, "summary": demo_model.HELLO}


def test_json_mode_follows_a_schema_written_in_the_prompt(demo):
    """instructor's JSON mode: response_format json_object, the schema in a system message; the
    answer is that schema filled from the task, not {"answer": ...}."""
    shape = {"properties": {"capital": {"title": "Capital", "type": "string"},
                            "population": {"title": "Population", "type": "integer"}},
             "required": ["capital", "population"], "title": "City", "type": "object"}
    prompt = ("As a genius expert, your task is to understand the content and provide the parsed "
              "objects in json that match the following json_schema:\n\n"
              f"{json.dumps(shape, indent=2)}\n\n"
              "Make sure to return an instance of the JSON, not the schema itself")
    body = chat({"role": "system", "content": prompt}, user(CAPITAL),
                response_format={"type": "json_object"})
    answer = json.loads(reply_message(demo, body)["content"])
    assert answer == {"capital": "Paris", "population": 2100000}


def test_a_task_after_a_line_break_is_read_whole(demo):
    """smolagents sends "New task:\n<task>": the word that starts the task's line is no value for
    a tool's string argument; the city the task names is."""
    weather = tool("get_weather", {"city": {"type": "string"}}, required=["city"])
    body = chat(user("New task:\nUse get_weather for Paris"), tools=[weather])
    assert call_pairs(reply_message(demo, body)) == [("get_weather", {"city": "Paris"})]


def test_openai_parse_fills_a_model_from_the_task(demo):
    """.parse(response_format=Model) with no tools: the answer's fields hold the task's facts."""
    from pydantic import BaseModel

    class City(BaseModel):
        capital: str
        population: int

    reply = client(demo).chat.completions.parse(model="demo", messages=[user(CAPITAL)],
                                                response_format=City)
    assert reply.choices[0].message.parsed == City(capital="Paris", population=2100000)


# --- sampling fields -------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, words", [
    ("temperature", 2.5, "decimal above maximum value. Expected a value <= 2, but got 2.5 instead."),
    ("temperature", -1, "decimal below minimum value. Expected a value >= 0, but got -1 instead."),
    ("top_p", 1.5, "decimal above maximum value. Expected a value <= 1, but got 1.5 instead."),
    ("frequency_penalty", -3, "decimal below minimum value. Expected a value >= -2, but got -3 instead."),
    ("presence_penalty", 2.1, "decimal above maximum value. Expected a value <= 2, but got 2.1 instead."),
])
def test_sampling_values_out_of_range_are_rejected_in_openais_words(demo, field, value, words):
    error = rejection(demo, chat(user("hi"), **{field: value}))
    assert error["message"] == f"Invalid '{field}': {words}" and error["param"] == field
    assert error["code"] == ("decimal_above_max_value" if "above" in words else "decimal_below_min_value")


@pytest.mark.parametrize("field, value, kind", [
    ("temperature", "0.7", "a number"), ("top_p", True, "a number"), ("seed", 1.5, "an integer"),
    ("max_tokens", "100", "an integer"), ("max_completion_tokens", 10.0, "an integer"),
])
def test_sampling_values_of_the_wrong_type_are_rejected(demo, field, value, kind):
    assert rejection(demo, chat(user("hi"), **{field: value}))["message"] == f"'{field}' : value must be {kind}"


def test_token_limits_must_be_positive(demo):
    for field in ("max_tokens", "max_completion_tokens"):
        error = rejection(demo, chat(user("hi"), **{field: 0}))
        assert error["message"] == (f"Invalid '{field}': integer below minimum value. Expected a value >= 1, "
                                    "but got 0 instead.") and error["code"] == "integer_below_min_value"


def test_stop_takes_a_string_or_at_most_four_strings(demo):
    assert post(demo, chat(user("hi"), stop="END", temperature=0, top_p=1, seed=7))[0] == 200
    assert post(demo, chat(user("hi"), stop=["a", "b", "c", "d"]))[0] == 200
    for stop in (["a", "b", "c", "d", "e"], 5, [1]):
        assert rejection(demo, chat(user("hi"), stop=stop))["message"] == (
            "stop : one of the following must be satisfied\n  stop : value must be a string\n"
            "  stop : maximum number of items is 4")


# --- routes ----------------------------------------------------------------------------------

def test_only_the_real_prefixes_are_served(demo):
    for path in ("/chat/completions", "/v2/chat/completions", "/openai/chat/completions", "/v1/chat/completions/x"):
        status, _, reply = request(demo, "POST", path, chat(user("hi")))
        assert status == 404 and reply["error"] == {
            "message": f"Unknown request URL: POST {path}. Please check the URL for typos, or see the docs at "
                       "https://console.groq.com/docs/", "type": "invalid_request_error", "code": "unknown_url"}
    assert request(demo, "GET", "/openai/v1/models")[0] == 200


def test_every_method_on_an_unknown_path_gets_a_json_404(demo):
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
        status, headers, reply = request(demo, method, "/v1/nothing")
        assert status == 404 and headers["Content-Type"] == "application/json", method
        assert reply["error"]["code"] == "unknown_url"
    status, headers, text = request(demo, "HEAD", "/v1/nothing")
    assert (status, text) == (404, "") and headers["Content-Type"] == "application/json"


def test_wrong_method_on_a_real_route_is_groqs_unknown_url(demo):
    for method, path in (("GET", "/openai/v1/chat/completions"), ("PUT", "/v1/chat/completions"),
                         ("DELETE", "/v1/models"), ("POST", "/v1/models")):
        status, _, reply = request(demo, method, path)
        assert status == 404 and reply["error"]["message"].startswith(f"Unknown request URL: {method} {path}.")


def test_a_model_is_served_by_its_id():
    with demo_model.start(models=["openai/gpt-oss-120b"]) as server:
        assert request(server, "GET", "/openai/v1/models/openai/gpt-oss-120b")[2] == {
            "id": "openai/gpt-oss-120b", "object": "model", "created": 0, "owned_by": "demo"}
        status, _, reply = request(server, "GET", "/v1/models/gpt-oss-120b")
        assert (status, reply["error"]) == (404, NOT_FOUND)
        assert client(server).models.retrieve("demo").id == "demo"


# --- Groq's extras in replies ----------------------------------------------------------------

def test_json_reply_carries_service_tier_and_groq_timings(demo):
    reply = post(demo, chat(user("hi")))[2]
    usage = reply["usage"]
    assert reply["service_tier"] == "on_demand"
    assert all(isinstance(usage[key], float) and 0 < usage[key] < 1
               for key in ("queue_time", "prompt_time", "completion_time", "total_time"))
    assert usage["total_time"] == pytest.approx(usage["prompt_time"] + usage["completion_time"])


def test_stream_usage_carries_groq_timings_on_the_finish_chunk_only(demo):
    chunks = stream_chunks(post(demo, chat(user("hi"), stream=True))[2])
    assert [c for c in chunks if "usage" in c] == [chunks[-1]]
    assert chunks[-1]["usage"]["completion_time"] > 0 and chunks[-1]["x_groq"]["usage"] == chunks[-1]["usage"]


def test_stream_options_without_stream_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), stream_options={"include_usage": True}))
    assert error == {"message": "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                     "type": "invalid_request_error", "param": "stream_options"}


# --- what Groq accepts and rejects -----------------------------------------------------------

def test_user_and_assistant_text_part_arrays_are_accepted(demo):
    parts = [{"type": "text", "text": "List the files"}]
    messages = [{"role": "user", "content": parts}, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                {"role": "user", "content": parts}]
    assert call_pairs(reply_message(demo, chat(*messages, tools=TOOLS))) == [("list_dir", {"path": "."})]


def test_assistant_content_parts_other_than_text_are_rejected(demo):
    image = {"type": "image_url", "image_url": {"url": "http://x/a.png"}}
    messages = [user("hi"), {"role": "assistant", "content": [image]}, user("again")]
    assert rejection(demo, chat(*messages))["message"] == (
        "'messages.1' : for 'role:assistant' the following must be satisfied"
        "[('messages.1.content.0.type' : value is not one of the allowed values ['text'])]")


def test_groq_documented_fields_are_accepted(demo):
    fields = {"reasoning_effort": "low", "service_tier": "on_demand", "disable_tool_validation": True,
              "citation_options": "disabled", "search_settings": {"include_images": False}, "documents": [],
              "user": "u1", "metadata": {"k": "v"}, "store": False, "logprobs": False, "seed": 1}
    assert post(demo, chat(user("hi"), **fields))[0] == 200


@pytest.mark.parametrize("field, value", [("logprobs", True), ("logit_bias", {"1": 5}), ("top_logprobs", 2)])
def test_logprobs_logit_bias_and_top_logprobs_are_rejected(demo, field, value):
    assert rejection(demo, chat(user("hi"), **{field: value}))["param"] == field


PLAIN = [{"role": "system", "content": "Use tools."}, {"role": "developer", "content": "Be brief."},
         user("List the files"), calls(("c1", "list_dir", {"path": "."})), result("c1", "a.txt")]


@pytest.mark.parametrize("index", range(len(PLAIN)), ids=[m["role"] for m in PLAIN])
def test_message_name_is_refused_on_every_role_as_groq_documents(demo, index):
    """console.groq.com/docs/openai: messages[].name is among the fields that "will result in a 400 error", though
    groq 1.7.0's types allow it on every role but tool: the documentation wins. A 400 in Groq's words (format A);
    the same conversation without the name passes. (A tool message with a name is how old tutorials write it.)"""
    assert post(demo, chat(*PLAIN, tools=TOOLS))[0] == 200
    named = [*PLAIN[:index], {**PLAIN[index], "name": "ann"}, *PLAIN[index + 1:]]
    assert rejection(demo, chat(*named, tools=TOOLS)) == {
        "message": f"'messages.{index}' : for 'role:{PLAIN[index]['role']}' the following must be satisfied"
                   f"[('messages.{index}' : property 'name' is unsupported)]",
        "type": "invalid_request_error"}


def test_function_role_messages_take_content_and_name(demo):
    """groq 1.7.0 chat_completion_function_message_param.py: role, content (str or null) and name, all required:
    the one role whose name the demo takes (the deprecated function calling has no other way to say whose it is)."""
    assert post(demo, chat(user("hi"), {"role": "function", "name": "f", "content": None}, user("again")))[0] == 200
    error = rejection(demo, chat(user("hi"), {"role": "function", "content": "x"}))
    assert "('messages.1.name' : property 'name' is missing)" in error["message"]
    error = rejection(demo, chat(user("hi"), {"role": "function", "name": 5, "content": "x"}))
    assert "('messages.1.name' : value must be a string)" in error["message"]


def test_tool_content_may_be_parts(demo):
    """groq 1.7.0 chat_completion_tool_message_param.py: content is str or content parts."""
    parts = {**result("c1", "x"), "content": [{"type": "text", "text": "a.txt"}]}
    assert post(demo, chat(user("ls"), calls(("c1", "list_dir", {})), parts, tools=TOOLS))[0] == 200


def test_a_field_value_outside_its_set_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), service_tier="fastest"))
    assert error["message"] == ("'service_tier' : value is not one of the allowed values "
                                "['auto', 'on_demand', 'flex', 'performance']")


# --- reasoning -------------------------------------------------------------------------------

def test_include_reasoning_false_drops_the_reasoning(demo):
    assert "reasoning" not in reply_message(demo, chat(user("hi"), include_reasoning=False))
    chunks = stream_chunks(post(demo, chat(user("hi"), include_reasoning=False, stream=True))[2])
    assert not any("reasoning" in c["choices"][0]["delta"] for c in chunks if c["choices"])


def test_reasoning_format_hidden_drops_the_reasoning(demo):
    message = reply_message(demo, chat(user("Read a.txt"), tools=TOOLS, reasoning_format="hidden"))
    assert "reasoning" not in message and message["tool_calls"]


def test_reasoning_format_raw_puts_the_reasoning_in_think_tags(demo):
    message = reply_message(demo, chat(user("hi"), reasoning_format="raw"))
    assert "reasoning" not in message
    assert message["content"] == ("<think>\nA plain chat with no tools, so I say who I am.\n</think>\n\n"
                                  + demo_model.HELLO)


def test_both_include_reasoning_and_reasoning_format_is_rejected(demo):
    error = rejection(demo, chat(user("hi"), include_reasoning=True, reasoning_format="parsed"))
    assert error["message"] == "cannot specify both `include_reasoning` and `reasoning_format`"


def test_raw_reasoning_is_rejected_on_gpt_oss_and_with_tools(demo):
    error = rejection(demo, chat(user("hi"), model="openai/gpt-oss-120b", reasoning_format="raw"))
    assert error["message"] == "`reasoning_format` is not supported with this model"
    assert rejection(demo, chat(user("hi"), tools=TOOLS, reasoning_format="raw"))["param"] == "reasoning_format"
    assert post(demo, chat(user("hi"), model="openai/gpt-oss-120b", reasoning_format="hidden"))[0] == 200


# --- HTTP robustness -------------------------------------------------------------------------

def test_chunked_request_body_is_read(demo):
    conn = http.client.HTTPConnection("127.0.0.1", demo.port, timeout=5)
    data = json.dumps(chat(user("hi"))).encode()
    conn.request("POST", "/v1/chat/completions", body=iter([data[:10], data[10:]]),
                 headers={"Content-Type": "application/json"})  # an iterable body goes out chunked
    response = conn.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["choices"][0]["message"]["content"] == demo_model.HELLO
    conn.request("GET", "/v1/models")  # the same connection still works: nothing was left unread
    assert conn.getresponse().status == 200
    conn.close()
    assert demo.requests[0]["headers"]["transfer-encoding"] == "chunked"
    assert demo.requests[0]["body"] == chat(user("hi"))


def test_body_past_the_size_limit_gets_413(demo):
    status, _, reply = post(demo, None, raw=b" " * (demo_model.MAX_BODY_BYTES + 1))
    assert status == 413 and reply["error"]["code"] == "request_too_large"
    with pytest.raises(openai.APIStatusError) as caught:
        client(demo).chat.completions.create(model="demo", messages=[user("x" * demo_model.MAX_BODY_BYTES)])
    assert caught.value.status_code == 413


def test_invalid_content_length_is_a_400_not_a_traceback(demo, capfd):
    for length in (b"abc", b"-5"):
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n"
        reply = raw_http(demo, head)
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and "Content-Length" in json.loads(body)["error"]["message"]
    assert capfd.readouterr().err == ""


def test_a_long_running_server_keeps_only_the_latest_requests():
    server = demo_model.DemoServer(keep=3)
    server.thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    server.thread.start()
    with server:
        for n in range(5):
            request(server, "GET", f"/v1/models?n={n}")
        assert [r["path"] for r in server.requests] == ["/v1/models?n=2", "/v1/models?n=3", "/v1/models?n=4"]
    assert demo_model.KEEP_REQUESTS > 0
    with demo_model.start() as everything:  # tests keep every request
        for n in range(5):
            request(everything, "GET", "/v1/models")
        assert len(everything.requests) == 5


# --- scripted faults -------------------------------------------------------------------------

def send_chat(sock, body):
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))


def receive_until(sock, done, received=b""):
    """Read until done(everything so far) holds; the server hanging up first fails the test."""
    while not done(received):
        got = sock.recv(65536)
        assert got, f"the server hung up after {received!r}"
        received += got
    return received


def test_trickle_sends_the_reply_a_byte_at_a_time(demo):
    demo.push({"status": 200, "body": {"a": 1}, "trickle": 0.02})
    with socket.create_connection(("127.0.0.1", demo.port), timeout=5) as sock:
        send_chat(sock, chat(user("hi")))
        body = receive_until(sock, lambda got: b"\r\n\r\n" in got).partition(b"\r\n\r\n")[2]
        started = time.monotonic()
        while len(body) < len(b'{"a": 1}'):
            got = sock.recv(65536)
            assert len(got) == 1  # each byte arrives on its own
            body += got
    assert body == b'{"a": 1}' and time.monotonic() - started >= 0.1


def test_a_trickled_reply_outlasts_a_read_timeout(demo):
    """httpx's timeout bounds each read, not the whole reply: a byte every 20 ms never trips a 0.5 s timeout, though
    the reply takes three times that. (A byte every 6 ms against 50 ms once failed with two suites on two cores.)"""
    completion = {"id": "c", "object": "chat.completion", "created": 0, "model": "demo", "choices": []}
    demo.push({"status": 200, "body": completion, "trickle": 0.02})
    started = time.monotonic()
    reply = openai.OpenAI(base_url=demo.url, api_key="k", max_retries=0, timeout=0.5).chat.completions.create(
        model="demo", messages=[user("hi")])
    assert reply.id == "c" and time.monotonic() - started > 0.5 * 3


def test_trickle_forever_holds_a_json_reply_open_with_spaces(demo, capfd):
    demo.push({"trickle_forever": 0.01})
    before = handler_threads()
    with socket.create_connection(("127.0.0.1", demo.port), timeout=5) as sock:
        send_chat(sock, chat(user("hi")))
        received = receive_until(sock, lambda got: b"\r\n\r\n" in got and got.endswith(b"     "))
        head, _, rest = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"Content-Length" not in head and set(rest) == {ord(" ")}
        mine = handler_threads() - before
    eventually(lambda: not any(t.is_alive() for t in mine))  # the client hung up: the handler ends
    assert capfd.readouterr().err == ""


def test_trickle_forever_on_a_stream_sends_keep_alive_lines(demo):
    demo.push({"trickle_forever": 0.01})
    with socket.create_connection(("127.0.0.1", demo.port), timeout=5) as sock:
        send_chat(sock, chat(user("hi"), stream=True))
        received = receive_until(sock, lambda got: got.count(b": keep-alive\n\n") >= 3)
    head, _, events = received.partition(b"\r\n\r\n")
    assert b"text/event-stream" in head and events.startswith(b": keep-alive\n\n: keep-alive\n\n")


def test_client_hanging_up_mid_trickle_leaves_no_traceback_and_the_thread_ends(demo, capfd):
    demo.push({"content": "a long answer " * 50, "trickle": 0.005})
    before = handler_threads()
    with socket.create_connection(("127.0.0.1", demo.port), timeout=5) as sock:
        send_chat(sock, chat(user("hi")))
        receive_until(sock, lambda got: len(got) >= 10)
        mine = handler_threads() - before
    eventually(lambda: not any(t.is_alive() for t in mine))
    assert capfd.readouterr().err == ""


def test_stopping_the_server_ends_a_reply_held_open():
    server = demo_model.start(script=[{"trickle_forever": 0.05}])
    before = handler_threads()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        send_chat(sock, chat(user("hi")))
        receive_until(sock, lambda got: b"\r\n\r\n" in got)
        mine = handler_threads() - before
        server.stop()
        eventually(lambda: mine and not any(t.is_alive() for t in mine))


def test_keepalive_lines_come_before_the_first_event(demo):
    demo.push({"content": "hello there", "keepalive": 2})
    events = sse_events(post(demo, chat(user("hi"), stream=True))[2])
    assert events[:2] == [": keep-alive", ": keep-alive"] and events[2].startswith("data: {")
    demo.push({"content": "hello there", "keepalive": 2})
    chunks = list(client(demo).chat.completions.create(model="demo", messages=[user("hi")], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello there"


def test_scripted_events_are_sent_exactly(demo):
    delta = {"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "read_file", "arguments": "{}"}}]}, "finish_reason": None}]}  # a tool-call delta without index
    usage_only = {"usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}  # no "choices" key
    demo.push({"events": [delta, usage_only, "data: [not json\n\n"], "done": False})
    assert post(demo, chat(user("hi"), stream=True))[2] == (
        f"data: {json.dumps(delta)}\n\ndata: {json.dumps(usage_only)}\n\ndata: [not json\n\n")
    demo.push({"events": [{"choices": [{"index": 0, "delta": {"refusal": "no"}, "finish_reason": "content_filter"}]}]})
    assert post(demo, chat(user("hi"), stream=True))[2].endswith('"content_filter"}]}\n\ndata: [DONE]\n\n')


def test_content_type_overrides_a_status_reply(demo):
    sse_body = 'data: {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "demo", "choices": []}\n\n'
    demo.push({"status": 200, "body": sse_body, "content_type": "text/event-stream"})
    status, headers, text = post(demo, chat(user("hi"), stream=True))
    assert (status, headers["Content-Type"], text) == (200, "text/event-stream", sse_body)
    demo.push({"status": 200, "body": '{"choices": []}', "content_type": "application/json"})
    assert post(demo, chat(user("hi")))[1]["Content-Type"] == "application/json"


def test_an_empty_string_body_is_sent_verbatim(demo):
    demo.push({"status": 200, "body": ""})
    status, headers, text = post(demo, chat(user("hi")))
    assert (status, headers["Content-Length"], text) == (200, "0", "")


def test_scripted_usage_false_sends_no_usage_in_json_or_stream(demo):
    demo.push({"content": "uncounted", "usage": False}, {"content": "uncounted", "usage": False})
    status, _, reply = post(demo, chat(user("hi")))
    assert status == 200 and "usage" not in reply
    status, _, text = post(demo, chat(user("hi"), stream=True, stream_options={"include_usage": True}))
    assert status == 200 and '"usage"' not in text and "uncounted" in text


def test_the_openai_stream_helper_assembles_a_tool_call_and_an_answer(demo):
    """client.chat.completions.stream(), the SDK's own helper, reads the demo's streams: a tool call, then text."""
    demo.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}, "id": "c1"}], "split_arguments": 3},
              "The file says hi.")
    with client(demo).chat.completions.stream(model="demo", messages=[user("Read a.txt")], tools=TOOLS) as stream:
        call = stream.get_final_completion().choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("c1", "read_file", '{"path": "a.txt"}')
    with client(demo).chat.completions.stream(model="demo", messages=[user("Read a.txt")]) as stream:
        pieces = [event.delta for event in stream if event.type == "content.delta"]
    assert "".join(pieces) == "The file says hi." and len(pieces) > 1


# --- cached tokens ---------------------------------------------------------------------------

LONG_SYSTEM = {"role": "system", "content": "x" * 6000}


def cached(reply):
    return reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_cached_tokens_count_the_prefix_an_earlier_prompt_began_with(demo):
    """OpenAI: "Cache hits are only possible for exact prefix matches", from 1024 tokens on
    (developers.openai.com/api/docs/guides/prompt-caching), in 128-token steps. The first prompt is "[]" (no tools)
    and the messages' JSON, 6072 characters; the second resends it with two more messages, so both begin with the
    same 6071 characters (all but the closing "]"): 11 whole blocks of 512 characters (128 tokens) -> 1408."""
    first = [LONG_SYSTEM, user("hi")]
    assert cached(post(demo, chat(*first))[2]) == 0
    reply = post(demo, chat(*first, {"role": "assistant", "content": "hello"}, user("more")))[2]
    assert cached(reply) == 1408 and reply["usage"]["prompt_tokens"] == 1539


def test_a_prefix_under_1024_tokens_is_not_cached(demo):
    """Caching starts at 1024 tokens: a short prompt sent twice reports no cached tokens."""
    assert [cached(post(demo, chat(user("hi")))[2]) for _ in range(2)] == [0, 0]


def test_cached_tokens_are_per_model(demo):
    """A cache holds one model's prompts: the same prompt to another model starts cold."""
    post(demo, chat(LONG_SYSTEM, user("hi")))
    assert cached(post(demo, chat(LONG_SYSTEM, user("hi"), model="openai/gpt-oss-120b"))[2]) == 0
    assert cached(post(demo, chat(LONG_SYSTEM, user("hi")))[2]) == 1408


def test_a_streams_usage_carries_cached_tokens(demo):
    """The usage on the finish chunk and the include_usage chunk both carry prompt_tokens_details."""
    post(demo, chat(LONG_SYSTEM, user("hi")))
    chunks = stream_chunks(post(demo, chat(LONG_SYSTEM, user("hi"), stream=True,
                                           stream_options={"include_usage": True}))[2])
    assert [c["usage"]["prompt_tokens_details"] for c in chunks if c.get("usage")] == [{"cached_tokens": 1408}] * 2


def test_the_prompt_cache_forgets_all_but_the_latest_prompts():
    """Memory stays bounded: keeping one prompt, A is forgotten once B comes. 5000 characters are 9 blocks."""
    cache = demo_model.PromptCache(keep=1)
    a, b = "a" * 5000, "b" * 5000
    assert [cache.cached_tokens("demo", text) for text in (a, a, b, a)] == [0, 1152, 0, 0]
    assert len(cache.prompts) == 1 and len(cache.blocks) == 9


# --- a client's own tools and MCP tools ------------------------------------------------------

WEATHER = tool("get_weather", {"city": {"type": "string"}}, required=["city"])
GET_TICKET = tool("ticket_server__get_ticket", {"ticket_id": {"type": "string"}}, required=["ticket_id"])
PROPOSE = tool("ticket_server__propose_label", {"ticket_id": {"type": "string"}, "label": {"type": "string"},
                                                "expected_version": {"type": "integer"}},
               required=["ticket_id", "label", "expected_version"])
TICKET = {"id": "DEMO-42", "title": "Charged twice for one order", "body": "...", "labels": [], "version": 3}
PROPOSED = ("Proposed label billing for DEMO-42 at version 4. Nothing was applied: a person reviews every "
            "proposal.")


def step(server, history, tools, text):
    """Ask the policy for its next call, answer it with `text`; returns the call as (name, arguments)."""
    message = reply_message(server, chat(*history, tools=tools))
    (pair,) = call_pairs(message)
    call_id = message["tool_calls"][0]["id"]
    history += [calls((call_id, *pair)), result(call_id, text)]
    return pair


def test_a_function_tool_the_task_names_is_called_with_a_value_from_the_task(demo):
    """"Use get_weather for Paris": the task names the tool, and Paris (a capitalised word of it) fills `city`;
    then the answer quotes the result."""
    history = [user("Use get_weather for Paris")]
    assert step(demo, history, [WEATHER], "Sunny, 18 C") == ("get_weather", {"city": "Paris"})
    assert reply_message(demo, chat(*history, tools=[WEATHER]))["content"] == "get_weather returned: Sunny, 18 C"


def test_mcp_tools_read_the_ticket_then_propose_then_quote_the_proposal(demo):
    """propose_label is asked for by its words ("Propose ... label"); its expected_version is in nothing the task
    says, so the server's get tool reads it first (ticket_id: the id in the task); label is the word before
    "label"; expected_version is the ticket's "version". The answer quotes what propose_label returned."""
    history, tools = [user("Propose the billing label for DEMO-42")], [GET_TICKET, PROPOSE]
    assert step(demo, history, tools, json.dumps(TICKET)) == ("ticket_server__get_ticket", {"ticket_id": "DEMO-42"})
    proposed = PROPOSED.replace("version 4", "version 3")
    assert step(demo, history, tools, proposed) == (
        "ticket_server__propose_label", {"ticket_id": "DEMO-42", "label": "billing", "expected_version": 3})
    answer = reply_message(demo, chat(*history, tools=tools))["content"]
    assert answer == f"ticket_server__propose_label returned: {proposed}"


def test_a_stale_version_error_reads_the_ticket_again_and_retries_once(demo):
    """An error naming the version (a value read from the ticket) means the read is stale: read again, retry once
    with the new version, then answer with both results."""
    history, tools = [user("Propose the billing label for DEMO-42")], [GET_TICKET, PROPOSE]
    step(demo, history, tools, json.dumps(TICKET))
    stale = "error: stale version: expected_version is 3, but DEMO-42 is at version 4. Read it again."
    step(demo, history, tools, stale)
    assert step(demo, history, tools, json.dumps({**TICKET, "version": 4}))[0] == "ticket_server__get_ticket"
    assert step(demo, history, tools, PROPOSED)[1]["expected_version"] == 4
    assert reply_message(demo, chat(*history, tools=tools))["content"] == (
        f"ticket_server__propose_label returned: {stale}\n\nticket_server__propose_label returned: {PROPOSED}")


def test_a_second_stale_error_is_answered_not_retried(demo):
    history, tools = [user("Propose the billing label for DEMO-42")], [GET_TICKET, PROPOSE]
    step(demo, history, tools, json.dumps(TICKET))
    step(demo, history, tools, "error: stale version 3")
    step(demo, history, tools, json.dumps({**TICKET, "version": 4}))
    step(demo, history, tools, "error: stale version 4")
    assert "tool_calls" not in reply_message(demo, chat(*history, tools=tools))


def test_the_read_then_act_rule_holds_for_any_server_and_names(demo):
    """Nothing is special about ticket_server: crm's fetch tool reads the revision its assign tool needs."""
    fetch = tool("crm__fetch_account", {"account_id": {"type": "string"}}, required=["account_id"])
    assign = tool("crm__assign_owner", {"account_id": {"type": "string"}, "owner": {"type": "string"},
                                        "expected_revision": {"type": "integer"}},
                  required=["account_id", "owner", "expected_revision"])
    history, tools = [user("Assign the alice owner to ACC-7")], [assign, fetch]
    assert step(demo, history, tools, '{"id": "ACC-7", "revision": 12}') == (
        "crm__fetch_account", {"account_id": "ACC-7"})
    assert step(demo, history, tools, "Assigned.") == (
        "crm__assign_owner", {"account_id": "ACC-7", "owner": "alice", "expected_revision": 12})


def test_a_value_the_task_gives_wins_over_the_first_enum_value(demo):
    """An enum lists what is allowed; the task's word picks among them ("bug"), not the enum's order."""
    enum = tool("ticket_server__propose_label", {
        "ticket_id": {"type": "string"}, "label": {"type": "string", "enum": ["billing", "bug"]},
        "expected_version": {"type": "integer"}}, required=["ticket_id", "label", "expected_version"])
    history, tools = [user("Propose the bug label for DEMO-43")], [GET_TICKET, enum]
    step(demo, history, tools, json.dumps({**TICKET, "id": "DEMO-43", "version": 1}))
    assert step(demo, history, tools, "Proposed.")[1] == {"ticket_id": "DEMO-43", "label": "bug", "expected_version": 1}


# --- summing up (phase 13): from the text sent, and carried on from in any words ---------------------------------

SUMMED_TASK = "Read a.txt, then read b.txt, then tell me the code word"
A_TXT = "".join("The code word is PELICAN.\n" if i == 50 else f"line {i} of a\n" for i in range(100))
ASK = "Sum up the work so far for yourself, to carry on from it."


def summed_up(server, *messages):
    """The demo's summary of these messages, asked for as the harness asks, with no tool call allowed."""
    return reply_message(server, chat(*messages, user(ASK), tools=TOOLS, tool_choice="none"))["content"]


def test_a_summary_keeps_a_fact_the_task_asks_about_from_the_middle_of_a_result(demo):
    """The fact the task asks about (the code word) is on line 51 of 100: the summary keeps that line and names
    the call it came from, and leaves out the lines the task does not ask about."""
    text = summed_up(demo, user(SUMMED_TASK), calls(("c1", "read_file", {"path": "a.txt"})), result("c1", A_TXT))
    assert '- read_file {"path": "a.txt"}: The code word is PELICAN.' in text.splitlines(), text
    assert "line 7 of a" not in text


def test_a_summary_keeps_nothing_from_text_it_was_not_sent(demo):
    """The demo read the whole of a.txt in one request; the next request, asking for a summary, holds only a
    placeholder for it: the summary has no code word, as a real model's could not."""
    first = [user(SUMMED_TASK), calls(("c1", "read_file", {"path": "a.txt"})), result("c1", A_TXT)]
    assert call_pairs(reply_message(demo, chat(*first, tools=TOOLS))) == [("read_file", {"path": "b.txt"})]
    cleared = [*first[:2], result("c1", "[cleared to save room: call read_file again to see it]")]
    text = summed_up(demo, *cleared)
    assert "a.txt" in text and "PELICAN" not in text, text


def test_a_request_to_summarize_in_other_words_gets_a_summary_and_a_task_to_summarize_a_file_does_not(demo):
    """"Summarize your work so far." after some calls is a request to sum up; "Summarize a.txt" as the task is a
    task: the demo reads the file."""
    history = [user(SUMMED_TASK), calls(("c1", "read_file", {"path": "a.txt"})), result("c1", A_TXT)]
    asked = reply_message(demo, chat(*history, user("Summarize your work so far."), tools=TOOLS))
    assert "The code word is PELICAN." in asked["content"] and "tool_calls" not in asked
    task = reply_message(demo, chat(user("Summarize a.txt"), tools=TOOLS))
    assert call_pairs(task) == [("read_file", {"path": "a.txt"})]


@pytest.mark.parametrize("wrap", [
    lambda text: user(f"[The earlier work, summed up]\n{text}"),
    lambda text: user(f"Summary of what happened so far (older messages were removed):\n\n{text}\n\nGo on."),
    lambda text: {"role": "assistant", "content": text},
], ids=["the reference's words", "a learner's words", "an assistant message"])
def test_the_model_carries_on_from_a_summary_in_any_words(demo, wrap):
    """The summary of the work (a.txt read) replaces the turns it sums up, in the harness's words, a learner's, or
    as an assistant message: the demo makes the next call (b.txt, not a.txt again), then answers with the fact the
    summary kept."""
    text = summed_up(demo, user(SUMMED_TASK), calls(("c1", "read_file", {"path": "a.txt"})), result("c1", A_TXT))
    history = [{"role": "system", "content": "You are careful."}, user(SUMMED_TASK), wrap(text)]
    assert step(demo, history, TOOLS, "nothing here\n") == ("read_file", {"path": "b.txt"})
    answer = reply_message(demo, chat(*history, tools=TOOLS))["content"]
    assert "PELICAN" in answer, answer


# --- the Responses API -----------------------------------------------------------------------

WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}
WEATHER_TASK = "Use get_weather for Paris"
WEATHER_ANSWER = "get_weather returned: Sunny, 18 C in Paris"


def post_response(server, body, path="/v1/responses"):
    return request(server, "POST", path, {"model": "demo", **body})


def weather_output(call):
    return {"type": "function_call_output", "call_id": call.call_id,
            "output": f"Sunny, 18 C in {json.loads(call.arguments)['city']}"}


def test_responses_create_holds_a_tool_conversation(demo):
    """client.responses.create: the model calls the client's function tool; the client sends the
    output items back with a function_call_output, as OpenAI's function-calling guide does; the
    model answers from it, with usage in input_tokens and output_tokens."""
    sdk = client(demo)
    history = [{"role": "user", "content": WEATHER_TASK}]
    first = sdk.responses.create(model="demo", input=history, tools=[WEATHER_TOOL])
    (call,) = first.output
    assert (first.status, call.type, call.name, json.loads(call.arguments)) == (
        "completed", "function_call", "get_weather", {"city": "Paris"})
    history += [*first.output, weather_output(call)]
    second = sdk.responses.create(model="demo", input=history, tools=[WEATHER_TOOL])
    assert second.output_text == WEATHER_ANSWER
    usage = second.usage
    assert usage.input_tokens > first.usage.input_tokens and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert [r["path"] for r in demo.requests] == ["/v1/responses"] * 2


def stream_events_of(text):
    """(event name, data) of each event of a Responses stream."""
    blocks = [block.split("\n") for block in sse_events(text)]
    return [(name.removeprefix("event: "), json.loads(data.removeprefix("data: ")))
            for name, data in blocks]


def test_a_streamed_response_sends_the_documented_events_in_order(demo):
    """OpenAI's streaming events: created, in_progress, the item added, a content part, the text in
    deltas, the text, part and item done, completed; each event's name is its type, sequence
    numbers count from 0, and no [DONE] ends the stream."""
    status, headers, text = post_response(demo, {"input": "hi", "stream": True})
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    assert "[DONE]" not in text
    events = stream_events_of(text)
    names = [name for name, _ in events]
    deltas = names.count("response.output_text.delta")
    assert deltas > 1 and names == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", *["response.output_text.delta"] * deltas,
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed"]
    assert [data["type"] for _, data in events] == names
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    said = "".join(data["delta"] for name, data in events if name == "response.output_text.delta")
    final = events[-1][1]["response"]
    assert said == demo_model.HELLO == final["output"][0]["content"][0]["text"]
    assert events[0][1]["response"]["status"] == "in_progress"


def test_a_streamed_tool_call_comes_as_argument_deltas_and_the_sdk_assembles_it(demo):
    sdk = client(demo)
    history = [{"role": "user", "content": WEATHER_TASK}]
    with sdk.responses.stream(model="demo", input=history, tools=[WEATHER_TOOL]) as stream:
        names = [event.type for event in stream]
        first = stream.get_final_response()
    assert names == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.function_call_arguments.delta",
                     "response.function_call_arguments.done", "response.output_item.done",
                     "response.completed"]
    (call,) = first.output
    history += [*first.output, weather_output(call)]
    answer = sdk.responses.create(model="demo", input=history, tools=[WEATHER_TOOL], stream=True)
    deltas = [event.delta for event in answer if event.type == "response.output_text.delta"]
    assert "".join(deltas) == WEATHER_ANSWER


CALL = {"type": "function_call", "call_id": "c1", "name": "get_weather",
        "arguments": '{"city": "Paris"}'}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "Sunny"}
TASK = user(WEATHER_TASK)
BAD_REQUESTS = [  # the body sent, then OpenAI's message, param and code (tests/wire.md 4)
    pytest.param({"input": [TASK, {**OUTPUT, "call_id": "nope"}]},
                 "No tool call found for function call output with call_id nope.", "input", None,
                 id="output-answers-no-call"),
    pytest.param({"input": [TASK, CALL]}, "No tool output found for function call c1.", "input",
                 None, id="call-unanswered"),
    pytest.param({"input": [TASK, OUTPUT, CALL]},
                 "No tool call found for function call output with call_id c1.", "input", None,
                 id="output-before-its-call"),
    pytest.param({"input": "hi", "messages": []}, "Unknown parameter: 'messages'.", "messages",
                 "unknown_parameter", id="unknown-field"),
    pytest.param({"input": [TASK, {**CALL, "parsed_arguments": None}, OUTPUT]},
                 f"Unknown parameter: 'input[1].parsed_arguments'. {demo_model.SEND_BACK}",
                 "input[1].parsed_arguments", "unknown_parameter", id="sdk-field"),
    pytest.param({"input": [{"type": "function_call_output", "output": "x"}]},
                 "Missing required parameter: 'input[0].call_id'.", "input[0].call_id",
                 "missing_required_parameter", id="missing-call-id"),
    pytest.param({"input": "hi", "tools": [{"type": "function", "function": {"name": "x"}}]},
                 "Missing required parameter: 'tools[0].name'.", "tools[0].name",
                 "missing_required_parameter", id="chat-shaped-tool"),
    pytest.param({"input": {"role": "user", "content": "hi"}},
                 "Invalid type for 'input': expected a string or an array of input items, but "
                 "got an object instead.", "input", "invalid_type", id="input-object"),
    pytest.param({"input": [{"role": "bot", "content": "hi"}]},
                 "Invalid value: \"bot\". Supported values are: 'user', 'assistant', 'system', "
                 "'developer'.", "input[0].role", "invalid_value", id="bad-role"),
    pytest.param({"input": "hi", "max_output_tokens": 5},
                 "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
                 "16, but got 5 instead.", "max_output_tokens", "integer_below_min_value",
                 id="few-tokens"),
    pytest.param({"input": "hi", "tool_choice": {"type": "function", "name": "read_file"}},
                 "Tool choice 'read_file' not found in 'tools' parameter.", "tool_choice", None,
                 id="unknown-tool-choice"),
    pytest.param({"input": "hi", "tools": [], "tool_choice": "required"},
                 "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                 "specified.", "tool_choice", None, id="required-with-no-tools"),
]


@pytest.mark.parametrize("body, message, param, code", BAD_REQUESTS)
def test_a_bad_responses_request_gets_openais_400(demo, body, message, param, code):
    status, _, reply = post_response(demo, {"tools": [WEATHER_TOOL], **body})
    expected = {"message": message, "type": "invalid_request_error", "param": param}
    assert (status, reply["error"]) == (400, {**expected, **({"code": code} if code else {})})


def test_previous_response_id_continues_a_stored_response_on_openais_path_only(demo):
    """OpenAI stores a response unless store is false, and previous_response_id carries its
    conversation on; Groq keeps none ("doesn't support stateful conversations yet",
    console.groq.com/docs/responses-api)."""
    sdk = client(demo)
    first = sdk.responses.create(model="demo", input=WEATHER_TASK, tools=[WEATHER_TOOL])
    answer = sdk.responses.create(model="demo", previous_response_id=first.id, tools=[WEATHER_TOOL],
                                  input=[weather_output(first.output[0])])
    assert answer.output_text == WEATHER_ANSWER
    unstored = sdk.responses.create(model="demo", input=WEATHER_TASK, tools=[WEATHER_TOOL],
                                    store=False)
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(model="demo", previous_response_id=unstored.id, input="go on")
    assert (caught.value.code, caught.value.body["message"]) == (
        "previous_response_not_found", f"Previous response with id '{unstored.id}' not found.")
    status, _, reply = post_response(demo, {"previous_response_id": first.id, "input": "go on"},
                                     path="/openai/v1/responses")
    assert (status, reply["error"]["param"]) == (400, "previous_response_id")


def test_a_response_in_a_json_schema_format_is_parsed_from_the_tasks_facts(demo):
    """responses.parse(text_format=Model) sends text.format json_schema; the answer fills it from
    the task."""
    from pydantic import BaseModel

    class City(BaseModel):
        capital: str
        population: int

    reply = client(demo).responses.parse(model="demo", input=CAPITAL, text_format=City)
    assert reply.output_parsed == City(capital="Paris", population=2100000)


def test_a_response_cut_by_max_output_tokens_is_incomplete(demo):
    status, _, reply = post_response(demo, {"input": "hi", "max_output_tokens": 16})
    assert (status, reply["status"], reply["incomplete_details"]) == (
        200, "incomplete", {"reason": "max_output_tokens"})
    text = reply["output"][0]["content"][0]["text"]
    assert text == demo_model.HELLO[:16 * demo_model.CHARS_PER_TOKEN]
    assert reply["usage"]["output_tokens"] == 16


def test_a_wrong_model_on_the_responses_route_gets_the_404_naming_the_nearest(demo):
    status, _, reply = post_response(demo, {"model": "gpt-oss-20b", "input": "hi"})
    assert (status, reply["error"]["code"]) == (404, "model_not_found")
    assert reply["error"]["message"].endswith("Did you mean `openai/gpt-oss-20b`?")
