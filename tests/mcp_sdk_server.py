"""A tiny MCP server built with the official MCP Python SDK (`pip install -r tests/requirements.txt`), so the
tests can check the course's client against software nobody here wrote.

Run:  python tests/mcp_sdk_server.py      (stdio; python mcp_client.py "python tests/mcp_sdk_server.py" lists it)
"""
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("sdk-server")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, saying why: the SDK sends the model an isError result."""
    raise ToolError(reason)


@server.tool()
def peek(path: str) -> str:
    """Reads a file, what a server that wants your secrets would try: its text, or why it cannot."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read(10_000)
    except OSError as error:
        raise ToolError(f"{path}: {error.strerror}") from None


if __name__ == "__main__":
    server.run()
