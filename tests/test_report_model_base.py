"""The typed report model's base (ckprof.analysis.model_base): figures carry unit and provenance,
a model's JSON form keeps field order and leaves ABSENT keys out, NaN is null, and a model comes
back from its JSON form (a host's report inside a job's)."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, dataclass

import numpy as np
import pytest

from ckprof.analysis.model_base import (
    ABSENT,
    DERIVED,
    MEASURED,
    Model,
    Note,
    field_table,
    figure,
    jsonable,
    plain,
    to_json,
)


@dataclass(frozen=True)
class Dev(Model):
    write_bytes: float | None = figure("B", DERIVED)


@dataclass(frozen=True)
class Row(Model):
    restore_s: float | None = figure("s", MEASURED, absent=True)
    id: str = plain()
    wall_s: float | None = figure("s", MEASURED)
    devices: dict[str, Dev] = plain(factory=dict)
    parts: list[Dev] | None = plain()
    notes: list[Note] = plain(factory=list)


def test_json_form_keeps_order_leaves_absent_out_and_writes_nan_as_null():
    r = Row(id="a", wall_s=float("nan"), devices={"sda": Dev(np.float64(3.0))}, notes=[Note("x_code", "words")])
    assert list(r.to_jsonable()) == ["id", "wall_s", "devices", "parts", "notes"]  # restore_s ABSENT
    assert json.loads(to_json(r)) == {
        "id": "a",
        "wall_s": None,
        "devices": {"sda": {"write_bytes": 3.0}},
        "parts": None,
        "notes": ["words"],
    }
    assert list(Row(restore_s=1.0, id="b").to_jsonable())[0] == "restore_s"
    assert jsonable({"k": [float("inf"), (1, 2)]}) == {"k": [None, [1, 2]]}


def test_a_model_comes_back_from_its_json_form_and_unknown_keys_are_refused():
    r = Row(restore_s=2.0, id="a", wall_s=1.5, devices={"sda": Dev(3.0)}, parts=[Dev(1.0)])
    back = Row.from_jsonable(json.loads(to_json(r)))
    assert back.devices["sda"].write_bytes == 3.0 and back.parts == [Dev(1.0)] and back.restore_s == 2.0
    assert Row.from_jsonable({"id": "b"}).restore_s is ABSENT
    with pytest.raises(KeyError, match="surprise"):
        Row.from_jsonable({"id": "c", "surprise": 1})
    with pytest.raises(FrozenInstanceError):
        r.id = "z"  # type: ignore[misc]


def test_field_table_names_every_figure_with_unit_and_provenance():
    assert field_table(Row) == {
        "restore_s": {"unit": "s", "provenance": MEASURED},
        "wall_s": {"unit": "s", "provenance": MEASURED},
        "devices.*.write_bytes": {"unit": "B", "provenance": DERIVED},
        "parts[].write_bytes": {"unit": "B", "provenance": DERIVED},
    }
