"""Two MCP clients sharing one memory through `korely-mcp`, the way desktop assistants do.

    python examples/mcp_client.py [--db memory.db]

It starts two `korely-mcp` servers over stdio, for Giulia's laptop and her phone (one memory,
two reader names), and calls their tools with the MCP SDK's client: the laptop remembers
where she lives, the phone corrects it, and the laptop is told of the change once. No model
is involved: the calls are the ones a model would make.
Needs `pip install . ./integrations/korely-mcp`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

GIULIA = ["--account", "acme", "--user", "giulia", "--agent", "support-copilot"]


def korely_mcp(url: str, reader: str) -> StdioServerParameters:
    """How a desktop client's configuration starts the server."""
    args = ["-m", "korely_mcp", "--url", url, *GIULIA, "--reader", reader]
    return StdioServerParameters(command=sys.executable, args=args)


async def call(client: Client, device: str, tool: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(tool, arguments)
    print(f"{device}> {tool} {json.dumps(arguments)}")
    said = "\n".join(c.text for c in result.content if c.type == "text").splitlines()
    if result.is_error:
        said[0] = f"[error] {said[0]}"
    print("\n".join(f"  {line}" if line else "" for line in said))


async def demo(url: str) -> None:
    async with (
        Client(korely_mcp(url, "giulia-laptop")) as laptop,
        Client(korely_mcp(url, "giulia-phone")) as phone,
    ):
        listed = await laptop.list_tools()
        print("tools:", ", ".join(tool.name for tool in listed.tools))
        where = {"query": "Where does Giulia live?"}
        await call(
            laptop,
            "laptop",
            "korely_remember",
            {"key": "home-city", "content": "Giulia lives in Rome"},
        )
        await call(laptop, "laptop", "korely_get_context", where)
        await call(
            phone,
            "phone",
            "korely_correct",
            {"key": "home-city", "content": "Giulia lives in Milan"},
        )
        await call(laptop, "laptop", "korely_get_context", where)  # told of the change
        await call(laptop, "laptop", "korely_get_context", where)  # once
        await call(
            laptop,
            "laptop",
            "korely_remember",
            {"key": "home-city", "content": "Marco lives in Oslo", "user": "marco"},
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", help="SQLite file to keep the memory in (default: a temporary one)")
    args = parser.parse_args()
    if args.db:
        anyio.run(demo, f"sqlite:///{Path(args.db).resolve()}")
        return
    with tempfile.TemporaryDirectory() as directory:
        anyio.run(demo, f"sqlite:///{Path(directory) / 'memory.db'}")


if __name__ == "__main__":
    main()
