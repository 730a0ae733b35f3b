"""The rows: functions that run inside a transaction the engine opened (versions, marks, the word
index, memories, writes, review, erasure, export and import, notes, items, held changes)."""
