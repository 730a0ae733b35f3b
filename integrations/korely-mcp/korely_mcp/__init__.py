"""korely-mcp: korely-memory for any agent that speaks the Model Context Protocol.

Run ``korely-mcp`` (stdio, one identity per process) or ``korely-mcp --transport http``
(streamable HTTP, the identity of each request from its bearer token). The same server from
Python:

    import anyio
    from korely_memory import Identity, MemoryEngine
    from korely_mcp import Caller, KorelyTools, create_server, run_stdio

    caller = Caller(Identity("acme", "giulia", "support-copilot"), reader="giulia-laptop")
    anyio.run(run_stdio, create_server(KorelyTools(MemoryEngine()), lambda: caller))
"""

from .server import VERSION as __version__
from .server import (
    bind,
    caller_from_token,
    create_server,
    http_app,
    run_http,
    run_stdio,
)
from .tokens import CallerToken, TokenFile, hash_token, new_token, read_token_file
from .tools import PREFIX, Caller, KorelyTools

__all__ = [
    "PREFIX",
    "Caller",
    "CallerToken",
    "KorelyTools",
    "TokenFile",
    "__version__",
    "bind",
    "caller_from_token",
    "create_server",
    "hash_token",
    "http_app",
    "new_token",
    "read_token_file",
    "run_http",
    "run_stdio",
]
