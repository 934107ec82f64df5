"""AR and speculative side by side: two columns (token stream and signals each) and a delta
bar (speedup, ITL tails, TTFT, memory, output agreement).

The columns show the view's ``compare`` pair: two recordings, or two live runs that the
controller runs one after the other on its one engine thread (never both at once: on a small
machine they would share the cores and both numbers would be wrong), or interleaved block by
block. The repaint path is the main screen's: the app's timer calls ``redraw``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.style import StyleType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from spectui.compare.divergence import UNJUDGED, Judgement, RunOutput, judge_outputs, prompt_length
from spectui.format import DASH, num, pct, signed_size
from spectui.metrics.conditions import SHARED_ABOVE, readings_load
from spectui.metrics.live import LiveRun
from spectui.metrics.same_text import common_tokens, decode_rate
from spectui.metrics.stats import Summary
from spectui.recording.redact import outputs_not_comparable
from spectui.ui.labels import recorded_label
from spectui.ui.messages import CompareRequested, DiffRequested, InterleaveToggled
from spectui.ui.widgets.signals import SignalGroup
from spectui.ui.widgets.token_stream import TokenStream

if TYPE_CHECKING:
    from spectui.ui.view import DashboardView

SIDES = ("baseline", "candidate")


#: what stands between two items of the delta bar
DELTA_SEPARATOR = "  │  "


def delta_items(base: LiveRun, cand: LiveRun, sb: Summary, sc: Summary, styles: Mapping[str, StyleType]) -> list[Text]:
    """What the candidate changes against the baseline, one ``label value`` item each: the
    speedup, ITL tails, TTFT, peak RSS, acceptance, and the verdict on the outputs."""
    muted, value, good, bad = (styles[k] for k in ("muted", "value", "good", "bad"))
    out: list[Text] = []

    def item(label: str, text: str, style: StyleType = value) -> None:
        out.append(Text.assemble((f"{label} ", muted), (text, style), end=""))

    n = min(len(base.tokens), len(cand.tokens))
    shared = common_tokens(base.tokens, cand.tokens)  # where the outputs part (n: they do not, so far)
    redacted = outputs_not_comparable(base.header, cand.header) if base.header and cand.header else ""
    greedy = all(h is not None and h.config.sampling.greedy for h in (base.header, cand.header))
    ratio = sc.decode_tok_s / sb.decode_tok_s if sb.decode_tok_s > 0 else math.nan
    over = ""
    if greedy and not redacted and shared < n:
        # over the same text: two greedy outputs that part are timed up to where they part
        base_rate = decode_rate(base.token_t_us, shared)
        ratio = decode_rate(cand.token_t_us, shared) / base_rate if base_rate > 0 else math.nan
        over = f" (first {shared} tokens, where the outputs part)"
    item("speedup", "—" if math.isnan(ratio) else f"{ratio:.2f}×{over}", good if ratio >= 1 else bad)
    limit = base.header.config.envelope.max_other_cpu if base.header is not None else SHARED_ABOVE
    load = readings_load(base.other_cpu, limit).worst(readings_load(cand.other_cpu, limit))
    if load.shared:  # the speedup above is that load's, not this machine's
        item("measured on a", f"{load.text()}: not this machine's speedup", bad)
    item(
        "ITL p50/p95/p99",
        f"{num(sb.itl_p50_ms, '.1f')}/{num(sb.itl_p95_ms, '.1f')}/{num(sb.itl_p99_ms, '.1f')} → "
        f"{num(sc.itl_p50_ms, '.1f')}/{num(sc.itl_p95_ms, '.1f')}/{num(sc.itl_p99_ms, '.1f')} ms",
    )
    if sb.ttft_ms > 0 and not math.isnan(sc.ttft_ms):
        growth = sc.ttft_ms / sb.ttft_ms - 1
        item("TTFT", f"{sc.ttft_ms:.0f} ms ({growth:+.0%})", good if growth <= 0.08 else bad)
    item("peak RSS", signed_size(sc.peak_rss_bytes - sb.peak_rss_bytes) if sb.peak_rss_bytes else DASH)
    if sc.drafted:
        item("acceptance", f"{pct(sc.acceptance_rate)} · {sc.mean_accepted_length:.2f} tok/block")
    if n and redacted:  # token stand-ins of a redacted copy match nothing else
        item("outputs", "not compared (redacted)", value)
    elif n:
        i = shared
        if i == n:
            item("outputs", f"identical ({n} tokens)", good)
        else:
            cause = divergence_cause(base, cand, i)
            if cause is None or cause.verdict == UNJUDGED:
                item("outputs", f"diverge at token {i}", bad)
            else:
                item("outputs", f"diverge at token {i}: {cause.short}", bad if cause.fails else value)
    return out


def delta_text(base: LiveRun, cand: LiveRun, sb: Summary, sc: Summary, styles: Mapping[str, StyleType]) -> Text:
    """The delta bar's items on one line (``delta_items``; the screen lays them out by width)."""
    return delta_separator(styles).join(delta_items(base, cand, sb, sc, styles))


def delta_separator(styles: Mapping[str, StyleType]) -> Text:
    return Text.assemble((DELTA_SEPARATOR, styles["muted"]), end="")


class ItemRows:
    """Items in rows at the width they are drawn at: a row breaks between two items, never
    inside one that fits a row, so the verdict after figures whose widths differ from host
    to host (``outputs identical (40 tokens)``) is never cut in two. An item wider than a
    row wraps on its own rows."""

    def __init__(self, items: list[Text], separator: Text) -> None:
        self.items = items
        self.separator = separator

    def rows(self, width: int) -> Text:
        rows: list[Text] = []
        for item in self.items:
            if rows and rows[-1].cell_len + self.separator.cell_len + item.cell_len <= width:
                rows[-1].append_text(self.separator)
                rows[-1].append_text(item)
            else:
                rows.append(item.copy())
        return Text("\n").join(rows)  # ends in a newline: Textual counts them for the height

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.rows(options.max_width)


def divergence_cause(base: LiveRun, cand: LiveRun, i: int) -> Judgement | None:
    """The judge's verdict on two runs on screen parting at token ``i`` (``spectui.compare.divergence``)."""
    if base.header is None or cand.header is None:
        return None

    def output(run: LiveRun) -> RunOutput:
        assert run.header is not None
        return RunOutput(tokens=run.tokens, top=run.top_two, prompt=prompt_length(run.header, run.end),
                         calibration=run.header.batch_noise, greedy=run.header.config.sampling.greedy,
                         ended=run.end.reason if run.end is not None else "")

    return judge_outputs(output(base), output(cand), index=i)


class CompareScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,v", "app.pop_screen", "Back"),
        Binding("r", "run_both", "Run both"),
        Binding("d", "diff", "Diff"),
        Binding("i", "toggle_interleave", "Interleave"),
    ]
    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen > #compare-title { height: 1; padding: 0 1; background: $panel; color: $text-primary; }
    CompareScreen > #columns { height: 1fr; }
    CompareScreen .compare-column { width: 1fr; }
    CompareScreen .compare-column > .column-title {
        height: 2; padding: 0 1; color: $text-primary; text-style: bold; text-wrap: nowrap; text-overflow: ellipsis;
    }
    CompareScreen .compare-column > TokenStream { height: 1fr; }
    CompareScreen SignalPanel { layout: vertical; height: 2; }
    CompareScreen SignalPanel > .signal-caption { width: 1fr; }
    CompareScreen > #delta { height: auto; max-height: 4; padding: 0 1; background: $surface; }
    CompareScreen > .compare--muted { color: $text-muted; }
    CompareScreen > .compare--value { color: $foreground; text-style: bold; }
    CompareScreen > .compare--good { color: $text-success; text-style: bold; }
    CompareScreen > .compare--bad { color: $text-error; text-style: bold; }
    """
    COMPONENT_CLASSES = {"compare--muted", "compare--value", "compare--good", "compare--bad"}
    AUTO_FOCUS = None

    def __init__(self, view: DashboardView) -> None:
        super().__init__()
        self.view = view

    def action_run_both(self) -> None:
        self.post_message(CompareRequested())

    def action_diff(self) -> None:
        self.post_message(DiffRequested())

    def action_toggle_interleave(self) -> None:
        self.post_message(InterleaveToggled())

    def compose(self) -> ComposeResult:
        yield Static("compare", id="compare-title", markup=False)
        with Horizontal(id="columns"):
            for side in SIDES:
                with Vertical(classes="compare-column", id=f"col-{side}"):
                    yield Static(side, classes="column-title", markup=False)
                    yield TokenStream(id=f"tokens-{side}")
                    yield SignalGroup(id=f"signals-{side}")
        yield Static("", id="delta", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_screen_resume(self) -> None:
        self.redraw()

    def redraw(self, *, full: bool = True) -> bool:
        view = self.view
        pair = view.compare
        try:
            self.query_one("#compare-title", Static).update(view.compare_title())
            if pair is None:
                return True
            summaries = []
            for side, live in zip(SIDES, pair):
                self.query_one(f"#tokens-{side}", TokenStream).update_from(live, restyle=full)
                if not full:
                    continue
                s = live.summary()
                summaries.append(s)
                label = recorded_label(live.header)  # the label its header and the history give it
                if live.header is not None and live.header.node:  # node A vs node B (compare --hosts)
                    label += f" @ {live.header.node}"
                # the run on its own line, the numbers on the next: a cost-aware run's label
                # (``spec n-gram K=1..16 adaptive``) and its figures do not fit half a terminal
                title = Text(f"{side}: {label}\n", end="")
                title.append(num(s.decode_tok_s, ".1f", " tok/s"))
                if live.end is not None:
                    title.append(f"  ({live.n_tokens} tokens, {live.end.reason})")
                elif live.header is not None:
                    title.append(f"  ({live.n_tokens} tokens…)")
                self.query_one(f"#col-{side} > .column-title", Static).update(title)
                mode = live.header.config.mode if live.header is not None else "ar"
                self.query_one(f"#signals-{side}", SignalGroup).show_run(live, s, mode, view.breach_marker(live))
            if full:
                get = self.get_component_rich_style
                styles = {k: get(f"compare--{k}") for k in ("muted", "value", "good", "bad")}
                items = delta_items(pair[0], pair[1], summaries[0], summaries[1], styles)
                self.query_one("#delta", Static).update(ItemRows(items, delta_separator(styles)))
        except NoMatches:
            return False
        return True
