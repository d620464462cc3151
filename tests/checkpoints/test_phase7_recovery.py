"""Phase 7, recovery: the openai package retries what may pass and says so; chat() retries only a reply that is no
reply and Groq's tool_use_failed; a reply cut short, filtered or refused ends the run and runs nothing; an empty
answer gets one nudge; the same call again and again is told, then stopped. Checked through the scripted cases of
tests/cases.py marked phase 7, chat(), run() and what the offline model receives."""
import pytest
from cases import CASES, start_cases
from helpers import scripted_backend

PHASE = 7
FILES = ("backend.py", "guards.py", "tools.py", "shell.py", "harness.py", "cli.py")
MINE = [name for name, case in CASES.items() if case["phase"] == PHASE]
STARTED = {}  # folder -> {case: future}: every folder's cases, started with this module's first test
pytestmark = pytest.mark.xdist_group("test_phase7_recovery")  # one worker: the first test starts every case


@pytest.fixture(autouse=True, scope="module")
def cases_started(request):
    """The scripted cases of this phase, for every folder whose case tests were chosen, start with the module's
    first test and run side by side with the tests that follow; the last tests wait for them."""
    folders = {item.callspec.params["code_dir"] for item in request.session.items
               if item.originalname == "test_done_when_the_scripted_case_passes" and item.module.PHASE == PHASE}
    STARTED.update({folder: start_cases(MINE, folder) for folder in sorted(folders)})


@pytest.fixture
def harness(load, workspace):
    (workspace / "notes.txt").write_text("buy milk\n")
    return load("harness")


def test_chat_asks_again_after_a_broken_reply_and_says_so(load, server):
    """chat(messages, backend=..., on_note=...) retries a 200 whose body is no JSON: it returns the next reply,
    and on_note hears of the retry once."""
    server.push({"status": 200, "body": "not json", "content_type": "application/json"}, "Hi.")
    notes = []
    response = load("backend").chat([{"role": "user", "content": "Hi"}], backend=scripted_backend(server),
                                    on_note=notes.append)
    assert response.choices[0].message.content == "Hi.", "step 4: a BrokenReply is asked again"
    assert len(server.requests) == 2 and len(notes) == 1, f"step 4: one retry, one note; notes: {notes}"


def test_nothing_in_a_reply_cut_short_runs_and_the_history_goes_on(harness, server, workspace):
    """A reply that ends with finish_reason length ends the run incomplete, runs none of its calls (even one a
    person would approve), and leaves a conversation that run(..., history=...) continues."""
    server.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "touch made"}}],
                 "finish_reason": "length"})
    result = harness.run("Touch", backend=scripted_backend(server), approve=lambda question: True)
    assert result.status == "incomplete", f"step 6: length is incomplete, not {result.status}"
    assert not (workspace / "made").exists(), "step 6: nothing in a reply cut short runs"
    server.push("Continued.")
    later = harness.run("Go on", backend=scripted_backend(server), history=result.messages)
    assert later.status == "answered" and later.answer == "Continued.", f"step 6: the history must go on: {later.error}"


def test_an_empty_answer_gets_one_nudge_then_ends_the_run(harness, server):
    """An empty answer gets one user message and one more request; a second empty answer ends the run incomplete."""
    server.push("", "")
    result = harness.run("Say hi", backend=scripted_backend(server))
    assert len(server.requests) == 2, f"step 7: one nudge, so two requests, not {len(server.requests)}"
    assert server.requests[1]["body"]["messages"][-1]["role"] == "user", "step 7: the nudge is a user message"
    assert result.status == "incomplete", f"step 7: a second empty answer is incomplete, not {result.status}"


def test_arguments_sent_as_an_object_still_run(harness, server):
    """A server that sends a call's arguments as a JSON object instead of a string: the call runs all the same."""
    server.push({"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "notes.txt"}}}]}},
        "Read.")
    result = harness.run("Read notes.txt", backend=scripted_backend(server))
    assert result.status == "answered", f"step 3: checked() mends arguments sent as an object: {result.error}"
    assert "buy milk" in server.requests[-1]["body"]["messages"][-1]["content"], "the call ran"


def test_a_server_too_slow_is_named_slow_not_unreachable(harness, server, load):
    """A server that answers too slowly for TIMEOUT (here 0.5 s): the message names TIMEOUT, and does not say it
    could not be reached."""
    load("backend").TIMEOUT = 0.5
    server.push(*[{"delay": 2, "content": "late"}] * 3)
    result = harness.run("Hi", backend=scripted_backend(server))
    assert result.status == "provider_error" and "TIMEOUT" in result.error, f"step 5: {result.error}"
    assert "Could not reach" not in result.error, f"step 5: ask APITimeoutError first: {result.error}"


@pytest.mark.parametrize("name", MINE)  # last: the cases ran beside the tests above
def test_done_when_the_scripted_case_passes(code_dir, name):
    """The scripted case runs as tests/cases.py describes it (`python tests/cases.py -v NAME` shows it run)."""
    found = STARTED[code_dir][name].result()
    assert found == [], f"case {name}: " + "; ".join(found)
