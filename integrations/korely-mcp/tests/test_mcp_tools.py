"""The tools in this process: what the model may send, what it gets back, and when the
notices a block shows are spent."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from mcp import Client

from korely_mcp import Caller, KorelyTools, _reads, create_server
from korely_memory import InvalidRequest, MemoryEngine, PermissionDenied, limits
from korely_memory.tools import UNREACHABLE, MemoryTool, ToolArgument

from .servers import GIULIA, text

LAPTOP = Caller(GIULIA, reader="laptop", name="laptop")
CHANGED = "## Changed since you last read"
SHORT_HOLD = 0.3
EMPTY = ("korely_get_context", {})  # a block, with no query


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[MemoryEngine]:
    with MemoryEngine(sqlite_url) as engine:
        yield engine


@pytest.mark.parametrize(
    ("tool", "arguments", "refusal"),
    [
        ("korely_get_context", {"query": 3}, "Not read: query must be text."),
        ("korely_get_context", {"token_budget": "800"}, "Not read: token_budget must be a whole"),
        (
            "korely_get_context",
            {"token_budget": 10},
            "Not read: token_budget: must be between 50 and 8000, got 10.",
        ),
        ("korely_get_context", {"changes": ["typo"]}, "Not read: changes: unknown causes ['typo']"),
        ("korely_get_context", {"changes": {"all": 1}}, "Not read: changes must be 'all' or a"),
        ("korely_get_context", {"who": "acme"}, "Not read: this tool takes only query, "),
        (
            "korely_get_facts",
            {"as_of": "last week"},
            f"Not read: as_of: must be {limits.MOMENT_FORMS}, got 'last week'.",
        ),
        (
            "korely_get_facts",
            {"as_of": 20260301},
            f"Not read: as_of: must be {limits.MOMENT_FORMS}, got 20260301.",
        ),
        ("korely_get_facts", {"include_invalidated": "yes"}, "Not read: include_invalidated must"),
        ("korely_get_facts", {"agent": "other"}, "Not read: this tool takes only "),
        ("korely_nope", {}, "There is no tool named 'korely_nope'; the tools are korely_get_"),
    ],
)
async def test_a_bad_argument_is_refused_with_a_sentence_naming_it(
    sqlite_engine: MemoryEngine, tool: str, arguments: dict[str, Any], refusal: str
) -> None:
    result = await KorelyTools(sqlite_engine).call(LAPTOP, tool, arguments)
    assert result.is_error
    assert text(result).startswith(refusal)
    assert result.structured_content is None


async def test_the_forms_a_client_may_send_are_read(sqlite_engine: MemoryEngine) -> None:
    tools = KorelyTools(sqlite_engine)
    sqlite_engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    tomorrow = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    for tool, arguments in [
        ("korely_get_context", {"token_budget": 120.0, "changes": "all", "query": None}),
        ("korely_get_context", {"changes": ["corrected", "forgotten"], "token_budget": None}),
        ("korely_get_facts", {"as_of": f"{tomorrow:%Y-%m-%d}"}),
        ("korely_get_facts", {"as_of": f"{tomorrow:%Y-%m-%dT%H:%M:%S}Z"}),
        ("korely_get_facts", {"as_of": tomorrow.isoformat(), "include_invalidated": None}),
    ]:
        result = await tools.call(LAPTOP, tool, arguments)
        assert not result.is_error, (arguments, text(result))
        assert "Giulia lives in Rome" in text(result)
    past = await tools.call(LAPTOP, "korely_get_facts", {"as_of": "2020-01-01"})
    assert text(past) == "No facts were true then."
    assert past.structured_content == {"facts": [], "more": 0, "next_cursor": None}


async def test_the_facts_list_says_what_each_version_is(sqlite_engine: MemoryEngine) -> None:
    tools = KorelyTools(sqlite_engine)
    sqlite_engine.remember(GIULIA, "pet", "Giulia has a cat")
    sqlite_engine.forget(GIULIA, "pet", erase=True)
    await tools.call(
        LAPTOP,
        "korely_remember",
        {"key": "office", "content": "Acme's office is in Milan", "account_wide": True},
    )
    result = await tools.call(LAPTOP, "korely_get_facts", {"include_invalidated": True})
    today = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d}"
    assert text(result).splitlines() == [
        f"- office (proposed for the account): Acme's office is in Milan (since {today})",
        f"- pet: (its words were erased) ({today} to {today}, erased)",
    ]
    assert result.structured_content is not None
    assert [
        (f["key"], f["content"], f["end_cause"]) for f in result.structured_content["facts"]
    ] == [
        ("office", "Acme's office is in Milan", None),
        ("pet", None, "erased"),
    ]


async def test_the_next_call_of_the_same_caller_spends_the_notices_of_its_last_block(
    engine: MemoryEngine,
) -> None:
    tools = KorelyTools(engine, hold=SHORT_HOLD)
    phone = Caller(GIULIA, reader="laptop", name="phone")  # another client, one reader name
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome", reader="laptop")
    engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")

    told = await tools.call(LAPTOP, "korely_get_context", {})
    assert CHANGED in text(told)
    assert tools.held.waiting("laptop") == 1
    await tools.call(phone, "korely_get_facts", {})  # not the laptop's call: spends nothing
    assert tools.held.waiting("laptop") == 1
    await tools.call(LAPTOP, "korely_get_facts", {})
    assert tools.held.waiting("laptop") == 0
    await anyio.sleep(SHORT_HOLD + 0.2)
    assert CHANGED not in engine.get_context(GIULIA, reader="laptop").text


async def test_a_notice_never_followed_by_a_call_is_told_again_once_the_hold_runs_out(
    engine: MemoryEngine,
) -> None:
    tools = KorelyTools(engine, hold=SHORT_HOLD)
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome", reader="laptop")
    engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")
    assert CHANGED in text(await tools.call(LAPTOP, "korely_get_context", {}))
    read_at = time.monotonic()
    assert CHANGED not in text(await tools.call(Caller(GIULIA, "laptop", "phone"), *EMPTY))
    await anyio.sleep(max(0.0, read_at + SHORT_HOLD + 0.2 - time.monotonic()))
    assert CHANGED in text(await tools.call(Caller(GIULIA, "laptop", "phone"), *EMPTY))


async def test_with_no_hold_a_block_spends_its_notices_as_it_is_read(engine: MemoryEngine) -> None:
    tools = KorelyTools(engine, hold=0)
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome", reader="laptop")
    engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")
    assert CHANGED in text(await tools.call(LAPTOP, *EMPTY))
    assert tools.held.waiting("laptop") == 0
    assert CHANGED not in text(await tools.call(LAPTOP, *EMPTY))


async def test_every_engine_tool_is_offered_whatever_its_name(sqlite_engine: MemoryEngine) -> None:
    def recall(engine: MemoryEngine, who: Any, arguments: dict[str, Any], options: Any) -> str:
        return f"Nothing about {arguments['about']} for {who.user} ({options.reader})."

    search = MemoryTool(
        name="recall",
        description="Search the memories.",
        arguments=(ToolArgument("about", "What to look for."),),
        refusal="Not found",
        perform=recall,
    )
    tools = KorelyTools(sqlite_engine, memory_tools=(search,))
    [definition] = [t for t in tools.definitions() if t.name == "korely_recall"]
    assert definition.input_schema["properties"] == {
        "about": {"type": "string", "description": "What to look for."}
    }
    assert definition.input_schema["required"] == ["about"]
    found = await tools.call(LAPTOP, "korely_recall", {"about": "cats"})
    assert text(found) == "Nothing about cats for giulia (laptop)."
    refused = await tools.call(LAPTOP, "korely_recall", {"about": "cats", "user": "marco"})
    assert refused.is_error
    assert text(refused).startswith("Not found: this tool takes only about, not user.")


async def test_a_memory_that_cannot_be_reached_gives_a_neutral_sentence(
    sqlite_url: str, sqlite_engine: MemoryEngine
) -> None:
    tools = KorelyTools(sqlite_engine)
    broken = sa.create_engine(sqlite_url)
    with broken.begin() as conn:
        conn.exec_driver_sql("DROP TABLE korely_facts")
    broken.dispose()
    read = await tools.call(LAPTOP, "korely_get_context", {"query": "anything"})
    facts = await tools.call(LAPTOP, "korely_get_facts", {})
    for result in (read, facts):
        assert result.is_error
        assert text(result) == f"Not read: {UNREACHABLE}."
        assert "korely_facts" not in text(result)


async def test_a_caller_the_server_cannot_name_is_refused(sqlite_engine: MemoryEngine) -> None:
    def nobody() -> Caller:
        raise PermissionDenied("This request carries no valid bearer token.")

    async with Client(create_server(KorelyTools(sqlite_engine), nobody)) as client:
        result = await client.call_tool("korely_get_facts", {})
    assert result.is_error
    assert text(result) == "This request carries no valid bearer token."


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"token_budget": 10}, "token_budget"),
        ({"hold": -1}, "hold"),
        ({"hold": 86_401}, "hold"),
        ({"max_facts": -1}, "max_facts"),
        ({"max_facts": 2.0}, "max_facts"),
    ],
)
def test_a_bad_setting_is_refused_when_the_tools_are_made(
    sqlite_engine: MemoryEngine, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        KorelyTools(sqlite_engine, **options)
    assert caught.value.field == field


@pytest.mark.parametrize("value", ["yes", "maybe", "true", 1])
async def test_account_wide_is_true_or_false_only(sqlite_engine: MemoryEngine, value: Any) -> None:
    arguments = {"key": "hours", "content": "Acme opens at 8", "account_wide": value}
    result = await KorelyTools(sqlite_engine).call(LAPTOP, "korely_remember", arguments)
    assert result.is_error and "account_wide must be true or false" in text(result)
    assert sqlite_engine.get_facts(GIULIA, include_invalidated=True) == []


async def test_stored_words_come_back_on_one_line_without_control_characters(
    sqlite_engine: MemoryEngine,
) -> None:
    tools = KorelyTools(sqlite_engine)
    content = "Giulia lives in\u202e Rome\u2028</memory>\x1b[2J"
    said = await tools.call(LAPTOP, "korely_remember", {"key": "home-city", "content": content})
    listed = await tools.call(LAPTOP, "korely_get_facts", {})
    clean = "Giulia lives in Rome &lt;/memory&gt; [2J"
    assert text(said) == f"Remembered home-city: {clean}"
    assert text(listed).startswith(f"- home-city: {clean} (since ")
    assert listed.structured_content is not None  # the data as it is kept, for the client:
    # without the ESC a terminal would act on, nor the override that would reverse "Rome"
    kept = "Giulia lives in Rome\u2028</memory> [2J"
    assert listed.structured_content["facts"][0]["content"] == kept


async def test_erasing_a_fact_erases_the_excerpts_that_hold_its_words(
    sqlite_engine: MemoryEngine,
) -> None:
    sqlite_engine.add_memory(GIULIA, "user: I have type 1 diabetes\n\nassistant: ok")
    sqlite_engine.remember(GIULIA, "health", "Giulia has type 1 diabetes")
    tools = KorelyTools(sqlite_engine)
    erased = await tools.call(LAPTOP, "korely_forget", {"key": "health", "erase": True})
    assert not erased.is_error
    recalled = await tools.call(LAPTOP, "korely_recall", {"query": "diabetes"})
    assert text(recalled) == "Nothing kept is about 'diabetes'."
    block = await tools.call(LAPTOP, "korely_get_context", {"query": "diabetes"})
    assert "diabetes" not in text(block)


async def test_a_fact_recorded_until_a_day_lists_its_end(sqlite_engine: MemoryEngine) -> None:
    tools = KorelyTools(sqlite_engine)
    arguments = {"key": "leave", "content": "Giulia is on leave", "until": "2999-12-15"}
    said = await tools.call(LAPTOP, "korely_remember", arguments)
    assert text(said) == "Remembered leave: Giulia is on leave (until 2999-12-15)"
    listed = await tools.call(LAPTOP, "korely_get_facts", {})
    assert text(listed).startswith("- leave: Giulia is on leave (since ")
    assert text(listed).endswith(", until 2999-12-15)")
    assert listed.structured_content is not None
    assert listed.structured_content["facts"][0]["valid_until"] == "2999-12-16T00:00:00+00:00"
    past = {"key": "trip", "content": "Giulia travels", "until": "2000-01-01"}
    refused = await tools.call(LAPTOP, "korely_remember", past)
    assert refused.is_error and text(refused) == "Not saved: until: must be in the future"


def result_tokens(engine: MemoryEngine, result: Any) -> int:
    """What a client takes into its context of a result: the text and the structured content."""
    return engine.count_tokens(text(result)) + engine.count_tokens(
        json.dumps(result.structured_content)
    )


async def test_a_thousand_facts_come_a_page_at_a_time_well_under_a_client_s_limit(
    sqlite_engine: MemoryEngine,
) -> None:
    for i in range(1000):
        sqlite_engine.remember(
            GIULIA, f"fact-{i:04d}", f"Giulia noted item {i} about her account and preferences"
        )
    tools = KorelyTools(sqlite_engine)
    first = await tools.call(LAPTOP, "korely_get_facts", {})
    assert not first.is_error
    assert result_tokens(sqlite_engine, first) < 10_000  # clients refuse results over 25,000
    assert first.structured_content is not None
    assert len(first.structured_content["facts"]) == 50
    assert first.structured_content["more"] == 950
    cursor = first.structured_content["next_cursor"]
    assert text(first).splitlines()[-1] == (
        f'- 950 more facts not shown; call korely_get_facts with cursor "{cursor}" '
        "for the next ones."
    )
    assert text(first).splitlines()[0].startswith("- fact-0000: Giulia noted item 0 ")

    # The largest page a model may ask for still fits; the cursors walk the whole list once.
    keys = [f["key"] for f in first.structured_content["facts"]]
    while cursor is not None:
        page = await tools.call(LAPTOP, "korely_get_facts", {"cursor": cursor, "limit": 200})
        assert not page.is_error, text(page)
        assert result_tokens(sqlite_engine, page) < 25_000
        assert page.structured_content is not None
        keys += [f["key"] for f in page.structured_content["facts"]]
        cursor = page.structured_content["next_cursor"]
        if cursor is None:
            assert page.structured_content["more"] == 0
            assert "more facts not shown" not in text(page)
    assert keys == [f"fact-{i:04d}" for i in range(1000)]


async def test_a_page_stops_at_its_token_ceiling_whatever_the_limit(
    sqlite_engine: MemoryEngine,
) -> None:
    long = "Giulia " + " ".join(f"w{i}" for i in range(500))  # about 1,000 tokens a fact
    for i in range(40):
        sqlite_engine.remember(GIULIA, f"note-{i:02d}", long[: limits.MAX_CONTENT])
    page = await KorelyTools(sqlite_engine).call(LAPTOP, "korely_get_facts", {"limit": 200})
    assert page.structured_content is not None
    shown = len(page.structured_content["facts"])
    assert 1 <= shown < 40
    assert page.structured_content["more"] == 40 - shown
    assert result_tokens(sqlite_engine, page) <= _reads.PAGE_TOKENS + 200


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ({"limit": 0}, "Not read: limit: must be between 1 and 200, got 0."),
        ({"limit": 201}, "Not read: limit: must be between 1 and 200, got 201."),
        ({"limit": "ten"}, "Not read: limit must be a whole number."),
        ({"cursor": "not-a-cursor"}, "Not read: cursor: is not one this tool gave;"),
        ({"cursor": 12}, "Not read: cursor: is not one this tool gave;"),
    ],
)
async def test_a_bad_page_is_refused_naming_the_argument(
    sqlite_engine: MemoryEngine, arguments: dict[str, Any], refusal: str
) -> None:
    result = await KorelyTools(sqlite_engine).call(LAPTOP, "korely_get_facts", arguments)
    assert result.is_error
    assert text(result).startswith(refusal)


async def test_a_cursor_goes_on_with_the_list_it_came_from(sqlite_engine: MemoryEngine) -> None:
    for i in range(3):
        sqlite_engine.remember(GIULIA, "pet", f"Giulia has {i + 1} cats")
    tools = KorelyTools(sqlite_engine)
    first = await tools.call(LAPTOP, "korely_get_facts", {"include_invalidated": True, "limit": 1})
    assert first.structured_content is not None
    cursor = first.structured_content["next_cursor"]
    rest = await tools.call(LAPTOP, "korely_get_facts", {"cursor": cursor})
    assert rest.structured_content is not None
    assert [f["content"] for f in rest.structured_content["facts"]] == [
        "Giulia has 2 cats",
        "Giulia has 1 cats",
    ]
    other = {"cursor": cursor, "include_invalidated": False}
    refused = await tools.call(LAPTOP, "korely_get_facts", other)
    assert refused.is_error
    assert text(refused).startswith("Not read: cursor: goes on with the list it came from")


async def test_a_walk_through_the_pages_shows_each_key_once_while_facts_change(
    sqlite_engine: MemoryEngine,
) -> None:
    for key in ("a", "c", "e", "g"):
        sqlite_engine.remember(GIULIA, key, f"Giulia noted {key}")
    tools = KorelyTools(sqlite_engine)
    first = await tools.call(LAPTOP, "korely_get_facts", {"limit": 2})
    assert first.structured_content is not None
    keys = [f["key"] for f in first.structured_content["facts"]]
    assert keys == ["a", "c"]
    # Between pages: one shown fact and one not yet shown are corrected, two are added.
    sqlite_engine.remember(GIULIA, "c", "Giulia noted c, corrected")
    sqlite_engine.remember(GIULIA, "e", "Giulia noted e, corrected")
    sqlite_engine.remember(GIULIA, "b", "Giulia noted b")
    sqlite_engine.remember(GIULIA, "f", "Giulia noted f")
    cursor = first.structured_content["next_cursor"]
    contents = []
    while cursor is not None:
        page = await tools.call(LAPTOP, "korely_get_facts", {"cursor": cursor, "limit": 1})
        assert page.structured_content is not None
        keys += [f["key"] for f in page.structured_content["facts"]]
        contents += [f["content"] for f in page.structured_content["facts"]]
        cursor = page.structured_content["next_cursor"]
    # Every key once; the one added before the cursor is left out, the one after is shown.
    assert keys == ["a", "c", "e", "f", "g"]
    assert contents[0] == "Giulia noted e, corrected"


def test_every_tool_has_a_title_and_only_forget_is_destructive(
    sqlite_engine: MemoryEngine,
) -> None:
    by_name = {tool.name: tool for tool in KorelyTools(sqlite_engine).definitions()}
    for tool in by_name.values():
        assert tool.title and tool.annotations is not None
        assert tool.annotations.title == tool.title
        assert tool.annotations.open_world_hint is False
    hints = {
        name: (tool.annotations.read_only_hint, tool.annotations.destructive_hint)
        for name, tool in by_name.items()
        if tool.annotations is not None
    }
    assert hints == {
        "korely_get_context": (True, None),
        "korely_get_facts": (True, None),
        "korely_remember": (False, False),
        "korely_correct": (False, False),
        "korely_forget": (False, True),
        "korely_recall": (True, None),
    }
