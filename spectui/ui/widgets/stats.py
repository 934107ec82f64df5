"""The stats panel: the run's numbers, with the same definitions as ``spectui report``.

Speed (decode tok/s, TTFT, prefill), speculation (acceptance, mean accepted length, K,
rollbacks), memory (peak RSS, swap) and the verdict: predicted speedup from the run's own
blocks (what each drafted block yielded against its size's cost on the run's curve,
``spectui.metrics.predict.predict_blocks``) beside the measured one (decode tok/s over an AR
run of the same prompt and settings, when the dashboard has one), and the gain of the blocks
drafted: the tokens beyond their cost they yielded, and what was expected of them.

Beside the run's K, the K cap under which the same blocks pay best (``blocks_best``: each block
truncated at the cap, priced on the run's curve). A run with no timed blocks (a server's) falls
back to the K the verify-cost curve says pays best at the run's acceptance (``curve_best``).
Pure Python on numbers the run keeps, cached per event, so it costs nothing on a repaint.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from spectui.drafting import DraftConfig
from spectui.format import DASH, missing, num, pct, signed_size, size
from spectui.metrics.live import LiveRun
from spectui.metrics.predict import BlockPrediction, best_k
from spectui.ui.state import Baseline


def curve_best(acceptance: float, draft: DraftConfig, seed: Sequence[float]) -> str:
    """``K 4 (seed curve)``: the K the run's verify-cost curve (``seed``, else the cost model)
    says pays best at ``acceptance`` (``AR`` when none beats one token per unit of cost),
    within a cost-aware K's limits, and whose curve it is."""
    best = best_k(acceptance, tuple(seed), *draft.priced_range)
    source = "seed curve" if seed else "cost model"
    return f"{f'K {best}' if best else 'AR'} ({source})"


def blocks_best(prediction: BlockPrediction) -> str:
    """``K 3 (run blocks)``: the K cap under which the run's own blocks pay best, ``AR`` when
    none beats one token per AR step."""
    return f"{f'K {prediction.best_cap}' if prediction.best_cap else 'AR'} (run blocks)"


class StatsPanel(Static):
    DEFAULT_CSS = """
    StatsPanel {
        width: 36;
        height: 1fr;
        border: round $primary 40%;
        border-title-color: $text-primary;
        padding: 0 1;
    }
    StatsPanel > .stats-panel--label { color: $text-muted; }
    StatsPanel > .stats-panel--value { color: $foreground; text-style: bold; }
    StatsPanel > .stats-panel--good { color: $text-success; text-style: bold; }
    StatsPanel > .stats-panel--bad { color: $text-error; text-style: bold; }
    """
    COMPONENT_CLASSES = {"stats-panel--label", "stats-panel--value", "stats-panel--good", "stats-panel--bad"}

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - Textual's widget keywords (id, classes, ...), passed on
        super().__init__("", markup=False, **kwargs)
        self.border_title = "stats"
        self._key: tuple | None = None

    def update_from(self, live: LiveRun, *, mode: str, k: str, baseline: Baseline | None) -> None:
        width, height = self.content_size
        get = self.get_component_rich_style
        label_style, value_style, good, bad = styles = tuple(
            get(f"stats-panel--{name}") for name in ("label", "value", "good", "bad")
        )
        # The styles are baked into the table, so they are part of what decides a rebuild
        # (a theme change restyles it even when no event arrived).
        key = (id(live), live.version, mode, k, baseline, width, height, styles)
        if key == self._key:
            return
        self._key = key

        s = live.summary()
        # Labels of at most 12 cells and values of at most 18 fit the 36-cell panel at 80x24.
        rows: list[tuple[str, str | Text]] = []

        def row(label: str, value: str | Text) -> None:
            rows.append((label, value))

        row("decode", num(s.decode_tok_s, ".1f", " tok/s"))
        energy = live.end.energy if live.end is not None else None  # measured at the run's end, where a counter exists
        if energy is not None and energy.j_per_token is not None:
            watts = f" · {energy.decode_watts:.0f}W" if energy.decode_watts is not None else ""
            row("energy", f"{energy.j_per_token:.3g} J/tok{watts}")
        row("TTFT", num(s.ttft_ms, ".1f", " ms"))
        row("prefill", num(s.prefill_ms, ".1f", " ms") + (f" · {s.n_prompt_tokens} tok" if s.n_prompt_tokens else ""))
        row("tokens", f"{s.n_tokens}" + (f" · {s.finish_reason}" if s.finish_reason else ""))
        row("acceptance", pct(s.acceptance_rate) + (f" · {s.accepted}/{s.drafted}" if s.drafted else ""))
        row("mean acc len", num(s.mean_accepted_length, ".2f"))
        row("draft K", ("AR" if mode == "ar" else k) + (f" · {s.rollbacks} rollbacks" if s.draft_blocks else ""))
        blocks = live.block_prediction(baseline.ar_step_us if baseline else None)
        if mode != "ar" and blocks is not None:
            row("curve best", blocks_best(blocks))
        elif mode != "ar" and s.drafted and live.header is not None and not missing(s.acceptance_rate):
            row("curve best", curve_best(s.acceptance_rate, live.header.config.draft, live.header.pricing.seed))
        if live.policy_changes:  # the fallback policy moved: where it stands now, and how often
            n = len(live.policy_changes)
            row("fallback", f"{live.policy_changes[-1].after} · {n} change{'s' if n > 1 else ''}")
        row("peak RSS", size(s.peak_rss_bytes) if s.peak_rss_bytes else DASH)
        swap = DASH if live.last_memory is None else f"{size(live.swap_used)} ({signed_size(live.swap_delta)})"
        row("swap", swap)

        prediction = live.prediction(baseline.ar_step_us if baseline else None)  # the coin model: details only
        if blocks is None:
            row("speedup pred", DASH)
        else:
            v = blocks.speedup
            row("speedup pred", Text(f"{v:.2f}×", good if v >= 1 else bad))
        measured: str | Text = DASH
        if baseline is not None and not missing(s.decode_tok_s) and baseline.decode_tok_s > 0 and live.draft_blocks:
            m = s.decode_tok_s / baseline.decode_tok_s
            measured = Text(f"{m:.2f}× vs AR", good if m >= 1 else bad)
        elif live.draft_blocks:
            measured = "needs an AR run"
        row("speedup meas", measured)
        if blocks is None:
            row("block gain", DASH)
        else:  # tokens the blocks yielded beyond their cost, and what was expected of them
            gain = Text(f"{blocks.realized_gain:+.1f}", good if blocks.realized_gain >= 0 else bad)
            row("block gain", gain + Text(f" (exp {blocks.expected_gain:+.1f})", value_style))
            row("block cost", f"{blocks.relative_cost:.2f}× AR ({blocks.source})")

        # Details, shown when the panel is tall enough (they are in `spectui report` too).
        details: list[tuple[str, str | Text]] = [("", "")]
        if s.warmup_dropped:
            details.append(("steady", num(s.steady_tok_s, ".1f", " tok/s")))
        details.append(("ITL p50", num(s.itl_p50_ms, ".2f", " ms")))
        details.append(("ITL p95", num(s.itl_p95_ms, ".2f", " ms")))
        details.append(("ITL p99", num(s.itl_p99_ms, ".2f", " ms")))
        if s.draft_blocks:
            details.append(("draft blocks", f"{s.draft_blocks}"))
            details.append(("draft time", f"{s.draft_ms:.1f} ms"))
            details.append(("verify time", f"{s.verify_ms:.1f} ms"))
            if s.draft_forwards:
                details.append(("draft fwds", f"{s.draft_forwards}"))
            if prediction is not None:  # the independent-coin model at the run's acceptance
                be = prediction.break_even
                details.append(("break-even a", "never" if missing(be) else pct(be)))
                details.append(("E[tok/block]", f"{prediction.expected_tokens:.2f}"))
            for j, share in enumerate(s.per_position_acceptance[:8], 1):
                details.append((f"accept @{j}", pct(share)))
        if live.last_memory is not None:
            details.append(("min headroom", size(s.min_headroom_bytes)))
        if height > len(rows) + 1:
            rows.extend(details[: height - len(rows)])

        # Plain Text in two aligned columns: a rich Table re-lays itself out on every repaint,
        # which cost more than everything else in this panel.
        width = max(20, width)
        label_width = max(len(label) for label, _ in rows) + 1
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        for i, (label, value) in enumerate(rows):
            if i:
                out.append("\n")
            out.append(label.ljust(label_width), label_style)
            value_text = value if isinstance(value, Text) else Text(value, value_style)
            out.append(" " * max(1, width - label_width - value_text.cell_len))
            out.append_text(value_text)
        self.update(out, layout=False)  # a fixed-size panel: no layout pass per update
