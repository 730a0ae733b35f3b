"""``python -m korely_server``: the `korely-server` command."""

import sys

from .cli import main

sys.exit(main())
