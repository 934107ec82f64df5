"""``spectui tune --weights``: why the verify-cost curve looks the way it does.

A probe is requantized with llama.cpp's own quantize API to each weight type, cached in the
user cache directory, and each copy's curve is measured on this machine: by default the small
embedded SmolLM2-135M (seconds), or, with ``--probe-target``, the user's own target, whose width
decides which kernels a large model gets (a 576-wide 135M model does not meet the conditions of
every kernel a 7B one runs, on Metal above all). Either way the report names the model probed.
Per type: the types whose blocks cost far less than their rows get batched matrix
kernels here (on x86 ggml: Q4_0 repacked in groups of 4 rows, Q8_0 and F16 through
llamafile's sgemm), the others pay close to one pass per token. The user's model is never
requantized unless ``--write-quant`` asks for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from spectui.config import BackendConfig
from spectui.engine.llamacpp import LlamaCppBackend
from spectui.engine.quantize import PROBE_TYPES, cached_copy
from spectui.models.gguf import read_gguf
from spectui.models.registry import embedded_model_path
from spectui.tune.measure import Curve, measure_curve

#: rows verified per one-token cost at n = 16 from which a type counts as batched here
BATCHED_ROWS_PER_COST = 3.0


@dataclass
class WeightRow:
    quant: str
    path: str
    size_bytes: int
    curve: Curve
    source: str = ""  # the model file the probe was made from

    @property
    def rows_per_cost(self) -> float:
        return 16 / self.curve.cost(16)

    @property
    def batched(self) -> bool:
        return self.rows_per_cost >= BATCHED_ROWS_PER_COST

    def ideal_speedup(self, k: int = 8) -> float:
        """Speedup at full acceptance with K drafted tokens: K + 1 tokens for one block."""
        return (k + 1) / self.curve.cost(k + 1)


def probe_file(quant: str, source: str | None = None) -> str:
    """``source`` (the embedded model when None) in ``quant``: the file itself when it is of
    that type already, or a cached requantized copy."""
    src = source or embedded_model_path()
    return src if read_gguf(src).quant.upper() == quant.upper() else str(cached_copy(src, quant))


def probe_weights(
    backend: BackendConfig,
    text: str,
    *,
    types: Sequence[str] = PROBE_TYPES,
    progress: Callable[[str], None] = lambda _m: None,
    source: str | None = None,
) -> list[WeightRow]:
    """The probe's curve in every weight type, at the depth ``text`` reaches; the probe is
    ``source`` (a model file) or, when None, the embedded model."""
    config = BackendConfig(n_ctx=max(512, min(backend.n_ctx, 2048)), n_batch=backend.n_batch, n_threads=backend.n_threads,
                           n_gpu_layers=backend.n_gpu_layers)
    rows = []
    for quant in types:
        progress(f"probe weights: {quant}")
        path = probe_file(quant, source)
        llama = LlamaCppBackend.open(path, config)
        try:
            tokens = llama.tokenize(text, add_bos=True)
            curve = measure_curve(llama, tokens, depth=len(tokens))
        finally:
            llama.close()
        rows.append(WeightRow(quant=quant, path=path, size_bytes=Path(path).stat().st_size, curve=curve,
                              source=source or embedded_model_path()))
    return rows


def weights_summary(rows: Sequence[WeightRow], yours: str, your_curve: Curve) -> list[str]:
    """Sentences: which types batch here, and what the user's own type costs."""
    batched = [r.quant for r in rows if r.batched]
    single = [r.quant for r in rows if not r.batched]
    lines = [
        f"batched verification on this machine: {', '.join(batched) or 'none'}"
        + (f"; close to one pass per token: {', '.join(single)}" if single else ""),
    ]
    yours_rows = 16 / your_curve.cost(16)
    kind = "batched" if yours_rows >= BATCHED_ROWS_PER_COST else "not batched"
    lines.append(f"your model ({yours}): a block of 16 costs {your_curve.cost(16):.2f} one-token evaluations "
                 f"({yours_rows:.1f} rows per unit: {kind}); a block of 9 (K=8) {your_curve.cost(9):.2f}")
    best = max(rows, key=lambda r: r.ideal_speedup(), default=None)
    if best is not None and best.quant.upper() != yours.upper() and best.ideal_speedup() > (9 / your_curve.cost(9)) * 1.1:
        lines.append(f"the probe verifies fastest in {best.quant} (ideal {best.ideal_speedup():.2f}x at full acceptance, K=8); "
                     f"a copy of your model in it: spectui tune --write-quant {best.quant} OUT.gguf (it changes the "
                     f"model's numbers: check quality with spectui quality)")
    return lines
