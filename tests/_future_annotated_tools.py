"""Tools defined in a module with string annotations (``from __future__ import annotations``).

Used by test_tools_function.py: every annotation here is a string that ``tool`` resolves in this
module's namespace when the tool is made.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Annotated, Literal

import attrs

from agentkit import tool


class Seat(enum.Enum):
    WINDOW = "window"
    AISLE = "aisle"


@attrs.define
class Traveller:
    """A person who travels.

    Attributes:
        name: the full name.
        age: age in years.
    """

    name: str
    age: int | None = None


@attrs.frozen
class Leg:
    origin: str
    destination: str
    stops: tuple[str, ...] = ()


@tool
def book_trip(
    traveller: Traveller,
    destination: Annotated[str, "where to go"],
    legs: list[Leg] | None = None,
    seat: Seat | None = None,
    mode: Literal["train", "plane"] = "train",
) -> dict[str, object]:
    """Book a trip.

    Args:
        traveller: who travels.
        legs: the legs of the journey, in order.
    """
    return {
        "traveller": traveller,
        "destination": destination,
        "legs": legs,
        "seat": seat,
        "mode": mode,
    }


@tool
def count_up(to: int, label: str | None = None) -> Iterator[str]:
    """Count from 1 to ``to``."""
    for number in range(1, to + 1):
        yield f"{label or ''}{number}"


@tool
def inspect_types(traveller: Traveller, legs: list[Leg], seat: Seat) -> list[str]:
    """Report the types the arguments were converted to."""
    return [
        type(traveller).__name__,
        type(legs[0]).__name__,
        type(legs[0].stops).__name__,
        repr(seat),
    ]
