"""Phase 1 troubleshooting rows, reproduced on the learner's harness: each entry breaks phase1/ one way.

Run:  python bugs.py   (from anywhere, with the venv active and no API key needed)
For every bug it copies phase1/ and demo_model.py to a temporary folder, applies the change, runs
`python harness.py TASK` offline and checks the symptom and exit code, then checks that
`pytest tests/checkpoints --phase 1 --code <that folder>` fails. Prints one ok/FAIL line per check.
"""
TASK = "List the files here, then read backend.py and tell me which model it calls."

BUGS = {
    "reply_not_taken_from_the_response": {  # chat() returns the whole response
        "file": "harness.py",
        "old": "chat(convo.messages, tools=TOOLS, backend=backend).choices[0].message",
        "new": "chat(convo.messages, tools=TOOLS, backend=backend)",
        "symptom": "AttributeError: 'ChatCompletion' object has no attribute 'content'",
        "exit": 1,
    },
    "returns_after_tools": {  # one `[1] ...` line, then an empty answer, exit 0
        "file": "harness.py",
        "old": "            convo.add_result(call, run_tool(call.function.name, call.function.arguments))\n",
        "new": "            convo.add_result(call, run_tool(call.function.name, call.function.arguments))\n"
               "        return message.content or \"\"\n",
        "symptom": "[1] list_dir",
        "exit": 0,
    },
    "assistant_not_appended": {
        "file": "harness.py",
        "old": "        convo.add_reply(message)\n",
        "new": "",
        "symptom": "answered 400: Invalid parameter: messages with role 'tool' must be a response to a "
                   "preceeding message with 'tool_calls'",
        "exit": 1,
    },
    "tool_call_id_is_name": {
        "file": "harness.py",
        "old": '"tool_call_id": call.id',
        "new": '"tool_call_id": call.function.name',
        "symptom": "answered 400: Invalid parameter: 'tool_call_id' of 'list_dir' not found in 'tool_calls' "
                   "of previous message",
        "exit": 1,
    },
    "model_dump_sent_back": {  # model_dump() adds refusal, annotations and audio, which Groq refuses
        "file": "harness.py",
        "old": "        self.messages.append(assistant_message(message))\n",
        "new": "        self.messages.append(message.model_dump())\n",
        "symptom": "property 'refusal' is unsupported",
        "exit": 1,
    },
    "tools_only_on_first_request": {
        "file": "harness.py",
        "old": "chat(convo.messages, tools=TOOLS, backend=backend)",
        "new": "chat(convo.messages, tools=TOOLS if step == 1 else None, backend=backend)",
        "symptom": "answered 400: Tool choice is none, but model called a tool",
        "exit": 1,
    },
    "max_steps_1": {
        "file": "harness.py",
        "old": "MAX_STEPS = 10\n",
        "new": "MAX_STEPS = 1\n",
        "symptom": "stopped: hit the step limit (MAX_STEPS = 1)",
        "exit": 3,
    },
}

if __name__ == "__main__":
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    repo = here.parents[1]
    env = {k: v for k, v in os.environ.items()
           if k not in ("GROQ_API_KEY", "OPENAI_API_KEY", "BACKEND", "MODEL", "BASE_URL", "API_KEY")}
    failures = 0

    def report(ok, text):
        global failures
        failures += not ok
        print(("ok   " if ok else "FAIL ") + text, flush=True)

    for name, bug in BUGS.items():
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for source in here.joinpath("phase1").glob("*.py"):
                shutil.copy(source, folder)
            shutil.copy(repo / "demo_model.py", folder)
            target = folder / bug["file"]
            text = target.read_text()
            if text.count(bug["old"]) != 1:
                report(False, f"{name}: 'old' is not exactly once in {bug['file']}")
                continue
            target.write_text(text.replace(bug["old"], bug["new"]))
            run = subprocess.run([sys.executable, "harness.py", TASK], cwd=folder, env=env,
                                 capture_output=True, text=True, timeout=120)
            said = run.stdout + run.stderr
            report(bug["symptom"] in said, f"{name}: prints {bug['symptom']!r}"
                   + ("" if bug["symptom"] in said else f"\n--- it printed ---\n{said}---"))
            report(run.returncode == bug["exit"], f"{name}: exit {run.returncode} (expected {bug['exit']})")
            check = subprocess.run([sys.executable, "-m", "pytest", "tests/checkpoints", "--phase", "1",
                                    "--code", str(folder)], cwd=repo, env=env, capture_output=True, text=True)
            summary = (check.stdout.strip().splitlines() or ["(no output)"])[-1]
            report(check.returncode != 0, f"{name}: phase 1 check fails ({summary})")
    print("all ok" if not failures else f"{failures} FAIL")
    sys.exit(1 if failures else 0)
