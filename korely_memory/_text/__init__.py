"""Text without I/O: words, tokens, frames, the rendered block, BM25, the extractor's prompt and
answer check, their caches, the days a memory's words point to."""
