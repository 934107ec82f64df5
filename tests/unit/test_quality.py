"""The quality checker on strings, check strings, prompt files and recordings."""

from __future__ import annotations

import re

import msgspec
import pytest

from spectui.errors import SpectuiError
from spectui.prompts import list_prompts, parse_prompt
from spectui.quality import (
    PassRate,
    check_output,
    difference_interval,
    difference_points,
    parse_check,
    wilson_interval,
)
from spectui.recording.output import OutputText, grade_recording, output_text
from spectui.recording.reader import read_recording
from tests.unit.test_diff import edit_header, replace_token, sample, write_events

CITY = "json; keys: city:str, population:int"
WEATHER = "tool-call; tools: get_weather(city:str, unit:str), get_time(timezone:str); call: get_weather"


def reason(check: str, text: str) -> str:
    result = check_output(check, text)
    assert not result.passed
    return result.reason


def test_json_passes_bare_fenced_and_in_prose():
    bare = '{"city": "Paris", "population": 2148000}'
    assert check_output(CITY, bare).passed
    fenced = f"Here it is:\n```json\n{bare}\n```\nThe population is an estimate."
    assert check_output(CITY, fenced).passed
    pretty = 'Sure! {\n  "city": "Oslo",\n  "population": 709000,\n  "extra": [1, {"x": "}"}]\n} hope it helps {'
    assert check_output(CITY, pretty).passed  # extra keys allowed; a brace in a string is not a brace


def test_json_failure_reasons_name_what_failed():
    assert reason(CITY, '{"city": "Paris", "population": "2148000"}') == "key population: expected int, got str"
    assert reason(CITY, '{"city": "Paris"}') == "key population: missing"
    assert reason(CITY, '{"city": 1, "population": true}') == "key city: expected str, got int; key population: expected int, got bool"
    assert reason(CITY, '{"city": "Paris", "population": 2.1e6}') == "key population: expected int, got float"
    assert reason(CITY, "The capital of France is Paris.") == "no JSON object in the output"
    assert reason(CITY, 'Sure:\n{"city": "Paris", "population": 21') == "a JSON object is never closed"
    assert reason(CITY, "{'city': 'Paris', 'population': 1}") == (
        "a {...} that is not JSON (Expecting property name enclosed in double quotes)"
    )
    assert "NaN is not JSON" in reason(CITY, '{"city": "Paris", "population": NaN}')


def test_the_first_complete_top_level_object_is_taken():
    # a balanced span that is not JSON (code) is skipped; the first valid object decides
    code = 'def f():\n    return {city: 1}\n{"city": "Rome", "population": 2800000} {"city": 3}'
    assert check_output(CITY, code).passed
    # top level, not an inner object: here the outer object is the one graded (and fails)
    nested = '{"result": {"city": "Rome", "population": 2800000}}'
    assert reason(CITY, nested) == "key city: missing; key population: missing"


def test_types():
    check = "json; keys: a:float, b:bool, c:list, d:object, e:str"
    assert check_output(check, '{"a": 50, "b": false, "c": [], "d": {}, "e": ""}').passed  # an int is a float
    assert reason(check, '{"a": true, "b": 0, "c": {}, "d": [], "e": null}') == (
        "key a: expected float, got bool; key b: expected bool, got int; key c: expected list, got object;"
        " key d: expected object, got list; key e: expected str, got null"
    )


def test_tool_calls():
    ok = 'Calling the tool.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n```'
    result = check_output(WEATHER, ok)
    assert result.passed and result.reason == "tool call get_weather(city:str, unit:str)"
    assert reason(WEATHER, '{"name": "get_time", "arguments": {"timezone": "UTC"}}') == "called get_time, expected get_weather"
    assert reason(WEATHER, '{"name": "get_wether", "arguments": {}}') == "unknown tool 'get_wether' (tools: get_weather, get_time)"
    assert reason(WEATHER, '{"name": "get_weather", "arguments": {"city": 3}}') == (
        "get_weather argument city: expected str, got int; get_weather argument unit: missing"
    )
    assert reason(WEATHER, '{"name": "get_weather", "arguments": [{"city": "Paris"}]}') == "key arguments: expected object, got list"
    assert reason(WEATHER, '{"tool": "get_weather"}') == "key name: missing; key arguments: missing"
    any_tool = parse_check("tool-call; tools: get_weather(city:str), get_time(timezone:str)")
    assert check_output(any_tool, '{"name": "get_time", "arguments": {"timezone": "UTC"}}').passed


@pytest.mark.parametrize(
    "text",
    [CITY, WEATHER, "tool-call; tools: now(), add(a:int, b:int)", "json; keys: x:float, y:bool, z:list, w:object"],
)
def test_check_strings_round_trip(text):
    check = parse_check(text)
    assert str(check) == text and parse_check(str(check)) == check


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yaml; keys: a:str", "unknown check 'yaml'"),
        ("json; keys: city str", "'city str' is not name:type"),
        ("json; keys: a:string", "unknown type 'string'"),
        ("json; keys: a:str, a:int", "a is listed twice"),
        ("json", "a json check needs keys"),
        ("json; keys: a:str; call: f", "takes keys, not tools or call"),
        ("tool-call; tools: f(a:str), ", "ends with a comma"),
        ("tool-call; tools: f(a:str) g()", "cannot read"),
        ("tool-call; tools: f(a:str); call: g", "'g' is not one of the tools"),
        ("tool-call; keys: a:str", "takes tools (and call), not keys"),
        ("json; keys: a:str; keys: b:str", "cannot read"),
    ],
)
def test_bad_check_strings(text, message):
    with pytest.raises(SpectuiError, match=re.escape(message)):
        parse_check(text)


def test_prompt_headers_give_the_canonical_check():
    spec = parse_prompt(
        "# tier: quality\n# check: tool-call\n# tools: get_weather( city : str ,unit:str),get_time(timezone:str)\n"
        "# call: get_weather\nWhat is the weather in Paris?\n",
        "quality-x",
    )
    assert spec.check == WEATHER and spec.tier == "quality"


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("# check: xml\n", r"prompt file quality-x: unknown check 'xml' \(known: json, tool-call\)"),
        ("# check: json\n# keys: city=str\n", "prompt file quality-x: keys: 'city=str' is not name:type"),
        ("# keys: city:str\n", "keys given without a check line"),
        ("# check: tool-call\n", "needs tools"),
    ],
)
def test_bad_prompt_headers_are_one_line_errors(header, message):
    with pytest.raises(SpectuiError, match=message):
        parse_prompt(header + "Say something.\n", "quality-x")


def test_shipped_quality_prompts():
    quality = [p for p in list_prompts() if p.tier == "quality"]
    assert 8 <= len(quality) <= 12
    kinds = set()
    for p in quality:
        assert p.name.startswith("quality-") and p.check, p.name
        assert 64 <= p.max_tokens <= 128, p.name
        check = parse_check(p.check)
        assert str(check) == p.check
        kinds.add(check.kind)
    assert kinds == {"json", "tool-call"}
    # prompts without a check stay unchecked, and every prompt is still listed
    assert all(not p.check for p in list_prompts() if p.tier != "quality")


def test_wilson_interval_and_differences():
    assert wilson_interval(0, 0) != wilson_interval(0, 0)  # NaN: nothing measured
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)  # the textbook value for 0/10
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(1 - 0.2775, abs=1e-4)
    lo, hi = wilson_interval(20, 40)
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)
    b, c = PassRate(20, 40), PassRate(18, 40)
    assert difference_points(b, c) == -5.0  # exactly: thresholds must not hinge on float error
    low, high = difference_interval(b, c)
    assert low < -5.0 < high and high - low > 30  # the noise at 40 runs a side
    assert str(PassRate(3, 10)) == "3/10 30% [11%-60%]"


def test_grading_a_real_recording(tmp_path):
    """A real recording, graded through its header: the EOG piece is not part of the text."""
    rec = read_recording(sample("short-control"))
    assert grade_recording(rec) is None  # recorded without a check
    text = output_text(rec.events)
    assert not text.endswith("<|im_end|>") and text
    streamed = OutputText()
    assert "".join(streamed.feed(ev) for ev in rec.events) == text  # the CLI's stream is the same text

    def checked(h):
        return msgspec.structs.replace(h, config=msgspec.structs.replace(h.config, prompt_check="json; keys: answer:str"))

    events = edit_header(rec.events, checked)
    failing = read_recording(write_events(tmp_path / "fail.spectui", events))
    assert grade_recording(failing).reason == "no JSON object in the output"
    passing = read_recording(
        write_events(tmp_path / "pass.spectui", replace_token(events, 0, 1, b'{"answer": "yes"} '))
    )
    assert grade_recording(passing).passed
