"""A drafter kind's own settings: declared once with the kind (``DrafterOption``), set from the
command line as ``--draft-option KEY=VALUE`` and parsed here, once, at that edge; kept typed in
the run's ``Lookup`` (so a recording holds what was asked), and handed to the kind's factory
resolved, every default filled in (``DraftSources.options``).

A value that arrives typed (a recording, a profile's run, the dashboard's settings) is checked
against the same declaration where the drafter is made, never parsed again: a wrong one is one
``SpectuiError`` line there too.

Imports only the config layer and ``spectui.errors``: the command line reads it for its flags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec

from spectui.drafting import Lookup, OptionValue
from spectui.errors import SpectuiError

_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
#: ``Lookup``'s own fields (not its name, not the options map): what ``DrafterOption.field`` may name
_FIELDS = frozenset(Lookup.__struct_fields__) - {"name", "options"}


@dataclass(frozen=True)
class DrafterOption:
    """One setting a drafter kind declares: ``--draft-option NAME=VALUE`` sets it."""

    #: as ``--draft-option`` and a recording's ``Lookup.options`` name it: ``min-match``
    name: str
    #: what its values are: int, float, bool or str
    type: type[OptionValue]
    #: the value a run that does not set it drafts with
    default: OptionValue
    #: one line for the docs and for a refused value
    help: str = ""
    #: the least and the most a number may be (None: no bound)
    min: float | None = None
    max: float | None = None
    #: a ``Lookup`` field that holds the value instead of ``Lookup.options``: the built-in
    #: drafters' settings, which recordings kept as fields before kinds had options
    field: str = ""

    def __post_init__(self) -> None:
        # a wrong declaration is the drafter author's bug: a ValueError as the kind is built
        # (a plugin's is then the one line "does not load: ValueError: ...")
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"a drafter option's name is lowercase words joined by '-', not {self.name!r}")
        if self.type not in (int, float, bool, str):
            raise ValueError(f"the drafter option {self.name!r} is an int, float, bool or str, not {self.type!r}")
        if self.field and self.field not in _FIELDS:
            raise ValueError(f"the drafter option {self.name!r} names no Lookup field: {self.field!r}")
        self.check(self.default, "its default")

    def parse(self, text: str) -> OptionValue:
        """``text`` (what follows ``KEY=``) as this option's value; ``SpectuiError`` saying why not."""
        value: OptionValue
        if self.type is bool:
            lowered = text.strip().lower()
            if lowered not in _TRUE + _FALSE:
                raise SpectuiError(f"--draft-option {self.name}={text}: {self.name} is {self._what()}")
            value = lowered in _TRUE
        elif self.type is str:
            value = text
        else:
            try:
                value = self.type(text)
            except ValueError:
                raise SpectuiError(f"--draft-option {self.name}={text}: {self.name} is {self._what()}") from None
        return self.check(value, f"--draft-option {self.name}={text}")

    def check(self, value: object, where: str) -> OptionValue:
        """A typed value held to this option (an int where a float is asked for is taken as one)."""
        if self.type is float and type(value) is int:
            value = float(value)
        if type(value) is not self.type:
            raise SpectuiError(f"{where}: {self.name} is {self._what()}, got {value!r}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
                raise SpectuiError(f"{where}: {self.name} must be {self._bounds()}, got {value}")
        return value

    def _what(self) -> str:
        return {int: "an integer", float: "a number", bool: "true or false", str: "text"}[self.type]

    def _bounds(self) -> str:
        if self.min is not None and self.max is not None:
            return f"between {self.min:g} and {self.max:g}"
        return f">= {self.min:g}" if self.min is not None else f"<= {self.max:g}"


def _named(kind: str, declared: Sequence[DrafterOption], name: str) -> DrafterOption:
    for option in declared:
        if option.name == name:
            return option
    known = ", ".join(o.name for o in declared)
    raise SpectuiError(f"the {kind} drafter has no option {name!r} "
                       f"({f'its options: {known}' if known else 'it declares none'})")


def with_options(kind: str, declared: Sequence[DrafterOption], lookup: Lookup, pairs: Sequence[str]) -> Lookup:
    """``lookup`` (the settings of the drafter ``kind``) with ``--draft-option KEY=VALUE``
    ``pairs`` set, each parsed against ``declared``: the one place their text is read."""
    fields: dict[str, OptionValue] = {}
    options = dict(lookup.options)
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise SpectuiError(f"--draft-option takes KEY=VALUE (an option of --draft {kind}), got {pair!r}")
        option = _named(kind, declared, key.strip())
        value = option.parse(text)
        if option.field:
            fields[option.field] = value
        else:
            options[option.name] = value
    return msgspec.structs.replace(lookup, options=options, **fields)


def resolve(kind: str, declared: Sequence[DrafterOption], lookup: Lookup) -> Mapping[str, OptionValue]:
    """Every option ``declared`` by ``kind``, valued as ``lookup`` sets it or by default. The
    options map is ``kind``'s only where ``lookup`` names it (the n-gram lookup that a fallback
    puts behind another kind's chain reads its field options, not that kind's map); there, a
    key ``kind`` does not declare is refused (a recording made with another version of it)."""
    mine = lookup.name == kind
    if mine:
        for name in lookup.options:
            _named(kind, declared, name)
    values: dict[str, OptionValue] = {}
    for option in declared:
        where = f"--draft {kind}'s options"
        if option.field:
            values[option.name] = option.check(getattr(lookup, option.field), where)
        else:
            given = lookup.options.get(option.name, option.default) if mine else option.default
            values[option.name] = option.check(given, where)
    return values
