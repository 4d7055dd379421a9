"""Reading numbers and booleans that a model sent as strings (lax argument conversion)."""

from __future__ import annotations

import math
import re
from typing import TypeVar

T = TypeVar("T")

# A JSON number, optionally signed with "+" and surrounded by spaces: nothing else is read as a
# number ("1_000", "0x10", "nan", "1,5" stay strings and are refused by the scalar hooks).
_NUMBER = re.compile(r"[ \t\r\n]*([+-]?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][+-]?[0-9]+)?[ \t\r\n]*")


def number(text: str, otherwise: T) -> int | float | T:
    """The number ``text`` spells (an int when it has no fraction or exponent), else
    ``otherwise``."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        return otherwise
    whole, fraction, exponent = match.groups()
    if fraction is None and exponent is None:
        try:
            return int(whole)
        except ValueError:  # more digits than Python converts (sys.set_int_max_str_digits)
            return otherwise
    value = float(whole + (fraction or "") + (exponent or ""))
    return value if math.isfinite(value) else otherwise


def boolean(text: str, otherwise: T) -> bool | T:
    """``True``/``False`` for ``"true"``/``"false"`` (any case, spaces around), else
    ``otherwise``."""
    word = text.strip(" \t\r\n").lower()
    if word == "true":
        return True
    if word == "false":
        return False
    return otherwise
