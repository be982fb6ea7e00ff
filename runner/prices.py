"""Dollars for tokens: the one lookup of a model's prices, from a maintained price library, pinned.

Prices come from ``genai-prices`` (pydantic's), at the version pyproject.toml pins, from the data it ships: never
fetched at run time (its ``UpdatePrices`` is never started), so a figure is the same on every machine with this
``ispm``. :data:`PRICES_LABEL` names the library, its version and its data's date, and every figure is shown
beside it. A model the library does not know is not guessed at: it keeps its tokens and gets a note instead of
dollars.

Cost is derived, never stored: the v1 record keeps tokens only (:mod:`runner.record.cost` prices them).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Self

from pydantic import BaseModel, ConfigDict

from runner.call import Usage

PRICE_LIBRARY_VERSION = "0.2.3"
"""The ``genai-prices`` version pyproject.toml pins (a test holds the installed one to it)."""
PRICE_DATA_DATE = "2026-11"
"""When that version's price data was published: the date shown beside every figure."""
PRICES_LABEL = f"genai-prices {PRICE_LIBRARY_VERSION}, price data of {PRICE_DATA_DATE}"
"""What every dollar figure is shown beside."""


class Cost(BaseModel):
    """Dollars of some tokens, and what could not be priced: a sum of many calls' or models' costs (``a + b``)."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")

    usd: float | None = None
    """US dollars of the tokens that could be priced; ``None`` when none could (tokens only)."""
    unpriced: tuple[str, ...] = ()
    """Why some tokens have no price, one note per cause (a model the price library does not know, calls that
    reported no usage); empty when every token is priced."""

    def __add__(self, other: Cost) -> Self:
        """Both costs together: dollars added, notes kept once each in order. Nothing but free calls (no tokens)
        beside unpriced tokens is tokens only, not $0."""
        usd = None if self.usd is None and other.usd is None else (self.usd or 0.0) + (other.usd or 0.0)
        notes = tuple(dict.fromkeys(self.unpriced + other.unpriced))
        if usd == 0 and notes:
            usd = None
        return type(self)(usd=usd, unpriced=notes)

    @property
    def complete(self) -> bool:
        """Whether every token is priced."""
        return self.usd is not None and not self.unpriced

    def text(self) -> str:
        """``$0.0123``; ``$0.0123 (partial)`` when some tokens have no price; ``tokens only`` when none has."""
        if self.usd is None:
            return "tokens only"
        return usd_text(self.usd) + ("" if not self.unpriced else " (partial)")


def usd_text(usd: float) -> str:
    """Dollars to four significant figures, never in exponent form (``$0.0001234``, ``$12.35``)."""
    if usd == 0:
        return "$0"
    digits = max(2, 3 - int(f"{abs(usd):e}".split("e")[1]))
    return f"${usd:.{digits}f}"


_FREE = Cost(usd=0.0)


def price(alias: str | None, usage: Usage, at: datetime | None = None, returned_model: str | None = None) -> Cost:
    """The dollars of ``usage`` on the model ``alias`` (``provider/model``) at the prices in force at ``at``.

    ``returned_model`` (the id the provider answered with) is tried when the alias's own model name is not known.
    No tokens cost nothing, whatever the model; a model the library does not know is a note, not an error.
    """
    if usage.input_tokens == 0 and usage.output_tokens == 0:
        return _FREE
    provider, _, model = (alias or "").partition("/")
    if not provider or not model:
        return Cost(unpriced=(f"{alias or 'no model'}: not a provider/model alias, tokens only",))
    # Imported here: the price data is a large module, loaded only when something is priced.
    from genai_prices import Usage as LibraryUsage
    from genai_prices import calc_price

    counted = LibraryUsage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cached_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    when = at or datetime.now(UTC)
    for name in dict.fromkeys(n for n in (model, returned_model) if n):
        try:
            found = calc_price(counted, name, provider_id=provider, genai_request_timestamp=when)
        except LookupError:
            continue
        return Cost(usd=float(found.total_price))
    return Cost(unpriced=(f"{alias}: not in {PRICES_LABEL}, tokens only",))
