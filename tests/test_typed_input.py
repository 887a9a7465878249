"""Typed input: pydantic's errors read as prbench's lines; the option text grammar before them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import pytest

from prbench.harness.sweep_file import (
    CONDITION_KEYS,
    ESTIMATE_KEYS,
    RESOURCE_KEYS,
    SCORER_KEYS,
    SWEEP_KEYS,
    SweepFileError,
    _sweep_model,
    load_sweep,
)
from prbench.options import OptionsError, parse_options
from prbench.typed_input import first_error, place


def _error(kind: str, *loc: str | int) -> dict:
    return {"type": kind, "loc": loc, "msg": kind, "input": None}


def test_first_error_puts_an_unknown_key_before_the_fields_next_to_it() -> None:
    field = _error("int_type", "scorers", 0, "estimate", "params_b")
    inner = _error("extra_forbidden", "scorers", 0, "estimat")
    outer = _error("extra_forbidden", "limitt")
    elsewhere = _error("extra_forbidden", "conditions", 0, "x")
    assert first_error([field, inner, elsewhere]) is inner
    assert first_error([field, inner, outer]) is outer  # the outermost mapping's keys first
    assert first_error([field, elsewhere]) is field  # an unknown key of another entry waits
    # a union's None arm never says what was wrong
    assert first_error([_error("none_required", "o"), _error("int_type", "o")])["type"] == \
        "int_type"


def test_place_writes_indices_and_fields_as_prbench_does() -> None:
    assert place(("items", 0, "profile", 2, "text")) == "items[0].profile[2].text"
    assert place(()) == ""
    assert place(("list[int]", 1, "x"), indices_only=True) == "[1]"


@dataclasses.dataclass(frozen=True)
class Named:
    """Options named like pydantic's own attributes, and a union read left to right."""

    json: str = ""
    model_config: int = 0
    copy: bool = False
    either: int | str = 0
    mode: Literal["a", "b"] = "a"


def test_options_may_have_any_name_and_unions_take_the_first_type_that_fits() -> None:
    got = parse_options(Named, {"json": "j", "model_config": "2", "copy": "yes", "either": "7"},
                        component="scorer 'n'")
    assert got == Named(json="j", model_config=2, copy=True, either=7)
    assert parse_options(Named, {"either": "seven"}, component="c").either == "seven"


@pytest.mark.parametrize(("raw", "message"), [
    # pydantic's lax mode would take these; the option text grammar does not
    ({"copy": "t"}, "option 'copy': expected true/false, got 't'"),
    ({"model_config": "3.0"}, "option 'model_config': expected an integer, got '3.0'"),
    ({"model_config": True}, "option 'model_config': expected an integer, got True"),
    ({"json": True}, "option 'json': expected a string, got True"),
    ({"mode": "c"}, "option 'mode': 'c' is not one of 'a', 'b'"),
    ({"jsno": "x"}, "unknown option 'jsno' (did you mean 'json'?); its options are: copy, "
                    "either, json, mode, model_config"),
])
def test_option_text_grammar_runs_before_the_strict_check(raw: dict, message: str) -> None:
    with pytest.raises(OptionsError) as exc:
        parse_options(Named, raw, component="scorer 'n'")
    assert str(exc.value) == f"scorer 'n': {message}"


def test_the_sweep_model_has_the_keys_its_messages_list() -> None:
    """The keys the model takes are the keys an unknown-key error lists, in the same order."""
    model = _sweep_model()
    fields = model.model_fields
    assert tuple(fields) == SWEEP_KEYS
    scorer = fields["scorers"].annotation.__args__[0]
    condition = fields["conditions"].annotation.__args__[0]
    assert tuple(scorer.model_fields) == SCORER_KEYS
    assert tuple(condition.model_fields) == CONDITION_KEYS
    estimate = scorer.model_fields["estimate"].annotation.__args__[0]
    assert tuple(estimate.model_fields) == ESTIMATE_KEYS
    resources = fields["resources"].annotation.__args__[0]
    assert tuple(resources.model_fields) == RESOURCE_KEYS


@pytest.mark.parametrize(("text", "message"), [
    ("scorers: [{model_args: {scorer: length}, estimate: {params_b: null}}]\n",
     "scorers[0].estimate.params_b must be a number"),
    ("scorers: [{model_args: {scorer: length}, stand_in: 5}]\n",
     "scorers[0].stand_in must be text"),
    ("scorers: [{model_args: {scorer: length}, estimat: {}}]\n",
     "scorers[0]: unknown key 'estimat' (did you mean 'estimate'?); allowed: name, model_args, "
     "estimate, stand_in, resources"),
    ("scorers: [3]\n", "scorers[0] must be a mapping, got int"),
    ("scorers: [{model_args: {scorer: length}}]\nlimit: true\n",
     "limit must be a positive number, got True"),
])
def test_sweep_file_errors_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(text + "conditions: [{tasks: x}]\n", encoding="utf-8")
    with pytest.raises(SweepFileError) as exc:
        load_sweep(path)
    assert str(exc.value) == f"{path}: {message}"
