"""The recording schema's tables (``reference/recordings.md``), generated from the schema itself.

A mkdocs hook (``hooks:`` in mkdocs.yml): ``on_page_markdown`` replaces the marker
``<!-- schema-reference -->`` on that page with one table per record, starting from the event
union of ``spectui.recording.schema`` and following every Struct a field holds (the run
configuration's included). Which fields exist, their order and defaults come from msgspec;
each field's type as written and the comment beside it (``#:`` lines above it, or ``#`` after
it) come from the module's source, so a field added with its comment is documented by that.

``python docs/hooks/schema_reference.py`` prints the tables; tests/unit/test_docs.py checks
that they name every field of every record.
"""

from __future__ import annotations

import ast
import enum
import inspect
import io
import re
import sys
import tokenize
import typing
from functools import cache
from pathlib import Path

PAGE = "reference/recordings.md"
MARKER = "<!-- schema-reference -->"

_REPO = Path(__file__).resolve().parents[2]


def _schema():  # noqa: ANN202
    if str(_REPO) not in sys.path:  # `mkdocs build` from a checkout whose spectui is not installed
        sys.path.insert(0, str(_REPO))
    from spectui.recording import schema

    return schema


@cache
def _source_facts(path: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(class, field) -> (type as written, its comment) for every annotated field in a module."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    trailing = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT}
    facts = {}
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            above, n = [], item.lineno - 2
            while n >= 0 and lines[n].strip().startswith("#:"):
                above.insert(0, lines[n].strip()[2:].strip())
                n -= 1
            after = trailing.get(item.lineno, "")
            after = "" if after.startswith("# noqa") or after.startswith("# type:") else after.lstrip("#").strip()
            facts[(node.name, item.target.id)] = (ast.unparse(item.annotation), " ".join([*above, after]).strip())
    return facts


def _structs_in(tp: object) -> list[type]:
    """The msgspec Structs a field's type holds (``X | None``, ``list[X]``, ``dict[str, X]`` ...)."""
    import msgspec

    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return [tp]
    return [s for arg in typing.get_args(tp) for s in _structs_in(arg)]


def records() -> list[type]:
    """The events in stream order, then every Struct they hold, each once, in the order met."""
    import msgspec

    schema = _schema()
    order = list(typing.get_args(schema.Event))
    for cls in order:  # grows while it is walked
        for field in msgspec.structs.fields(cls):
            order += [s for s in _structs_in(field.type) if s not in order]
    return order


def _md(text: str) -> str:
    """A comment or docstring as Markdown table-cell text: reST ``code`` as Markdown `code`."""
    text = re.sub(r"``([^`]+)``", r"`\1`", " ".join(text.split()))
    return text.replace("|", "\\|")


def _default(field) -> str:  # noqa: ANN001
    import msgspec

    if field.default is not msgspec.NODEFAULT:
        value = field.default
        return repr(value.value if isinstance(value, enum.Enum) else value)
    if field.default_factory is not msgspec.NODEFAULT:
        factory = field.default_factory
        return {list: "[]", dict: "{}"}.get(factory, f"{getattr(factory, '__name__', factory)}()")
    return "required"


def render() -> str:
    import msgspec

    schema = _schema()
    events = set(typing.get_args(schema.Event))
    out = [f"Schema version {schema.SCHEMA_VERSION}.", ""]
    for cls in records():
        facts = _source_facts(inspect.getsourcefile(cls))
        conf = cls.__struct_config__
        out += [f"### {cls.__name__}", ""]
        if cls in events:
            shape = "a msgpack array: fields in this order, no names" if conf.array_like else "a msgpack map"
            out += [f"Record `{schema.EVENT_NAMES[cls]}`, tag {conf.tag}, {shape}.", ""]
        doc = inspect.getdoc(cls)
        if doc and doc != inspect.getdoc(msgspec.Struct):
            out += [_md(doc.split("\n\n")[0]), ""]
        out += ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
        for field in msgspec.structs.fields(cls):
            written, comment = facts.get((cls.__name__, field.name), (str(field.type), ""))
            default = _default(field)
            default = default if default == "required" else f"`{default}`"
            out.append(f"| `{field.name}` | `{written.replace('|', chr(92) + '|')}` | {default} | {_md(comment)} |")
        out.append("")
    out += ["### TokenOrigin", "", "Who decided each token (`Step.origins`).", "", "| value | name |", "| --- | --- |"]
    out += [f"| {origin.value} | `{origin.name}` |" for origin in schema.TokenOrigin]
    return "\n".join(out) + "\n"


# -- the mkdocs hook ------------------------------------------------------------------------


def on_page_markdown(markdown, page, config, files):  # noqa: ANN001, ANN201 - mkdocs' hook signature
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its {MARKER} line: the schema tables have nowhere to go")
    return markdown.replace(MARKER, render())


if __name__ == "__main__":
    sys.stdout.write(render())
