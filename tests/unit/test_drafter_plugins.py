"""Drafters of other packages (the ``spectui.drafters`` entry point group): the documented
example loads, registers and drafts; every way a plugin can be broken is one ``SpectuiError``
line, raised before any model loads. No model here: tests/backends/test_drafter_plugin.py runs
the example on the real one."""

from __future__ import annotations

import importlib
import sys

import pytest

from spectui.drafting import MODEL_FREE, DraftConfig, Fixed, Lookup
from spectui.engine.drafters import (
    ENTRY_POINT_GROUP,
    DrafterKind,
    drafter_kind,
    drafter_kinds,
    find_drafter,
    load_plugin,
    unregister,
)
from spectui.engine.protocol import Drafter
from spectui.errors import SpectuiError
from tests.drafter_plugins import doc_example, install

SOURCE, NAME, VALUE = doc_example()


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Install packages in a folder on the path; each one's module and registration go after."""
    made: list[tuple[str, str]] = []

    def add(source: str, name: str = NAME, value: str = VALUE, dist: str = "spectui-recall") -> None:
        install(tmp_path / dist, source, name, value, dist=dist)
        monkeypatch.syspath_prepend(str(tmp_path / dist))
        importlib.invalidate_caches()
        made.append((name, value.split(":")[0]))

    yield add
    for name, module in made:
        if name not in ("ngram", "suffix"):  # a built-in stays, whatever a plugin claimed
            unregister(name)
        sys.modules.pop(module, None)


def refused(name: str, *fragments: str) -> str:
    with pytest.raises(SpectuiError) as info:
        find_drafter(name)
    line = str(info.value)
    assert "\n" not in line and info.value.exit_code == 2
    for fragment in fragments:
        assert fragment in line, line
    return line


def test_the_documented_example_is_found_registered_and_drafts(plugins):
    assert ENTRY_POINT_GROUP == "spectui.drafters"
    assert len(SOURCE.splitlines()) < 40
    assert find_drafter(NAME) is None and NAME not in MODEL_FREE  # not installed yet
    plugins(SOURCE)
    kind = find_drafter(NAME)
    assert kind is not None and kind.name == NAME and kind in drafter_kinds()
    assert drafter_kind(NAME) is kind  # registered: found again without the entry points
    assert MODEL_FREE[NAME] == kind.label and not DraftConfig(drafter=Lookup(name=NAME), length=Fixed()).has_model
    drafter = kind.make(None)  # type: ignore[arg-type]  # its factory reads nothing of the sources
    assert isinstance(drafter, Drafter) and drafter.free and not drafter.chained
    drafter.reset([5, 6, 7, 5])
    assert drafter.propose([5, 6, 7, 5], 4).tokens == [6, 7, 5]
    assert drafter.propose([5, 6, 7, 5, 6, 7], 2).tokens == [5, 6]  # kept up to date as the history grows


def test_a_name_no_package_declares_is_no_drafter():
    assert find_drafter("no-such-drafter") is None
    assert find_drafter("model.gguf") is None and find_drafter("/models/x") is None
    with pytest.raises(SpectuiError, match="no drafter is called 'no-such-drafter'; the model-free ones are ngram, suffix"):
        drafter_kind("no-such-drafter")


def test_a_plugin_that_does_not_import_is_one_line(plugins):
    plugins("import no_such_module_here\n")
    refused(NAME, "the drafter plugin 'recall' (spectui-recall 0.1: spectui_recall:KIND) does not load",
            "ModuleNotFoundError", "no_such_module_here")
    assert NAME not in MODEL_FREE


def test_a_plugin_whose_object_is_missing_or_no_kind_is_one_line(plugins):
    plugins(SOURCE, value="spectui_recall:NOT_THERE")
    refused(NAME, "does not load", "AttributeError")
    sys.modules.pop("spectui_recall", None)
    plugins(SOURCE, value="spectui_recall:RecallDrafter", dist="spectui-recall-class")
    # two packages now declare the name
    refused(NAME, "two drafter plugins are called 'recall'")


def test_a_plugin_object_that_is_no_drafter_kind_is_one_line(plugins):
    plugins(SOURCE, value="spectui_recall:RecallDrafter")
    refused(NAME, "is a type, not a spectui.engine.drafters.DrafterKind")


def test_a_plugin_that_breaks_the_protocol_is_one_line(plugins):
    plugins(SOURCE.replace("def propose(", "def suggest("))
    refused(NAME, "makes a RecallDrafter, which is no Drafter: it lacks propose", "DrafterBase")
    assert NAME not in MODEL_FREE


def test_a_plugin_whose_factory_fails_is_one_line(plugins):
    plugins(SOURCE.replace("    return RecallDrafter()", "    raise RuntimeError('no GPU')"))
    refused(NAME, "cannot make a drafter: RuntimeError: no GPU")


def test_a_plugin_naming_its_drafter_otherwise_is_one_line(plugins):
    plugins(SOURCE, name="other")
    refused("other", "makes a drafter called 'recall': the two names must agree")


def test_a_plugin_cannot_take_a_built_in_name(plugins):
    plugins(SOURCE.replace('"recall"', '"ngram"'), name="ngram")
    assert find_drafter("ngram") is drafter_kind("ngram")  # the built-in is never replaced
    assert drafter_kind("ngram").label == "n-gram"
    with pytest.raises(SpectuiError, match="the drafter plugin 'ngram' .* takes a built-in drafter's name"):
        load_plugin("ngram")
    assert drafter_kind("ngram").label == "n-gram"


def test_run_draft_refuses_a_broken_plugin_in_one_line_before_a_model_loads(plugins, capsys):
    from spectui.cli import main

    plugins(SOURCE.replace("def propose(", "def suggest("))
    assert main(["run", "--headless", "--no-record", "--draft", NAME, "--prompt", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("spectui: error: the drafter plugin 'recall'") and "lacks propose" in err[0]


def test_the_config_layers_table_is_the_registrys():
    """config cannot import the registry (the layers run one way), so its table starts with a
    copy of the built-in drafters' labels for recordings read without the engine: the same."""
    built_in = {k.name: k.label for k in drafter_kinds() if k.name in ("ngram", "suffix")}
    assert {n: MODEL_FREE[n] for n in built_in} == built_in
    assert [n for n in MODEL_FREE if find_drafter(n) is None] == []
    assert isinstance(drafter_kind("ngram"), DrafterKind)
