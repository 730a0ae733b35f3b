"""korely-memory for LlamaIndex: facts kept between conversations, told once when they change.

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.memory.korely import KorelyMemory, korely_tools
    memory = KorelyMemory.from_defaults(engine, who, reader="support-bot")
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine, who))
    await agent.run("I moved to Milan", memory=memory)

`KorelyMemoryBlock` goes into a `Memory` of your own; `korely_tools` are `FunctionTool`s.
"""

from llama_index.memory.korely.block import KorelyMemoryBlock
from llama_index.memory.korely.memory import KorelyMemory, block_room, engine_tokenizer
from llama_index.memory.korely.tools import korely_tools

__all__ = ["KorelyMemory", "KorelyMemoryBlock", "block_room", "engine_tokenizer", "korely_tools"]
