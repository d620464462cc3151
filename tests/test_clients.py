"""Real clients against the offline model: each completes a two-turn tool conversation (the model calls the
client's own tool, the client sends the result back the way its docs do, the model answers from it),
or answers with the shape it asks for, from the task's facts.

The clients are test-only: `pip install -r tests/requirements.txt`. A test whose package is missing skips and says
which. Nothing leaves 127.0.0.1 (an audit hook fails a test whose client tries): LiteLLM runs in its offline mode,
and the Agents SDK's tracing is off.
"""
import asyncio
import json
import sys

import pytest

TASK = "Use get_weather for Paris"
ANSWER = "get_weather returned: Sunny, 18 C in Paris"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
REASONING_MODEL, PLAIN_MODEL = "openai/gpt-oss-120b", "llama-3.3-70b-versatile"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
REACHED = []  # every address past 127.0.0.1 a client tried to look up or connect to while a test here ran
WATCHING = []


def watch(event, args):
    """An audit hook (it stays for the process, so it only records while WATCHING): name lookups and connects."""
    if not WATCHING or event not in ("socket.getaddrinfo", "socket.connect"):
        return
    address = args[0] if event == "socket.getaddrinfo" else args[1]
    if event == "socket.connect" and not isinstance(address, tuple):
        return  # a Unix socket's path
    host = address[0] if isinstance(address, tuple) else address
    host = host.decode() if isinstance(host, bytes) else host
    if host is not None and host not in LOOPBACK:
        REACHED.append((event, address))


sys.addaudithook(watch)
# one worker runs the module: each client package (LiteLLM alone takes 3 s of CPU) is imported once, not
# once in each worker that one of its tests lands on
pytestmark = pytest.mark.xdist_group("test_clients")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Each test here fails if its client tried to reach anything but 127.0.0.1 (a price map, telemetry...)."""
    # set before a client is imported: LiteLLM fetches its price map and tokenizers unless told to use its own
    monkeypatch.setenv("LITELLM_OFFLINE_MODE", "true")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    REACHED.clear()
    WATCHING.append(True)
    yield
    WATCHING.clear()
    assert REACHED == [], f"a client tried to reach the network: {REACHED}"


def need(module, package=None):
    """The module, or a skip naming the package to install."""
    return pytest.importorskip(module, reason=f"{package or module} is test-only: see tests/requirements.txt")


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny, 18 C in {city}"


def tool_result(call_id, arguments):
    return {"role": "tool", "tool_call_id": call_id, "content": get_weather(**json.loads(arguments))}


def echoed(server):
    """The assistant message the client sent back with its second request."""
    return next(m for m in server.requests[-1]["body"]["messages"] if m["role"] == "assistant")


@pytest.mark.parametrize("model", [REASONING_MODEL, PLAIN_MODEL])
def test_openai_sdk_appends_the_message_object(server, model):
    """The openai SDK's docs append the returned message object itself: on a reasoning model it carries
    `reasoning` back, which Groq accepts there (groq 1.7.0 chat_completion_assistant_message_param.py)."""
    openai = need("openai")
    client = openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": TASK}]
    message = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER]).choices[0].message
    messages.append(message)
    messages += [tool_result(call.id, call.function.arguments) for call in message.tool_calls]
    answer = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
    assert answer.choices[0].message.content == ANSWER
    assert ("reasoning" in echoed(server)) == (model == REASONING_MODEL)


@pytest.mark.parametrize("model", [REASONING_MODEL, PLAIN_MODEL])
def test_groq_sdk_appends_the_message_object(server, model):
    """The groq SDK on Groq's own path (/openai/v1), appending the returned message as its tool-use docs do."""
    groq = need("groq")
    client = groq.Groq(base_url=server.url.removesuffix("/v1"), api_key="gsk_test", max_retries=0)
    messages = [{"role": "user", "content": TASK}]
    message = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER]).choices[0].message
    messages.append(message)
    messages += [tool_result(call.id, call.function.arguments) for call in message.tool_calls]
    answer = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
    assert answer.choices[0].message.content == ANSWER
    assert server.requests[-1]["path"] == "/openai/v1/chat/completions"


def litellm_turns(server, model, api_base):
    """Two litellm.completion() turns, appending the returned Message as LiteLLM's function-calling docs do."""
    litellm = need("litellm")
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on the 400 below
    settings = {"model": model, "tools": [WEATHER], "api_base": api_base, "api_key": "gsk_test", "num_retries": 0}
    messages = [{"role": "user", "content": TASK}]
    message = litellm.completion(messages=messages, **settings).choices[0].message
    messages.append(message)
    messages += [tool_result(call.id, call.function.arguments) for call in message.tool_calls]
    return litellm.completion(messages=messages, **settings).choices[0].message.content


def test_litellm_groq_prefix_completes_the_conversation(server):
    """LiteLLM's groq/ provider sends the reply back as Groq's types describe it (`reasoning`, no extras)."""
    assert litellm_turns(server, f"groq/{REASONING_MODEL}", server.url.replace("/v1", "/openai/v1")) == ANSWER
    assert set(echoed(server)) <= {"role", "content", "tool_calls", "reasoning"}


def test_litellm_openai_prefix_sends_fields_groq_refuses(server):
    """LiteLLM's openai/ provider sends its own reasoning_content and provider_specific_fields back; neither is in
    Groq's assistant message type, so the demo refuses them as Groq would (Format A, wire.md 4.1.2)."""
    litellm = need("litellm")
    with pytest.raises(litellm.BadRequestError) as caught:
        litellm_turns(server, f"openai/{REASONING_MODEL}", server.url)
    assert ("'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : property "
            "'reasoning_content' is unsupported), ('messages.1' : property 'provider_specific_fields' is "
            "unsupported)]") in str(caught.value)


def test_openai_agents_runner_calls_a_function_tool(server):
    """The OpenAI Agents SDK's Runner with a @function_tool: it sends the model's `reasoning` back with the call."""
    agents = need("agents", "openai-agents")
    openai = need("openai")
    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    model = agents.OpenAIChatCompletionsModel(model=REASONING_MODEL, openai_client=client)
    agent = agents.Agent(name="weather", instructions="Use your tools.", model=model,
                         tools=[agents.function_tool(get_weather)])
    assert agents.Runner.run_sync(agent, TASK).final_output == ANSWER
    assert echoed(server)["reasoning"] and len(server.requests) == 2


def test_openai_agents_default_runner_calls_a_function_tool_over_the_responses_api(server):
    """The Agents SDK's default model provider (OpenAIProvider) uses the Responses API: the Runner
    sends its instructions, the function tool and, on the second turn, the function_call with its
    output."""
    agents = need("agents", "openai-agents")
    openai = need("openai")
    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    settings = agents.RunConfig(model_provider=agents.OpenAIProvider(openai_client=client))
    agent = agents.Agent(name="weather", instructions="Use your tools.", model=REASONING_MODEL,
                         tools=[agents.function_tool(get_weather)])
    assert agents.Runner.run_sync(agent, TASK, run_config=settings).final_output == ANSWER
    assert [request["path"] for request in server.requests] == ["/v1/responses"] * 2
    sent = server.requests[-1]["body"]
    assert sent["instructions"] == "Use your tools." and sent["tools"][0]["name"] == "get_weather"
    assert [item.get("type", "message") for item in sent["input"]] == [
        "message", "function_call", "function_call_output"]


def test_openai_agents_default_runner_streams_over_the_responses_api(server):
    """Runner.run_streamed reads the Responses API's events: the call's arguments, the answer."""
    agents = need("agents", "openai-agents")
    openai = need("openai")
    agents.set_tracing_disabled(True)

    async def run():
        client = openai.AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
        settings = agents.RunConfig(model_provider=agents.OpenAIProvider(openai_client=client))
        agent = agents.Agent(name="weather", instructions="Use your tools.", model=REASONING_MODEL,
                             tools=[agents.function_tool(get_weather)])
        result = agents.Runner.run_streamed(agent, TASK, run_config=settings)
        kinds = [event.type async for event in result.stream_events()]
        return result.final_output, kinds

    answer, kinds = asyncio.run(run())
    assert answer == ANSWER and "raw_response_event" in kinds
    assert [request["body"].get("stream") for request in server.requests] == [True, True]


@pytest.mark.parametrize("api", ["OpenAIChatModel", "OpenAIResponsesModel"])
def test_pydantic_ai_output_type_answers_from_the_tasks_facts(server, api):
    """pydantic-ai's Agent with output_type: its final_result tool (tool_choice required) is
    called with the task's facts, on Chat Completions and on the Responses API alike."""
    need("pydantic_ai", "pydantic-ai-slim[openai]")
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models import openai as models
    from pydantic_ai.providers.openai import OpenAIProvider

    class City(BaseModel):
        capital: str
        population: int

    provider = OpenAIProvider(base_url=server.url, api_key="sk-test")
    model = getattr(models, api)(PLAIN_MODEL, provider=provider)
    answer = Agent(model, output_type=City).run_sync(
        "The capital of France is Paris; its population is 2,100,000.").output
    assert answer == City(capital="Paris", population=2100000)
    assert server.requests[-1]["body"]["tool_choice"] == "required"


def test_langchain_chat_openai_with_bind_tools(server):
    """LangChain's ChatOpenAI with bind_tools: the AIMessage and a ToolMessage go back, LangChain builds the JSON."""
    need("langchain_openai", "langchain-openai")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=REASONING_MODEL, base_url=server.url, api_key="sk-test", max_retries=0)
    llm = llm.bind_tools([get_weather])
    messages = [HumanMessage(TASK)]
    reply = llm.invoke(messages)
    messages.append(reply)
    messages += [ToolMessage(get_weather(**call["args"]), tool_call_id=call["id"]) for call in reply.tool_calls]
    assert llm.invoke(messages).content == ANSWER
