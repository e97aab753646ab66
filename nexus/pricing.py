"""What a model call costs: a price table by model-name prefix, overridable, in micro-dollars.

Money is exact: prices are `Decimal` dollars per million tokens, so a token costs the price
in micro-dollars, and a turn's cost is rounded half-up to a whole micro-dollar once. A model
the table does not know is *unpriced* (cost `None`), never free; only `scripted` is free.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from nexus.ledger.records import TokenUsage

# Anthropic's list prices (USD per million tokens) as of this table's version. A 5-minute
# cache write costs 1.25 x input and a cache read 0.1 x input (their published multipliers).
BUILTIN_PRICE_VERSION = "anthropic-2025-11"
CACHE_WRITE_MULTIPLIER = Decimal("1.25")
CACHE_READ_MULTIPLIER = Decimal("0.1")
KINDS = ("input", "output", "cache_write", "cache_read")


class PriceTableError(ValueError):
    """An override file that cannot be used; the message says which entry and why."""


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens of each kind."""

    input: Decimal
    output: Decimal
    cache_write: Decimal
    cache_read: Decimal

    @classmethod
    def of(cls, input: str, output: str) -> ModelPrice:
        """Input and output prices; the cache prices by Anthropic's multipliers."""
        dollars = Decimal(input)
        return cls(
            dollars,
            Decimal(output),
            dollars * CACHE_WRITE_MULTIPLIER,
            dollars * CACHE_READ_MULTIPLIER,
        )


# Longest matching prefix wins. Families are priced at their newest model's price; the
# older models whose price differs are listed by their own (longer) prefix.
BUILTIN_PRICES: dict[str, ModelPrice] = {
    "claude-opus-4": ModelPrice.of("5", "25"),  # Opus 4.5 and later
    "claude-opus-4-0": ModelPrice.of("15", "75"),
    "claude-opus-4-1": ModelPrice.of("15", "75"),
    "claude-opus-4-2025": ModelPrice.of("15", "75"),  # claude-opus-4-20250514 (Opus 4)
    "claude-sonnet-4": ModelPrice.of("3", "15"),
    "claude-haiku-4": ModelPrice.of("1", "5"),
    "claude-3-7-sonnet": ModelPrice.of("3", "15"),
    "claude-3-5-sonnet": ModelPrice.of("3", "15"),
    "claude-3-5-haiku": ModelPrice.of("0.80", "4"),
    "claude-3-opus": ModelPrice.of("15", "75"),
    "claude-3-haiku": ModelPrice.of("0.25", "1.25"),
    "scripted": ModelPrice.of("0", "0"),  # the offline built-in model costs nothing
}


@dataclass(frozen=True)
class Cost:
    """A call's cost under a price table: `micros` is None when the model has no price."""

    micros: int | None
    price_version: str

    @property
    def unpriced(self) -> bool:
        return self.micros is None


@dataclass(frozen=True)
class PriceTable:
    prices: dict[str, ModelPrice]
    version: str = BUILTIN_PRICE_VERSION

    def price_of(self, model: str) -> ModelPrice | None:
        matches = [prefix for prefix in self.prices if model.startswith(prefix)]
        return self.prices[max(matches, key=len)] if matches else None

    def cost(self, model: str | None, usage: TokenUsage) -> Cost:
        """What `usage` of `model` costs, in whole micro-dollars (half-up). No tokens cost
        nothing whatever the model; tokens of an unknown model are unpriced."""
        if usage.total == 0:
            return Cost(0, self.version)
        price = self.price_of(model) if model is not None else None
        if price is None:
            return Cost(None, self.version)
        # $ per million tokens = micro-dollars per token.
        exact = (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_write_tokens * price.cache_write
            + usage.cache_read_tokens * price.cache_read
        )
        return Cost(int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP)), self.version)


BUILTIN = PriceTable(dict(BUILTIN_PRICES))


def load_prices(path: str | None) -> PriceTable:
    """The built-in table, with the overrides in `path` (NEXUS_PRICES, YAML or JSON) merged
    over it when given."""
    if path is None:
        return BUILTIN
    file = Path(path)
    if not file.is_file():
        raise PriceTableError(f"NEXUS_PRICES={path}: no such file")
    return parse_prices(file.read_text(), source=str(file))


def parse_prices(text: str, *, source: str = "prices") -> PriceTable:
    try:
        document = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError as error:
        raise PriceTableError(f"{source}: not valid YAML or JSON: {error}") from error
    return with_overrides(document, source=source)


def with_overrides(document: Any, base: PriceTable = BUILTIN, *, source: str = "") -> PriceTable:
    """`base` with the entries of an override document merged over it (an entry replaces
    the prefix it names, or adds one). The document is
    `{"version"?: str, "models": {prefix: {input, output, cache_write?, cache_read?}}}`;
    prices are USD per million tokens, cache prices default to Anthropic's multipliers.
    Without a `version`, the version is the base's plus a digest of the overrides, so turns
    priced by different tables never share a version."""
    where = f"{source}: " if source else ""
    if not isinstance(document, dict):
        raise PriceTableError(f"{where}expected a mapping with 'models', got {_kind(document)}")
    unknown = set(document) - {"version", "models"}
    if unknown:
        raise PriceTableError(f"{where}unknown keys {sorted(unknown)} (allowed: version, models)")
    models = document.get("models")
    if not isinstance(models, dict) or not models:
        raise PriceTableError(f"{where}'models' must map model-name prefixes to prices")
    merged = dict(base.prices)
    for prefix, entry in models.items():
        if not isinstance(prefix, str) or not prefix:
            raise PriceTableError(f"{where}a model prefix must be a non-empty string: {prefix!r}")
        merged[prefix] = _price(entry, f"{where}models.{prefix}")
    version = document.get("version")
    if version is None:
        digest = hashlib.sha256(json.dumps(models, sort_keys=True, default=str).encode())
        version = f"{base.version}+{digest.hexdigest()[:10]}"
    elif not isinstance(version, str) or not version.strip() or len(version) > 64:
        raise PriceTableError(f"{where}'version' must be a string of 1 to 64 characters")
    return PriceTable(merged, version)


def _price(entry: Any, where: str) -> ModelPrice:
    if not isinstance(entry, dict):
        raise PriceTableError(f"{where}: expected a mapping of prices, got {_kind(entry)}")
    unknown = set(entry) - set(KINDS)
    if unknown:
        raise PriceTableError(f"{where}: unknown keys {sorted(unknown)} (allowed: {list(KINDS)})")
    missing = [kind for kind in ("input", "output") if kind not in entry]
    if missing:
        raise PriceTableError(f"{where}: missing {missing} (USD per million tokens)")
    values = {kind: _dollars(entry[kind], f"{where}.{kind}") for kind in entry}
    return ModelPrice(
        input=values["input"],
        output=values["output"],
        cache_write=values.get("cache_write", values["input"] * CACHE_WRITE_MULTIPLIER),
        cache_read=values.get("cache_read", values["input"] * CACHE_READ_MULTIPLIER),
    )


def _dollars(value: Any, where: str) -> Decimal:
    # str() first: a YAML 0.3 is a float, and Decimal(0.3) is not 0.3.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PriceTableError(f"{where}: expected a number of USD per million tokens")
    try:
        dollars = Decimal(str(value))
    except InvalidOperation:
        raise PriceTableError(f"{where}: {value!r} is not a number") from None
    if not dollars.is_finite() or dollars < 0:
        raise PriceTableError(f"{where}: a price must be a finite number >= 0, got {value!r}")
    return dollars


def _kind(value: Any) -> str:
    return type(value).__name__


def usd(micros: int) -> str:
    """Micro-dollars as an exact dollar amount, `"0.015000"`."""
    return f"{Decimal(micros).scaleb(-6):.6f}"
