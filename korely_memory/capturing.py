"""The former name of :mod:`korely_memory.capture`, kept for this release: it goes in the next.

Every name here is ``korely_memory.capture``'s; import it from there.
"""

from .capture import (
    ACTIONS,
    DEFAULT_DELAY,
    MAX_DELAY,
    OPERATIONS_SCHEMA,
    CaptureControls,
    Captures,
    CaptureStats,
    Extractor,
    ExtractorStats,
    Job,
    ModelExtractor,
    Operation,
    check_capture,
    chunks,
    extraction_prompt,
    operations_from,
)

__all__ = [
    "ACTIONS",
    "DEFAULT_DELAY",
    "MAX_DELAY",
    "OPERATIONS_SCHEMA",
    "CaptureControls",
    "CaptureStats",
    "Captures",
    "Extractor",
    "ExtractorStats",
    "Job",
    "ModelExtractor",
    "Operation",
    "check_capture",
    "chunks",
    "extraction_prompt",
    "operations_from",
]
