"""Values: what the engine takes and returns, its errors, and the check of every argument.

Imports nothing of the engine above it (``limits``, beside it, is its public face)."""
