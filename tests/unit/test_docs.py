"""The README and the documentation site hold to what they promise, with no model loaded:

* the README stays short and opens with the two commands (``.ci/run`` executes its line 2);
* ``mkdocs build --strict`` passes (every link and anchor between pages resolves) and the site
  loads nothing from another host;
* the generated CLI reference names every subcommand and every long option of the real parsers,
  and the generated schema tables every field of every record;
* the README's links into ``docs/`` resolve, and every repository path the README,
  ARCHITECTURE.md and ``docs/`` quote exists;
* ARCHITECTURE.md's layer map is the layers contract in pyproject.toml.
"""

from __future__ import annotations

import argparse
import glob
import html.parser
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
ARCHITECTURE = REPO / "ARCHITECTURE.md"
DOCS = REPO / "docs"

#: The README's first two lines, verbatim: they make their own virtual environment, so they
#: work under PEP 668; `.ci/run` runs line 2 exactly as written.
RUN_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e '.[demo]' && spectui"
TEST_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e '.[demo,test]'"
                " && python -m pytest -m 'not slow' -n 2 && python -m pytest -m slow")
README_MAX_LINES = 250


def load_hook(name: str):  # noqa: ANN201
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def markdown_files() -> list[Path]:
    return [README, ARCHITECTURE, *sorted(DOCS.rglob("*.md"))]


def without_code_blocks(text: str) -> str:
    """The text outside fenced code blocks (examples there name files that need not exist)."""
    return re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)


def heading_slugs(path: Path) -> set[str]:
    """The anchors mkdocs' toc makes for a page's headings (explicit ``{ #id }`` included)."""
    slugs = set()
    for line in without_code_blocks(path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*(\{\s*#([\w-]+)\s*\})?\s*$", line)
        if m:
            slugs.add(m.group(3) or re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", m.group(1)).strip().lower()))
    return slugs


# -- the README ------------------------------------------------------------------------------


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    assert lines[0] == RUN_COMMAND
    assert lines[1] == TEST_COMMAND


def test_the_ci_script_runs_the_readmes_second_line():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "sed -n '2p' README.md" in ci


def test_readme_links_resolve():
    text = without_code_blocks(README.read_text(encoding="utf-8"))
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    into_docs = [t for t in targets if t.startswith("docs/")]
    assert len(into_docs) >= 10, "the README points into docs/ for everything it left out"
    for target in targets:
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        assert (REPO / path).exists(), f"README.md links to {target}, which does not exist"
        if anchor:
            assert anchor in heading_slugs(REPO / path), f"README.md links to {target}: no such heading"


# -- repository paths quoted anywhere ----------------------------------------------------------

_QUOTED_PATH = re.compile(r"`((?:spectui|tests|benchmarks|docs|prompts|themes|engine|ui|sessions|recording|"
                          r"server|remote|tune|cli|metrics|models|compare|lab)/[^`\s]*)`")


def test_every_quoted_repository_path_exists():
    """A file named in prose (`spectui/engine/loop/decode.py`, `tests/unit/...`) must exist,
    so a move is caught where a reader would follow it. Short `engine/...` forms are read under
    spectui/; placeholders (`<time>`, `...`) are skipped and globs must match something."""
    missing = []
    for md in markdown_files():
        for quoted in _QUOTED_PATH.findall(without_code_blocks(md.read_text(encoding="utf-8"))):
            path = quoted.rstrip(".,;:)")
            if any(mark in path for mark in ("<", "...", "…", "{")):
                continue
            candidates = [REPO / path, REPO / "spectui" / path]
            if "*" in path:
                found = any(glob.glob(str(c)) for c in candidates)
            else:
                found = any(c.exists() for c in candidates)
            if not found:
                missing.append(f"{md.relative_to(REPO)}: {path}")
    assert not missing, "paths quoted in the docs that do not exist:\n" + "\n".join(missing)


# -- ARCHITECTURE.md is the one layer map ----------------------------------------------------------


def architecture_layers() -> list[str]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```\n(.*?)^```", section, flags=re.M | re.S).group(1)
    # a layer starts at column 0; its description follows after two spaces or on indented lines
    return [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line and not line[0].isspace()]


def test_architecture_layer_map_is_the_import_contract():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    expected = [" | ".join(p.strip().removeprefix("spectui.") for p in layer.split("|")) for layer in contract["layers"]]
    assert architecture_layers() == expected


def test_readme_and_docs_link_to_the_architecture_instead_of_repeating_it():
    readme = README.read_text(encoding="utf-8")
    assert "](ARCHITECTURE.md)" in readme
    assert "## Layout" not in readme
    page = (DOCS / "internals" / "architecture.md").read_text(encoding="utf-8")
    assert '--8<-- "ARCHITECTURE.md"' in page  # the site includes the file, never a copy


# -- the generated reference pages ----------------------------------------------------------------


def parsers(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):  # noqa: ANN201
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*words, name))


def test_cli_reference_names_every_subcommand_and_long_option():
    from spectui.cli import build_parser

    hook = load_hook("cli_reference")
    page = hook.render(build_parser())
    sections = re.split(r"^#{2,4} ", page, flags=re.M)
    by_command = {s.splitlines()[0].split("{", 1)[0].strip(): s for s in sections[1:]}
    checked = 0
    for words, parser in parsers(build_parser()):
        command = " ".join(("spectui", *words))
        assert command in by_command, f"{command} has no section in the CLI reference"
        # the options a row's first cell spells: `-o, --output FILE`, `--k K`, `--charts`
        listed = {o for cell in re.findall(r"^\| `(.*?)` \|", by_command[command], flags=re.M)
                  for o in re.findall(r"(?<![\w-])--?[\w-]+", cell)}
        for action in parser._actions:
            for option in action.option_strings:
                if not option.startswith("--") or isinstance(action, argparse._HelpAction):
                    continue
                shown = option in listed
                if action.help == argparse.SUPPRESS:  # an old spelling: hidden here as in --help
                    assert not shown, f"{command} {option} is hidden from --help but listed"
                else:
                    assert shown, f"{command} {option} is missing from the CLI reference"
                    checked += 1
    assert checked > 100  # the walk really reached every command's flags


def test_schema_reference_names_every_field_of_every_record():
    import typing

    from spectui.recording import schema

    hook = load_hook("schema_reference")
    page = hook.render()
    records = hook.records()
    assert set(typing.get_args(schema.Event)) <= set(records)
    for cls in records:
        assert f"### {cls.__name__}\n" in page
        table = page.split(f"### {cls.__name__}\n", 1)[1].split("\n### ", 1)[0]
        for field in msgspec.structs.fields(cls):
            assert f"| `{field.name}` |" in table, f"{cls.__name__}.{field.name} is missing from the schema tables"


def test_metrics_vocabulary_defines_every_summary_field():
    from spectui.metrics.stats import Summary

    page = (DOCS / "reference" / "metrics.md").read_text(encoding="utf-8")
    missing = [f.name for f in msgspec.structs.fields(Summary) if f"`{f.name}`" not in page]
    assert not missing, f"fields of a run's summary the metrics vocabulary does not define: {missing}"


# -- the site builds, strictly and offline ---------------------------------------------------------


class _ExternalLoads(html.parser.HTMLParser):
    """What a page would fetch from another host when opened: stylesheets, scripts, images, fonts."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001, ANN201
        attrs = dict(attrs)
        url = attrs.get("src") if tag in ("script", "img", "iframe") else attrs.get("href") if tag == "link" else None
        if url and re.match(r"(https?:)?//", url):
            self.found.append(f"<{tag}> {url}")


def test_mkdocs_build_strict_passes_offline(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    cli_page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert 'id="spectui-run"' in cli_page  # the generated page is in the site
    assert "<table>" in (site / "reference" / "recordings" / "index.html").read_text(encoding="utf-8")
    architecture = (site / "internals" / "architecture" / "index.html").read_text(encoding="utf-8")
    assert "Where new things go" in architecture  # ARCHITECTURE.md included, not a dangling snippet
    loads = []
    for page in site.rglob("*.html"):
        parser = _ExternalLoads()
        parser.feed(page.read_text(encoding="utf-8"))
        loads += [f"{page.relative_to(site)}: {x}" for x in parser.found]
    assert not loads, "the site would fetch from other hosts:\n" + "\n".join(loads)


@pytest.mark.parametrize("name", ["cli_reference", "schema_reference"])
def test_generators_print_their_pages(name):
    """`python docs/hooks/NAME.py` prints the page, to read it without building the site."""
    result = subprocess.run(
        [sys.executable, str(DOCS / "hooks" / f"{name}.py")],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n| ") > 20
