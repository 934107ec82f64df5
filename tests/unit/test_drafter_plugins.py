"""Drafters of other packages (the ``spectui.drafters`` entry point group): the documented
example loads, registers and drafts; every way a plugin can be broken is one ``SpectuiError``
line, raised before any model loads. A kind's own options: declared, set with ``--draft-option``
(parsed once, at the command line; every bad one a line and exit 2), recorded typed, handed to
its factory resolved; its state: one object per engine, shared by every drafter of the kind
the engine makes, closed with it. No model here: tests/backends/test_drafter_plugin.py runs
the example on the real one."""

from __future__ import annotations

import importlib
import sys

import pytest

from spectui.config import RunConfig
from spectui.drafting import BUILT_IN_LABELS, DraftConfig, Fixed, Lookup, Model, Runtime, lookup_label
from spectui.engine.drafters import (
    ENTRY_POINT_GROUP,
    DrafterKind,
    DraftSources,
    drafter_kind,
    drafter_kinds,
    find_drafter,
    load_plugin,
    make_lookup,
    parse_drafter,
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
    assert len(SOURCE.splitlines()) < 60
    assert find_drafter(NAME) is None and parse_drafter(NAME) == Model(path=NAME)  # not installed yet: a model's name
    plugins(SOURCE)
    kind = find_drafter(NAME)
    assert kind is not None and kind.name == NAME and kind in drafter_kinds()
    assert drafter_kind(NAME) is kind  # registered: found again without the entry points
    assert parse_drafter(NAME) == Lookup(name=NAME) and not DraftConfig(drafter=Lookup(name=NAME), length=Fixed()).has_model
    assert lookup_label(NAME) == kind.label  # a plugin's lookup is named by its name
    drafter = make_lookup(kind, DraftSources(RunConfig()))  # as tune replays it: no engine, no state
    assert isinstance(drafter, Drafter) and drafter.free and not drafter.chained
    drafter.reset([5, 6, 7, 5])
    assert drafter.propose([5, 6, 7, 5], 4).tokens == []  # min-match 2 by default: [7, 5] came nowhere before
    assert drafter.propose([5, 6, 7, 5, 6], 4).tokens == [7, 5, 6]
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
    assert NAME not in {k.name for k in drafter_kinds()}


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
    assert NAME not in {k.name for k in drafter_kinds()}


def test_a_plugin_whose_factory_fails_is_one_line(plugins):
    factory = '    return RecallDrafter(sources.state, int(sources.options["min-match"]))'
    assert factory in SOURCE
    plugins(SOURCE.replace(factory, "    raise RuntimeError('no GPU')"))
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


def test_the_config_layers_labels_are_the_registrys_and_strings_are_read_by_the_registry():
    """config cannot import the registry (the layers run one way), so it keeps the built-in
    drafters' labels for recordings read without the engine: the same as the registry's. Which
    string is a lookup is the registry's alone (``parse_drafter``), read where a string arrives."""
    built_in = {k.name: k.label for k in drafter_kinds() if k.name in ("ngram", "suffix")}
    assert dict(BUILT_IN_LABELS) == built_in
    assert isinstance(drafter_kind("ngram"), DrafterKind)
    assert parse_drafter("suffix") == Lookup(name="suffix")
    assert parse_drafter("runtime:ngram-mod") == Runtime(method="ngram-mod")
    assert parse_drafter("models/draft.gguf") == Model(path="models/draft.gguf")


# -- a kind's own options and its state across requests -------------------------------------


def run_flags(*argv: str) -> DraftConfig:
    from spectui.cli import build_parser
    from spectui.cli.run_flags import config_from_args

    return config_from_args(build_parser().parse_args(["run", "--prompt", "x", *argv])).draft


def test_draft_option_is_parsed_once_at_the_edge_and_recorded_typed(plugins):
    import msgspec

    plugins(SOURCE)
    draft = run_flags("--draft", NAME, "--draft-option", "min-match=3")
    assert draft.drafter == Lookup(name=NAME, options={"min-match": 3})  # an int, not the text "3"
    header = msgspec.json.encode(draft)  # as a recording's header holds it
    assert b'"options":{"min-match":3}' in header and msgspec.json.decode(header, type=DraftConfig) == draft
    old = b'{"drafter":{"kind":"lookup","name":"ngram","ngram_min":2,"ngram_max":4,"memory":true},"length":{"kind":"fixed"}}'
    assert msgspec.json.decode(old, type=DraftConfig).drafter == Lookup(ngram_min=2)  # a recording from before options
    # the factory reads every option resolved: as asked, or the kind's default
    made = make_lookup(drafter_kind(NAME), DraftSources(RunConfig(draft=draft)))
    assert made.min_match == 3  # type: ignore[attr-defined]
    assert make_lookup(drafter_kind(NAME), DraftSources(RunConfig(draft=run_flags("--draft", NAME)))).min_match == 2  # type: ignore[attr-defined]
    assert DraftSources(RunConfig(draft=draft)).options == {"min-match": 3}


def test_the_built_in_kinds_declare_theirs_in_the_fields_recordings_hold():
    assert [o.name for o in drafter_kind("ngram").options] == ["ngram-min", "ngram-max"]
    assert run_flags("--draft-option", "ngram-max=6", "--draft-option", "ngram-min=2") == run_flags("--ngram-max", "6", "--ngram-min", "2")
    assert run_flags("--draft", "suffix", "--draft-option", "memory=off") == run_flags("--draft", "suffix", "--no-draft-memory")
    assert DraftSources(RunConfig(draft=DraftConfig(drafter=Lookup(ngram_max=6)))).options == {"ngram-min": 1, "ngram-max": 6}


def test_draft_option_sets_the_chain_in_front_of_a_draft_model(plugins, tmp_path):
    plugins(SOURCE)
    model = tmp_path / "draft.gguf"
    model.write_bytes(b"")
    draft = run_flags("--draft", str(model), "--chain", "ngram", "--draft-option", "ngram-max=5")
    assert draft.lookup_part == Lookup(name="ngram", ngram_max=5) and draft.has_model


@pytest.mark.parametrize(("argv", "says"), [
    (("--draft", NAME, "--draft-option", "window=4"), "the recall drafter has no option 'window' (its options: min-match)"),
    (("--draft", NAME, "--draft-option", "min-match=two"), "--draft-option min-match=two: min-match is an integer"),
    (("--draft", NAME, "--draft-option", "min-match=0"), "--draft-option min-match=0: min-match must be >= 1, got 0"),
    (("--draft", NAME, "--draft-option", "min-match"), "--draft-option takes KEY=VALUE (an option of --draft recall), got 'min-match'"),
    (("--draft", "ngram", "--draft-option", "min-match=3"), "the ngram drafter has no option 'min-match' (its options: ngram-min, ngram-max)"),
    (("--draft", "suffix", "--draft-option", "memory=maybe"), "--draft-option memory=maybe: memory is true or false"),
    (("--draft", "runtime:ngram-mod", "--runtime", "llama-server", "--draft-option", "min-match=3"),
     "--draft-option sets an option of a model-free drafter"),
])
def test_a_bad_draft_option_is_one_line_and_exit_2(plugins, capsys, argv, says):
    from spectui.cli import main

    plugins(SOURCE)
    assert main(["run", "--headless", "--no-record", "--prompt", "x", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("spectui: error: ") and says in err[0], err


def test_options_that_arrive_typed_are_checked_against_the_kind(plugins):
    from spectui.engine.drafters import check_options

    plugins(SOURCE)
    find_drafter(NAME)
    check_options(DraftConfig(drafter=Lookup(name=NAME, options={"min-match": 4})))
    for options, says in (({"window": 4}, "has no option 'window'"), ({"min-match": "4"}, "min-match is an integer, got '4'"),
                          ({"min-match": 0}, "must be >= 1")):
        with pytest.raises(SpectuiError, match=says):  # a recording or a profile made with another version of the plugin
            check_options(DraftConfig(drafter=Lookup(name=NAME, options=options)))


def test_options_belong_to_their_kind_when_the_drafter_changes(plugins):
    plugins(SOURCE)
    asked = run_flags("--draft", NAME, "--draft-option", "min-match=3", "--ngram-max", "6")
    assert asked.drafting_with(Lookup(name=NAME)).drafter == asked.drafter  # the same kind keeps them
    assert asked.drafting_with(Lookup()).drafter == Lookup(name="ngram", ngram_max=6)  # another kind: its fields carry, not the map


def test_a_kind_declaring_its_options_wrong_is_refused_as_it_is_built():
    from spectui.engine.drafters import DrafterOption

    def make(sources: DraftSources):  # noqa: ANN202
        raise AssertionError("never made")

    for bad, says in ((lambda: DrafterOption("Min_Match", int, 2), "lowercase words"),
                      (lambda: DrafterOption("ratio", list, []), "int, float, bool or str"),  # type: ignore[arg-type]
                      (lambda: DrafterOption("ratio", float, 2.0, max=1.0), "ratio must be <= 1"),
                      (lambda: DrafterOption("size", int, 2, field="no_such"), "names no Lookup field"),
                      (lambda: DrafterKind("twice", "twice", make, options=(DrafterOption("n", int, 1),) * 2), "declares an option twice")):
        with pytest.raises((ValueError, SpectuiError), match=says):
            bad()


class _Stub:
    """A loaded model's stand-in: the engine's drafters need none, its close closes it."""

    closed = False

    def close(self) -> None:
        self.closed = True


class _Outputs(list):
    closes = 0

    def close(self) -> None:
        type(self).closes += 1


def test_an_engine_keeps_one_state_per_kind_shared_by_its_drafters_and_closes_it(plugins):
    from spectui.engine.embedded import Engine

    plugins(SOURCE)
    kind = find_drafter(NAME)
    assert kind is not None
    made: list[int] = []

    def state() -> _Outputs:
        made.append(1)
        return _Outputs()

    from spectui.engine.drafters import register

    register(DrafterKind(NAME, kind.label, kind.make, kind.summary, kind.options, state))  # the example, its state closable
    config = RunConfig(draft=run_flags("--draft", NAME, "--draft-option", "min-match=3"))
    target = _Stub()
    engine = Engine(target, None, config)  # type: ignore[arg-type]  # no model: drafters are made, nothing decodes
    first, second = engine.make_drafter(config), engine.make_drafter(config)
    assert made == [1] and first is not second
    assert first.outputs is second.outputs is engine.drafter_state(drafter_kind(NAME))  # type: ignore[union-attr]
    first.reset([1, 2, 3])  # type: ignore[union-attr]
    first.finish([1, 2, 3, 7, 8, 9, 4])  # type: ignore[union-attr]  # request one's output: 7 8 9 4
    second.reset([5, 7, 8])  # type: ignore[union-attr]
    assert second.propose([5, 7, 8, 9], 2).tokens == [4]  # type: ignore[union-attr]  # request two copies from it
    assert second.min_match == 3  # type: ignore[union-attr]
    assert Engine(_Stub(), None, config).make_drafter(config).outputs == []  # type: ignore[arg-type, union-attr]  # another engine, its own
    engine.close()
    assert _Outputs.closes == 1 and target.closed


def test_a_failing_state_hook_is_one_line(plugins):
    from spectui.engine.drafters import register
    from spectui.engine.embedded import Engine

    plugins(SOURCE)
    kind = find_drafter(NAME)
    assert kind is not None

    def state() -> list[int]:
        raise OSError("no room")

    register(DrafterKind(NAME, kind.label, kind.make, kind.summary, kind.options, state))
    config = RunConfig(draft=DraftConfig(drafter=Lookup(name=NAME)))
    with pytest.raises(SpectuiError, match="the recall drafter's state hook failed: OSError: no room"):
        Engine(_Stub(), None, config).make_drafter(config)  # type: ignore[arg-type]
