"""The words a 422 uses for pydantic's error kinds (pure)."""

from __future__ import annotations

from nexus.api.validation import field_errors, field_name, plain, summary


def test_choices_are_listed_plainly() -> None:
    error = {"type": "enum", "loc": ("body", "mode"), "ctx": {"expected": "'a', 'b' or 'c'"}}
    assert plain(error) == "must be one of a, b, c"


def test_bounds_and_lengths_are_said_with_their_limits() -> None:
    assert plain({"type": "less_than_equal", "ctx": {"le": 10}}) == "must be at most 10"
    assert plain({"type": "string_too_short", "ctx": {"min_length": 3}}) == (
        "must be at least 3 characters"
    )
    assert plain({"type": "too_long", "ctx": {"max_length": 2}}) == "must be at most 2 items"


def test_an_unknown_kind_keeps_pydantics_words_about_the_field() -> None:
    assert plain({"type": "new_kind", "msg": "Input should be shiny"}) == "must be shiny"


def test_fields_are_named_as_a_caller_names_them() -> None:
    assert field_name(("body", "items", 0, "name")) == "items.0.name"
    assert field_name(("query", "limit")) == "limit (query)"
    assert field_name(("body",)) == "body"


def test_the_same_line_is_said_once_and_details_drop_the_input() -> None:
    error = {"type": "missing", "loc": ("body", "x"), "input": {"secret": 1}}
    assert summary([error, error]) == "x: is required"
    assert field_errors([error])[0].model_dump() == {
        "loc": "body.x",
        "type": "missing",
        "message": "is required",
    }
