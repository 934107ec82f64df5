"""Batch-shape noise: how far a backend's logits move when the same tokens are evaluated in
blocks (as verification does) instead of one at a time (as AR does).

Why it matters: greedy speculative output equals AR only if the target's logits do not
depend on the shape of the evaluation. On llama.cpp's CPU backend with several threads,
single-token flash attention splits the KV span across threads and sums in another order
than a block does; past ~256 tokens of context the logits then differ by up to ~1 and AR and
speculative output can part where the two best tokens are nearly tied. A divergence is
numerics, not speculation, when the margins of both runs at that token are within what the
backend's own noise can flip; ``spectui.compare.divergence`` judges that against this.

The calibration walks one text from an empty cache to ``depth`` twice: one token at a time,
and in blocks cycling through ``BLOCKS``, and keeps the largest difference per 32 positions.
The whole path is walked, not windows at a few depths, because a block writes the KV cache
too and the differences it leaves accumulate: on the embedded model, 16-token windows saw
1.13 where the full path saw 2.08. Only each position's ``TOP`` best logits (by the single
-token pass) are compared: a near-tie is decided among the best tokens, and keeping whole
rows of a 49k vocabulary to depth 1024 would take 200 MB.

A server batches several requests (llama-server's slots, ``--parallel``): a request's logits
then move with its neighbours' tokens in the batch, which one request's blocks never show.
Where requests are judged under load, the calibration also walks the text beside a
neighbour in a context of two slots, against the same text alone (``measure_beside_noise``).

Calibrations are cached per model, backend and the settings that change the kernels
(``spectui.models.json_cache``); a run needs one as deep as its prompt plus its budget,
rounded up to a power of two (at most ``MAX_DEPTH``).
"""

from __future__ import annotations

import datetime as dt
import json
import time
import warnings
from collections.abc import Callable, Sequence

import msgspec
import numpy as np

from spectui.engine.protocol import Backend
from spectui.errors import SpectuiError
from spectui.models.json_cache import read_entry, write_entry
from spectui.prompts import list_prompts
from spectui.recording.schema import BatchNoise

CACHE_NAME = "batch-noise.json"
#: block sizes cycled through: verification of 1, 2, 4 and 7 drafted tokens
BLOCKS = (2, 3, 5, 8)
DEPTH_STEP = 32
#: logits compared per position: the single-token pass's best ones
TOP = 64
MIN_DEPTH, MAX_DEPTH = 64, 1024
#: a calibration stops deepening after this long (the single-token pass gets half): the embedded
#: model reaches depth 512 in ~8 s, MLX on a CPU (~8 tok/s) would need minutes, and divergences
#: past the depth reached stay unclassified rather than the run waiting
BUDGET_S = 30.0
#: What a first greedy run at new settings waits for, said before it starts (the CLI prints it as
#: one stderr line; the dashboard shows ``CALIBRATION_DETAIL`` as the loading state and this in
#: a notification): what is measured, why, and how long it may take.
CALIBRATION_NOTICE = (
    "spectui: first greedy run at these settings: measuring this backend's batch-shape noise "
    "(how far verifying tokens in blocks moves the logits), so that a speculative output which "
    f"parts from AR can be told from plain numerics; up to about {BUDGET_S:.0f} s, once, then cached"
)
CALIBRATION_DETAIL = f"measuring batch noise (first greedy run at these settings, up to ~{BUDGET_S:.0f} s, once)"


class CalibrationNotice(UserWarning):
    """A run waits for a batch-noise calibration (``CALIBRATION_NOTICE``): a note, not a fault."""


#: what decides the kernels a backend runs (runtime_info keys); other keys do not move logits
SETTINGS = ("backend", "llama.cpp", "mlx", "device", "dtype", "n_threads", "n_gpu_layers", "flash_attn", "n_batch")


def calibration_depth(reach: int, n_ctx: int) -> int:
    """The depth to calibrate for a run whose context reaches ``reach`` tokens."""
    depth = MIN_DEPTH
    while depth < min(reach, MAX_DEPTH):
        depth *= 2
    return max(min(depth, n_ctx - 1), 1)


def noise_settings(backend: Backend) -> dict[str, str]:
    runtime = backend.runtime_info()
    return {k: runtime[k] for k in SETTINGS if runtime.get(k)}


def _text_tokens(backend: Backend, n: int) -> list[int]:
    """``n`` tokens of ordinary text: the shipped prompts, repeated as needed."""
    text = "\n\n".join(p.text for p in list_prompts()) or __doc__ or "calibration"
    tokens = backend.tokenize(text, special=False)
    while len(tokens) < n:
        tokens = tokens + tokens
    return tokens[:n]


def measure_batch_noise(backend: Backend, tokens: Sequence[int], *, budget_s: float = BUDGET_S) -> BatchNoise:
    """Walk ``tokens`` one at a time, then in blocks, and compare their logits; as deep as
    ``budget_s`` allows (``BatchNoise.note`` says where it stopped short).

    Leaves the backend's cache empty.
    """
    depth = len(tokens)
    t0 = time.perf_counter()
    note = ""
    top = min(TOP, backend.n_vocab)
    best = np.empty((depth, top), dtype=np.int64)
    values = np.empty((depth, top), dtype=np.float32)
    backend.truncate(0)
    for i, tok in enumerate(tokens):
        if i >= DEPTH_STEP and time.perf_counter() - t0 > budget_s / 2:
            depth, note = i, f"stopped at depth {i} of {len(tokens)}: the {budget_s:g} s budget ran out"
            break
        row = backend.eval((tok,), all_logits=False)[-1]
        idx = np.argpartition(row, -top)[-top:]
        best[i], values[i] = idx, row[idx]
    backend.truncate(0)
    worst = np.zeros(depth, dtype=np.float64)
    i, b = 0, 0
    while i < depth:
        size = min(BLOCKS[b % len(BLOCKS)], depth - i)
        rows = backend.eval(tokens[i : i + size], all_logits=True)
        for j in range(size):
            worst[i + j] = float(np.abs(rows[j][best[i + j]] - values[i + j]).max())
        i += size
        b += 1
    backend.truncate(0)
    buckets = [float(np.max(worst[s : s + DEPTH_STEP])) for s in range(0, depth, DEPTH_STEP)]
    return BatchNoise(
        depth_step=DEPTH_STEP,
        by_depth=[round(x, 4) for x in np.maximum.accumulate(buckets).tolist()],
        depth=depth,
        blocks=list(BLOCKS),
        settings=noise_settings(backend),
        note=note,
        measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        seconds=round(time.perf_counter() - t0, 2),
    )


def _has_slots(backend: Backend) -> bool:
    """``backend`` can hold several requests in one batch (llama.cpp, as llama-server does)."""
    from spectui.engine.backends.llamacpp import LlamaCppBackend

    return isinstance(backend, LlamaCppBackend)


#: block sizes a request and its neighbour cycle through when measured side by side: an AR
#: step's one token beside another's, and verification's blocks beside either
BESIDE_BLOCKS = (1, *BLOCKS)
#: the neighbour's tokens that share the batch of the request's prompt (a decode step's one
#: is not enough: on the embedded Q4_1, 3 moved later logits by up to 1.2, 1 by nothing)
PREFILL_NEIGHBOURS = 3


def measure_beside_noise(backend: Backend, tokens: Sequence[int], *, budget_s: float = BUDGET_S) -> list[float]:
    """How far neighbouring requests in the batch move a request's logits, as llama-server
    batches its slots (``engine/backends/llamacpp_slots``). A prompt's KV is computed by a
    matrix product whose kernel depends on how many rows the batch holds: on the embedded
    model's shipped Q4_1 at 2 threads, a prompt of 100-200 tokens prefilled with 3 of a
    neighbour's tokens in its batch, or in two chunks, moved the logits of every later token by
    up to 1.2, where a single context's blocks move nothing below depth 256 (its F16: 0.03-0.07
    beside a neighbour, as in blocks). So the text's first 1, 2, 4, ...
    tokens are each a prompt, prefilled and decoded up to twice its length two ways: alone in
    one batch, then one token at a time (a request at one client); and in two chunks, the first
    with ``PREFILL_NEIGHBOURS`` of a neighbour's tokens in its batch, then in blocks cycling
    through ``BESIDE_BLOCKS`` beside the neighbour's, out of step (a request under load). Per
    ``DEPTH_STEP`` bucket, the largest difference of the best logits (``TOP``), never
    decreasing; as deep as ``budget_s`` allows. Empty for a backend that holds one request
    (MLX): nothing else shares its batch."""
    from spectui.engine.backends.llamacpp import LlamaCppBackend
    from spectui.engine.backends.llamacpp_slots import Slots

    if not isinstance(backend, LlamaCppBackend):
        return []
    t0 = time.perf_counter()
    neighbour = [*tokens[len(tokens) // 2:], *tokens[:len(tokens) // 2]]  # another text at every position
    top = min(TOP, backend.n_vocab)
    with Slots(backend, 2) as slots:

        def walk(prompt_batches: Sequence[int], extra: int, blocks: Sequence[int], end: int) -> np.ndarray:
            """The logits of the prompt's last token and of every later one before ``end``: the
            prompt in batches of ``prompt_batches`` tokens, the first with ``extra`` of the
            neighbour's (none: alone), then blocks cycling through ``blocks`` (``[]``: one token
            at a time), each beside the neighbour's next ones where it has any."""
            slots.clear()
            if extra:
                slots.eval([(1, neighbour[:DEPTH_STEP])])  # the neighbour is under way
            at, rows = 0, []
            for b, n in enumerate(prompt_batches):
                parts = [(0, tokens[at:at + n]), *([(1, neighbour[DEPTH_STEP:DEPTH_STEP + extra])] if extra and b == 0 else [])]
                last = slots.eval(parts)[0][-1]
                at += n
            rows.append(last)
            other, b = DEPTH_STEP + extra, 0
            while at < end:
                size = min(blocks[b % len(blocks)] if blocks else 1, end - at)
                parts = [(0, tokens[at:at + size])]
                if extra:
                    beside = blocks[(b + 1) % len(blocks)] if blocks else 1
                    parts.append((1, neighbour[other % len(neighbour):other % len(neighbour) + beside]))
                    other += beside
                rows.extend(slots.eval(parts)[0])
                at, b = at + size, b + 1
            return np.stack(rows)

        depth = len(tokens) - 1
        worst = np.full(depth, np.nan)  # per position: what the neighbours moved its best logits
        prompt = 1
        while prompt < depth and not (prompt > DEPTH_STEP and time.perf_counter() - t0 > budget_s):
            end = min(2 * prompt, depth)
            alone = walk([prompt], 0, [], end)
            idx = np.argpartition(alone, -top, axis=1)[:, -top:]
            values = np.take_along_axis(alone, idx, 1)
            moved = walk([prompt // 2, prompt - prompt // 2] if prompt > 1 else [prompt], PREFILL_NEIGHBOURS, BESIDE_BLOCKS, end)
            worst[prompt - 1:end] = np.abs(np.take_along_axis(moved, idx, 1) - values).max(axis=1)
            prompt = end
        reached = int(np.argmax(np.isnan(worst))) if np.isnan(worst).any() else depth
        buckets = [float(np.nanmax(worst[s:min(s + DEPTH_STEP, reached)], initial=0.0)) for s in range(0, reached, DEPTH_STEP)]
    return [round(x, 4) for x in np.maximum.accumulate(buckets).tolist()] if buckets else []


def noise_key(sha256: str, settings: dict[str, str]) -> str:
    return f"{sha256}|{json.dumps(settings, sort_keys=True)}"


def cached_noise(key: str, depth: int) -> BatchNoise | None:
    """A cached calibration at least ``depth`` deep (or as deep as its budget went), or None."""
    noise = read_entry(CACHE_NAME, key, BatchNoise)
    return noise if noise is not None and (noise.depth >= depth or noise.note) and noise.by_depth else None


def batch_noise(
    backend: Backend,
    sha256: str,
    reach: int,
    *,
    before: Callable[[], object] | None = None,
    measure_on: Callable[[], Backend] | None = None,
    budget_s: float = BUDGET_S,
    beside: bool = False,
) -> BatchNoise:
    """The backend's calibration for a run reaching ``reach`` tokens: cached, or measured now
    (then cached). A measurement is announced first: by calling ``before`` (the dashboard posts
    its own note), else as a ``CalibrationNotice`` warning, which the CLI prints as one stderr
    line, so a headless run never sits silent for seconds.
    ``measure_on`` opens a second context of the same settings to measure in (closed after),
    leaving ``backend``'s cache as it is. ``budget_s`` bounds a measurement's time (a user's
    first run waits for it; a cached one that ran out is reused as far as it went).
    ``beside``: requests are judged under load too (the workload's server at several clients),
    so what a neighbour in the batch moves is measured as well (``measure_beside_noise``),
    once, into the same cached entry."""
    depth = calibration_depth(reach, backend.n_ctx)
    key = noise_key(sha256, noise_settings(backend))
    noise = cached_noise(key, depth)
    beside_short = noise is None or len(noise.beside_by_depth) * noise.depth_step < min(noise.depth, depth)
    measure_beside = beside and beside_short and _has_slots(backend)
    if noise is not None and not measure_beside:
        return noise
    if before is not None:
        before()
    else:
        warnings.warn(CALIBRATION_NOTICE, CalibrationNotice, stacklevel=2)
    scratch = measure_on() if measure_on is not None else None
    try:
        on = scratch or backend
        if noise is None:
            noise = measure_batch_noise(on, _text_tokens(backend, depth), budget_s=budget_s)
        if measure_beside:
            # as deep as this run needs (a deeper cached calibration need not be matched)
            noise.beside_by_depth = measure_beside_noise(on, _text_tokens(backend, min(noise.depth, depth)), budget_s=budget_s)
    finally:
        if scratch is not None:
            scratch.close()
    write_entry(CACHE_NAME, key, msgspec.to_builtins(noise))
    return noise


def require_invariant(noise: BatchNoise, weights: str) -> None:
    """Refuse a ``--deterministic`` run whose settings were measured not to be batch-invariant:
    one thread and flash attention make the llama.cpp CPU backend's blocks equal single tokens
    bit for bit only for some weight types. Measured on the x86 AVX2 host this was written on,
    SmolLM2-135M to depth 128: Q4_0, Q4_1 and Q8_0 differ by 0.0; Q4_K_M by up to 1.01 and Q6_K
    by 0.79 (with weight repacking on or off), the Qwen2.5-Coder 1.5B Q4_K_M by 0.66 and its
    greedy speculative output parted from AR at token 37 of a summary."""
    worst = max(noise.by_depth, default=0.0)
    if worst > 0:
        raise SpectuiError(
            f"--deterministic cannot hold for {weights} here: evaluated in blocks, its logits differ from "
            f"one token at a time by up to {worst:.2f} (measured to depth {noise.depth} at these settings: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(noise.settings.items()))}); drop --deterministic "
            "(greedy outputs may then part from AR at near-ties), or use weights whose kernels are "
            "invariant here (Q8_0, Q4_0 and Q4_1 measured so on x86; K-quants not)"
        )
