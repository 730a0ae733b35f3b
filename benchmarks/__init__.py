"""The engine against its peers: ``python -m benchmarks`` (``--smoke``: tiny sizes)."""
