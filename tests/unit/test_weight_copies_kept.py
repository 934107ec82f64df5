"""The first-run probe's clean-up keeps every requantized copy that a stored choice runs
(the weight probe's copies): a one-thread probe (``--deterministic``) must not delete the Q8_0 copy
the two-thread choice loads, or alternating the two requantizes on every switch.

Real files in a temporary cache; no model is loaded (the copies are stand-ins: the clean-up
only reads their paths)."""

from __future__ import annotations

from pathlib import Path

from spectui.config import BackendConfig
from spectui.engine.host.verify_cost import Curve
from spectui.engine.host.weights import (
    WeightRow,
    choice_key,
    choose_weights,
    discard_unused_copies,
    store_choice,
    stored_choice,
    stored_types,
)

SHIPPED = "Q4_1"


def rows(folder: Path, source: Path, *, fast: str) -> list[WeightRow]:
    """A probe's rows over real files: the shipped file itself and two copies, ``fast`` the
    type whose block is clearly the cheapest (so it is chosen)."""
    out = []
    for quant in (SHIPPED, "F16", "Q8_0"):
        path = source if quant == SHIPPED else folder / f"model.{quant}.gguf"
        if quant != SHIPPED:
            path.write_bytes(b"GGUF" + quant.encode())
        block = 2.0 if quant == fast else 6.0
        curve = Curve(depth=64, unit_us=1000.0, relative=tuple(1.0 + (block - 1.0) * (n - 1) / 8 for n in range(1, 10)))
        out.append(WeightRow(quant=quant, path=str(path), size_bytes=path.stat().st_size, curve=curve, source=str(source)))
    return out


def setup(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:  # noqa: ANN001 - pytest's fixture
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    copies = tmp_path / "cache" / "spectui" / "quant"
    copies.mkdir(parents=True)
    source = tmp_path / f"model.{SHIPPED}.gguf"
    source.write_bytes(b"GGUF shipped")
    return copies, source


def test_a_one_thread_probe_keeps_the_copy_the_two_thread_choice_runs(tmp_path, monkeypatch):
    copies, source = setup(tmp_path, monkeypatch)
    two, one = BackendConfig(n_threads=2), BackendConfig(n_threads=1)
    sha16 = choice_key(two).split("|", 1)[0]

    # the plain run's probe (two threads) chose Q8_0; its clean-up left Q8_0
    first = rows(copies, source, fast="Q8_0")
    store_choice(two, choose_weights(first, SHIPPED, by="first run"))
    assert stored_choice(two).quant == "Q8_0"
    discard_unused_copies(first, sha16)
    assert (copies / "model.Q8_0.gguf").is_file() and not (copies / "model.F16.gguf").exists()

    # then a --deterministic run (one thread) probes and keeps the shipped type: before the
    # fix its clean-up deleted every copy it did not choose, the two-thread choice's included
    second = rows(copies, source, fast=SHIPPED)
    store_choice(one, choose_weights(second, SHIPPED, by="first run"))
    assert stored_choice(one).quant == SHIPPED
    gone = discard_unused_copies(second, sha16)
    assert (copies / "model.Q8_0.gguf").is_file(), "the copy the two-thread choice runs was deleted"
    assert gone == [copies / "model.F16.gguf"] and not (copies / "model.F16.gguf").exists()
    assert source.is_file()  # the shipped file is never a copy to delete
    assert stored_types(sha16) == {"Q8_0", SHIPPED}


def test_choices_for_another_shipped_file_keep_nothing_here(tmp_path, monkeypatch):
    copies, source = setup(tmp_path, monkeypatch)
    probe = rows(copies, source, fast="F16")
    store_choice(BackendConfig(n_threads=2), choose_weights(probe, SHIPPED, by="first run"))  # F16, for this file
    discard_unused_copies(probe, "0" * 16)  # a shipped file no stored choice names
    assert not (copies / "model.F16.gguf").exists() and not (copies / "model.Q8_0.gguf").exists()
    assert source.is_file()
