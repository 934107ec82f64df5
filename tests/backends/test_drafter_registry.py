"""A drafter defined here, added through the public registry (``spectui.engine.drafters``),
runs everywhere a built-in model-free drafter does, with no other file edited: ``spectui
run --draft NAME`` on the real model (its output equal to AR's), ``--chain NAME``, tune's
replay of a greedy output, and the dashboard model picker's list."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from spectui.cli import build_parser, main
from spectui.drafting import DraftConfig, Fixed, Lookup
from spectui.engine.drafters import DrafterKind, DraftSources, drafter_kind, register, unregister
from spectui.engine.protocol import Draft, DrafterBase
from spectui.errors import SpectuiError
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from spectui.tune.replay import replay

PROMPT = "Repeat this line twice, exactly: the quick brown fox jumps over the lazy dog."


class LastTokenDrafter(DrafterBase):
    """Copies what followed the latest earlier occurrence of the last token (a bigram lookup,
    written here from scratch: nothing of the built-in n-gram drafter is reused)."""

    name = "last-token"
    free = True

    def reset(self, prompt: Sequence[int]) -> None:
        self.proposals = 0

    def propose(self, history: Sequence[int], k: int) -> Draft:
        self.proposals += 1
        last = history[-1]
        for i in range(len(history) - 2, -1, -1):
            if history[i] == last:
                return Draft(list(history[i + 1 : i + 1 + k]), match=1)
        return Draft([])

    def close(self) -> None:
        pass


@pytest.fixture
def last_token():
    made: list[LastTokenDrafter] = []

    def make(sources: DraftSources) -> LastTokenDrafter:
        made.append(LastTokenDrafter())
        return made[-1]

    register(DrafterKind("last-token", "last token", make, "copies what followed the last token before"))
    yield made
    unregister("last-token")


def _tokens(path) -> list[int]:
    return [t for e in read_recording(path).events if type(e) is Step for t in e.tokens]


def test_a_registered_drafter_runs_through_spectui_run(last_token, tmp_path, calibrations, monkeypatch):
    from tests.conftest import seed_calibrations

    cache = tmp_path / "cache"
    seed_calibrations(calibrations, cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    common = ["run", "--headless", "--prompt", PROMPT, "--max-tokens", "40", "--threads", "1"]
    assert main([*common, "--mode", "ar", "-o", str(tmp_path / "ar.spectui")]) == 0
    assert main([*common, "--draft", "last-token", "--k", "4", "-o", str(tmp_path / "spec.spectui")]) == 0
    spec = read_recording(tmp_path / "spec.spectui")
    assert spec.header.config.draft.flag == "last-token" and not spec.header.config.draft.has_model
    # a recording names a plugin by its registered name, so it reads the same without the plugin
    assert spec.header.config.label() == "spec last-token K=4"
    assert last_token and last_token[0].proposals > 0  # the engine made it through the registry
    steps = [e for e in spec.events if type(e) is Step]
    assert sum(e.accepted for e in steps) > 0  # it drafted and had tokens accepted
    assert _tokens(tmp_path / "spec.spectui") == _tokens(tmp_path / "ar.spectui")


def test_tune_replays_a_registered_drafter(last_token):
    prompt = [5, 6, 7, 8, 9, 5, 6]
    output = [7, 8, 9, 5, 6, 7, 8, 9]
    r = replay(prompt, output, lambda n: 1.0 + 0.5 * (n - 1), DraftConfig(drafter=Lookup(name="last-token"), length=Fixed(k=4)))
    assert r.drafted > 0 and r.accepted == r.drafted  # every copy is right on this cycle
    assert drafter_kind("last-token").label == "last token"


def test_the_flags_and_the_model_picker_offer_a_registered_drafter(last_token):
    from spectui.ui.screens.model_picker import free_drafter_options

    args = build_parser().parse_args(["run", "--draft", "model.gguf", "--chain", "last-token"])
    assert args.chain == "last-token"
    assert "'last-token'" in next(a.help for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
                                  if a.dest == "draft")
    labels = [str(o.prompt) for o in free_drafter_options()]
    assert labels == ["n-gram (no draft model)", "suffix (no draft model)", "last token (no draft model)"]
    unregister("last-token")
    assert "last token (no draft model)" not in [str(o.prompt) for o in free_drafter_options()]
    with pytest.raises(SpectuiError, match="invalid choice: 'last-token'"):
        build_parser().parse_args(["run", "--chain", "last-token"])
