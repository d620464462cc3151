"""Phase 13, context: a long run costs a third of the tokens, and forgets nothing the task needs. Checked through
run(..., limits=Limits(..., context_tokens=N)) and the command line against the offline model, which counts cached
prompt tokens as OpenAI does, answers a request to sum up the work with a summary of what it was sent, and carries
on from that summary in whatever words it comes back."""
import json

import pytest
from cases import run_case
from helpers import groq_env, run_python, scripted_backend, trace_records

PHASE = 13
FILES = ("harness.py", "backend.py", "tools.py", "cli.py")
STEPS = 24


@pytest.fixture
def long_task(workspace):
    """A workspace with a note of 61 lines, the middle one holding a fact, and STEPS files of about 4,000 characters;
    and the script of a model that reads the note, then every file, then answers."""
    (workspace / "notes.txt").write_text("more notes\n" * 30 + "The code word is PELICAN.\n" + "more notes\n" * 30)
    for n in range(STEPS):
        (workspace / f"file{n}.txt").write_text("".join(f"{n}: line {i} of a file the task reads\n"
                                                        for i in range(100)))
    reads = ["notes.txt", *(f"file{n}.txt" for n in range(STEPS))]
    return [{"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]} for path in reads] + ["done"]


def long_run(harness, server, script, budget):
    server.push(*script)
    return harness.run("Read the notes and every file, then tell me the code word", backend=scripted_backend(server),
                       limits=harness.Limits(max_steps=STEPS + 5, max_tool_calls=STEPS + 5, context_tokens=budget))


def asks_to_sum_up(request):
    """Whether a request's last message is the harness asking the model to sum up ("Sum up the work so far")."""
    last = request["body"]["messages"][-1]
    return last["role"] == "user" and str(last["content"]).startswith("Sum up the work so far")


def rewrites(requests):
    """How many requests do not begin with the messages of the request before: each one a prefix a provider had
    cached and lost. Requests to sum up are left out: each is the one before it, or its start, and one message."""
    bodies = [r["body"]["messages"] for r in requests if not asks_to_sum_up(r)]
    return sum(later[:len(earlier)] != earlier for earlier, later in zip(bodies, bodies[1:]))


def test_usage_counts_the_cached_prompt_tokens(load, server, long_task):
    """Result.usage has cached_tokens: the prompt tokens the provider said it had cached, added up."""
    result = long_run(load("harness"), server, long_task[:4] + ["done"], None)
    assert result.status == "answered" and result.usage.get("cached_tokens", 0) > 0, result.usage
    assert result.usage["cached_tokens"] < result.usage["prompt_tokens"]


def test_under_a_budget_the_conversation_stays_small_valid_and_keeps_its_head(load, server, long_task):
    """With context_tokens=4000, every request stays near the budget; the strict server accepts every one (each
    tool call still has its answer); the system message and the task are sent as they were."""
    result = long_run(load("harness"), server, long_task, 4000)
    assert result.status == "answered", result.error
    sizes = [len(json.dumps(r["body"]["messages"])) // 4 for r in server.requests]
    assert max(sizes) < 4000 * 2, sizes
    first = server.requests[0]["body"]["messages"][:2]
    assert all(r["body"]["messages"][:2] == first for r in server.requests), "the system message and task change"


def test_the_model_sums_up_from_the_full_text_before_anything_is_cleared(load, server, long_task):
    """A long run under a small budget: the model is asked to sum up the work (the last message a user message that
    begins "Sum up the work so far"), and every tool result in that request is whole, as the model first got it:
    what compaction clears is summed up first."""
    long_run(load("harness"), server, long_task, 4000)
    asks = [r for r in server.requests if asks_to_sum_up(r)]
    assert asks, "the model should be asked to sum up the older part"
    first_sent = {}
    for r in server.requests:
        for m in r["body"]["messages"]:
            if m["role"] == "tool":
                first_sent.setdefault(m["tool_call_id"], m["content"])
    changed = [m for r in asks for m in r["body"]["messages"]
               if m["role"] == "tool" and m["content"] != first_sent[m["tool_call_id"]]]
    assert not changed, f"the model was asked to sum up a result already cleared: {changed[0]['content'][:200]!r}"


def test_what_was_cleared_says_how_to_get_it_again_and_the_summary_keeps_the_facts(load, server, long_task):
    """After a compaction, a request says to make a call again (file0.txt's, read early) to see its result; and
    the fact in the middle of the note, which no placeholder keeps, is still in the last request."""
    long_run(load("harness"), server, long_task, 4000)
    texts = [json.dumps(r["body"]["messages"]) for r in server.requests if not asks_to_sum_up(r)]
    assert any("again" in text and "file0.txt" in text for text in texts[5:]), "a cleared result says how to get it"
    assert "PELICAN" in texts[-1], "the fact read first is lost by the end"


def test_compaction_is_rare_so_the_cached_prefix_survives(load, server, long_task):
    """Compaction happens in big steps: most requests begin with the whole request before them."""
    long_run(load("harness"), server, long_task, 4000)
    assert rewrites(server.requests) <= len(server.requests) // 3, rewrites(server.requests)


def test_a_long_run_costs_a_third_of_the_prompt_tokens(load, server, long_task):
    """The same run, managed (context_tokens=4000) and not (None): the managed one sends at most 0.4 of the
    prompt tokens (the benchmark's 50-step run reaches 0.3)."""
    harness = load("harness")
    naive = long_run(harness, server, long_task, None)
    managed = long_run(harness, server, long_task, 4000)
    assert managed.usage["prompt_tokens"] <= 0.4 * naive.usage["prompt_tokens"], (managed.usage, naive.usage)


def test_the_command_line_takes_a_budget_and_zero_turns_it_off(workspace, server, long_task):
    """--context-tokens N sets the budget; --context-tokens 0 never compacts; the trace's reply records carry
    cached_tokens in their usage."""
    server.push(*long_task[:8], "done")
    done = run_python(workspace, "harness.py", "--context-tokens", "0", "--trace", "t.jsonl", "Read them",
                      env=groq_env(server))
    assert done.returncode == 0, done.stderr
    assert rewrites(server.requests) == 0, "with 0, nothing is ever rewritten"
    replies = [r for r in trace_records(workspace / "t.jsonl") if r["type"] == "reply"]
    assert all("cached_tokens" in r["usage"] for r in replies), replies[0]


def test_an_early_fact_survives_fifty_steps(code_dir):
    """The scripted case an_early_fact_survives_fifty_steps: 50 steps under the default budget on the command line,
    then the offline model answers from what the last request holds, and its answer has the notes read at step 1
    (`python tests/cases.py -v an_early_fact_survives_fifty_steps` shows it run)."""
    found = run_case("an_early_fact_survives_fifty_steps", code_dir)
    assert found == [], "; ".join(found)


def test_a_fact_from_step_3_survives_wordless_calls(code_dir):
    """The scripted case a_fact_from_step_3_survives_wordless_calls: 50 steps whose tool calls carry no
    words (content "" or null), the code word on a line in the middle of the log read at step 3; the offline model
    answers from the last request, and its answer has the code word (`python tests/cases.py -v
    a_fact_from_step_3_survives_wordless_calls` shows it run)."""
    found = run_case("a_fact_from_step_3_survives_wordless_calls", code_dir)
    assert found == [], "; ".join(found)
