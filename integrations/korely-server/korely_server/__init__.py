"""korely-server: korely-memory over HTTP, in one process.

``korely-server --tokens tokens.json`` serves the REST API under ``/v1`` (its OpenAPI schema at
``/openapi.json``), the MCP endpoint at ``/mcp`` and the administrator's page at ``/admin``, each
request's caller named by its bearer token. The same application from Python:

    from korely_memory import MemoryEngine
    from korely_mcp import TokenFile
    from korely_server import create_app

    app = create_app(MemoryEngine("sqlite:///memory.db"), TokenFile("tokens.json"))
"""

from .app import MAX_BODY, VERSION, create_app

__version__ = VERSION

__all__ = ["MAX_BODY", "__version__", "create_app"]
