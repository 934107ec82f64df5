"""Incremental, UI-free state of one session, folded from its events one at a time.

The dashboard feeds a live run's events into a ``LiveRun`` as they arrive; opening a
recording (and replay) feeds the recorded events into a fresh one. Both then go through the
same redraw code, which reads only this object: the screen cannot tell the two apart.

Folding an event is O(tokens in the event) with no numpy, so it can run for every event on
the UI thread. Anything that needs the whole run (percentiles, the steady-state slope) is
computed by ``summary()`` on demand, with the definitions of ``spectui.metrics.stats``
(``summary()`` of a finished run equals ``summarize()`` of its events; a test pins it), and
cached until the next event.
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Iterable

import numpy as np

from spectui.drafting import DraftConfig
from spectui.metrics.predict import Block, BlockPrediction, Prediction, predict, predict_blocks, run_curve
from spectui.metrics.stats import Summary, fill_blocks, fill_prefill, fill_times
from spectui.recording.schema import End, Event, Header, MemorySample, PolicyChange, Prefill, Step, TokenOrigin

_AR = int(TokenOrigin.AR)


class LiveRun:
    """Everything the dashboard shows about one session.

    Series (parallel lists, times in seconds since the session's start):

    * tokens: ``tokens``, ``origins``, ``pieces``, ``texts`` (each token's share of the
      decoded text: a piece holding half a UTF-8 character contributes "" and the next one
      the whole character), ``token_t_us``; ``block_starts`` holds the index of the first
      token of every step, i.e. the block boundaries.
    * inter-token latency: ``itl_ms`` with ``itl_t`` (the later token's time). Tokens of one
      speculative block arrive together, so gaps inside a block are 0, as in ``stats``.
    * acceptance per drafted block: ``block_acceptance`` (accepted / drafted) with
      ``block_t``.
    * memory: ``mem_t``, ``headroom``, ``rss`` (bytes) and the last ``MemorySample``.
    """

    def __init__(self) -> None:
        self.header: Header | None = None
        self.prefill: Prefill | None = None
        self.end: End | None = None
        self.policy_changes: list[PolicyChange] = []
        #: for each policy change, the index of the first token decided after it
        self.policy_marks: list[int] = []
        self.n_events = 0
        #: bumped by every event: a redraw can skip work when nothing changed
        self.version = 0

        self.tokens: list[int] = []
        #: each token's (margin in thousandths of a logit, runner-up id); None: not recorded
        self.top_two: list[tuple[int, int] | None] = []
        self.origins: list[int] = []
        self.pieces: list[bytes] = []
        self.texts: list[str] = []
        self.token_t_us: list[int] = []
        self.block_starts: list[int] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        self.itl_ms: list[float] = []
        self.itl_t: list[float] = []

        self.block_acceptance: list[float] = []
        self.block_t: list[float] = []
        self.block_drafted: list[int] = []
        self.block_accepted: list[int] = []

        self.mem_t: list[float] = []
        self.headroom: list[int] = []
        self.rss: list[int] = []
        self.last_memory: MemorySample | None = None
        self.other_cpu: list[int | None] = []
        self.peak_rss = 0
        self.min_headroom = -1
        self._swap_first: int | None = None
        self.swap_used = 0

        self.steps = 0
        self.drafted = 0
        self.accepted = 0
        self.rollbacks = 0
        self.draft_forwards = 0
        self.draft_us = 0  # all steps, as stats.Summary.draft_ms
        self.verify_us = 0
        self.block_draft_us = 0  # drafted blocks only: the cost of a block
        self.block_verify_us = 0
        self.ar_steps = 0  # steps that drafted nothing and evaluated one token
        self.ar_step_us = 0
        self.ar_draft_us = 0  # what asking the drafter took on those steps (AR itself never pays it)
        #: every drafted block, for the prediction from the run's own blocks
        self.blocks: list[Block] = []
        self.last_k = 0
        self._block_prediction: tuple[tuple[int, float | None], BlockPrediction | None] | None = None

        self._summary: Summary | None = None
        self._summary_version = -1

    # -- folding ------------------------------------------------------------------------

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> LiveRun:
        run = cls()
        run.feed_many(events)
        return run

    def feed_many(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.feed(ev)

    def feed(self, ev: Event) -> None:
        if type(ev) is Step:
            self._step(ev)
        elif type(ev) is MemorySample:
            self._memory(ev)
        elif type(ev) is Prefill:
            self.prefill = ev
        elif type(ev) is Header:
            self.header = ev
        elif type(ev) is End:
            self.end = ev
        elif type(ev) is PolicyChange:
            self.policy_changes.append(ev)
            self.policy_marks.append(len(self.tokens))
        self.n_events += 1
        self.version += 1

    def _step(self, ev: Step) -> None:
        start = len(self.tokens)
        self.block_starts.append(start)
        self.steps += 1
        prev = self.token_t_us[-1] if self.token_t_us else None
        decode = self._decoder.decode
        for t_us, piece in zip(ev.t_us, ev.pieces):
            if prev is not None:
                self.itl_ms.append((t_us - prev) / 1000)
                self.itl_t.append(t_us / 1e6)
            prev = t_us
            self.texts.append(decode(piece))
        self.tokens.extend(ev.tokens)
        if ev.margins_milli is not None and ev.runner_up is not None:
            self.top_two.extend(zip(ev.margins_milli, ev.runner_up))
        else:
            self.top_two.extend([None] * len(ev.tokens))
        self.origins.extend(ev.origins)
        self.pieces.extend(ev.pieces)
        self.token_t_us.extend(ev.t_us)

        self.draft_us += ev.draft_us
        self.verify_us += ev.verify_us
        self.draft_forwards += ev.draft_forwards
        if ev.k:
            self.last_k = ev.k
        if ev.drafted:
            self.drafted += ev.drafted
            self.accepted += ev.accepted
            self.block_drafted.append(ev.drafted)
            self.block_accepted.append(ev.accepted)
            if ev.accepted < ev.drafted:
                self.rollbacks += 1
            self.block_draft_us += ev.draft_us
            self.block_verify_us += ev.verify_us
            self.block_acceptance.append(ev.accepted / ev.drafted)
            self.blocks.append(Block(ev.drafted, ev.accepted, len(ev.tokens), ev.draft_us, ev.verify_us))
            self.block_t.append((ev.t_us[-1] if ev.t_us else 0) / 1e6)
        elif ev.verify_us > 0 and ev.origins and ev.origins[0] == _AR:
            # The first step (the prefill's token) has no verify time of its own: skipped.
            self.ar_steps += 1
            self.ar_step_us += ev.verify_us
            self.ar_draft_us += ev.draft_us

    def _memory(self, ev: MemorySample) -> None:
        self.last_memory = ev
        self.other_cpu.append(ev.other_cpu_pct)  # other processes' load (``metrics.conditions``)
        self.mem_t.append(ev.t_us / 1e6)
        self.headroom.append(ev.headroom)
        self.rss.append(ev.rss)
        self.peak_rss = max(self.peak_rss, ev.rss)
        self.min_headroom = ev.headroom if self.min_headroom < 0 else min(self.min_headroom, ev.headroom)
        if self._swap_first is None:
            self._swap_first = ev.swap_used
        self.swap_used = ev.swap_used

    # -- derived ------------------------------------------------------------------------

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def draft_blocks(self) -> int:
        return len(self.block_drafted)

    @property
    def text(self) -> str:
        """The decoded text so far (a trailing half character is held back)."""
        return "".join(self.texts)

    @property
    def answer(self) -> str:
        """The generated text as ``recording.output.output_text`` reads it: without the
        end-of-generation token an embedded run stopped on (what a conversation keeps)."""
        h, end = self.header, self.end
        stopped = end is not None and end.reason == "stop" and h is not None and h.artifacts.server is None
        return "".join(self.texts[:-1] if stopped else self.texts)

    @property
    def finished(self) -> bool:
        return self.end is not None

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else math.nan

    @property
    def mean_accepted_length(self) -> float:
        return 1.0 + self.accepted / len(self.block_drafted) if self.block_drafted else math.nan

    @property
    def swap_delta(self) -> int:
        return 0 if self._swap_first is None else self.swap_used - self._swap_first

    @property
    def mean_ar_step_us(self) -> float:
        return self.ar_step_us / self.ar_steps if self.ar_steps else math.nan

    def decode_tok_s(self) -> float:
        """Tokens after the first over the time since the first (as ``stats``)."""
        t = self.token_t_us
        if len(t) > 1 and t[-1] > t[0]:
            return (len(t) - 1) / ((t[-1] - t[0]) / 1e6)
        return math.nan

    def prediction(self, baseline_ar_step_us: float | None = None) -> Prediction | None:
        """Predicted speedup from this run's acceptance and costs (``spectui.metrics.predict``).

        The AR step time comes from this run's steps without a draft when it has any, else
        from ``baseline_ar_step_us`` (an AR run of the same model), else the cost model.
        """
        blocks = len(self.block_drafted)
        if not blocks:
            return None
        if self.ar_steps:
            ar_us, source = self.mean_ar_step_us, "run"
        elif baseline_ar_step_us and baseline_ar_step_us > 0:
            ar_us, source = baseline_ar_step_us, "baseline"
        else:
            ar_us, source = None, "model"
        return predict(
            acceptance=self.accepted / self.drafted,
            k=self.drafted / blocks,
            draft_us=self.block_draft_us / blocks,
            verify_us=self.block_verify_us / blocks,
            ar_step_us=ar_us,
            ar_step_source=source,
        )

    def block_prediction(self, baseline_ar_step_us: float | None = None) -> BlockPrediction | None:
        """Predicted speedup from this run's own blocks (``spectui.metrics.predict.predict_blocks``):
        what each drafted block yielded against its size's cost on the run's curve, the steps
        that drafted nothing at one AR step. The AR step is this run's own when it has steps
        without a draft, else ``baseline_ar_step_us``, else read off the blocks against the
        header's seed curve. Cached until the next event."""
        key = (self.version, baseline_ar_step_us)
        if self._block_prediction is not None and self._block_prediction[0] == key:
            return self._block_prediction[1]
        result = None
        if self.blocks:
            seed = self.header.pricing.seed if self.header is not None else ()
            if self.ar_steps:
                unit, source = self.mean_ar_step_us, "run"
            elif baseline_ar_step_us and baseline_ar_step_us > 0:
                unit, source = baseline_ar_step_us, "baseline"
            else:
                unit, source = None, ""
            curve = run_curve(self.blocks, seed=seed, ar_step_us=unit, source=source)
            if curve is not None:
                longest = max(b.drafted for b in self.blocks)  # a fixed K may pass k-max
                k_min, k_max = (self.header.config.draft if self.header is not None else DraftConfig()).priced_range
                caps = range(k_min, max(k_max, longest) + 1)
                # the run's own price of its blocks, once its end says it (a cost-aware K's runs)
                decisions = self.end.decisions if self.end is not None else None
                priced = decisions.expected_tokens if decisions is not None and decisions.blocks == len(self.blocks) else None
                result = predict_blocks(self.blocks, ar_steps=self.ar_steps, ar_draft_us=self.ar_draft_us, curve=curve, caps=caps,
                                        priced_tokens=priced)
        self._block_prediction = (key, result)
        return result

    def summary(self) -> Summary:
        """``stats.summarize`` of the events so far, from the folded state (cached)."""
        if self._summary is not None and self._summary_version == self.version:
            return self._summary
        s = Summary()
        if self.header is not None:
            s.n_prompt_tokens = len(self.header.prompt_tokens)
        if self.prefill is not None:
            fill_prefill(s, self.prefill)
        if self.end is not None:
            s.finish_reason = self.end.reason
            s.error = self.end.error
        s.draft_forwards = self.draft_forwards
        s.draft_ms = self.draft_us / 1000
        s.verify_ms = self.verify_us / 1000
        fill_times(s, self.token_t_us)
        fill_blocks(s, self.block_drafted, self.block_accepted)
        if self.rss:
            s.peak_rss_bytes = self.peak_rss
            s.min_headroom_bytes = self.min_headroom
            s.swap_delta_bytes = self.swap_delta
        self._summary, self._summary_version = s, self.version
        return s


def percentiles(values: list[float] | list[int], qs: tuple[float, ...] = (50, 95)) -> tuple[float, ...]:
    """Percentiles of a series (NaN for an empty one): the sparkline captions."""
    if not values:
        return tuple(math.nan for _ in qs)
    return tuple(float(v) for v in np.percentile(np.asarray(values, dtype=np.float64), qs))
