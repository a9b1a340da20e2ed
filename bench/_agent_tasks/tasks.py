"""The fixed task set of the agent benchmark, and its split into a tuning part and a
report part.

Each task is a question about the invented world (`world`), the tools its agent
gets (those its answer needs), the expected answer, and a reference plan: the
one to three calls that reach it, each using what the one before returned
(look up a country's capital, then that city's population). The tests run every
plan through the tools and check that its last result holds the answer.

Tasks come in pairs of one kind (two capitals, two prices in crowns, ...):
the odd ids are the tuning part, the even ids the report part, so each part
holds one task of each kind. Rules may be chosen on the tuning part only; the
report part is the figure to quote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["PARTS", "TASKS", "Part", "Task", "part_of"]

Part = Literal["tuning", "report"]
PARTS: tuple[Part, ...] = ("tuning", "report")


@dataclass(frozen=True, kw_only=True, slots=True)
class Task:
    """One multi-step task."""

    id: str
    """`agent_01` ... in order."""
    prompt: str
    """The user's question."""
    tools: tuple[str, ...]
    """The names of the tools its agent gets (`world.TOOLS`)."""
    answer: str | float
    """What the final must hold: a name (a whole word, any case) or a number."""
    plan: tuple[tuple[str, dict[str, Any]], ...]
    """A reference solution: the calls (tool, input) that reach the answer, in order."""


def _task(n: int, prompt: str, answer: str | float, *plan: tuple[str, dict[str, Any]]) -> Task:
    tools = tuple(dict.fromkeys(name for name, _ in plan))
    return Task(id=f"agent_{n:02d}", prompt=prompt, tools=tools, answer=answer, plan=plan)


def _capital(country: str) -> tuple[str, dict[str, Any]]:
    return ("capital_of", {"country": country})


def _population(city: str) -> tuple[str, dict[str, Any]]:
    return ("population_of", {"city": city})


def _price(product: str) -> tuple[str, dict[str, Any]]:
    return ("price_of", {"product": product})


def _flight(origin: str, destination: str) -> tuple[str, dict[str, Any]]:
    return ("flight_hours", {"origin": origin, "destination": destination})


def _home(person: str) -> tuple[str, dict[str, Any]]:
    return ("home_city", {"person": person})


def _calc(expression: str) -> tuple[str, dict[str, Any]]:
    return ("calculator", {"expression": expression})


def _convert(value: float, from_unit: str, to_unit: str) -> tuple[str, dict[str, Any]]:
    return ("convert", {"value": value, "from_unit": from_unit, "to_unit": to_unit})


TASKS: tuple[Task, ...] = (
    # one lookup or one computation
    _task(1, "What is the capital of Veloria?", "Marest", _capital("Veloria")),
    _task(2, "What is the capital of Karthane?", "Pellamy", _capital("Karthane")),
    _task(3, "How many people live in Tovik?", 87500, _population("Tovik")),
    _task(4, "What is the population of Fendral?", 720000, _population("Fendral")),
    _task(5, "How much does the Zorbix lamp cost?", 42.5, _price("Zorbix lamp")),
    _task(6, "What is the price of the Trellis chair?", 85, _price("Trellis chair")),
    _task(7, "How many hours is the flight from Marest to Tovik?", 3.5, _flight("Marest", "Tovik")),
    _task(
        8,
        "How long does the flight from Pellamy to Ulmaro take, in hours?",
        2.5,
        _flight("Pellamy", "Ulmaro"),
    ),
    _task(9, "Which city does Ilsa Moravec live in?", "Rivasco", _home("Ilsa Moravec")),
    _task(10, "Where does Brenna Hollis live?", "Caskin", _home("Brenna Hollis")),
    _task(11, "What is 37 times 48?", 1776, _calc("37 * 48")),
    _task(12, "What is 1234 plus 5678?", 6912, _calc("1234 + 5678")),
    _task(13, "Convert 15 kilometers to miles.", 9.3206, _convert(15, "kilometers", "miles")),
    _task(14, "How many pounds is 40 kilograms?", 88.1848, _convert(40, "kilograms", "pounds")),
    _task(15, "What is 23 degrees Celsius in Fahrenheit?", 73.4, _convert(23, "celsius", "fahrenheit")),
    _task(16, "Convert 250 dollars to crowns.", 1600, _convert(250, "dollars", "crowns")),
    # two hops: the second call uses what the first returned
    _task(
        17,
        "What is the population of the capital of Quenland?",
        87500,
        _capital("Quenland"),
        _population("Tovik"),
    ),
    _task(
        18,
        "How many people live in the capital of Drevania?",
        298000,
        _capital("Drevania"),
        _population("Ulmaro"),
    ),
    _task(
        19, "How much do 3 Kelpo kettles cost in total?", 56.25, _price("Kelpo kettle"), _calc("3 * 18.75")
    ),
    _task(20, "What do 4 Quibble mugs cost altogether?", 28.8, _price("Quibble mug"), _calc("4 * 7.2")),
    _task(
        21,
        "What is the price of the Vantor backpack in crowns?",
        409.6,
        _price("Vantor backpack"),
        _convert(64, "dollars", "crowns"),
    ),
    _task(
        22,
        "How much do the Nimbra headphones cost in crowns?",
        831.36,
        _price("Nimbra headphones"),
        _convert(129.9, "dollars", "crowns"),
    ),
    _task(
        23,
        "How many minutes is the flight from Caskin to Fendral?",
        360,
        _flight("Caskin", "Fendral"),
        _convert(6, "hours", "minutes"),
    ),
    _task(
        24,
        "How many minutes does the flight from Marest to Belun take?",
        105,
        _flight("Marest", "Belun"),
        _convert(1.75, "hours", "minutes"),
    ),
    _task(
        25,
        "What is the population of the city where Tomas Quell lives?",
        23900,
        _home("Tomas Quell"),
        _population("Oskel"),
    ),
    _task(
        26,
        "How many people live in Mira Soltane's home city?",
        63200,
        _home("Mira Soltane"),
        _population("Pellamy"),
    ),
    _task(
        27,
        "How many hours is the flight from Marest to the capital of Morvath?",
        5.5,
        _capital("Morvath"),
        _flight("Marest", "Iselle"),
    ),
    _task(
        28,
        "How many hours does a flight from Tovik to the capital of Ostravia take?",
        4.25,
        _capital("Ostravia"),
        _flight("Tovik", "Belun"),
    ),
    _task(
        29,
        "Ilsa Moravec flies from her home city to Tovik. How many hours is her flight?",
        1.25,
        _home("Ilsa Moravec"),
        _flight("Rivasco", "Tovik"),
    ),
    _task(
        30,
        "Tomas Quell flies from his home city to Belun. How many hours is his flight?",
        2.75,
        _home("Tomas Quell"),
        _flight("Oskel", "Belun"),
    ),
    # three calls
    _task(
        31,
        "What is the combined population of Marest and Tovik?",
        499500,
        _population("Marest"),
        _population("Tovik"),
        _calc("412000 + 87500"),
    ),
    _task(
        32,
        "How much do a Zorbix lamp and a Quibble mug cost together?",
        49.7,
        _price("Zorbix lamp"),
        _price("Quibble mug"),
        _calc("42.5 + 7.2"),
    ),
    _task(
        33,
        "Davor Kint flies from his home city to Marest. How many minutes does the flight take?",
        330,
        _home("Davor Kint"),
        _flight("Iselle", "Marest"),
        _convert(5.5, "hours", "minutes"),
    ),
    _task(
        34,
        "Tomas Quell flies from his home city to Belun. How many minutes is the flight?",
        165,
        _home("Tomas Quell"),
        _flight("Oskel", "Belun"),
        _convert(2.75, "hours", "minutes"),
    ),
    _task(
        35,
        "The capital of Zentia will grow by 12000 people. What will its population be?",
        166000,
        _capital("Zentia"),
        _population("Caskin"),
        _calc("154000 + 12000"),
    ),
    _task(
        36,
        "How much do 5 Trellis chairs cost in crowns?",
        2720,
        _price("Trellis chair"),
        _calc("5 * 85"),
        _convert(425, "dollars", "crowns"),
    ),
)
"""The tasks, `agent_01` to `agent_36`."""


def part_of(task: Task) -> Part:
    """The part a task belongs to: odd ids tune, even ids report."""
    return "tuning" if int(task.id.rsplit("_", 1)[1]) % 2 else "report"
