"""The rule that picks the embedded default's weight type from a probe's measurements."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from spectui.engine.host.verify_cost import Curve
from spectui.engine.host.weights import CHOICE_BLOCK, DISTURBED_BY, WeightRow, choose_weights, disturbed


def row(quant: str, token_ms: float, block_cost: float) -> WeightRow:
    """A type whose one token takes ``token_ms`` and whose block of ``CHOICE_BLOCK`` costs
    ``block_cost`` one-token evaluations (linear in between)."""
    relative = tuple(1.0 + (block_cost - 1.0) * (n - 1) / (CHOICE_BLOCK - 1) for n in range(1, CHOICE_BLOCK + 1))
    return WeightRow(quant=quant, path=f"/m/{quant}.gguf", size_bytes=1, curve=Curve(depth=64, unit_us=token_ms * 1000, relative=relative))


# measured on this repository's 2-core AMD EPYC host (first-run probe, 2026-11-26)
HOST = [row("Q4_1", 9.9, 6.14), row("F16", 12.4, 2.67), row("Q8_0", 9.7, 4.53), row("Q4_0", 6.0, 4.75)]


def test_a_faithful_type_that_verifies_faster_without_a_slower_token_replaces_the_shipped_one():
    """Q4_0 is faster still, but a second 4-bit rounding is never chosen; F16's token is slower."""
    choice = choose_weights(HOST, "Q4_1", by="test")
    assert choice.quant == "Q8_0" and choice.shipped == "Q4_1"
    assert choice.block_us["Q8_0"] == pytest.approx(9700 * 4.53)
    assert "43.9 ms against the shipped Q4_1's 60.8" in choice.reason()


def test_a_type_whose_single_token_is_slower_is_not_chosen_however_well_it_batches():
    """F16 verifies a block of 9 fastest but one token 25% slower: AR and every rejected
    block would pay that."""
    rows = [row("Q4_1", 9.9, 6.14), row("F16", 12.4, 1.5)]
    assert choose_weights(rows, "Q4_1", by="test").quant == "Q4_1"


def test_ties_go_to_the_type_most_faithful_to_the_shipped_weights():
    rows = [row("Q4_1", 10.0, 6.0), row("Q8_0", 9.0, 4.0), row("F16", 9.0, 3.9)]  # within 5%
    assert choose_weights(rows, "Q4_1", by="test").quant == "F16"


def test_the_shipped_file_stays_unless_a_type_beats_it_clearly():
    rows = [row("Q4_1", 10.0, 4.0), row("Q8_0", 10.0, 3.8)]  # 5% faster: noise on a shared machine
    choice = choose_weights(rows, "Q4_1", by="test")
    assert choice.quant == "Q4_1" and "no type verifies a block" in choice.reason()


def test_a_second_4_bit_rounding_is_never_chosen_however_fast():
    rows = [row("Q4_1", 10.0, 6.0), row("Q4_K_M", 5.0, 2.0), row("Q4_0", 5.0, 2.0)]
    assert choose_weights(rows, "Q4_1", by="test").quant == "Q4_1"


def test_on_a_gpu_f16_wins_both_ways():
    """What the probe measured on an NVIDIA H200 (benchmarks/results/cuda-probe-2026-11-26.txt)."""
    rows = [row("Q4_0", 3.46, 1.71), row("Q4_1", 3.56, 1.61), row("Q8_0", 4.61, 1.64), row("F16", 2.78, 1.21)]
    assert choose_weights(rows, "Q4_1", by="test").quant == "F16"


def test_a_stored_choice_the_rule_no_longer_allows_is_probed_again(tmp_path, monkeypatch):
    """An older spectui's stored choice of a type outside the candidates reads as none."""
    from spectui.config import BackendConfig
    from spectui.engine.host.weights import store_choice, stored_choice

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    backend = BackendConfig()
    store_choice(backend, choose_weights(HOST, "Q4_1", by="test"))
    assert stored_choice(backend).quant == "Q8_0"
    old = choose_weights([row("Q4_1", 10.0, 6.0), row("Q4_0", 5.0, 2.0)], "Q4_1", by="test")
    store_choice(backend, msgspec.structs.replace(old, quant="Q4_0"))  # what the first cut of the rule stored
    assert stored_choice(backend) is None


def test_a_type_measured_while_other_processes_were_busier_is_measured_again():
    """Types are timed one after another: the shipped Q4_1 timed beside a test collection (a
    core of two busy elsewhere, 2026-11-28) took 123.5 ms a token against its usual ~15, and
    F16 was chosen on it. Such a row is the one measured again; load that stayed on through
    every type, or none known, is not a reason."""
    def loaded(r: WeightRow, load: int | None) -> WeightRow:
        return dataclasses.replace(r, other_load=load)

    q41, f16, q80 = HOST[0], HOST[1], HOST[2]
    assert disturbed([loaded(q41, 52), loaded(f16, 3), loaded(q80, 4)]) == [0]
    assert disturbed([loaded(q41, 3 + DISTURBED_BY - 1), loaded(f16, 3)]) == []
    assert disturbed([loaded(q41, 55), loaded(f16, 50), loaded(q80, 52)]) == []  # busy throughout: alike
    assert disturbed([loaded(q41, 60), loaded(f16, None)]) == []  # nothing to compare with
    assert disturbed([loaded(q41, 2), loaded(f16, 30), loaded(q80, 45)]) == [1, 2]


def test_a_deterministic_run_picks_among_the_invariant_types_by_the_same_rule():
    """The probe picked F16 (not batch-invariant with one thread): a --deterministic run takes
    the invariant type the same rule picks from the same numbers; an invariant pick stands."""
    from spectui.engine.host.weights import INVARIANT_TYPES, WeightChoice, deterministic_pick

    numbers = {"Q4_1": (9.9, 6.14), "F16": (12.4, 1.5), "Q8_0": (9.7, 4.53)}
    token = {q: t * 1000 for q, (t, _) in numbers.items()}
    block = {q: t * 1000 * c for q, (t, c) in numbers.items()}
    forced = WeightChoice(quant="F16", shipped="Q4_1", token_us=token, block_us=block, by="test")
    assert deterministic_pick(forced) == "Q8_0" and "F16" not in INVARIANT_TYPES
    slow_q8 = msgspec.structs.replace(forced, block_us={**block, "Q8_0": block["Q4_1"]})
    assert deterministic_pick(slow_q8) == "Q4_1"  # nothing invariant beats the shipped file: it runs as shipped
    assert deterministic_pick(msgspec.structs.replace(forced, quant="Q8_0")) == "Q8_0"
