"""The price table: prefixes, cache multipliers, exact micro-dollars, overrides, unpriced."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from nexus.ledger.records import TokenUsage
from nexus.pricing import (
    BUILTIN,
    BUILTIN_PRICE_VERSION,
    PriceTableError,
    load_prices,
    parse_prices,
)


def _usage(i: int = 0, o: int = 0, r: int = 0, w: int = 0) -> TokenUsage:
    return TokenUsage(input_tokens=i, output_tokens=o, cache_read_tokens=r, cache_write_tokens=w)


@pytest.mark.parametrize(
    ("model", "input_", "output"),
    [
        ("claude-sonnet-4-5", "3", "15"),
        ("claude-sonnet-4-5-20250929", "3", "15"),
        ("claude-sonnet-4-6", "3", "15"),
        ("claude-haiku-4-5", "1", "5"),
        ("claude-opus-4-5-20251101", "5", "25"),
        ("claude-opus-4-1-20250805", "15", "75"),
        ("claude-opus-4-20250514", "15", "75"),
        ("claude-3-5-haiku-latest", "0.80", "4"),
    ],
)
def test_models_match_their_family_by_the_longest_prefix(
    model: str, input_: str, output: str
) -> None:
    price = BUILTIN.price_of(model)
    assert price is not None
    assert (price.input, price.output) == (Decimal(input_), Decimal(output))
    # Cache writes (5 minutes) cost 1.25 x input, cache reads 0.1 x input.
    assert price.cache_write == Decimal(input_) * Decimal("1.25")
    assert price.cache_read == Decimal(input_) * Decimal("0.1")


def test_a_cost_is_exact_micro_dollars_with_cache_priced_apart() -> None:
    # Sonnet: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million tokens.
    cost = BUILTIN.cost("claude-sonnet-4-5", _usage(i=1_000, o=200, r=5_000, w=2_000))
    assert cost.micros == 1_000 * 3 + 200 * 15 + 5_000 * 0.3 + 2_000 * 3.75 == 15_000
    assert cost.price_version == BUILTIN_PRICE_VERSION and not cost.unpriced


def test_fractions_of_a_micro_dollar_round_half_up_once_per_call() -> None:
    # Haiku cache reads cost $0.10 per million: 0.1 micro-dollar each.
    assert BUILTIN.cost("claude-haiku-4-5", _usage(r=4)).micros == 0  # 0.4
    assert BUILTIN.cost("claude-haiku-4-5", _usage(r=5)).micros == 1  # 0.5
    assert BUILTIN.cost("claude-haiku-4-5", _usage(i=1, r=14)).micros == 2  # 1 + 1.4


def test_an_unknown_model_is_unpriced_not_free_and_scripted_is_free() -> None:
    unknown = BUILTIN.cost("gpt-9", _usage(i=100, o=10))
    assert unknown.micros is None and unknown.unpriced
    assert BUILTIN.cost(None, _usage(i=1)).unpriced
    assert BUILTIN.cost("scripted", _usage(i=10_000, o=500)).micros == 0
    # No tokens cost nothing, whatever the model (a lost worker's attempt has none).
    assert BUILTIN.cost("gpt-9", _usage()).micros == 0


def test_overrides_merge_over_the_builtin_table_with_their_own_version() -> None:
    table = parse_prices(
        "version: acme-2026-11\n"
        "models:\n"
        "  claude-sonnet-4-5: {input: 2.5, output: 12, cache_read: 0.2}\n"
        "  local-llama: {input: 0, output: 0.5}\n"
    )
    assert table.version == "acme-2026-11"
    sonnet = table.price_of("claude-sonnet-4-5-20250929")
    assert sonnet is not None
    assert (sonnet.input, sonnet.cache_read, sonnet.cache_write) == (
        Decimal("2.5"),
        Decimal("0.2"),
        Decimal("3.125"),
    )
    # Other Sonnets still match the built-in family price.
    assert table.cost("claude-sonnet-4-6", _usage(i=1)).micros == 3
    assert table.cost("local-llama-70b", _usage(i=100, o=100)).micros == 50


def test_json_overrides_without_a_version_get_one_from_their_content() -> None:
    first = parse_prices('{"models": {"x-model": {"input": 1, "output": 2}}}')
    second = parse_prices('{"models": {"x-model": {"input": 1, "output": 3}}}')
    assert first.version.startswith(BUILTIN_PRICE_VERSION + "+")
    assert first.version != second.version


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("models: [1, 2]", "'models' must map"),
        ("[]", "expected a mapping"),
        ("models: {x: {input: 1}}", "models.x: missing ['output']"),
        ("models: {x: {input: -1, output: 1}}", "models.x.input: a price must be"),
        ("models: {x: {input: abc, output: 1}}", "models.x.input: 'abc' is not a number"),
        ("models: {x: {input: 1, output: 1, cache_hour: 2}}", "unknown keys ['cache_hour']"),
        ("prices: {}", "unknown keys ['prices']"),
        ("models: {x: {input: 1, output: .nan}}", "finite number"),
        ("models: {x: [", "not valid YAML or JSON"),
    ],
)
def test_a_bad_override_file_is_refused_saying_where(text: str, says: str) -> None:
    with pytest.raises(PriceTableError, match=r"^prices\.yaml: ") as raised:
        parse_prices(text, source="prices.yaml")
    assert says in str(raised.value)


def test_load_prices_reads_the_file_or_keeps_the_builtin_table(tmp_path: Path) -> None:
    assert load_prices(None) is BUILTIN
    with pytest.raises(PriceTableError, match=r"NEXUS_PRICES=.*no such file"):
        load_prices(str(tmp_path / "missing.yaml"))
    file = tmp_path / "prices.yaml"
    file.write_text("models: {claude-haiku-4: {input: 0.9, output: 4.5}}\n")
    assert load_prices(str(file)).cost("claude-haiku-4-5", _usage(o=2)).micros == 9


def test_doctor_says_whether_the_prices_load_and_price_the_default_model(tmp_path: Path) -> None:
    from nexus.doctor import check_prices
    from nexus.settings import Settings

    assert check_prices(Settings(model="claude-sonnet-4-5")).status == "ok"
    unknown = check_prices(Settings(model="local-llm"))
    assert unknown.status == "warn" and "local-llm has no price" in unknown.detail
    file = tmp_path / "prices.yaml"
    file.write_text("models: {local-llm: {input: 0.5, output: 1}}\n")
    assert check_prices(Settings(model="local-llm", prices=str(file))).status == "ok"
    file.write_text("models: {local-llm: {input: free, output: 1}}\n")
    broken = check_prices(Settings(model="local-llm", prices=str(file)))
    assert broken.status == "fail" and "models.local-llm.input: 'free' is not a number" in (
        broken.detail
    )


def test_a_worker_with_a_bad_price_file_does_not_start(tmp_path: Path) -> None:
    from nexus.bootstrap import bootstrap_worker
    from nexus.settings import Settings

    file = tmp_path / "prices.json"
    file.write_text('{"models": {"local-llm": {"input": 1}}}')
    with pytest.raises(PriceTableError, match=r"models\.local-llm: missing \['output'\]"):
        bootstrap_worker(Settings(database_url=f"sqlite:///{tmp_path}/x.db", prices=str(file)))
    file.write_text('{"models": {"local-llm": {"input": 1, "output": 2}}}')
    graph = bootstrap_worker(Settings(database_url=f"sqlite:///{tmp_path}/x.db", prices=str(file)))
    try:
        assert graph.turns.prices.cost("local-llm-7b", TokenUsage(output_tokens=3)).micros == 6
    finally:
        graph.close()
