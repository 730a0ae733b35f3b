"""``python -m korely_memory``: the ``korely`` command."""

from korely_memory._cli import main

main()
