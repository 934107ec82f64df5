"""The chart helper (``spectui.charts``) and the numbers the charts are given: units a person
reads (a 75% run plots at 75), ticks without scientific notation, wall-clock time axes, an
empty chart that says so; and the one display name of a model (``format.model_name``)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from spectui.charts import Axis, Panel, Series, nice_ticks, render, time_axis
from spectui.format import EMBEDDED_MODEL_FILE, counted, model_name
from spectui.history.render import chart_panels, format_history, group_charts
from spectui.history.row import IndexedRun
from spectui.history.trend import Group

#: what scientific notation looks like in a tick label: 7.42e-3, 1.0e4, 2E+05
SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")
T0 = dt.datetime(2026, 11, 24, 22, 0, tzinfo=dt.timezone.utc)


def group(acceptances: list[float], minutes_apart: float = 3.0) -> Group:
    runs = [
        IndexedRun(
            path=f"/r/{i}.spectui", started_at=(T0 + dt.timedelta(minutes=i * minutes_apart)).isoformat(), complete=True,
            decode_tok_s=120.0 + i, acceptance=a, itl_p95_ms=9.5, ttft_ms=40.0 + i, peak_rss_bytes=280 * 2**20,
        )
        for i, a in enumerate(acceptances)
    ]
    key = {"host": "cpu x2", "target_sha256": "ab" * 32, "backend": "llamacpp", "mode": "spec", "drafter": "n-gram",
           "k": "K=4", "label": "spec n-gram K=4", "sampling": "greedy", "prompt": "load-typo-fix"}
    return Group(key, "SmolLM2-135M-Instruct.Q4_1", "Q4_1", "copy", "ngram", 4, runs)


def panel(panels: list[Panel], title: str) -> Panel:
    return next(p for p in panels if p.title.startswith(title))


def test_a_75_percent_run_plots_at_75():
    acceptance = panel(chart_panels(group([0.75])), "acceptance")
    assert acceptance.title == "acceptance %"
    assert list(acceptance.series[0].y) == [75.0]
    text = group_charts(group([0.75]), width=100)
    tick_rows = [line for line in text.splitlines() if "┤" in line]
    assert any(re.search(r"(^|[\s│])75(\.0+)?┤", line) for line in tick_rows), text  # a tick at 75 ...
    row = next(line for line in tick_rows if re.search(r"(^|[\s│])75(\.0+)?┤", line))
    assert "•" in row.split("75", 1)[1].split("│")[0]  # ... and the run's point on its row
    assert not SCIENTIFIC.search(text), text


def test_runs_minutes_apart_read_in_wall_clock_time_without_exponents():
    g = group([0.74, 0.76, 0.75, 0.755])
    panels = chart_panels(g)
    x = panels[0].x
    assert x.label == "time (UTC)"
    assert x.labels[0] == "22:00:00" and x.labels[-1] == "22:09:00"  # nine minutes: seconds shown
    assert [round(v, 1) for v in panel(panels, "acceptance").series[0].y] == [74.0, 76.0, 75.0, 75.5]
    assert list(panel(panels, "peak RSS").series[0].y) == [280.0] * 4  # MiB, not bytes
    text = group_charts(g, width=120)
    assert "22:00" in text and "days" not in text
    assert not SCIENTIFIC.search(text), text


@pytest.mark.parametrize("lo, hi", [(0.0074, 0.0076), (74.2, 75.8), (0, 3e9), (1e-7, 3e-7), (5, 5), (-2, 2)])
def test_ticks_are_round_and_never_scientific(lo, hi):
    (a, b), ticks, labels = nice_ticks(lo, hi)
    assert a <= min(lo, hi) and b >= max(lo, hi)
    assert len(ticks) == len(labels) >= 2
    assert all(not SCIENTIFIC.search(s) for s in labels), labels
    assert all(abs(float(s) - t) <= abs(t) * 1e-6 + 1e-12 for s, t in zip(labels, ticks))


GIB, MIB = 2**30, 2**20


def memory_sample(t_s: float, headroom: int, rss: int):  # noqa: ANN201
    from spectui.recording.schema import MemorySample

    return MemorySample(
        t_us=int(t_s * 1e6), rss=rss, available=headroom, headroom=headroom, pressure=0.0, swap_in_total=0,
        red_pressure_ms=0, throttle_events=0, on_ac_power=True, low_power_mode=False, other_cpu_pct=2,
    )


def tick_labels(text: str, title: str, *, decimals: int = 2) -> tuple[list[float], list[float]]:
    """The left and right y tick labels of the panel titled ``title`` in a rendered chart, each
    written with at most ``decimals`` decimals (more: ticks zoomed into noise)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    left, right = [], []
    for line in lines[start + 1 :]:
        if re.match(r"\s*└", line):  # the panel's bottom edge (a legend's box has one too, inside)
            break
        if m := re.match(r"\s*(-?[\d.]+)┤", line):
            left.append(m.group(1))
        if m := re.search(r"├(-?[\d.]+)\s*$", line):
            right.append(m.group(1))
    for labels in (left, right):
        assert all(len(s.partition(".")[2]) <= decimals for s in labels), f"ticks zoomed into noise: {labels}\n{text}"
    return [float(s) for s in left], [float(s) for s in right]


def test_a_flat_memory_plot_reads_flat_instead_of_zooming_into_noise():
    """Headroom that moves by a few KiB around 23.0252 GiB once filled the memory panel from
    23.02518 to 23.02520: the axes now span at least the panel's minimum, in round ticks."""
    from spectui.metrics.live import LiveRun
    from spectui.recording.schema import Header
    from spectui.ui.widgets.plots import HEADROOM_SPAN_GIB, RSS_SPAN_MIB, plot_panels

    base = int(23.02518 * GIB)
    events = [Header()] + [memory_sample(i * 0.5, base + (i % 3) * 10_000, 300 * MIB + (i % 2) * 4096) for i in range(20)]
    live = LiveRun.from_events(events)
    text = render(plot_panels(live), width=100, height=36)
    headroom, rss = tick_labels(text, "memory: headroom")
    assert len(headroom) >= 2 and len(rss) >= 2, text
    assert max(headroom) - min(headroom) >= HEADROOM_SPAN_GIB and min(headroom) <= 23.0252 <= max(headroom)
    assert max(rss) - min(rss) >= RSS_SPAN_MIB and min(rss) <= 300 <= max(rss)
    assert not SCIENTIFIC.search(text), text


@pytest.mark.parametrize("values", [[23.02518, 23.0252, 23.02519], [280.0, 280.0001], [0.5, 0.50001]])
def test_a_series_that_barely_moves_gets_an_axis_of_its_magnitude(values):
    """Any chart drawn from its data: a span under MIN_RELATIVE_SPAN of the values is widened to it."""
    from spectui.charts import MIN_RELATIVE_SPAN

    xs = list(range(len(values)))
    text = render([Panel("flat", [Series(xs, values)]), Panel("other", [Series([0, 1], [0, 1])])], width=80, height=30)
    ticks, _ = tick_labels(text, "flat", decimals=3)
    assert max(ticks) - min(ticks) >= MIN_RELATIVE_SPAN * max(values) and min(ticks) <= min(values) <= max(values) <= max(ticks)
    (lo, hi), _, _ = nice_ticks(0.0, 1e-6, min_span=64.0)  # memory from zero: widened upwards, never below it
    assert lo == 0.0 and hi >= 64.0


def test_time_axis_spans_days_by_date():
    xs, axis = time_axis([T0, T0 + dt.timedelta(days=10)])
    assert xs == [0.0, 10 * 86400.0]
    assert axis.labels[0] == "2026-11-24" and axis.labels[-1] == "2026-12-04"


def test_nothing_to_plot_says_so_instead_of_empty_frames():
    empty = [Panel("latency", []), Panel("acceptance", [Series([1.0], [float("nan")])])]
    assert render(empty, width=60, height=20, empty="Nothing to plot yet.") == "Nothing to plot yet."
    # one panel with data: the other keeps its frame and says it has none
    text = render([Panel("latency", [Series([0, 1], [3, 4])], x=Axis(label="s")), Panel("acceptance", [])], width=60, height=24)
    assert "acceptance (no data)" in text and "latency" in text


def test_history_text_counts_runs_in_words():
    g = group([0.75])
    from spectui.history.index import IndexUpdate

    update = IndexUpdate(index_path="/tmp/i.sqlite", found=1, read=1, unchanged=0, removed=0, seconds=0.0, notes=[])
    text = format_history([g], update, stale_days=14)
    assert "1 run in 1 group," in text and "1 runs" not in text
    assert counted(2, "run") == "2 runs"


@pytest.mark.parametrize(
    "source, quant, name",
    [
        ("", "", EMBEDDED_MODEL_FILE.removesuffix(".gguf")),
        ("smollm2", "Q4_1", "SmolLM2-135M-Instruct.Q4_1"),
        ("/models/SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1", "SmolLM2-135M-Instruct.Q4_1"),
        ("/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "Q4_K_M", "qwen2.5-coder-1.5b-instruct-q4_k_m"),
        ("/models/model.gguf", "Q8_0", "model Q8_0"),
        ("/models/mlx-community/SmolLM2-4bit/", "", "SmolLM2-4bit"),
    ],
)
def test_one_display_name_per_model(source, quant, name):
    assert model_name(source, quant) == name
