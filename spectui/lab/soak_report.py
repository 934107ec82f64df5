"""A soak report as text: the totals, the RSS trend and swap, a table of windows, the verdict."""

from __future__ import annotations

from pathlib import Path

from spectui.format import num_or_na, text_table
from spectui.lab.soak_analysis import SoakReport


def format_soak_report(r: SoakReport, folder: str | Path | None = None) -> str:
    th = r.thresholds
    reasons = ", ".join(f"{n} {k}" for k, n in sorted(r.finish_reasons.items())) or "none ended"
    lo, hi = r.slope_ci95_mib_min
    head = [["soak", f"{r.duration_s:.1f} s, {r.sessions} sessions ({reasons}), {r.tokens} tokens, {r.memory_samples} memory samples"]]
    if folder is not None:
        head.append(["folder", str(folder)])
    head += [
        [
            "RSS",
            f"first {num_or_na(r.rss_first_mib)} MiB, after the warm-up {num_or_na(r.rss_start_mib)} MiB, end {num_or_na(r.rss_end_mib)} MiB"
            f" (total {num_or_na(r.total_growth_mib, '+.1f')} MiB), peak {num_or_na(r.peak_rss_mib)} MiB",
        ],
        [
            "slope",
            f"{num_or_na(r.slope_mib_min, '+.3f')} MiB/min (95% CI {num_or_na(lo, '+.3f')} .. {num_or_na(hi, '+.3f')}),"
            f" growth {num_or_na(r.growth_mib, '+.2f')} MiB over {r.fit_span_s:.0f} s after a {r.warmup_s:.0f} s warm-up"
            f" ({r.fit_samples} samples)",
        ],
        [
            "swap",
            f"{num_or_na(r.swap_start_mib)} -> {num_or_na(r.swap_end_mib)} MiB in use"
            f" ({'never fell across windows' if r.swap_grew_monotonically else 'not growing monotonically'})",
        ],
        ["overall", f"acceptance {num_or_na(r.acceptance_rate, '.3f')}, decode {num_or_na(r.decode_tok_s)} tok/s"],
    ]
    windows = [
        [
            f"{w.start_s:.0f}-{w.end_s:.0f} s",
            str(w.sessions),
            str(w.tokens),
            num_or_na(w.acceptance_rate, ".3f"),
            num_or_na(w.decode_tok_s),
            num_or_na(w.rss_mib),
            num_or_na(w.swap_mib),
        ]
        for w in r.windows
    ]
    header = ["window", "sessions", "tokens", "acceptance", "decode tok/s", "RSS MiB", "swap MiB"]
    checks = [
        [
            "FLAG" if c.flagged else {True: "PASS", False: "FAIL", None: "n/a"}[c.passed],
            c.name,
            c.value,
            c.limit,
            c.detail,
        ]
        for c in r.envelope_checks
    ]
    low = r.low_acceptance_windows
    checks.append(
        [
            "PASS" if low <= th.max_low_windows else "FAIL",
            "acceptance drift",
            f"{low} low window{'s' if low != 1 else ''} in a row",
            f"<= {th.max_low_windows}",
            f"a window is low below acceptance {th.min_window_acceptance:g}",
        ]
    )
    if r.passed:
        verdict = (
            f"PASS (slope <= {th.max_slope_mib_min:g} MiB/min or growth <= {th.min_growth_mib:g} MiB;"
            " swap not growing monotonically; envelope held; acceptance did not drift)"
        )
    else:
        verdict = "FAIL: " + "; ".join(r.reasons)
    key_width = [len("verdict")]  # the lines above the windows and the verdict below line up
    return "\n".join(
        [
            text_table(None, head, indent=0, min_widths=key_width),
            text_table(header, windows, right=set(range(len(header)))),
            "envelope and drift:",
            text_table(None, checks),
            text_table(None, [["verdict", verdict]], indent=0, min_widths=key_width),
        ]
    )
