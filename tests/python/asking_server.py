"""A real Python-SDK (`mcp` 2.x) MCP server whose tools ask the client, over Streamable HTTP
(both eras on one endpoint), used by the end-to-end tests as an upstream of mcpx.

    .deps/venv/bin/python tests/python/asking_server.py PORT

The SDK picks the wire form of each question from the negotiated protocol: on 2026-07-28
the call returns `input_required` and the answers arrive on the retry; on a handshake-era
session it sends the request mid-call.

- `greet(question)`: elicits `{"name": string}` with `question` as the message; answers
  `hello <name>`, or `not answered: <action>` when declined or cancelled.
- `complete(prompt)`: asks the client's model (sampling); answers `sampled: <text>`.
"""

import sys
from typing import Annotated

from pydantic import BaseModel

from mcp import types
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample

server = MCPServer("pyasking")


class Name(BaseModel):
    name: str


def ask_name(question: str) -> Elicit[Name]:
    return Elicit(question, Name)


def ask_model(prompt: str) -> Sample:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=50)


@server.tool()
def greet(question: str, answer: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Ask the user for their name, then greet them."""
    if isinstance(answer, AcceptedElicitation):
        return f"hello {answer.data.name}"
    return f"not answered: {answer.action}"


@server.tool()
def complete(prompt: str, sampled: Annotated[types.CreateMessageResult, Resolve(ask_model)]) -> str:
    """Ask the client's model to complete the prompt."""
    content = sampled.content
    text = content.text if isinstance(content, types.TextContent) else repr(content)
    return f"sampled: {text}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
