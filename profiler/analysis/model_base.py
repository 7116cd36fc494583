"""The pieces every typed report model is made of (the host report, analysis/model.py; the job
report): a figure field that carries its unit and provenance, a note with a code, and the one
conversion of a model to its JSON form and back.

    @dataclass(frozen=True)
    class Run(Model):
        wall_s: float | None = figure("s", MEASURED)
        checkpoints: int = plain()

    Run(wall_s=12.0, checkpoints=2).to_jsonable()   # {"wall_s": 12.0, "checkpoints": 2}

Provenance (docs/report-format.md): measured, read from a counter or sensor; derived, computed from
measured values by a stated rule; estimated, from a model. An energy entry carries its own (the
worst of its sources'): PER_ENTRY.

JSON (RFC 8259) has no NaN or infinity: they are written as null (the one NaN rule, ckprof.jsonsafe).
A field holding ABSENT is left out of the JSON object (a key only some rows have, e.g. a load's
restore figures); a field whose metadata says `json_name` is written under that name.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from ckprof import jsonsafe

MEASURED, DERIVED, ESTIMATED = "measured", "derived", "estimated"
PER_ENTRY = "per entry"  # an energy entry's own provenance (its `provenance` key)
WORST = "worst of the components'"  # a sum of energy entries: the worst of theirs


class _Absent:
    """A key left out of the JSON object (not null: absent)."""

    _it: ClassVar[_Absent | None] = None

    def __new__(cls):
        if cls._it is None:
            cls._it = super().__new__(cls)
        return cls._it

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):  # pickled (a process pool, Dask) and back: still the one ABSENT
        return (_Absent, ())


ABSENT: Any = _Absent()


def figure(unit: str, provenance: str, doc: str = "", *, default: Any = None, absent: bool = False) -> Any:
    """A field holding a number (or a map of numbers) in `unit`, of `provenance`; `doc` says what
    it is where the name does not. absent=True: left out of the JSON until set (ABSENT)."""
    return dataclasses.field(
        default=ABSENT if absent else default,
        metadata={"unit": unit, "provenance": provenance, "doc": doc},
    )


def plain(doc: str = "", *, default: Any = None, absent: bool = False, factory=None) -> Any:
    """A field that is no figure (an id, a path, a verdict, a text): no unit, no provenance."""
    meta = {"doc": doc}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=ABSENT if absent else default, metadata=meta)


def unit_of(f: dataclasses.Field) -> str | None:
    return f.metadata.get("unit")


def provenance_of(f: dataclasses.Field) -> str | None:
    return f.metadata.get("provenance")


@dataclass(frozen=True)
class Note:
    """What could not be measured, or what a figure needs said beside it: a stable `code` that
    tests and programs match, the words for people (`text`), and what it is about (`subject`: a
    checkpoint's id, a device, or None for the whole recording). In the JSON a note is its text."""

    code: str
    text: str
    subject: str | None = None

    def to_jsonable(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def jsonable(o: Any) -> Any:
    """A model (or anything in it) as plain JSON values: dataclasses → objects in field order
    (ABSENT fields left out), tuples → lists, numpy scalars → Python's, NaN/inf → null."""
    if o is None or isinstance(o, (str, bool, int)):
        return o
    if isinstance(o, float):
        return jsonsafe.json_float(o)
    if hasattr(o, "to_jsonable") and not isinstance(o, type):
        return jsonable(o.to_jsonable())
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {
            f.metadata.get("json_name", f.name): jsonable(v)
            for f in dataclasses.fields(o)
            if (v := getattr(o, f.name)) is not ABSENT
        }
    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items() if v is not ABSENT}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if hasattr(o, "item"):  # numpy scalars
        return jsonable(o.item())
    return o


def to_json(o: Any) -> str:
    """The JSON text of a model (or a plain dict): indented, standard (no NaN), newline-ended."""
    return jsonsafe.to_json(jsonable(o))


class Model:
    """Base of a report model's dataclasses: `to_jsonable()` (its JSON form) and `from_jsonable()`
    (a model from that form, e.g. a host's report inside a job's JSON)."""

    def to_jsonable(self) -> dict:
        return {
            f.metadata.get("json_name", f.name): jsonable(v)
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if (v := getattr(self, f.name)) is not ABSENT
        }

    @classmethod
    def from_jsonable(cls, d: dict):
        """The model from its JSON form; a key the form lacks is ABSENT (absent fields) or the
        field's default; a key the model does not know is refused (KeyError), so nothing is lost."""
        if isinstance(d, cls):
            return d
        hints = _hints(cls)
        kw = {}
        names = set()
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            key = f.metadata.get("json_name", f.name)
            names.add(key)
            if key in d:
                kw[f.name] = _parse(hints[f.name], d[key])
        unknown = set(d) - names
        if unknown:
            raise KeyError(f"{cls.__name__}: unknown key(s) {sorted(unknown)}")
        return cls(**kw)


@cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _parse(hint, v):
    """A JSON value as the type the field's annotation names (models nested in lists/dicts)."""
    if v is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(hint) if isinstance(a, type) and issubclass(a, Model)]
        if models and isinstance(v, dict):
            return models[0].from_jsonable(v)
        others = [a for a in typing.get_args(hint) if a is not type(None)]
        return _parse(others[0], v) if len(others) == 1 else v
    if isinstance(hint, type) and issubclass(hint, Model):
        return hint.from_jsonable(v) if isinstance(v, dict) else v
    if hint is Note:  # in the JSON a note is its text alone: read back, its code is not known ("")
        return v if isinstance(v, Note) else Note(code="", text=v) if isinstance(v, str) else Note(**v)
    if origin in (list, tuple):
        (arg, *_) = typing.get_args(hint) or (Any,)
        return [_parse(arg, x) for x in v] if isinstance(v, list) else v
    if origin is dict:
        _, arg = typing.get_args(hint) or (str, Any)
        return {k: _parse(arg, x) for k, x in v.items()} if isinstance(v, dict) else v
    return v


def field_table(cls, prefix: str = "") -> dict[str, dict[str, str]]:
    """`path → {unit, provenance}` of every figure of a model and the models inside it, paths as
    docs/report-format.md writes them: `checkpoints[].bytes_app`, `checkpoints[].devices.*.write_bytes`."""
    out: dict[str, dict[str, str]] = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        path = prefix + f.metadata.get("json_name", f.name)
        if unit_of(f) is not None:
            out[path] = {"unit": unit_of(f), "provenance": provenance_of(f)}
        inner, suffix = _inner_model(hints[f.name])
        if inner is not None:
            out.update(field_table(inner, path + suffix + "."))
    return out


def _inner_model(hint) -> tuple[type | None, str]:
    """The model a field holds (directly, in a list, or as a dict's values) and its path suffix."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for a in typing.get_args(hint):
            m, s = _inner_model(a)
            if m is not None:
                return m, s
        return None, ""
    if isinstance(hint, type) and issubclass(hint, Model):
        return hint, ""
    if origin in (list, tuple):
        m, s = _inner_model((typing.get_args(hint) or (Any,))[0])
        return m, "[]" + s
    if origin is dict:
        m, s = _inner_model((typing.get_args(hint) or (str, Any))[-1])
        return m, ".*" + s
    return None, ""


def json_schema(cls) -> dict:
    """A JSON Schema (2020-12) of a model's JSON form: each object's keys and their types, each
    figure's unit and provenance in its description. An ABSENT field is not required; any field
    may be null where its annotation allows None."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": cls.__name__, **_object_schema(cls)}


def _object_schema(cls) -> dict:
    hints = _hints(cls)
    props, required = {}, []
    for f in dataclasses.fields(cls):
        key = f.metadata.get("json_name", f.name)
        s = _type_schema(hints[f.name])
        words = [w for w in (f.metadata.get("doc"), unit_of(f) and f"unit: {unit_of(f)}") if w]
        if provenance_of(f):
            words.append(f"provenance: {provenance_of(f)}")
        if words:
            s = {**s, "description": "; ".join(words)}
        props[key] = s
        if f.default is not ABSENT:
            required.append(key)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _type_schema(hint) -> dict:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(a) for a in typing.get_args(hint)]}
    if hint is type(None):
        return {"type": "null"}
    if hint is Any:
        return {}
    if hint is Note:
        return {"type": "string"}
    if isinstance(hint, type) and issubclass(hint, Model):
        return _object_schema(hint)
    if origin in (list, tuple):
        (arg, *_) = typing.get_args(hint) or (Any,)
        return {"type": "array", "items": _type_schema(arg)}
    if origin is dict:
        _, arg = typing.get_args(hint) or (str, Any)
        return {"type": "object", "additionalProperties": _type_schema(arg)}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if hint in simple:
        return {"type": ["number"] if hint is float else simple[hint]}
    return {}
