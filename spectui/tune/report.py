"""Every rendering of a ``TuneResult`` (``spectui.tune.result``): what ``spectui tune`` prints
(the curves, a plan per tier with its check, the settings to use in spectui, and for each
runtime the command that measures its own settings: nothing is advised for a runtime that
was not run there, see ``spectui.tune.runtime``), the shorter view the dashboard's tune screen shows (``format_summary``), the plotext
charts both show, and the JSON ``tune --json`` prints and ``spectui.tune.store`` keeps. The
screen reads a stored result back into a ``TuneResult`` and renders it here: one renderer."""

from __future__ import annotations

import math
from typing import Any

import msgspec

from spectui.charts import Axis, Panel, Series, render
from spectui.config import RUNTIMES
from spectui.drafting import lookup_label
from spectui.engine.host.verify_cost import Curve
from spectui.format import num, section_title, text_table
from spectui.metrics.conditions import MachineLoad
from spectui.tune.plan import K_CHOICES, Setting, TierPlan
from spectui.tune.result import TuneResult, agreement, finite
from spectui.tune.runtime import MEASURED_METHODS

#: a prediction and its check agree when within this share of each other
AGREEMENT = 0.15
#: sizes shown in the curve table
SHOWN_SIZES = (2, 3, 4, 5, 8, 9, 12, 16)


def _curve_row(label: str, curve: Curve) -> list[str]:
    return [label, str(curve.depth), f"{curve.unit_us / 1000:.1f} ms", *(f"{curve.cost(n):.2f}" for n in SHOWN_SIZES)]


def fixed_k_label(result: TuneResult) -> str:
    """The label of the fixed-K settings of this result's drafter, ``{}`` for K."""
    return Setting(result.drafter).fixed_prefix() + "{}"


def curve_lines(result: TuneResult) -> list[str]:
    """The verify-cost curves as a table (and a draft model's cost per token)."""
    curves = [_curve_row("prompt depth", result.curve)]
    if result.long_curve is not None:
        curves.append(_curve_row("long context", result.long_curve))
    out = ["verify cost: evaluating n tokens at once, in one-token evaluations",
           text_table(["at", "depth", "1 token", *(f"n={n}" for n in SHOWN_SIZES)], curves,
                      right=set(range(1, 3 + len(SHOWN_SIZES))), rules_before={0})]
    if result.draft_cost:
        out.append(f"  draft model: {result.draft_cost:.2f} target one-token evaluations per drafted token")
    return out


def _off_by(plan: TierPlan) -> str:
    """How far the check landed from the prediction; `` !`` past ``AGREEMENT``."""
    if plan.disturbed:
        return f"disturbed: others {max(plan.disturbed.values()):.0%}"
    agree = agreement(plan)
    return "-" if agree is None else f"{agree:+.0%}" + ("" if abs(agree) <= AGREEMENT else " !")


def disturbed_lines(result: TuneResult) -> list[str]:
    """A line per tier whose check stayed on a shared machine (measured again): the load,
    and that its measured figure is not this machine's answer."""
    out = []
    for p in result.tiers:
        if p.disturbed:
            load = MachineLoad(max(p.disturbed.values()))
            out.append(f"  {p.tier}: checked while {load.text()} (measured again, still shared: "
                       f"{', '.join(p.disturbed)}); its measured {_x(p.measured)} is that load's, not this machine's: "
                       "run tune again on a quiet machine")
    return out


def _x(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}x"


def format_summary(result: TuneResult) -> str:
    """The dashboard's tune screen: when and where it was measured, the curves, one table of
    the plan per tier with its check and what the weights allow, the verdicts and the
    settings to use (``format_text`` has the rest)."""
    out = [f"{result.model} ({result.quant}), {result.threads} threads, drafter {result.drafter} · measured "
           f"{result.measured_at or '?'} · acceptance from {result.source}", ""]
    out.extend(curve_lines(result))
    out.append("")
    out.append("plan per tier (predicted from the curve, checked by real runs)")
    rows = [[p.tier, p.best.label(), num(p.acceptance, ".2f"), num(p.break_even, ".2f"), _x(p.best_speedup), _x(p.measured),
             _off_by(p), _x(p.copy_ceiling), _x(p.perfect_ceiling)] for p in result.tiers]
    # the last two: what the weights allow (``spectui.tune.ceiling``)
    out.append(text_table(["tier", "setting", "accept", "break-even", "predicted", "measured", "off by",
                           "copying at best", "perfect drafter"], rows, right={2, 3, 4, 5, 6, 7, 8}, rules_before={0}))
    out.extend(disturbed_lines(result))
    out.append("")
    out.extend(f"  {p.verdict}" for p in result.tiers if p.verdict)
    out.append("")
    out.append("settings to use")
    out.extend(f"  {line}" for line in settings_lines(result))
    return "\n".join(out)


def format_text(result: TuneResult) -> str:
    """What ``spectui tune`` prints."""
    out = [section_title(f"spectui tune: {result.model} ({result.quant}), {result.threads} threads, drafter {result.drafter}")]
    out.extend(curve_lines(result))
    out.append("")
    out.append(f"plans per tier (acceptance from {result.source}; predicted from the curve, checked by real runs)")
    rows = [[p.tier, str(len(p.prompts)), p.best.label(), num(p.acceptance, ".2f"), num(p.break_even, ".2f"),
             f"{p.best_speedup:.2f}x", "-" if p.measured is None else f"{p.measured:.2f}x", _off_by(p)]
            for p in result.tiers]
    out.append(text_table(["tier", "prompts", "best setting", "accept", "break-even", "predicted", "measured", "off by"],
                          rows, right={1, 3, 4, 5, 6, 7}, rules_before={0}))
    out.extend(disturbed_lines(result))
    out.append("")
    for p in result.tiers:
        out.append(f"  {p.verdict}")
    out.append("")
    out.extend(ceiling_lines(result))
    out.append("")
    out.append("predicted speedup per fixed K (x AR)")
    ks = [k for k in K_CHOICES if k in (1, 2, 3, 4, 6, 8, 12, 16)]
    label = fixed_k_label(result)
    per_k = [[p.tier, *(num(p.predicted.get(label.format(k)), ".2f") for k in ks)] for p in result.tiers]
    out.append(text_table(["tier", *(f"K={k}" for k in ks)], per_k, right=set(range(1, len(ks) + 1)), rules_before={0}))
    out.append("")
    out.append("acceptance per drafted position (longest K)")
    pos = [[p.tier, *(num(a, ".2f") for a in p.per_position[:8])] for p in result.tiers]
    out.append(text_table(["tier", *(f"#{j + 1}" for j in range(8))], pos, right=set(range(1, 9)), rules_before={0}))
    out.append("")
    out.append("settings to use")
    out.extend(f"  {line}" for line in settings_lines(result))
    out.append("")
    out.append("exactness (greedy speculative output vs AR)")
    out.extend(f"  {line}" for line in exactness_lines(result))
    return "\n".join(out)


def _share(speedup: float, bound: float) -> str:
    return num(speedup / bound * 100 if bound and math.isfinite(bound) else math.nan, ".0f", "%")


def ceiling_lines(result: TuneResult) -> list[str]:
    """What the weights allow per tier (``tune.ceiling``) beside what the best setting gets."""
    rows = [[p.tier, f"{p.best_speedup:.2f}x", num(p.lookup_bound, ".2f", "x"), num(p.copy_ceiling, ".2f", "x"),
             num(p.perfect_ceiling, ".2f", "x"), _share(p.best_speedup, p.lookup_bound), _share(p.best_speedup, p.copy_ceiling)]
            for p in result.tiers]
    out = ["what these weights allow (x AR, from the curve over each tier's greedy outputs)",
           text_table(["tier", "best setting", "lookup at best", "copying at best", "perfect drafter", "of lookup",
                       "of copying"], rows, right={1, 2, 3, 4, 5, 6}, rules_before={0})]
    top = max((p.perfect_ceiling for p in result.tiers if not math.isnan(p.perfect_ceiling)), default=math.nan)
    if not math.isnan(top):
        out.append("  lookup at best: prompt lookup that knew where each copy ends (what a draft length can reach);")
        out.append("  copying at best: a drafter that knew which earlier text to copy and where each copy ends; "
                   "perfect: one never wrong.")
        out.append(f"  Past {top:.2f}x only cheaper verification helps: the curve above, spectui tune --weights.")
    return out


def exactness_lines(result: TuneResult) -> list[str]:
    """What the backend's numerics do to exactness here, and what ``--deterministic`` costs."""
    if result.noise is None:
        return ["not measured"]
    lines = [f"these settings ({result.threads} threads): {result.noise.describe()}"]
    if not result.noise.invariant:
        lines.append("  greedy output may part from AR at near-ties there; spectui diff tells a near-tie from a defect")
    det = result.deterministic_noise
    if det is None:
        lines.append("--deterministic: no batch-invariant setting is known for this backend")
    else:
        slower = f"one token costs {result.deterministic_cost:.2f}x these settings' one token"
        lines.append(f"--deterministic (1 thread, flash attention on): {det.describe()}; {slower}")
    return lines


def settings_lines(result: TuneResult) -> list[str]:
    """Per tier: spectui's flags; then, per runtime, how to measure its own settings. tune ran
    spectui's loop, not a runtime: a runtime's methods read K in their own ways and are its own
    code, so a flag translated from spectui's K would be advice nobody measured. Running them
    here would also load a second copy of the weights beside the engine tune holds."""
    lines = []
    for p in result.tiers:
        lines.append(f"{p.tier}: spectui       {spectui_flags(p.best, result)}")
    lines.append("runtimes (not run by this tune; each measures its own methods against its own AR):")
    for name in RUNTIMES:
        if name in MEASURED_METHODS:
            lines.append(f"  {name}: spectui tune --runtime {name}   (its n-gram methods at the K values each reads, "
                         "on one prompt per tier; prints the measured command line)")
        else:
            lines.append(f"  {name}: spectui compare --runtime {name} --draft runtime:METHOD   (one setting against its own AR)")
    return lines


def spectui_flags(s: Setting, result: TuneResult) -> str:
    if s.drafter == "ar":
        return "spectui run --mode ar"
    if s.model_free:  # n-gram is the default drafter: no --draft for it
        draft = "" if s.drafter == "ngram" else f" --draft {s.drafter}"
        k = "" if s.k is None else f" --k {s.k}"
        return f"spectui run --mode spec{draft}{k}   ({lookup_label(s.drafter)}; no --k = cost-aware K)"
    return f"spectui run --mode spec --draft {result.drafter} --k {s.k}" + (f" --p-min {s.p_min:g}" if s.p_min else "")


def format_charts(result: TuneResult, width: int = 60, height: int = 14, *, colour: bool = False) -> str:
    """The cost curve, and predicted speedup against K per tier (``spectui.charts``)."""
    curves = [
        Series(list(range(1, len(curve.relative) + 1)), list(curve.relative), label=label)
        for label, curve in (("prompt depth", result.curve), ("long context", result.long_curve))
        if curve is not None
    ]
    label = fixed_k_label(result)
    speedups = []
    for p in result.tiers:
        pts = [(k, p.predicted.get(label.format(k), math.nan)) for k in K_CHOICES]
        speedups.append(Series([k for k, _ in pts], [v for _, v in pts], label=p.tier))
    panels = [
        Panel("verify cost (one-token evaluations)", curves, x=Axis(label="tokens at once")),
        Panel("predicted speedup vs AR", speedups, x=Axis(ticks=[k for k in K_CHOICES if k in (1, 2, 4, 6, 8, 12, 16)], label="K")),
    ]
    return render(panels, width=width * 2, height=height, cols=2, colour=colour)


def to_json(result: TuneResult) -> dict:
    def curve(c: Curve | None) -> dict[str, Any] | None:
        return None if c is None else {"depth": c.depth, "unit_us": c.unit_us, "relative": list(c.relative)}

    return finite({
        "model": result.model, "quant": result.quant, "threads": result.threads, "drafter": result.drafter,
        "runtime": result.runtime, "acceptance_from": result.source,
        "curve": curve(result.curve), "long_curve": curve(result.long_curve), "draft_cost": result.draft_cost,
        "tiers": [{
            "tier": p.tier, "prompts": p.prompts, "verdict": p.verdict,
            "best": {"drafter": p.best.drafter, "k": p.best.k, "p_min": p.best.p_min, "label": p.best.label(),
                     "spectui": spectui_flags(p.best, result)},
            "predicted": p.best_speedup, "measured": p.measured, "agreement": agreement(p),
            "acceptance": p.acceptance, "break_even": p.break_even, "per_position": p.per_position,
            "copy_ceiling": p.copy_ceiling, "perfect_ceiling": p.perfect_ceiling, "lookup_bound": p.lookup_bound,
            "predicted_by_setting": p.predicted,
            "predicted_per_prompt": p.per_prompt, "measured_per_prompt": p.measured_per_prompt,
            # other processes' share of all cores per prompt whose check stayed shared (agreement: null)
            "disturbed": p.disturbed,
            "measured_while": MachineLoad(max(p.disturbed.values())).text() if p.disturbed else "",
        } for p in result.tiers],
        "settings": settings_lines(result),
        "exactness": {
            "noise": None if result.noise is None else msgspec.to_builtins(result.noise),
            "deterministic_noise": None if result.deterministic_noise is None else msgspec.to_builtins(result.deterministic_noise),
            "deterministic_cost": result.deterministic_cost or None,
            "lines": exactness_lines(result),
        },
    })
