"""Python annotations as JSON Schema, and the converters back (SPEC 9.1's `@tool` types).

This module uses `from __future__ import annotations`, as aerix's own code does:
the annotations reach `schema_of` as strings first, `NotRequired` included.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import subprocess
import sys
import textwrap
from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import annotated_types
import pydantic
import pytest
import typing_extensions

from aerix import AerixError
from aerix._annotations import same, schema_of, unwrap
from aerix._schema import compile_validator, validate


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    S = 1
    L = 3


@dataclasses.dataclass
class Item:
    """A line of an order.

    Attributes:
        sku: The product code
    """

    sku: str
    qty: Annotated[int, "How many"] = 1
    color: Color | None = None
    tags: list[str] = dataclasses.field(default_factory=list)
    total: float = dataclasses.field(default=0.0, init=False)


class Address(typing_extensions.TypedDict):  # pydantic wants this one before Python 3.12
    street: str
    zip: NotRequired[str]


class Loose(TypedDict, total=False):
    a: int
    b: Required[list[Item]]


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(description="Full name")
    age: int | None = None
    home: Address | None = None


def schema(annotation: object) -> dict[str, Any]:
    return schema_of(annotation, where="tool 't': parameter 'x'")[0]


def convert(annotation: object, value: object) -> Any:
    s, c = schema_of(annotation, where="t")
    assert validate(s, value) is None, validate(s, value)
    return c(value)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Size, {"type": "integer", "enum": [1, 3]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list[list[str]], {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (str | None, {"type": ["string", "null"]}),
        (Color | None, {"anyOf": [{"type": "string", "enum": ["red", "blue"]}, {"type": "null"}]}),
        (Annotated[int, "A count"], {"type": "integer", "description": "A count"}),
        (Annotated[int | None, "Maybe"], {"type": ["integer", "null"], "description": "Maybe"}),
        (
            list[Annotated[str, "A tag"]],
            {"type": "array", "items": {"type": "string", "description": "A tag"}},
        ),
        (
            Address,
            {
                "type": "object",
                "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["street"],
                "additionalProperties": False,
            },
        ),
    ],
)
def test_schema_of(annotation: object, expected: dict[str, Any]) -> None:
    assert schema(annotation) == expected


def test_a_dataclass_is_an_object_of_its_init_fields_with_their_descriptions() -> None:
    assert schema(Item) == {
        "type": "object",
        "properties": {
            "sku": {"type": "string", "description": "The product code"},
            "qty": {"type": "integer", "description": "How many"},
            "color": {"anyOf": [{"type": "string", "enum": ["red", "blue"]}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["sku"],
        "additionalProperties": False,
    }


def test_a_typeddict_reads_total_required_and_not_required() -> None:
    s = schema(Loose)
    assert s["required"] == ["b"]
    assert s["properties"]["b"]["items"] == schema(Item)


def test_a_pydantic_model_is_its_json_schema_checked_and_inlined() -> None:
    s = schema(Person)
    assert "$defs" not in s and "$ref" not in str(s)
    assert s["properties"]["name"] == {"description": "Full name", "title": "Name", "type": "string"}
    assert s["required"] == ["name"]
    home = s["properties"]["home"]["anyOf"][0]
    assert home["properties"]["street"] == {"title": "Street", "type": "string"}
    assert validate(s, {"name": "Al", "home": {"street": 3}}) == "input.home.street: expected string, got 3"


@pydantic.dataclasses.dataclass
class Booking:
    nights: int = pydantic.Field(ge=1, description="How many nights")
    note: str = pydantic.Field(default="", max_length=5)
    guests: list[Item] = pydantic.Field(default_factory=list)


def test_a_pydantic_dataclass_is_pydantics_schema_and_conversion() -> None:
    s = schema(Booking)
    assert s["required"] == ["nights"]  # a Field without a default is required, as pydantic says
    assert s["properties"]["nights"] == {
        "description": "How many nights",
        "minimum": 1,
        "title": "Nights",
        "type": "integer",
    }
    assert s["properties"]["note"]["maxLength"] == 5
    assert validate(s, {}) == "input: missing required field 'nights'"
    assert validate(s, {"nights": 0}) == "input.nights: expected at least 1, got 0"
    booking = convert(Booking, {"nights": 2, "guests": [{"sku": "a", "color": "red"}]})
    assert isinstance(booking, Booking) and booking.nights == 2 and booking.note == ""
    assert booking.guests == [Item(sku="a", color=Color.RED)]


@pydantic.dataclasses.dataclass
class PostalAddress:
    """A postal address.

    Attributes:
        street: The street and number.
        city: The city's name.
    """

    street: str
    city: Annotated[str, "Where it is"]  # the Annotated text comes before the docstring's
    zip: str = pydantic.Field(default="", description="The postcode")


class Shipment(pydantic.BaseModel):
    """Where a parcel goes.

    Attributes:
        to: The address.
    """

    to: PostalAddress
    express: bool = False


def test_a_pydantic_class_s_docstring_is_read_as_a_dataclass_s() -> None:
    for cls in (PostalAddress, Shipment):
        s = schema(cls)
        assert "Attributes" not in json.dumps(s)
    address = schema(PostalAddress)
    assert address["description"] == "A postal address."
    assert {k: p.get("description") for k, p in address["properties"].items()} == {
        "street": "The street and number.",
        "city": "Where it is",
        "zip": "The postcode",
    }
    shipment = schema(Shipment)
    assert shipment["description"] == "Where a parcel goes."
    assert shipment["properties"]["to"]["description"] == "The address."
    inner = shipment["properties"]["to"]  # the nested class's own docstring, through its $ref
    assert inner["properties"]["street"]["description"] == "The street and number."


class Booked(pydantic.BaseModel):
    """A booking.

    Attributes:
        city_name: Where to go.
    """

    model_config = pydantic.ConfigDict(alias_generator=lambda name: name.replace("_", "-"))
    city_name: str
    nights: Annotated[int, "How many nights"]


def test_a_pydantic_class_s_docstring_is_read_under_its_aliases_and_when_nested() -> None:
    booked = schema(Booked)
    assert {k: p.get("description") for k, p in booked["properties"].items()} == {
        "city-name": "Where to go.",
        "nights": "How many nights",
    }

    class Trip(pydantic.BaseModel):
        booking: Booked

    nested = schema(Trip)["properties"]["booking"]  # pydantic's $defs, inlined
    assert nested["properties"]["nights"]["description"] == "How many nights"
    assert nested["properties"]["city-name"]["description"] == "Where to go."


def test_a_dataclass_whose_init_needs_more_than_its_fields_is_refused() -> None:
    @dataclasses.dataclass
    class Order:
        sku: str
        discount: dataclasses.InitVar[int]

        def __post_init__(self, discount: int) -> None:
            self.price = 100 - discount

    with pytest.raises(AerixError) as info:
        schema(Order)
    assert info.value.message.startswith("tool 't': parameter 'x': ")
    assert info.value.message.endswith(
        "Order.__init__ needs 'discount', which is no field of the dataclass "
        "(an InitVar?), so no input can give it; give it a default, or make it a field"
    )

    @dataclasses.dataclass
    class Discounted:
        sku: str
        discount: dataclasses.InitVar[int] = 0

        def __post_init__(self, discount: int) -> None:
            self.price = 100 - discount

    assert schema(Discounted)["properties"] == {"sku": {"type": "string"}}  # with a default it may stay out
    assert convert(Discounted, {"sku": "a"}).price == 100


def test_converters_build_the_annotated_values() -> None:
    assert convert(float, 3) == 3 and isinstance(convert(float, 3), int)  # kept as the model wrote it
    assert convert(float, 2.5) == 2.5
    assert convert(Color, "blue") is Color.BLUE
    assert convert(Size, 3) is Size.L
    assert convert(list[Color], ["red", "blue"]) == [Color.RED, Color.BLUE]
    assert convert(dict[str, Color], {"a": "red"}) == {"a": Color.RED}
    assert convert(Color | None, None) is None
    item = convert(Item, {"sku": "a", "color": "red"})
    assert item == Item(sku="a", qty=1, color=Color.RED, tags=[])
    assert convert(list[Item], [{"sku": "b", "qty": 2}]) == [Item(sku="b", qty=2)]
    assert convert(Address, {"street": "x"}) == {"street": "x"}
    loose = convert(Loose, {"b": [{"sku": "c", "color": "blue"}]})
    assert loose == {"b": [Item(sku="c", color=Color.BLUE)]}
    person = convert(Person, {"name": "Al", "home": {"street": "x"}})
    assert isinstance(person, Person) and person.home == {"street": "x"} and person.age is None


def test_a_flat_converter_is_the_identity() -> None:
    for annotation in (str, int, bool, Literal["a"], list[str], dict[str, int], Address, str | None):
        assert schema_of(annotation, where="t")[1] is same, annotation


def test_unwrap() -> None:
    assert unwrap(Annotated[int | None, "d"]) == (int, "d", True, {}, ["d"])
    assert unwrap(int | str) == (int | str, None, False, {}, [])
    ge, lt = annotated_types.Ge(1), annotated_types.Lt(9)
    assert unwrap(Annotated[int, "d", ge, lt]) == (int, "d", False, {"ge": 1, "lt": 9}, ["d", ge, lt])
    assert unwrap(Annotated[Annotated[int, annotated_types.Ge(1)], annotated_types.Ge(5)])[3] == {"ge": 5}
    # an outer bound wins over an inner one, across `| None` too (as pydantic reads them)
    assert unwrap(Annotated[Annotated[int, annotated_types.Ge(1)] | None, annotated_types.Ge(5)])[3] == {
        "ge": 5
    }
    # what says nothing of the value's schema is left to the conversion: `None`, another library's marker
    marker = object()
    assert unwrap(Annotated[int, None, "d", marker], "p") == (int, "d", False, {}, [None, "d", marker])
    # the metadata handed on to `pydantic_conversion`, a TypedDict key's `Required` or `NotRequired` between
    assert unwrap(NotRequired[Annotated[str, "z"]]) == (str, "z", False, {}, ["z"])
    assert unwrap(Annotated[Required[Annotated[str, "z"]], "a"]) == (str, "a", False, {}, ["a", "z"])
    with pytest.raises(
        AerixError, match=r"p: Annotated metadata MultipleOf\(multiple_of=2\) is not supported"
    ):
        unwrap(Annotated[int, annotated_types.MultipleOf(2)], "p")


class Mixed(enum.Enum):
    A = "a"
    B = 2


class Flags(enum.Enum):
    ON = True


class Bare(TypedDict):
    x: object


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node]


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (list, "has annotation list (say what the items are: list[T])"),
        (dict, "has annotation dict (the keys must be str: dict[str, T])"),
        (dict[int, str], "(the keys must be str: dict[str, T])"),
        (int | str, "(a union other than T | None)"),
        (set[int], "has annotation set[int]"),
        (tuple[int, int], "has annotation tuple[int, int]"),
        (object, "has annotation object"),
        (Any, "has annotation Any"),
        (Mixed, "has annotation Mixed (its values ['a', 2] are not all str or all int)"),
        (Flags, "(its values [True] are not all str or all int)"),
        (Literal["a", 1], "Literal values must all be of one type"),
        (list[bytes], "tool 't': parameter 'x': items has annotation bytes"),
        (Bare, "tool 't': parameter 'x': field 'x' of Bare has annotation object"),
        (Node, "tool 't': parameter 'x': field 'children' of Node: items: Node -> Node is recursive"),
    ],
)
def test_what_cannot_be_mapped_is_refused_naming_where(annotation: object, message: str) -> None:
    with pytest.raises(AerixError) as info:
        schema(annotation)
    assert info.value.kind == "options"
    assert info.value.message.startswith("tool 't': parameter 'x'")
    assert message in info.value.message
    if "recursive" not in message and "Literal" not in message:
        assert "use str, int, float, bool, a Literal, an Enum" in info.value.message


def test_a_model_with_a_keyword_aerix_cannot_take_is_refused_naming_it() -> None:
    class Tagged(pydantic.BaseModel):
        tags: set[str]

    with pytest.raises(AerixError) as info:
        schema(Tagged)
    assert "Tagged: unsupported JSON Schema keyword 'uniqueItems' at schema.properties.tags.uniqueItems" in (
        info.value.message
    )


def test_aerix_never_imports_pydantic_itself() -> None:
    code = textwrap.dedent(
        """
        import dataclasses, sys
        from aerix import tool

        @dataclasses.dataclass
        class P:
            x: int

        @tool
        def f(p: P, q: list[int]) -> str:
            '''F.'''
            return ""

        print("pydantic" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@dataclasses.dataclass
class Documented:
    """A record documented in reST.

    :ivar when: The day, as YYYY-MM-DD
    :ivar where: Overridden by Annotated
    """

    when: str
    where: Annotated[str, "The place"] = ""


def test_field_descriptions_come_from_annotated_or_the_class_docstring() -> None:
    props = schema(Documented)["properties"]
    assert props["when"]["description"] == "The day, as YYYY-MM-DD"
    assert props["where"]["description"] == "The place"


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    meow: int


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    bark: str


class Owner(pydantic.BaseModel):
    pet: Cat | Dog = pydantic.Field(discriminator="kind")


def test_a_pydantic_discriminated_union_is_taken_its_tags_doing_the_check() -> None:
    """Pydantic writes OpenAPI's `discriminator` beside the choices: a hint the choices'
    `const` tags already enforce, so it is left out, not refused."""
    schema, convert = schema_of(Owner, where="t")
    assert "discriminator" not in json.dumps(schema)
    check = compile_validator(schema)
    assert check({"pet": {"kind": "dog", "bark": "woof"}}) is None
    assert check({"pet": {"kind": "dog", "meow": 1}}) == "input.pet: missing required field 'bark'"
    assert convert({"pet": {"kind": "dog", "bark": "woof"}}) == Owner(pet=Dog(kind="dog", bark="woof"))
