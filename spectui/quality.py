"""The quality mini-set's checker: does an output hold the JSON object or tool call asked for?

A check is one line, kept in every recording header (``RunConfig.prompt_check``) so a
recording can be graded without its prompt file::

    json; keys: city:str, population:int
    tool-call; tools: get_weather(city:str), get_time(timezone:str); call: get_weather

``json`` passes when the output holds a JSON object with every listed key, each of its type.
``tool-call`` passes when it holds ``{"name": TOOL, "arguments": {...}}`` naming one of the
tools (the ``call`` one when given: choosing the right tool is part of the task) with every
argument of that tool, each of its type. Extra keys and arguments are allowed: the check is
about what the caller needs, not about what else a model says.

Types: ``str``, ``int``, ``float`` (an integer counts: ``50`` is a fine price), ``bool``,
``list``, ``object``. ``true`` is never an ``int`` here, although Python says it is.

Where the JSON is: models wrap it in prose and in fenced blocks, so the checker takes the
first *complete top-level* object: the first ``{`` whose braces balance (braces inside JSON
strings do not count) and whose text parses as JSON. A balanced span that is not JSON
(Python dict literals, code) is skipped, and the next one tried.

Plain data and the standard library only, so every layer may import it (prompt files name
their checks); grading a recording is ``spectui.recording.output.grade_recording``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spectui.errors import SpectuiError

KINDS = ("json", "tool-call")

#: A type name -> does a decoded JSON value have it? (bool is excluded from the numbers on
#: purpose: ``isinstance(True, int)`` holds in Python, but ``true`` is not a count.)
TYPES: dict[str, Any] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_FIELD = re.compile(rf"^({_NAME})\s*:\s*([a-z]+)$")
_TOOL = re.compile(rf"\s*({_NAME})\s*\(([^()]*)\)\s*(,|$)")


@dataclass(frozen=True)
class Field:
    name: str
    type: str

    def __str__(self) -> str:
        return f"{self.name}:{self.type}"


@dataclass(frozen=True)
class Tool:
    name: str
    args: tuple[Field, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class QualityCheck:
    kind: str  # one of KINDS
    keys: tuple[Field, ...] = ()  # json
    tools: tuple[Tool, ...] = ()  # tool-call
    call: str = ""  # tool-call: the tool that must be chosen ("" = any of them)

    def __str__(self) -> str:
        """The canonical one-line form; ``parse_check(str(c)) == c``."""
        if self.kind == "json":
            return f"json; keys: {', '.join(map(str, self.keys))}"
        text = f"tool-call; tools: {', '.join(map(str, self.tools))}"
        return text + (f"; call: {self.call}" if self.call else "")


@dataclass(frozen=True)
class QualityResult:
    passed: bool
    reason: str  # what failed, exactly; on a pass, what was found


# -- parsing a check -----------------------------------------------------------------------


def parse_fields(text: str, what: str = "keys") -> tuple[Field, ...]:
    """``"city:str, population:int"`` -> fields. Raises ``SpectuiError`` naming the bad part."""
    fields: list[Field] = []
    if not text.strip():
        return ()
    for part in text.split(","):
        m = _FIELD.match(part.strip())
        if not m:
            raise SpectuiError(f"{what}: {part.strip()!r} is not name:type (types: {', '.join(TYPES)})")
        name, kind = m.groups()
        if kind not in TYPES:
            raise SpectuiError(f"{what}: unknown type {kind!r} for {name} (types: {', '.join(TYPES)})")
        if any(f.name == name for f in fields):
            raise SpectuiError(f"{what}: {name} is listed twice")
        fields.append(Field(name, kind))
    return tuple(fields)


def parse_tools(text: str) -> tuple[Tool, ...]:
    """``"get_weather(city:str), get_time(timezone:str)"`` -> tools."""
    tools: list[Tool] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOOL.match(text, pos)
        if not m:
            raise SpectuiError(f"tools: cannot read {text[pos:].strip()!r}; expected name(arg:type, ...), ...")
        name, args = m.group(1), m.group(2)
        if any(t.name == name for t in tools):
            raise SpectuiError(f"tools: {name} is listed twice")
        tools.append(Tool(name, parse_fields(args, f"tools: {name}")))
        pos = m.end()
        if m.group(3) == "," and pos >= len(text):
            raise SpectuiError("tools: the list ends with a comma")
    return tuple(tools)


def check_from_parts(kind: str, keys: str = "", tools: str = "", call: str = "") -> QualityCheck:
    """A check from its parts (a prompt file's ``check`` / ``keys`` / ``tools`` / ``call`` lines)."""
    kind = kind.strip()
    if kind not in KINDS:
        raise SpectuiError(f"unknown check {kind!r} (known: {', '.join(KINDS)})")
    if kind == "json":
        if tools.strip() or call.strip():
            raise SpectuiError("a json check takes keys, not tools or call")
        fields = parse_fields(keys)
        if not fields:
            raise SpectuiError("a json check needs keys: name:type, ...")
        return QualityCheck(kind="json", keys=fields)
    if keys.strip():
        raise SpectuiError("a tool-call check takes tools (and call), not keys")
    parsed = parse_tools(tools)
    if not parsed:
        raise SpectuiError("a tool-call check needs tools: name(arg:type, ...), ...")
    call = call.strip()
    if call and call not in {t.name for t in parsed}:
        raise SpectuiError(f"call: {call!r} is not one of the tools ({', '.join(t.name for t in parsed)})")
    return QualityCheck(kind="tool-call", tools=parsed, call=call)


def check_from_meta(meta: dict[str, str]) -> QualityCheck | None:
    """The check a prompt file's metadata lines describe, or None when it has none."""
    parts = {k: meta[k] for k in ("keys", "tools", "call") if k in meta}
    if "check" not in meta:
        if parts:
            raise SpectuiError(f"{', '.join(parts)} given without a check line (check: json or tool-call)")
        return None
    return check_from_parts(meta["check"], **parts)


def parse_check(text: str) -> QualityCheck:
    """The canonical one-line form (``str(QualityCheck)``) back into a check."""
    kind, *rest = [p.strip() for p in text.split(";")]
    parts: dict[str, str] = {}
    for part in rest:
        key, sep, value = part.partition(":")
        key = key.strip()
        if not sep or key not in ("keys", "tools", "call") or key in parts:
            raise SpectuiError(f"quality check {text!r}: cannot read {part!r}")
        parts[key] = value
    return check_from_parts(kind, **parts)


# -- checking an output --------------------------------------------------------------------


def _type_name(value: Any) -> str:
    for name in ("bool", "int", "float", "str", "list", "object"):  # bool before int
        if TYPES[name](value):
            return name
    return "null" if value is None else type(value).__name__


def _balanced_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every top-level ``{...}`` whose braces balance, in order; a last
    ``(start, -1)`` when an object is still open at the end of the text."""
    i, n = 0, len(text)
    while True:
        start = text.find("{", i)
        if start < 0:
            return
        depth, in_str, escaped = 0, False, False
        for j in range(start, n):
            c = text[j]
            if in_str:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    yield start, j + 1
                    i = j + 1
                    break
        else:
            yield start, -1
            return


def find_json_object(text: str) -> tuple[dict | None, str]:
    """(the first complete top-level JSON object, "") or (None, why there is none)."""
    # Reasons name no positions: ``spectui quality`` counts runs by reason, and "never closed"
    # at character 203 and at 290 are the same failure (usually the token budget ran out).
    first_error = ""
    for start, end in _balanced_spans(text):
        if end < 0:
            return None, first_error or "a JSON object is never closed"
        try:
            value = json.loads(text[start:end], parse_constant=_no_constant)
        except ValueError as exc:
            first_error = first_error or f"a {{...}} that is not JSON ({getattr(exc, 'msg', exc)})"
            continue
        return value, ""
    return None, first_error or "no JSON object in the output"


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")  # json.loads would accept NaN / Infinity


def _field_errors(obj: dict, fields: tuple[Field, ...], label: str) -> list[str]:
    errors = []
    for f in fields:
        if f.name not in obj:
            errors.append(f"{label} {f.name}: missing")
        elif not TYPES[f.type](obj[f.name]):
            errors.append(f"{label} {f.name}: expected {f.type}, got {_type_name(obj[f.name])}")
    return errors


def _check_tool_call(check: QualityCheck, obj: dict) -> QualityResult:
    errors = _field_errors(obj, (Field("name", "str"), Field("arguments", "object")), "key")
    if errors:
        return QualityResult(False, "; ".join(errors))
    tools = {t.name: t for t in check.tools}
    name = obj["name"]
    if name not in tools:
        return QualityResult(False, f"unknown tool {name!r} (tools: {', '.join(tools)})")
    if check.call and name != check.call:
        return QualityResult(False, f"called {name}, expected {check.call}")
    errors = _field_errors(obj["arguments"], tools[name].args, f"{name} argument")
    if errors:
        return QualityResult(False, "; ".join(errors))
    return QualityResult(True, f"tool call {tools[name]}")


def check_output(check: QualityCheck | str, text: str) -> QualityResult:
    """Grade one output. ``check`` is a ``QualityCheck`` or its one-line form."""
    if isinstance(check, str):
        check = parse_check(check)
    obj, why = find_json_object(text)
    if obj is None:
        return QualityResult(False, why)
    if check.kind == "tool-call":
        return _check_tool_call(check, obj)
    errors = _field_errors(obj, check.keys, "key")
    if errors:
        return QualityResult(False, "; ".join(errors))
    return QualityResult(True, f"json object with {', '.join(f.name for f in check.keys)}")


# -- pass rates ----------------------------------------------------------------------------


def wilson_interval(passed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a pass rate (NaN, NaN for n = 0).

    Why Wilson and not rate +- 1.96 SE: with a few dozen runs and rates near 0 or 1 (both
    common here) the normal interval leaves [0, 1] or collapses to a point; Wilson does not.
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class PassRate:
    passed: int
    n: int

    @property
    def rate(self) -> float:
        return self.passed / self.n if self.n else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.passed, self.n)

    def __str__(self) -> str:
        if not self.n:
            return "n/a"
        lo, hi = self.interval
        return f"{self.passed}/{self.n} {self.rate:.0%} [{lo:.0%}-{hi:.0%}]"


def pass_rate(results: list[QualityResult]) -> PassRate:
    return PassRate(sum(r.passed for r in results), len(results))


def difference_points(baseline: PassRate, candidate: PassRate) -> float:
    """Candidate minus baseline pass rate, in percentage points (rounded off at 1e-9, so 18/40
    against 20/40 is -5 exactly and a threshold of 5 points does not hinge on float error)."""
    return round((candidate.rate - baseline.rate) * 100, 9)


def difference_interval(baseline: PassRate, candidate: PassRate) -> tuple[float, float]:
    """95% interval of candidate minus baseline, in points (Newcombe's hybrid score method,
    built from the two Wilson intervals; it stays sensible at rates of 0 or 1 and small n).

    This is the noise a pass-rate comparison carries: at 40 runs a side and rates near 50%
    it is about +-20 points, so a drop of a few points means nothing until the runs number
    in the hundreds.
    """
    (bl, bh), (cl, ch) = baseline.interval, candidate.interval
    b, c = baseline.rate, candidate.rate
    d = c - b
    low = d - math.sqrt((c - cl) ** 2 + (bh - b) ** 2)
    high = d + math.sqrt((ch - c) ** 2 + (b - bl) ** 2)
    return low * 100, high * 100
