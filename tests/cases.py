"""The scripted cases: short conversations with the offline model in scripted mode, one per way a run can go right
or wrong. Each runs `python harness.py` for real, against a scripted server, in a scratch folder.

Run:  python tests/cases.py                      (every case; each trace is written to traces/NAME.jsonl)
      python tests/cases.py --phase 7            (the cases of phases 0 to 7: what code at phase 7 must pass)
      python tests/cases.py -v rate_limited_then_answered     (-v: show what the harness printed, too)
      python tests/cases.py --code DIR two_steps  (the code in DIR, e.g. phases/05-budgets; default: the root's)
Each case names the phase that introduced what it checks; that phase's check runs it on every later checkpoint too
(tests/checkpoints/test_phase5_budgets.py, test_phase6_clock.py, test_phase7_recovery.py, test_phase8_streaming.py).
"""
import argparse
import email.utils
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from helpers import ROOT, copy_code, demo_model, run_python, sleep_then

WORKERS = 6  # cases run side by side: most of a case is waiting (for a sleep, a retry, a deadline)


def call(name, arguments, id=None):
    return {"name": name, "arguments": arguments, **({"id": id} if id is not None else {})}


def error(message, code=None, **extra):
    return {"error": {"message": message, "type": "invalid_request_error", **({"code": code} if code else {}), **extra}}


def chunk(delta, finish=None, **extra):
    """One streamed chunk, as OpenAI-style servers send it."""
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


LIST = {"tool_calls": [call("list_dir", {"path": "."})]}
READ = {"tool_calls": [call("read_file", {"path": "notes.txt"})]}
TOOL_USE_FAILED = {"status": 400, "body": error("Failed to call a function. Please adjust your prompt. See "
                                                "'failed_generation' for more details.", code="tool_use_failed",
                                                failed_generation='<function=read_file{"path": "notes.txt"}'
                                                                  '</function>')}
READ_FUNCTION = {"name": "read_file", "arguments": '{"path": "notes.txt"}'}
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


# cat with its file in quotes: sh's single ones, or cmd's double ones on Windows (to cmd, ' is a letter)
QUOTED = 'cat "notes.txt"' if os.name == "nt" else "cat 'notes.txt'"
DEADLINE = "3"  # --deadline of the cases that wait for it: seconds, counted from the harness's start
BUSY_DEADLINE = "9"  # theirs again, when a machine too busy to send the first request before DEADLINE ran one
GRACE = 1  # harness.GRACE: seconds past the deadline the run's end may take


def bound(deadline):
    """The most a run under --deadline may take: three times the deadline and its grace."""
    return 3 * (float(deadline) + GRACE)


def in_two_seconds():
    return email.utils.formatdate(time.time() + 2, usegmt=True)


# name: the phase that introduced what it checks, the task, what the server does (a list, or a function that makes
# one when the case runs), write (files the workspace starts with, beside notes.txt), and what must come of it.
# expect: status and exit code always; answer (a part of it), requests (how many the server got), requests_over
# (at most that many is wrong), results (parts of the tool results, in any order; a tuple: texts one
# result holds in that order), stderr / stdout (a part, or a tuple of parts in that order),
# trace_has (a record type the trace must hold), side_by_side (the first turn's tools overlap: the time between
# the first two requests is under three quarters of their trace records' seconds added up),
# stderr_lacks / stdout_lacks (a part it must not hold), stdout_once (a text printed exactly once), files (what the
# workspace must hold afterwards), trace_under (the most bytes the trace may hold), seconds (the most the run may
# take: three times what it takes, or more, for the suite runs on a busy two-core machine; a run under --deadline
# counts from the server's first request, as tests/checkpoints/test_phase8_streaming.py's deadline test does, so
# that a busy machine's slow start is not charged to the harness).
CASES = {
    "two_steps": {
        "phase": 5,
        "task": "List the files here, then read notes.txt",
        "script": [LIST, READ, "The notes say: buy milk."],
        "expect": {"status": "answered", "exit": 0, "requests": 3, "results": ["notes.txt", "buy milk"],
                   "answer": "buy milk"}},
    "declined_command": {
        "phase": 5,
        "task": "Delete notes.txt", "input": "n\n",
        "script": [{"tool_calls": [call("run_shell", {"command": "rm notes.txt"})]}, "I did not delete it."],
        "expect": {"status": "answered", "exit": 0, "results": [("error:", "declined")], "files": ["notes.txt"]}},
    "unknown_tool": {
        "phase": 5,
        "task": "Search the web",
        "script": [{"tool_calls": [call("web_search", {"query": "milk"})]}, LIST, "I can only look at files."],
        # lesson 1's box: the result of an unknown tool starts error: and names it
        "expect": {"status": "answered", "exit": 0, "results": [("error:", "web_search"), "notes.txt"]}},
    "malformed_then_fixed": {
        "phase": 5,
        "task": "Read notes.txt",
        "script": [{"tool_calls": [call("read_file", '{"path": "notes.txt"')]}, READ, "Read it."],
        "expect": {"status": "answered", "exit": 0, "results": [("error:", "not valid JSON"), "buy milk"]}},
    "tool_use_failed_then_answered": {
        "phase": 7,
        "task": "Read notes.txt",
        "script": [TOOL_USE_FAILED, READ, "Read it."],
        "expect": {"status": "answered", "exit": 0, "requests": 3, "stderr": "the model wrote",
                   "results": ["buy milk"]}},
    "rate_limited_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 429, "headers": {"retry-after": "1"},
                    "body": error("Rate limit reached for model `openai/gpt-oss-120b` on tokens per minute (TPM): "
                                  "Limit 8000, Used 7034, Requested 1443.", code="rate_limit_exceeded")}, "Hi."],
        # phase 7 on, the openai package retries, and says so in its own words
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "Retrying request"}},
    "server_error_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 503, "body": {"error": {"message": "Service Unavailable",
                                                      "type": "internal_server_error"}}},
                   {"status": 502, "body": "<html><body>502 Bad Gateway</body></html>"}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 3}},
    "dropped_connection_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"drop": True}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2}},
    "answer_in_an_error_body_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 200, "body": error("Internal error while streaming")}, "Hi."],
        # checked() names every reply that is no chat completion alike (it said "without a reply" before the re-cut)
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "not a chat completion"}},
    "bad_key_is_not_retried": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 401, "body": error("Invalid API Key", code="invalid_api_key")}],
        "expect": {"status": "provider_error", "exit": 1, "requests": 1, "stderr": "GROQ_API_KEY"}},
    "unknown_model_is_not_retried": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 404, "body": error("The model `gpt-oss-120b` does not exist or you do not have access "
                                                 "to it.", code="model_not_found")}],
        "expect": {"status": "provider_error", "exit": 1, "requests": 1, "stderr": "MODEL"}},
    "step_limit": {
        "phase": 5,
        "task": "Look around", "args": ["--max-steps", "2"],
        "script": [LIST, LIST, LIST],
        "expect": {"status": "step_limit", "exit": 3, "requests": 2}},
    "length_stop": {
        "phase": 7,
        "task": "Explain everything",
        "script": [{"content": "Everything began when", "finish_reason": "length"}],
        "expect": {"status": "incomplete", "exit": 4, "answer": "Everything began when"}},
    "duplicate_ids": {
        "phase": 7,
        "task": "Read notes.txt and list the files",
        "script": [{"tool_calls": [call("read_file", {"path": "notes.txt"}, id="x"),
                                   call("list_dir", {"path": "."}, id="x")]}, "Both done."],
        "expect": {"status": "answered", "exit": 0, "results": ["buy milk", "notes.txt"]}},
    "missing_id": {
        "phase": 7,
        "task": "Read notes.txt",
        "script": [{"tool_calls": [call("read_file", {"path": "notes.txt"}, id="")]}, "Done."],
        "expect": {"status": "answered", "exit": 0, "results": ["buy milk"]}},
    "same_call_again_and_again": {
        "phase": 7,
        "task": "Read notes.txt",
        "script": [READ, READ, READ, READ, READ],
        # the call of the stopped turn is answered by phase 5's answer_every_call(): an error result
        "expect": {"status": "repeated", "exit": 3, "requests": 4,
                   "results": ["buy milk", "buy milk", "error: not run: you made this exact call in 3 turns",
                               "error:"]}},
    "empty_answer_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"content": ""}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "answer": "Hi."}},
    "stream_arguments_in_pieces": {
        "phase": 8,
        "task": "Read notes.txt", "args": ["--stream"],
        "script": [{"tool_calls": [call("read_file", {"path": "notes.txt"})], "split_arguments": 4},
                   "The notes say buy milk."],
        "expect": {"status": "answered", "exit": 0, "results": ["buy milk"], "answer": "The notes say buy milk."}},
    "stream_cut_short_then_answered": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"content": "Hello there, this stream will break", "cut_after": 2}, "Hi again."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "stream ended before"}},
    "stream_error_event_then_answered": {
        "phase": 8,
        "task": "Read notes.txt", "args": ["--stream"],
        "script": [{"content": "", "error_event": TOOL_USE_FAILED["body"]["error"]}, READ, "Read it."],
        "expect": {"status": "answered", "exit": 0, "requests": 3, "results": ["buy milk"]}},

    # One clock: --deadline bounds the whole run, whatever the server or the tools do, its start-up included. These
    # cases need the first request sent before the deadline: DEADLINE, which a harness started from the warm
    # process (tests/warm.py) meets on a busy machine too; a run that sent nothing before it, or ended at it in
    # time but short of what the case expects (the reply read too late), runs again with BUSY_DEADLINE (see
    # run_case). The bounds: three times the deadline and its grace, counted from the first request (a harness
    # that ignored the deadline would run for a minute).
    "trickling_reply_meets_the_deadline": {
        "phase": 6,
        "task": "Say hi", "args": ["--deadline", DEADLINE],
        "script": [{"content": "never finished", "trickle_forever": 0.2}],
        "expect": {"status": "deadline", "exit": 3, "requests": 1, "seconds": bound(DEADLINE)}},
    "trickling_stream_meets_the_deadline": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream", "--deadline", DEADLINE],
        "script": [{"content": "never finished", "trickle_forever": 0.2}],
        "expect": {"status": "deadline", "exit": 3, "requests": 1, "seconds": bound(DEADLINE)}},
    "slow_but_steady_reply_is_kept": {
        "phase": 6,
        "task": "Say hi",
        "script": [{"content": "Hi, slowly.", "trickle": 0.002}],
        "expect": {"status": "answered", "exit": 0, "answer": "Hi, slowly."}},
    "approved_sleep_meets_the_deadline": {
        "phase": 6,
        "task": "Sleep", "args": ["--yes", "--sandbox", "off", "--deadline", DEADLINE],  # approved on every machine
        "script": [{"tool_calls": [call("run_shell", {"command": sleep_then(60, "woke")})]}, "never asked"],
        "expect": {"status": "deadline", "exit": 3, "requests": 1, "seconds": bound(DEADLINE),
                   "results": ["the run's deadline"]}},
    "retry_wait_past_the_deadline": {
        "phase": 7,
        # the openai package waits a retry-after of 60 s (up to 120 s) by itself and says so; the deadline ends it
        "task": "Say hi", "args": ["--deadline", DEADLINE],
        "script": [{"status": 429, "headers": {"retry-after": "60"}, "body": error("slow down")}, "Hi."],
        "expect": {"status": "deadline", "exit": 3, "requests": 1, "seconds": bound(DEADLINE),
                   "stderr": "Retrying request"}},

    # Replies that are not replies: retried, then provider_error; never a traceback.
    "not_json_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 200, "body": "not json at all", "content_type": "application/json"}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2}},
    "empty_body_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 200, "body": "", "content_type": "application/json"}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2}},
    "json_nested_too_deep_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 200, "body": "[" * 100000 + "]" * 100000, "content_type": "application/json"}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2}},
    "tool_call_of_an_unknown_type_then_answered": {
        "phase": 7,
        # ChatCompletion.model_validate() refuses it: "not a chat completion" (before the re-cut, "not a function call")
        "task": "Say hi",
        "script": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "custom", "custom": {"name": "x", "input": "y"}}]}}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "not a chat completion"}},
    "tool_call_without_a_function_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": None}]}}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2}},
    "broken_replies_every_time": {
        "phase": 7,
        # chat() tries RETRIES + 1 = 3 times (it was 4 when chat() did every retry itself)
        "task": "Say hi",
        "script": [{"status": 200, "body": "", "content_type": "application/json"}] * 4,
        "expect": {"status": "provider_error", "exit": 1, "requests": 3, "stderr": "broken reply"}},
    "lone_surrogate_in_arguments_and_answer": {
        "phase": 7,
        "task": "Read it",
        "script": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file",
                                                          "arguments": '{"path": "notes\\ud800.txt"}'}}]}},
            {"content": "Odd \ud800 name."}],
        "expect": {"status": "answered", "exit": 0, "results": ["error:"], "stdout": "Odd"}},
    "retry_after_ms_zero_is_a_backoff": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 429, "headers": {"retry-after-ms": "0"}, "body": error("busy")}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2}},
    "negative_retry_after_is_a_backoff": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 503, "headers": {"retry-after": "-5"}, "body": error("busy")}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "seconds": 15}},
    "a_wait_too_long_is_named_in_the_message": {
        "phase": 7,
        # openai 2.x and 3.x do not retry when a wait is over two minutes (1.x retries after its own backoff)
        "task": "Say hi",
        "script": [{"status": 429, "headers": {"retry-after": "3600"}, "body": error("Rate limit reached")}],
        "expect": {"status": "provider_error", "exit": 1, "requests": 1, "stderr": ("a wait of", "3600")}},
    "http_date_retry_after_is_honoured": {
        "phase": 7,
        # the openai package honours the date and says "Retrying request" (chat() said "trying again in" before)
        "task": "Say hi",
        "script": lambda: [{"status": 429, "headers": {"retry-after": in_two_seconds()}, "body": error("busy")}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "seconds": 15, "stderr": "Retrying request"}},
    "trace_that_cannot_be_written": {
        "phase": 5,
        "task": "Say hi", "trace": "/dev/full",
        "script": ["Hi."],
        "expect": {"status": None, "exit": 1, "stderr": "trace"}},

    # Repeated calls judged by what they mean.
    "identical_calls_in_one_turn_run_side_by_side": {
        "phase": 6,
        # was three_identical_calls_in_one_turn_run_once: since the re-cut, identical calls are not merged; they
        # run side by side, so four take the time of one. Measured against the calls' own times, not a clock
        # bound, so that a busy machine (slower calls, slower start) cannot fail it: the turn may take three
        # quarters of the four calls' times added up: two seconds each (it was four) leave two for the rest
        "task": "Sleep", "args": ["--yes", "--sandbox", "off"],  # approved on every machine, bubblewrap or not
        "script": [{"tool_calls": [call("run_shell", {"command": sleep_then(2, "once")}, id=f"s{n}")
                                   for n in range(4)]}, "Slept."],
        "expect": {"status": "answered", "exit": 0, "results": ["once"] * 4, "side_by_side": True}},
    "same_command_spelled_otherwise_is_the_same_call": {
        "phase": 7,
        "task": "Read notes.txt",
        "script": [{"tool_calls": [call("run_shell", {"command": command})]}
                   for command in ("cat notes.txt", "cat  notes.txt", QUOTED, " cat notes.txt")],
        "expect": {"status": "repeated", "exit": 3, "requests": 4}},
    "same_call_spelled_otherwise_is_the_same_call": {
        "phase": 7,
        "task": "Read notes.txt",
        "script": [READ, {"tool_calls": [call("read_file", {"path": "./notes.txt"})]},
                   {"tool_calls": [call("read_file", {"path": "notes.txt", "offset": 1, "limit": 200})]},
                   {"tool_calls": [call("read_file", {"limit": 200, "path": "sub/../notes.txt"})]}],
        "expect": {"status": "repeated", "exit": 3, "requests": 4}},
    "same_call_with_other_spacing_is_the_same_call": {
        "phase": 7,
        "task": "Read notes.txt",
        "script": [READ, {"tool_calls": [call("read_file", '{ "path" :"notes.txt" }')]},
                   {"tool_calls": [call("read_file", '{"path":"notes.txt"}')]}, READ],
        "expect": {"status": "repeated", "exit": 3, "requests": 4}},

    # Streams as other servers send them.
    "stream_finished_then_cut_is_kept": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [chunk({"role": "assistant", "content": "Kept "}), chunk({"content": "whole."}),
                               chunk({}, "stop")], "done": False}],
        "expect": {"status": "answered", "exit": 0, "requests": 1, "answer": ("Kept ", "whole.")}},
    "stream_retry_marks_where_the_reply_starts_again": {
        "phase": 8,
        # was stream_retry_does_not_print_the_text_twice: chat() no longer holds back what it showed before; it
        # marks where the new reply starts, once
        "task": "Say hi", "args": ["--stream"],
        "script": [{"content": "one two three four five six seven eight", "cut_after": 2},
                   {"content": "one two three four five six seven eight"}],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stdout_once": "[the reply starts again]"}},
    "stream_retry_that_says_less_is_shown_whole": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"content": "one two three four five six seven eight", "cut_after": 3}, {"content": "one"}],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "answer": "one",
                   "stdout": ("[the reply starts again]\n", "one")}},
    "json_error_answering_a_stream_request": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"status": 200, "body": error("The stream backend is overloaded"),
                    "content_type": "application/json"}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "The stream backend is overloaded"}},
    "stream_calls_without_index": {
        "phase": 8,
        "task": "Read two", "args": ["--stream"],
        "script": [{"events": [chunk({"role": "assistant", "content": None}),
                               chunk({"tool_calls": [{"id": "a1", "type": "function",
                                                      "function": {"name": "list_dir", "arguments": "{}"}}]}),
                               chunk({"tool_calls": [{"id": "b2", "type": "function",
                                                      "function": {"name": "read_file",
                                                                   "arguments": '{"path": "notes.txt"}'}}]}),
                               chunk({}, "tool_calls")]}, "Two done."],
        "expect": {"status": "answered", "exit": 0, "results": ["notes.txt", "buy milk"]}},
    "stream_parallel_calls_sharing_index_0": {
        "phase": 8,
        "task": "Read two", "args": ["--stream"],
        "script": [{"events": [chunk({"tool_calls": [{"index": 0, "id": "a1", "type": "function",
                                                      "function": {"name": "list_dir", "arguments": "{}"}}]}),
                               chunk({"tool_calls": [{"index": 0, "id": "b2", "type": "function",
                                                      "function": {"name": "read_file",
                                                                   "arguments": '{"path": "notes.txt"}'}}]}),
                               chunk({}, "tool_calls")]}, "Two done."],
        "expect": {"status": "answered", "exit": 0, "results": ["notes.txt", "buy milk"]}},
    "stream_whole_calls_without_index_or_id": {
        "phase": 8,
        "task": "Read two", "args": ["--stream"],
        "script": [{"events": [chunk({"tool_calls": [{"function": {"name": "list_dir", "arguments": "{}"}}]}),
                               chunk({"tool_calls": [{"function": {"name": "read_file",
                                                                   "arguments": '{"path": "notes.txt"}'}}]}),
                               chunk({}, "tool_calls")]}, "Two done."],
        "expect": {"status": "answered", "exit": 0, "results": ["notes.txt", "buy milk"]}},
    "stream_name_repeated_in_every_piece": {
        "phase": 8,
        "task": "List", "args": ["--stream"],
        "script": [{"events": [chunk({"tool_calls": [{"index": 0, "id": "a1", "type": "function",
                                                      "function": {"name": "list_dir", "arguments": '{"pa'}}]}),
                               chunk({"tool_calls": [{"index": 0, "function": {"name": "list_dir",
                                                                               "arguments": 'th": "."}'}}]}),
                               chunk({}, "tool_calls")]}, "Listed."],
        "expect": {"status": "answered", "exit": 0, "results": ["notes.txt"]}},
    "stream_usage_chunk_without_choices": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [chunk({"role": "assistant", "content": "Counted."}), chunk({}, "stop"),
                               {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                "usage": USAGE}]}],
        "expect": {"status": "answered", "exit": 0, "answer": "Counted."}},

    "stream_delta_null_and_arguments_as_an_object": {
        "phase": 8,
        "task": "Read notes.txt", "args": ["--stream"],
        "script": [{"events": [{**chunk({}), "choices": [{"index": 0, "delta": None, "finish_reason": None}]},
                               chunk({"tool_calls": [{"index": 0, "id": "a1", "type": "function",
                                                      "function": {"name": "read_file",
                                                                   "arguments": {"path": "notes.txt"}}}]}),
                               chunk({}, "tool_calls")]}, "Read it."],
        "expect": {"status": "answered", "exit": 0, "results": ["buy milk"]}},
    "stream_chunk_that_is_no_object_then_answered": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [chunk({"content": "Half"}), "data: [1, 2]\n\n", chunk({}, "stop")]}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "answer": "Hi."}},
    "stream_with_two_choices_keeps_the_first": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [{**chunk({}), "choices": [{"index": 1, "delta": {"content": "Second."}},
                                                         {"index": 0, "delta": {"content": "First."}}]},
                               chunk({}, "stop")]}],
        "expect": {"status": "answered", "exit": 0, "answer": "First.", "stdout_lacks": "Second."}},
    "message_that_is_no_object_then_answered": {
        "phase": 7,
        # checked() says "not a chat completion" for it (before the re-cut, "without a message")
        "task": "Say hi",
        "script": [{"status": 200, "body": {"choices": [{"index": 0, "message": "Hi.", "finish_reason": "stop"}]}},
                   "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "not a chat completion"}},
    "fields_of_the_wrong_type_then_answered": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 200, "body": {"choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "Hi.", "refusal": 5}}]}}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "not a chat completion"}},
    "usage_that_does_not_count_is_estimated": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 200, "body": {"choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "Hi."}}], "usage": [1]}},
                   {"content": "unused"}],
        "expect": {"status": "answered", "exit": 0, "requests": 1, "answer": "Hi."}},
    "usage_of_nulls_in_a_stream_is_estimated": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [chunk({"content": "Hi."}), chunk({}, "stop", usage={
            "prompt_tokens": None, "completion_tokens": None, "total_tokens": None})]}],
        "expect": {"status": "answered", "exit": 0, "answer": "Hi."}},
    "number_ids_and_choices_out_of_order": {
        "phase": 7,
        "task": "Read notes.txt",
        "script": [{"status": 200, "body": {"choices": [
            {"index": 1, "finish_reason": "stop", "message": {"role": "assistant", "content": "Not this one."}},
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                                                                    "tool_calls": [{"id": 7, "type": "function",
                                                                                    "function": READ_FUNCTION}]}}]}},
                   "Read it."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "results": ["buy milk"], "answer": "Read it."}},

    "stream_choices_that_are_no_list_then_answered": {
        "phase": 8,
        # streamed() names every malformed chunk alike: "a stream chunk that is no chunk" (it named the field before)
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [{**chunk({}), "choices": 5}, chunk({}, "stop")]}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "no chunk"}},
    "stream_tool_calls_that_are_no_list_then_answered": {
        "phase": 8,
        # "no chunk" here too (before the re-cut, "tool_calls is not a list")
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [chunk({"tool_calls": 5}), chunk({}, "tool_calls")]}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "stderr": "no chunk"}},
    "content_parts_holding_numbers_are_text": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"message": {"role": "assistant", "content": [{"type": "text", "text": 42}]}}],
        "expect": {"status": "answered", "exit": 0, "requests": 1, "answer": "42"}},
    "retry_after_date_too_big_is_a_backoff": {
        "phase": 7,
        "task": "Say hi",
        "script": [{"status": 429, "headers": {"retry-after": "Sun, 06 Nov 1994 08:49:37 +99999999999999"},
                    "body": error("busy")}, "Hi."],
        "expect": {"status": "answered", "exit": 0, "requests": 2, "seconds": 15}},
    "unknown_finish_reason_is_not_finished": {
        "phase": 7,
        "task": "Explain",
        "script": [{"content": "The three causes are: first, the", "finish_reason": "model_length"}],
        "expect": {"status": "incomplete", "exit": 4, "stdout": "The three causes are"}},

    "stream_events_with_ids_comments_and_pings": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [f"id: 1\ndata: {json.dumps(chunk({'content': 'Hello'}))}\n\n", ": keep-alive\n\n",
                               "event: ping\n\n", "retry: 3000\n\n",
                               f"id: 2\nevent: message\ndata: {json.dumps(chunk({'content': ' world.'}))}\n\n",
                               f"id: 3\ndata: {json.dumps(chunk({}, 'stop'))}\n\n"]}],
        "expect": {"status": "answered", "exit": 0, "requests": 1, "answer": ("Hello", " world.")}},
    "stream_starting_with_a_byte_order_mark": {
        "phase": 8,
        "task": "Say hi", "args": ["--stream"],
        "script": [{"events": [f"\ufeffdata: {json.dumps(chunk({'content': 'Hello'}))}\n\n",
                               chunk({"content": " world."}), chunk({}, "stop")]}],
        "expect": {"status": "answered", "exit": 0, "requests": 1, "answer": ("Hello", " world.")}},
    "endless_stream_is_cut": {
        "phase": 8,
        "task": "Write a lot", "args": ["--stream"],
        "script": [{"events": [chunk({"content": "x" * 100_000})] * 30 + [chunk({}, "stop")]}],
        "expect": {"status": "incomplete", "exit": 4, "trace_under": 200_000}},

    "a_path_or_command_too_long_is_refused_at_once": {
        "phase": 6,
        "task": "Read it", "args": ["--deadline", "10"],
        "script": [{"tool_calls": [call("read_file", {"path": "a/" * 200_000 + "x"}, id="r1"),
                                   call("run_shell", {"command": "cat " + "a/" * 100_000 + "x"}, id="r2")]},
                   "Too long."],
        # each is refused (lesson 2 says why in its own words), and at once
        "expect": {"status": "answered", "exit": 0, "seconds": 30, "results": ["error:", "error:"]}},
    "too_many_calls_in_one_reply_are_cut": {
        "phase": 7,
        "task": "List", "args": ["--deadline", "10"],
        "script": [{"tool_calls": [call("list_dir", {"path": f"d{n}"}) for n in range(5000)]}],
        "expect": {"status": "incomplete", "exit": 4, "seconds": 30, "trace_under": 200_000}},
    "too_many_calls_in_one_stream_are_cut": {
        "phase": 8,
        "task": "List", "args": ["--stream", "--deadline", "10"],
        "script": [{"events": [chunk({"tool_calls": [{"index": n, "id": f"c{n}", "type": "function", "function": {
            "name": "list_dir", "arguments": "{}"}}]}) for n in range(5000)] + [chunk({}, "tool_calls")]}],
        "expect": {"status": "incomplete", "exit": 4, "seconds": 30, "trace_under": 200_000}},
    "finish_reasons_of_a_finished_answer_from_other_servers": {
        "phase": 7,
        "task": "What is 2+2?",
        "script": [{"content": "4.", "finish_reason": "eos_token"}],
        "expect": {"status": "answered", "exit": 0, "answer": "4."}},

    # Endings that say what happened.
    "content_filter_is_its_own_ending": {
        "phase": 7,
        "task": "Say something",
        "script": [{"content": "The first half", "finish_reason": "content_filter"}],
        "expect": {"status": "content_filter", "exit": 4, "stdout": "The first half"}},
    "refusal_is_shown": {
        "phase": 7,
        "task": "Do something bad",
        "script": [{"message": {"role": "assistant", "content": None, "refusal": "I can't help with that."}}],
        "expect": {"status": "refused", "exit": 4, "stdout": "I can't help with that."}},
    "huge_reply_is_cut": {
        "phase": 7,
        "task": "Write a lot",
        "script": [{"content": "x" * 2_000_000}],
        "expect": {"status": "incomplete", "exit": 4, "trace_under": 200_000}},
    "token_budget_without_usage_from_the_server": {
        "phase": 5,
        "task": "Loop", "args": ["--max-tokens", "300"],
        "script": [{**LIST, "usage": False}] * 10,
        "expect": {"status": "token_limit", "exit": 3}},

    # Messages that point at the fix.
    "a_base_url_that_is_no_url": {
        "phase": 5,
        "task": "Say hi", "env": {"BASE_URL": "localhost:8000/v1"},
        "script": [],
        "expect": {"status": None, "exit": 1, "requests": 0, "stderr": "BASE_URL"}},
    "failures_without_stream_do_not_mention_it": {
        "phase": 8,
        "task": "Say hi",
        "script": [{"status": 200, "body": "", "content_type": "application/json"}] * 4,
        "expect": {"status": "provider_error", "exit": 1, "stderr_lacks": "--stream"}},

    # Phase 13, context: 50 steps, each reading a log of about 4,000 characters, under the default budget. The
    # notes read at step 1 are summed up or cleared long before step 50; the last reply is the demo model's own
    # (policy), from what the last request still holds, so the answer has the early fact only if compaction kept it.
    "an_early_fact_survives_fifty_steps": {
        "phase": 13,
        "task": "Read notes.txt, then every log, then tell me what notes.txt says",
        "args": ["--max-steps", "60", "--max-tool-calls", "60"],
        "write": {f"log{n}.txt": "".join(f"{n}: line {i} of a log the task reads\n" for i in range(110))
                  for n in range(1, 49)},
        "script": [READ, *({"tool_calls": [call("read_file", {"path": f"log{n}.txt"})]} for n in range(1, 49)),
                   {"policy": True}],
        "expect": {"status": "answered", "exit": 0, "requests_over": 50, "answer": "buy milk",
                   "trace_has": "compact"}},
    # The same length of run, with the fact on a line in the middle of the log read at step 3, and tool calls that
    # carry no words of their own (content "" or null, as gpt-oss often sends them): only the tool results hold the
    # fact, so the answer has it only if what compaction cleared was summed up first, from its full text.
    "a_fact_from_step_3_survives_wordless_calls": {
        "phase": 13,
        "task": "Read the logs one by one, then tell me the code word",
        "args": ["--max-steps", "60", "--max-tool-calls", "60"],
        "write": {f"log{n}.txt": "".join("The code word is PELICAN.\n" if (n, i) == (3, 50) else
                                         f"{n}: line {i} of a log the task reads\n" for i in range(105))
                  for n in range(1, 50)},
        "script": [*({"content": "", "tool_calls": [call("read_file", {"path": f"log{n}.txt"})]} if n % 2 else
                     {"message": {"role": "assistant", "content": None, "tool_calls": [
                         {"id": f"call_{n}", "type": "function",
                          "function": {"name": "read_file", "arguments": json.dumps({"path": f"log{n}.txt"})}}]}}
                     for n in range(1, 50)), {"policy": True}],
        "expect": {"status": "answered", "exit": 0, "requests_over": 50, "answer": "PELICAN",
                   "trace_has": "compact"}},
}


POOL = ThreadPoolExecutor(max_workers=WORKERS)


def start_cases(names, code_dir=ROOT, traces=None):
    """Start the cases, WORKERS at a time (with any started before); returns {name: a future of its problems}."""
    return {name: POOL.submit(run_case, name, code_dir, traces and Path(traces) / f"{name}.jsonl") for name in names}


def run_case(name, code_dir=ROOT, trace=None, show=False):
    """Run one case against the code in code_dir; return what went wrong (an empty list when it passed).
    show: print the command and what the harness printed. A case with a --deadline whose run got to nothing it
    checks before it (a busy machine ran the harness too slowly to send its request, or to read the reply: the
    run ended at its deadline, in time, but short of what the case expects) runs again with BUSY_DEADLINE, and
    three times that and the grace to take, judged as strictly."""
    case, expect = CASES[name], Expect(**CASES[name]["expect"])
    found, reached = attempt(case, case.get("args", []), expect, code_dir, trace, show)
    if "--deadline" in case.get("args", []) and not reached and expect.requests:
        args = list(case["args"])
        if trace:  # each trace holds the last run only
            Path(trace).unlink(missing_ok=True)
        args[args.index("--deadline") + 1] = BUSY_DEADLINE
        expect = Expect(**{**case["expect"], "seconds": bound(BUSY_DEADLINE)})
        found, _ = attempt(case, args, expect, code_dir, trace, show)
    return found


def attempt(case, args, expect, code_dir, trace, show):
    """One run of a case with these arguments: (what went wrong, whether it got to what the case checks: a request
    sent, and, if it ended at its deadline in time, nothing the case expects missing)."""
    script = case["script"]() if callable(case["script"]) else case["script"]
    with tempfile.TemporaryDirectory() as scratch, demo_model.start(script=script) as server:
        work = copy_code(code_dir, scratch)
        (work / "notes.txt").write_text("buy milk\n")
        for name, text in case.get("write", {}).items():
            (work / name).write_text(text)
        trace = Path(case.get("trace") or trace or work / "trace.jsonl").resolve()
        env = dict(BACKEND="groq", GROQ_API_KEY="gsk_case", BASE_URL=server.url, MODEL="openai/gpt-oss-120b")
        started = time.monotonic()
        done = run_python(work, "harness.py", "--trace", str(trace), *args, case["task"],
                          env={**env, **case.get("env", {})}, input=case.get("input", ""))
        seconds = time.monotonic() - started
        if "--deadline" in args and server.requests:  # the harness's time on the clock, without its start-up
            seconds, started = time.monotonic() - server.requests[0]["time"], "since its first request"
        else:
            started = "since it started"
        if show:
            print("the case ran: " + " ".join(["python harness.py", *args, json.dumps(case["task"])]))
            print(done.stdout + done.stderr)
        records, unreadable = read_trace(trace)
        found = problems(expect, done, records, server, work, (seconds, started), trace)
        at_deadline = records and records[-1].get("status") == "deadline" and seconds <= expect.seconds
        return unreadable + found, bool(server.requests) and not (found and at_deadline)


@dataclass
class Expect:
    """What must come of a case (see the comment above CASES)."""
    status: str | None
    exit: int
    answer: str | tuple = ""
    requests: int | None = None
    requests_over: int = -1
    results: list | None = None
    stdout: str | tuple = ""
    stderr: str | tuple = ""
    stdout_lacks: str | None = None
    stderr_lacks: str | None = None
    stdout_once: str | None = None
    trace_has: str | None = None
    side_by_side: bool = False
    seconds: float = 60
    trace_under: int | None = None
    files: list = field(default_factory=list)


# The fields of a trace record the cases read, and their types, as lesson 5's box states them (a field of another
# type is named, never a crash here). Every tool call a reply record lists has a tool record of its own.
TRACED = {"reply": {"calls": list}, "tool": {"id": str, "result": str, "seconds": (int, float, type(None))},
          "end": {"status": (str, type(None)), "answer": (str, type(None))}}


def read_trace(trace):
    """(records, problems): the trace's records as lesson 5 states them, and, for any that is not, what is wrong,
    naming the line and the field. Records that are wrong are left out."""
    records, found = [], []
    lines = trace.read_text(errors="replace").splitlines() if trace.is_file() else []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError:
            found.append(f"line {number} of the trace is not JSON: {line[:200]!r}")
            continue
        kind = record.get("type") if isinstance(record, dict) else None
        wrong = [f"{name} is {record.get(name)!r}" for name, types in TRACED.get(kind, {}).items()
                 if not isinstance(record.get(name), types)]
        calls = record.get("calls") if kind == "reply" else []
        if isinstance(calls, list) and not all(isinstance(call, str) for call in calls):
            wrong.append(f"calls is {calls!r}, not a list of the calls' ids")
        if not isinstance(kind, str):
            found.append(f"line {number} of the trace is no record with a type: {line[:200]!r}")
        elif wrong:
            found.append(f"the trace's {kind} record on line {number}: {'; '.join(wrong)} (lesson 5's box says what "
                         "each field holds)")
        else:
            records.append(record)
    return records, found


def problems(expect, done, records, server, work, seconds, trace):
    """What in a finished case differs from what it expects; seconds: (how long it took, since when)."""
    end = records[-1] if records and records[-1]["type"] == "end" else {}
    results = [r["result"] for r in records if r["type"] == "tool"]
    answer = end.get("answer") or ""
    found = []
    if (done.returncode, end.get("status")) != (expect.exit, expect.status):
        found.append(f"ended {end.get('status')} with exit {done.returncode}, "
                     f"expected {expect.status} with exit {expect.exit}")
    if expect.requests is not None and len(server.requests) != expect.requests:
        found.append(f"the server got {len(server.requests)} requests, expected {expect.requests}")
    if len(server.requests) <= expect.requests_over:
        found.append(f"the server got {len(server.requests)} requests, expected more than {expect.requests_over}")
    if expect.trace_has and expect.trace_has not in {r["type"] for r in records}:
        found.append(f"the trace has no {expect.trace_has!r} record")
    if not in_order(expect.answer, answer):
        found.append(f"the answer {answer!r} lacks {expect.answer!r}")
    for stream, wanted in (("stdout", expect.stdout), ("stderr", expect.stderr)):
        if not in_order(wanted, getattr(done, stream)):
            found.append(f"{stream} lacks {wanted!r}: it says {tail(getattr(done, stream))}")
    for stream, unwanted in (("stdout", expect.stdout_lacks), ("stderr", expect.stderr_lacks)):
        if unwanted and unwanted in getattr(done, stream):
            found.append(f"{stream} says {unwanted!r}")
    if expect.stdout_once and done.stdout.count(expect.stdout_once) != 1:
        found.append(f"stdout has {expect.stdout_once!r} {done.stdout.count(expect.stdout_once)} times")
    if expect.results is not None and not matches(expect.results, results):
        found.append(f"the tool results {results} do not match {expect.results}")
    if expect.side_by_side and len(server.requests) >= 2:
        together = server.requests[1]["time"] - server.requests[0]["time"]  # the turn's tools ran in between
        one_by_one = sum(r.get("seconds") or 0 for r in records if r["type"] == "tool")
        if together > 0.75 * one_by_one:
            found.append(f"the calls took {together:.1f} s together, {one_by_one:.1f} s one by one: not side by side")
    seconds, counted = seconds
    if seconds > expect.seconds:
        found.append(f"it took {seconds:.1f} s {counted}, more than {expect.seconds} s")
    if expect.trace_under and trace.is_file() and trace.stat().st_size > expect.trace_under:
        found.append(f"the trace is {trace.stat().st_size} bytes, more than {expect.trace_under}")
    found += [f"{name} is gone" for name in expect.files if not (work / name).exists()]
    called = [call for r in records if r["type"] == "reply" for call in r.get("calls") or []]
    traced = {r["id"] for r in records if r["type"] == "tool"}
    if end and set(called) - traced:
        found.append(f"calls without a tool record in the trace: {sorted(set(called) - traced)}")
    if "Traceback" in done.stderr:
        found.append("a traceback:\n" + done.stderr)
    return found


def in_order(words, text):
    """True when text holds the words (a text, or a tuple of texts) one after another."""
    at = 0
    for word in [words] if isinstance(words, str) else words:
        at = text.find(word, at)
        if at < 0:
            return False
        at += len(word)
    return True


def tail(text, size=300):
    """The end of a long text, as a reader sees it: what it said last."""
    return repr(text if len(text) <= size else "..." + text[-size:])


def matches(parts, results):
    """True when each result holds its own one of the parts (parallel calls may finish in any order); a part that
    is a tuple of texts is held by one result in that order."""
    left = list(results)
    for part in parts:
        found = next((result for result in left if in_order(part, result)), None)
        if found is None:
            return False
        left.remove(found)
    return not left


def main(argv):
    parser = argparse.ArgumentParser(description="Run the scripted cases against your code.")
    parser.add_argument("names", nargs="*", help="the cases to run (default: every case)")
    parser.add_argument("-v", dest="show", action="store_true", help="show what the harness printed, too")
    parser.add_argument("--phase", type=int, metavar="N", help="only the cases of phases 0 to N")
    parser.add_argument("--code", type=Path, metavar="DIR", default=ROOT, help="the folder whose .py files are your "
                        "code (default: the repository root)")
    args = parser.parse_args(argv)
    if not args.code.is_dir():
        parser.error(f"--code {args.code}: no such folder")
    show, names = args.show, args.names or [name for name, case in CASES.items()
                                            if args.phase is None or case["phase"] <= args.phase]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"no such case: {', '.join(unknown)}. The cases are: {', '.join(CASES)}")
    Path("traces").mkdir(exist_ok=True)
    for name in names:
        (Path("traces") / f"{name}.jsonl").unlink(missing_ok=True)  # each trace holds the last run only
    running = {} if show else start_cases(names, args.code, "traces")
    failed = 0
    for name in names:
        found = running[name].result() if name in running else run_case(name, args.code,
                                                                         Path("traces") / f"{name}.jsonl", show)
        failed += bool(found)
        print(f"{'ok  ' if not found else 'FAIL'} {name:48} traces/{name}.jsonl")
        for problem in found:
            print(f"       {problem}")
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
