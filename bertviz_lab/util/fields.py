"""One validator for every configuration field (BERTConfig, TrainConfig, the YAML run config), so that a field's
type, bounds and default are written once and checked one way.

A `Field` states a setting: its type, default, bounds (`ge`/`gt`/`le`/`lt`, as pydantic spells them), allowed
choices and a one-line meaning. `check` tests a value against it and raises a one-line error naming the setting, the
value and what was expected, in one of two phrasings: "python" for the classes (`BERTConfig.hidden_size must be a
positive int, got str '768'.`) and "yaml" for the run config (`data.batch_size must be an integer, got 'big' (str).`).
`setting` makes a dataclass field whose default and check come from one Field.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from bertviz_lab.util.files import shown

MAX_INT = 2**63 - 1  # the largest size or id a tensor can hold (int64)
PHRASINGS = ("python", "yaml")


@dataclass(frozen=True)
class Field:
    """One setting: its type, default, allowed values or range, and a one-line meaning."""

    kind: type
    default: Any = None
    help: str = ""
    nullable: bool = False
    choices: tuple[str, ...] | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    alias_of: str | None = None  # a run config key that is another spelling of this one

    def type_name(self) -> str:
        """The type as YAML users read it ("int or null")."""
        name = {int: "int", float: "float", bool: "bool", str: "str"}[self.kind]
        return f"{name} or null" if self.nullable else name


def setting(field: Field, **metadata: Any) -> Any:
    """A dataclass field with `field`'s default, the Field kept in its metadata for `check_fields`."""
    return dataclasses.field(default=field.default, metadata={"field": field, **metadata})


def fields_of(cls: Any) -> dict[str, Field]:
    """The Fields of a dataclass's checked fields, by field name."""
    return {f.name: f.metadata["field"] for f in dataclasses.fields(cls) if "field" in f.metadata}


def check_fields(obj: Any, owner: str) -> None:
    """Check every Field of a dataclass instance (python phrasing, `owner.name` in the message)."""
    for name, field in fields_of(type(obj)).items():
        check(f"{owner}.{name}", field, getattr(obj, name))


def _number(value: float) -> str:
    """A bound as people write it: 0, 1, 1e-12."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _kind_words(field: Field) -> str:
    """What the value must be, in words ("a positive int", "a float in [0, 1)")."""
    kind, ge, gt, lt = field.kind, field.ge, field.gt, field.lt
    if kind is bool:
        words = "True or False"
    elif kind is str:
        words = "a string" if field.choices is None else f"one of {field.choices}"
    elif kind is int:
        by_bound: dict[float | None, str] = {1: "a positive int", 0: "a non-negative int"}
        words = by_bound.get(ge, "an int") if gt is None else "an int"
        if ge not in (0, 1, None):
            words += f" >= {ge}"
    elif ge is not None and lt is not None:
        words = f"a float in [{_number(ge)}, {_number(lt)})"
    elif ge is not None and field.le is not None:
        words = f"a float in [{_number(ge)}, {_number(field.le)}]"
    elif gt is not None and field.le is not None:
        words = f"a float in ({_number(gt)}, {_number(field.le)}]"
    elif gt == 0:
        words = "a positive finite float"
    elif ge == 0:
        words = "a finite float >= 0"
    elif ge is not None:
        words = f"a finite float >= {_number(ge)}"
    else:
        words = "a finite float"
    return f"None or {words}" if field.nullable else words


def _yaml_type(kind: type) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[kind]


def _has_type(kind: type, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind is int:
        return isinstance(value, int)
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _bound_broken(field: Field, value: Any) -> str | None:
    """The bound `value` breaks, as `>= 1` (the first one, in ge, gt, le, lt order), or None."""
    for symbol, bound, holds in ((">=", field.ge, lambda b: value >= b), (">", field.gt, lambda b: value > b),
                                 ("<=", field.le, lambda b: value <= b), ("<", field.lt, lambda b: value < b)):
        if bound is not None and not holds(bound):
            return f"{symbol} {_number(bound)}"
    return None


def check(name: str, field: Field, value: Any, phrasing: str = "python", type_error: type[Exception] = TypeError,
          value_error: type[Exception] = ValueError) -> Any:
    """`value` if it fits `field` (a float field's int as a float); else `type_error` (wrong type) or `value_error`
    (wrong value) with one line naming `name`, the value and what was expected."""
    yaml = phrasing == "yaml"
    if value is None and field.nullable:
        return None
    if not _has_type(field.kind, value):
        if yaml:
            got = "null" if value is None else f"{shown(value)} ({type(value).__name__})"
            raise type_error(f"{name} must be {_yaml_type(field.kind)}, got {got}.")
        raise type_error(f"{name} must be {_kind_words(field)}, got {type(value).__name__} {shown(value)}.")
    if field.kind is float:
        value = float(value)
        if not math.isfinite(value):
            raise value_error(f"{name} must be a finite number, got {shown(value)}." if yaml
                              else f"{name} must be {_kind_words(field)}, got {shown(value)}.")
    if field.choices is not None and value not in field.choices:
        raise value_error(f"{name} must be one of {', '.join(field.choices)}; got {shown(value)}." if yaml
                          else f"{name} must be one of {field.choices}, got {shown(value)}.")
    broken = _bound_broken(field, value)
    if broken is None:
        return value
    if yaml:
        raise value_error(f"{name} must be {broken}, got {shown(value)}.")
    if field.kind is int and field.le == MAX_INT and value > MAX_INT:
        raise value_error(f"{name} must be {_kind_words(field)} of at most 2**63 - 1 (what a tensor can hold), got "
                          f"{shown(value)}.")
    raise value_error(f"{name} must be {_kind_words(field)}, got {shown(value)}.")
