"""Formatting numbers, sizes and text for every report and screen: one place, one spelling.

A number a run does not have (NaN, None) is an em dash on screen and "n/a" in text reports
and JSON-adjacent text. Tables: ``text_table`` (aligned plain text, for every text report) and
``markdown_table``; ``section_title`` heads a report's sections. ``model_name``: the one display
name of a model. ``terminal_safe``: text from outside (a server's body, a file's value, a
model's metadata, a node's words) with every control character escaped, so no byte of it
reaches a terminal as a command; every printer and table goes through it.

Plain functions that import only the standard library at load time (``text_table`` imports
rich when it is called), so every layer may import this; it imports nothing of spectui.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

DASH = "—"
#: How text reports (``spectui report``, sweep tables, the CLI summary) spell a missing number.
NA = "n/a"


def terminal_safe(text: str, *, multiline: bool = False) -> str:
    """``text`` with every character that is not printable written as Python escapes it
    (``\\x1b``, ``\\x07``, ``\\u202e``, ``\\udcff``): an ESC, a BEL, a bidirectional override or a
    byte that was not UTF-8 arrives at the terminal as letters, never as a command (a title
    change, a cleared screen, a hidden line). ``multiline`` keeps newlines and tabs."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (multiline and ch in "\n\t") else repr(ch)[1:-1] for ch in text)


def missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def num(v: float | None, spec: str = ".1f", unit: str = "", *, na: str = DASH) -> str:
    if missing(v):
        return na
    return f"{format(v, spec)}{unit}"


def num_or_na(v: float | None, spec: str = ".1f") -> str:
    """``v`` formatted, or "n/a" (a number the run did not have): the text reports' spelling."""
    return num(v, spec, na=NA)


def mib(n: int) -> str:
    """Bytes as MiB with thousands separators for text reports; negative means unknown."""
    return NA if n < 0 else f"{n / 2**20:,.1f} MiB"


def signed_mib(n: int) -> str:
    """A change in bytes as signed MiB for text reports: ``+1,024.0 MiB``."""
    return f"{n / 2**20:+,.1f} MiB"


def pct(v: float | None) -> str:
    return DASH if v is None or missing(v) else f"{v * 100:.1f}%"


def size(n: int | None) -> str:
    """Bytes in binary units; negative or None means unknown."""
    if n is None or n < 0:
        return DASH
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}" if unit == "GiB" else f"{n / scale:.0f} {unit}"
    return f"{n} B"


def signed_size(n: int) -> str:
    return ("+" if n >= 0 else "-") + size(abs(n))


def counted(n: int, noun: str) -> str:
    """``1 run``, ``3 runs``: a count with its noun agreeing."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# -- model names ----------------------------------------------------------------------------

#: The embedded default model's file (``spectui.models.registry`` finds it in its wheel); the
#: configuration names it ``""`` or ``"smollm2"``.
EMBEDDED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_ALIASES = ("", "smollm2")


def model_name(source: str, quant: str = "") -> str:
    """The one name every screen, report and recording gives a model: its file name without
    ``.gguf`` (an MLX folder's name), with the quant added when the name lacks it
    (``SmolLM2-135M-Instruct.Q4_1``, ``model Q4_0``). ``source`` is a path, a configuration's
    target or draft (``""``/``"smollm2"``: the embedded model), or a server's model id.

    A GGUF's ``general.name`` is the model's own detail (often a training-run label such as
    ``Smollm2 135M 8k Lc100K Mix1 Ep2``), shown beside this name, never instead of it."""
    if source in EMBEDDED_MODEL_ALIASES:
        source = EMBEDDED_MODEL_FILE
    base = source.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or source
    if base.lower().endswith(".gguf"):
        base = base[: -len(".gguf")]
    if quant and quant.lower().replace("-", "_") not in base.lower().replace("-", "_"):
        base = f"{base} {quant}"
    return base


def ellipsize_left(text: str, width: int) -> str:
    """Keep the end of a path (its file name) when it does not fit."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1):] if width > 1 else "…"


# -- tables ---------------------------------------------------------------------------------

#: rich box for ``text_table``: nothing drawn but the section line, a dashed rule across the table
_RULE_BOX = "    \n    \n    \n    \n -- \n    \n    \n    \n"


def text_table(
    header: Sequence[str] | None,
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = frozenset(),
    indent: int = 2,
    rules_before: Collection[int] = frozenset(),
    min_widths: Sequence[int] = (),
) -> str:
    """Rows as an aligned plain-text table: columns two spaces apart, the ``right`` ones (column
    indexes) right-aligned, header cells included; a dashed rule across the table before each
    row index in ``rules_before`` (``0`` with a header: a rule under it); column ``i`` at least
    ``min_widths[i]`` wide (to line up several tables); every line indented by ``indent``, no
    trailing spaces, no colour, no markup (cells are plain text, ``[bold]`` stays as written).

    The layout is rich's ``Table`` (cell widths by terminal cells, so wide characters align);
    rich is imported here, not at module level: the headless core loads without it.
    """
    import io

    from rich.box import Box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    lines = [list(header)] if header is not None else []
    lines += [list(r) for r in rows]
    if not lines:
        return ""
    n = max(len(r) for r in lines)
    offset = 1 if header is not None else 0  # rows[i] is line i + offset
    # the header is a plain first row: rich draws a line under a real header whenever a box is set
    table = Table(box=Box(_RULE_BOX), show_header=False, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for i in range(n):
        table.add_column(justify="right" if i in right else "left", no_wrap=True, min_width=min_widths[i] if i < len(min_widths) else None)
    for j, row in enumerate(lines):
        cells = [Text(terminal_safe(str(c))) for c in row] + [Text("")] * (n - len(row))
        table.add_row(*cells, end_section=j + 1 - offset in rules_before)
    out = io.StringIO()
    console = Console(
        file=out, width=1 << 20, color_system=None, no_color=True, force_terminal=False, legacy_windows=False,
        markup=False, emoji=False, highlight=False,
    )
    console.print(table)
    pad = " " * indent
    return "\n".join(pad + line if line else line for line in (raw.rstrip() for raw in out.getvalue().splitlines()))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Collection[int] = frozenset()) -> str:
    """GitHub markdown: a header row, its alignment row, then the rows. Pipes are escaped and
    line breaks become ``<br>`` so a cell never breaks the table; an empty cell stays empty."""

    def cell(c: str) -> str:
        return str(c).replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(cell(c) for c in row) + " |"

    align = "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"
    return "\n".join([line(header), align, *(line(r) for r in rows)])


def section_title(title: str, width: int = 64) -> str:
    """``-- title ------``: a report section's heading line, ``width`` characters in all (at least
    the title and its dashes)."""
    head = f"-- {title} "
    return head + "-" * max(2, width - len(head))
