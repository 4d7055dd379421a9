"""Words of a text and how much a shared word counts, for the stores without a search engine
(in memory, Redis): a memory matches a query when they share a word; rarer shared words
count more (inverse document frequency, as BM25 weighs them)."""

from __future__ import annotations

import math
import unicodedata

import regex

__all__ = ["MAX_QUERY_WORDS", "idf", "words"]

MAX_QUERY_WORDS = 64
"""How many distinct words of a query are looked up (the first ones)."""

_WORD = regex.compile(r"[\p{L}\p{N}]+")


def words(text: str) -> list[str]:
    """The distinct words of ``text``, lowercased, accents removed, in order of appearance."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    stripped = "".join(c for c in folded if not unicodedata.combining(c))
    return list(dict.fromkeys(_WORD.findall(stripped)))


def idf(total: int, having: int) -> float:
    """How much a word found in ``having`` of ``total`` memories counts (always > 0)."""
    return math.log(1.0 + (total - having + 0.5) / (having + 0.5))
