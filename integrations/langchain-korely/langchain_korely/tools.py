"""The `remember`, `correct` and `forget` tools.

The identity a tool writes under comes from the run's `ToolRuntime`, which the
agent injects and the model can neither see nor fill in. A call the engine
refuses comes back to the model as a sentence it can act on.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from korely_memory import Identity, InvalidRequest, KorelyError, MemoryEngine
from langchain_korely._identity import IdentityResolver, identity_from_context

_KEY = (
    "Short stable identifier of what the fact is about, e.g. 'home-city' "
    "or 'reporting-region'. Lower case, digits and '-', '.', '_', ':'."
)
_IDENTITY_FIELDS = frozenset({"account", "user", "agent"})


class _Arguments(BaseModel):
    # The runtime is declared so the agent knows to inject it; it is never
    # shown to the model.
    model_config = ConfigDict(arbitrary_types_allowed=True)
    runtime: ToolRuntime[Any, Any]


class RememberInput(_Arguments):
    """What the model fills in to record a fact."""

    key: str = Field(description=_KEY)
    content: str = Field(
        description="The fact in one or two sentences that make sense on their own, "
        "e.g. 'Giulia lives in Milan'."
    )


class CorrectInput(_Arguments):
    """What the model fills in to correct a fact."""

    key: str = Field(description=_KEY)
    content: str = Field(description="The fact as it holds now, in one or two sentences.")


class ForgetInput(_Arguments):
    """What the model fills in to forget a fact."""

    key: str = Field(description="The key of the fact that no longer holds.")


class _KorelyTool(BaseTool):
    # Each tool defines only `_run`: `ainvoke` runs it in a worker thread
    # (BaseTool's own `_arun`), so sync and async share one body.

    engine: MemoryEngine
    """The memory the tool writes to."""
    identity_from: IdentityResolver | None = None
    """Where the identity comes from; by default the run's context."""
    refusal: ClassVar[str]

    def _write(
        self, write: Callable[..., Any], runtime: ToolRuntime[Any, Any], *args: Any, **options: Any
    ) -> str:
        who = self._identity(runtime)
        try:
            fact = write(who, *args, **options)
        except KorelyError as error:
            return self._refuse(error)
        return self._done(fact)

    def _identity(self, runtime: ToolRuntime[Any, Any]) -> Identity:
        return (self.identity_from or identity_from_context)(runtime)

    def _refuse(self, error: KorelyError) -> str:
        # A bad identity is the application's mistake, not one the model can fix.
        if isinstance(error, InvalidRequest) and error.field in _IDENTITY_FIELDS:
            raise error
        return f"{self.refusal}: {error}"

    @abstractmethod
    def _done(self, fact: Any) -> str:
        """The sentence that tells the model what was written."""


class KorelyRemember(_KorelyTool):
    """Records a fact to keep between conversations; a key already in use is replaced."""

    name: str = "remember"
    description: str = (
        "Record a fact worth knowing in later conversations: a short, self-contained "
        "statement about the user or their work. Recording under a key that already "
        "holds a fact replaces it."
    )
    args_schema: type[BaseModel] = RememberInput
    max_facts: int | None = None
    """Refuse a new key once the identity holds this many facts (None: no ceiling)."""
    refusal: ClassVar[str] = "Not saved"

    def _run(self, key: str, content: str, runtime: ToolRuntime[Any, Any]) -> str:
        return self._write(self.engine.remember, runtime, key, content, max_facts=self.max_facts)

    def _done(self, fact: Any) -> str:
        return f"Remembered {fact.key}: {fact.content}"


class KorelyCorrect(_KorelyTool):
    """Replaces the fact under a key; the old version stays in its history."""

    name: str = "correct"
    description: str = (
        "Correct a fact kept under a key when it is no longer accurate. "
        "The old version is kept as history."
    )
    args_schema: type[BaseModel] = CorrectInput
    refusal: ClassVar[str] = "Not corrected"

    def _run(self, key: str, content: str, runtime: ToolRuntime[Any, Any]) -> str:
        return self._write(self.engine.correct, runtime, key, content)

    def _done(self, fact: Any) -> str:
        return f"Corrected {fact.key}: {fact.content}"


class KorelyForget(_KorelyTool):
    """Ends the fact under a key."""

    name: str = "forget"
    description: str = (
        "Forget the fact kept under a key when it no longer holds or the user asks not to keep it."
    )
    args_schema: type[BaseModel] = ForgetInput
    refusal: ClassVar[str] = "Not forgotten"

    def _run(self, key: str, runtime: ToolRuntime[Any, Any]) -> str:
        return self._write(self.engine.forget, runtime, key)

    def _done(self, fact: Any) -> str:
        return f"Forgot {fact.key}."


def korely_tools(
    engine: MemoryEngine,
    max_facts: int | None = None,
    *,
    identity_from: IdentityResolver | None = None,
) -> list[BaseTool]:
    """The `remember`, `correct` and `forget` tools, writing to `engine`.

    Args:
        engine: The memory to write to.
        max_facts: Refuse a new key once the identity holds this many facts;
            the model is told to correct or forget one instead.
        identity_from: Where the identity comes from; by default the run's
            context (`agent.invoke(..., context=Identity(...))`).
    """
    return [
        KorelyRemember(engine=engine, max_facts=max_facts, identity_from=identity_from),
        KorelyCorrect(engine=engine, identity_from=identity_from),
        KorelyForget(engine=engine, identity_from=identity_from),
    ]
