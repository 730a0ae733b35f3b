"""korely-memory for LlamaIndex: facts kept between conversations, told once when they change.

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.memory.korely import KorelyMemory, korely_tools

    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))  # one agent for everyone
    memory = KorelyMemory.from_defaults(engine, who, reader="support-bot")  # per conversation
    await agent.run("I moved to Milan", memory=memory)

``KorelyMemory`` is a ``Memory`` with the korely block inside; ``KorelyMemoryBlock``
goes into a ``Memory`` of your own; ``korely_tools`` are ``FunctionTool``s. With
``capture=korely_extractor(llm)``, facts are also drawn from each finished turn.
"""

from llama_index.memory.korely._budget import block_room, engine_tokenizer
from llama_index.memory.korely.block import KorelyMemoryBlock
from llama_index.memory.korely.capture import (
    CaptureStats,
    ExtractorStats,
    KorelyExtractor,
    korely_extractor,
)
from llama_index.memory.korely.chat_store import (
    SharedChatStore,
    aerase_chat_sessions,
    erase_chat_sessions,
)
from llama_index.memory.korely.memory import KorelyMemory
from llama_index.memory.korely.tools import korely_functions, korely_tools

__all__ = [
    "CaptureStats",
    "ExtractorStats",
    "KorelyExtractor",
    "KorelyMemory",
    "KorelyMemoryBlock",
    "SharedChatStore",
    "aerase_chat_sessions",
    "block_room",
    "engine_tokenizer",
    "erase_chat_sessions",
    "korely_extractor",
    "korely_functions",
    "korely_tools",
]
