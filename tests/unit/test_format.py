"""The one formatting module's tables: plain text laid out by rich, and markdown."""

from __future__ import annotations

import subprocess
import sys

from spectui.format import markdown_table, section_title, text_table


def test_text_table_aligns_pads_and_rules():
    out = text_table(
        ["point", "runs", "95% CI"],
        [["AR", "4", ""], ["K=2", "14", "0.90-1.12"], ["K=4", "1", "1.01-1.03"]],
        right={1, 2},
        rules_before={0, 2},
    )
    assert out.splitlines() == [
        "  point  runs     95% CI",
        "  ----------------------",
        "  AR        4",
        "  K=2      14  0.90-1.12",
        "  ----------------------",
        "  K=4       1  1.01-1.03",
    ]


def test_text_table_without_header_indent_or_trailing_space():
    out = text_table(None, [["a", "b", ""], ["ccc", "", "d"]], indent=0)
    assert out.splitlines() == ["a    b", "ccc     d"]
    assert not any(line.endswith(" ") for line in out.splitlines())
    assert text_table(None, [["x", "y"]], rules_before={0}) == "  x  y"  # nothing to rule off above row 0
    assert text_table(None, []) == ""


def test_text_table_keeps_text_as_written():
    # no markup, no emoji codes, no highlighting, no colour codes: cells are plain text
    out = text_table(["k", "v"], [["[bold]x[/bold]", ":smile: 1.5 /tmp/a"]], indent=0)
    assert out.splitlines()[1] == "[bold]x[/bold]  :smile: 1.5 /tmp/a"
    assert "\x1b" not in out


def test_text_table_min_widths_and_wide_characters():
    out = text_table(None, [["日本", "x"], ["ab", "y"]], indent=0, min_widths=[6])
    assert out.splitlines() == ["日本    x", "ab      y"]  # a wide character takes two cells


def test_markdown_table_escapes_what_would_break_it():
    md = markdown_table(["field", "value"], [["a|b", "line 1\nline 2"], ["", "z"]], right={1})
    assert md.splitlines() == ["| field | value |", "|---|---:|", "| a\\|b | line 1<br>line 2 |", "|  | z |"]


def test_section_title():
    assert section_title("run") == "-- run " + "-" * 57
    assert len(section_title("run", 40)) == 40
    assert section_title("x" * 80).endswith(" --")


def test_the_formatting_module_loads_without_rich():
    code = "import sys, spectui.format\nassert 'rich' not in sys.modules\n"
    subprocess.run([sys.executable, "-c", code], check=True)
