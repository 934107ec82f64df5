"""``spectui tune --weights``: why the verify-cost curve looks the way it does (the probe
itself, and the embedded default's choice it stores, are ``engine.weights``).

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

from collections.abc import Sequence

from spectui.engine.host.verify_cost import Curve
from spectui.engine.host.weights import BATCHED_ROWS_PER_COST, WeightRow


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
