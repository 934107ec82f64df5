import pytest

from spectui.errors import SpectuiError
from spectui.prompts import find_prompt, list_prompts, load_prompt, parse_prompt


def test_metadata_header_and_body():
    spec = parse_prompt("# tier: long\n# max_tokens: 128\n# a comment\nLine one.\n\nLine two.\n", "x")
    assert (spec.tier, spec.max_tokens, spec.text) == ("long", 128, "Line one.\n\nLine two.")


def test_tier_from_file_name_without_header(tmp_path):
    f = tmp_path / "copy-list.txt"
    f.write_text("Copy this: a, b, c\n")
    spec = load_prompt(f)
    assert (spec.name, spec.tier, spec.max_tokens) == ("copy-list", "copy", 256)
    assert [s.name for s in list_prompts(tmp_path)] == ["copy-list"]
    assert find_prompt("copy-list", tmp_path).text == "Copy this: a, b, c"


def test_bad_prompt_files(tmp_path):
    with pytest.raises(SpectuiError, match="no prompt text"):
        parse_prompt("# tier: short\n", "empty")
    with pytest.raises(SpectuiError, match="max_tokens"):
        parse_prompt("# max_tokens: many\nhello", "bad")
    with pytest.raises(SpectuiError, match="no prompt named"):
        find_prompt("missing", tmp_path)


def test_shipped_prompts_cover_the_tiers():
    tiers = {p.tier for p in list_prompts()}
    assert {"short", "medium", "long", "code", "copy", "memo"} <= tiers
