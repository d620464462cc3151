"""Phase 1 (learner's version): send one request with the tools and print the raw reply.

Run:  python probe.py ["prompt"]   prints `content: ...` and `tool_calls: [...]` exactly as the SDK gives them.
"""
import sys

from backend import BackendError, chat, choose
from tools import TOOLS

prompt = " ".join(sys.argv[1:]) or "List the files here."
try:
    backend = choose()
    if backend["note"]:
        print(backend["note"], file=sys.stderr)
    reply = chat([{"role": "user", "content": prompt}], tools=TOOLS, backend=backend).choices[0].message
except BackendError as error:
    sys.exit(f"error: {error}")
print(f"content: {reply.content!r}")
print(f"tool_calls: {reply.tool_calls}")
