"""A typed answer: the agent answers with a Pydantic model, not text.

With `output=Trip`, the final turn is decoded under `Trip`'s JSON schema,
checked against it and handed back as a `Trip` instance (`answer.output`).
A final that fails the check is asked again, like any bad turn.

Run it:

    pip install 'aerix[llama]' pydantic
    python examples/typed_answer.py
"""

from pydantic import BaseModel, Field

import aerix
from aerix import Agent


class Trip(BaseModel):
    """A trip as the user describes it."""

    city: str = Field(description="The city the user travels to")
    nights: int = Field(ge=1, description="How many nights the user stays")


def main() -> None:
    agent = Agent(
        model=aerix.load("smollm2-instruct"),
        instructions="Read the user's trip and give it back as data.",
        output=Trip,
        generation={"temperature": 0},
    )
    answer = agent.ask_sync("I will spend 3 nights in Lisbon in May.")
    trip = answer.output
    print(repr(trip))
    print(f"{trip.city}: {trip.nights} nights, {trip.nights + 1} days")
    print(f"as JSON: {answer.text}")


if __name__ == "__main__":
    main()
