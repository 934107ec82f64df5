"""Conversations on the real model: every turn exact, the KV cache's prefix kept between turns,
the folder of recordings read back turn by turn.

The turns stay under 256 tokens of context, where llama.cpp's CPU kernels are batch-invariant
on this machine (see ``test_exactness``): a divergence here is a bug, not a near-tie.
"""

from __future__ import annotations

import msgspec
import pytest

from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Fixed, Model
from spectui.errors import SpectuiError
from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import Prefill, Step
from spectui.sessions.conversation import Conversation, rerun_paths, turn_paths
from spectui.sessions.record import record_session

FIRST = "Write a Python function that returns the squares of a list of numbers."
REPEAT = "Repeat the function you just wrote exactly, word for word."
MAX_TOKENS = 56


def base(engine, **overrides) -> RunConfig:  # noqa: ANN001
    return RunConfig(target=engine.config.target, backend=engine.config.backend, max_tokens=MAX_TOKENS, **overrides)


def tokens_of(events) -> list[int]:  # noqa: ANN001
    return [t for ev in events if type(ev) is Step for t in ev.tokens]


def prefill_of(events) -> Prefill:  # noqa: ANN001
    return next(ev for ev in events if type(ev) is Prefill)


def converse(engine, config: RunConfig, messages=(FIRST, REPEAT), folder=None) -> tuple[Conversation, list[list]]:  # noqa: ANN001
    conv = Conversation.start(record=folder is not None, folder=folder)
    runs = []
    for text in messages:
        turn = conv.next_config(config, text)
        events = list(record_session(engine, turn, conv.record_path if folder is not None else None))
        assert conv.add(turn, events) is not None
        runs.append(events)
    return conv, runs


@pytest.fixture(scope="module")
def ar_chat(engine):
    return converse(engine, base(engine, mode="ar"))


@pytest.mark.parametrize("draft", [DraftConfig(length=CostAware()), DraftConfig(length=Fixed(k=4))],
                         ids=["ngram-cost-aware", "ngram-k4"])
def test_every_turn_equals_ar_and_the_follow_up_copies_more(engine, ar_chat, draft):
    ar_conv, ar_runs = ar_chat
    conv, runs = converse(engine, base(engine, mode="spec", draft=draft))
    for turn, (spec, ar) in enumerate(zip(runs, ar_runs), 1):
        assert tokens_of(spec) == tokens_of(ar), f"turn {turn}: speculative output differs from AR"
    assert [t.reply for t in conv.turns] == [t.reply for t in ar_conv.turns]
    first, second = (summarize(r) for r in runs)
    # the share of each reply that came from accepted drafts (not the rate: a cost-aware K
    # drafts little where nothing is copyable, and a rate over a few drafts says little)
    assert second.accepted / second.n_tokens > first.accepted / first.n_tokens, (first.accepted, second.accepted)


def test_a_follow_up_evaluates_only_its_new_tokens(engine, ar_chat):
    conv, (turn1, turn2) = ar_chat
    p1, p2 = prefill_of(turn1), prefill_of(turn2)
    assert p1.n_cached == 0  # the conversation's first turn starts from an empty cache
    _, prompt2 = engine.prepare_prompt(conv.turns[1].config)
    # kept: the first turn's prompt and reply (as far as the reply re-tokenizes the same)
    assert p2.n_tokens == len(prompt2)
    assert p2.n_cached >= p1.n_tokens + len(tokens_of(turn1)) - 2, (p2.n_cached, p1.n_tokens)
    assert p2.n_evaluated < 40  # the template's turn markers and the new message
    # the same turn run on its own evaluates everything (its tokens may part from the turn's
    # at a near-tie: a prompt split into other batches moves llama.cpp's logits)
    cold = msgspec.structs.replace(conv.turns[1].config, conversation="")
    events = list(engine.run(cold))
    assert prefill_of(events).n_cached == 0 and prefill_of(events).n_evaluated == len(prompt2)
    # a turn of another conversation never takes this one's cache
    other = msgspec.structs.replace(conv.turns[1].config, conversation="another")
    assert prefill_of(list(engine.run(other))).n_cached == 0


def test_a_draft_model_keeps_its_cache_across_turns_and_stays_exact(engine, ar_chat):
    _, ar_runs = ar_chat
    draft = DraftConfig(drafter=Model(path=engine.config.target), length=Fixed(k=3))  # self-drafting: a second context
    _, runs = converse(engine, base(engine, mode="spec", draft=draft))
    assert [tokens_of(r) for r in runs] == [tokens_of(r) for r in ar_runs]
    kept = engine.draft_model.cached
    assert len(kept) >= prefill_of(runs[1]).n_tokens - 1  # turn 2's prompt is in the draft cache


def test_the_folder_holds_the_conversation_turn_by_turn(engine, tmp_path):
    folder = tmp_path / "chat"
    conv, runs = converse(engine, base(engine, mode="spec"), folder=folder)
    baseline = conv.rerun()  # every turn again, AR, with the same messages
    assert [c.mode for c in baseline] == ["ar", "ar"] and baseline[1].history == conv.turns[1].config.history
    reruns = [list(record_session(engine, c, conv.record_path)) for c in baseline]
    assert prefill_of(reruns[1]).n_cached == prefill_of(runs[1]).n_cached  # its cache built the same way
    assert [tokens_of(r) for r in reruns] == [tokens_of(r) for r in runs]
    files = sorted(p.name for p in folder.iterdir())
    assert [f.split("_")[0] for f in files] == ["turn-01", "turn-01", "turn-02", "turn-02"]
    paths = turn_paths(folder)  # the baseline re-runs are not part of the turn order
    assert [read_recording(p).header.config.mode for p in paths] == ["spec", "spec"]
    assert sorted(rerun_paths(folder)) == sorted(set(folder.iterdir()) - set(paths))
    opened = Conversation.open(folder)
    assert opened.id == conv.id and [t.reply for t in opened.turns] == [t.reply for t in conv.turns]
    assert [t.path for t in opened.turns] == paths
    header = read_recording(paths[1]).header
    assert header.config.conversation == conv.id and header.config.turn == 2
    assert [m.role for m in header.config.history] == ["user", "assistant"]


def test_a_conversation_past_the_context_is_refused_in_one_line(engine):
    conv = Conversation(id="c")
    config = base(engine)
    conv.add(conv.next_config(config, "word " * 1500), "reply " * 600)
    with pytest.raises(SpectuiError, match=r"the conversation \(2 turns\) is \d+ tokens but the context holds 2048"):
        engine.check(conv.next_config(config, "and now?"))


def test_mlx_keeps_its_cache_between_turns_and_stays_exact(mlx_engine):
    """The same on MLX (short: its CPU backend runs ~8 tok/s here)."""
    def short(**kw) -> RunConfig:  # noqa: ANN003
        return RunConfig(target=mlx_engine.config.target, backend=mlx_engine.config.backend, max_tokens=12, **kw)

    _, ar = converse(mlx_engine, short(mode="ar"), messages=("Name a colour.", "Say it again."))
    _, spec = converse(mlx_engine, short(mode="spec", draft=DraftConfig(length=Fixed(k=3))), messages=("Name a colour.", "Say it again."))
    assert [tokens_of(r) for r in spec] == [tokens_of(r) for r in ar]
    assert prefill_of(ar[1]).n_cached > prefill_of(ar[0]).n_tokens and prefill_of(spec[1]).n_cached == prefill_of(ar[1]).n_cached
