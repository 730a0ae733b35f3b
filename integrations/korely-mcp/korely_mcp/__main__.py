"""``python -m korely_mcp``: the `korely-mcp` command."""

import sys

from .cli import main

sys.exit(main())
