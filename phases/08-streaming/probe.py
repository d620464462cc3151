"""Send one request with the tools and print the model's reply raw: its text and the tool calls it
asks for.

Run:  python probe.py
      python probe.py "Read README.md"
"""
import sys

from backend import BackendError, chat, choose
from tools import TOOLS

TASK = "List the files in the current directory."

if __name__ == "__main__":
    try:
        backend = choose()
        if backend["note"]:
            print(f"note: {backend['note']}", file=sys.stderr)
        response = chat([{"role": "user", "content": " ".join(sys.argv[1:]) or TASK}], tools=TOOLS,
                        backend=backend)
    except BackendError as error:
        sys.exit(f"error: {error}")
    print("content:", repr(response.choices[0].message.content))
    print("tool_calls:", response.choices[0].message.tool_calls)
