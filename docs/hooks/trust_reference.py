"""The security page's list of the keys that need trust (``guide/security.md``), generated from
``spectui.profiles.TRUSTED_KEYS``: the very table the check reads.

A mkdocs hook (``hooks:`` in mkdocs.yml): ``on_page_markdown`` replaces the marker
``<!-- trusted-keys -->`` on that page with one table, the keys grouped by what they can make
spectui do (run a program, start a download or a build, start a server, open a connection or
send data). ``python docs/hooks/trust_reference.py`` prints it; tests/unit/test_config_trust.py
checks that the page keeps the marker and the table names every key.
"""

from __future__ import annotations

import sys
from pathlib import Path

PAGE = "guide/security.md"
MARKER = "<!-- trusted-keys -->"

_REPO = Path(__file__).resolve().parents[2]


def render() -> str:
    if str(_REPO) not in sys.path:  # `mkdocs build` from a checkout whose spectui is not installed
        sys.path.insert(0, str(_REPO))
    from spectui.profiles import BUILD, CONNECTION, PROGRAM, SERVER, TRUSTED_KEYS

    out = ["| what it can do | key | how |", "| --- | --- | --- |"]
    for power in (PROGRAM, BUILD, SERVER, CONNECTION):
        out += [f"| {power} | `{k.key}` | {k.why} |" for k in TRUSTED_KEYS if k.power == power]
    return "\n".join(out) + "\n"


def on_page_markdown(markdown, page, config, files):  # noqa: ANN001, ANN201 - mkdocs' hook signature
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its {MARKER} line: the keys that need trust have nowhere to go")
    return markdown.replace(MARKER, render())


if __name__ == "__main__":
    sys.stdout.write(render())
