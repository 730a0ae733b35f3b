"""Benchmarks of the engine against its peers: ``python -m benchmarks`` (``--smoke`` for tiny sizes)."""
