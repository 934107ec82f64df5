"""A test helper: greedy AR on llama.cpp and on MLX from one GGUF, and where the two part."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from spectui.config import BackendConfig


@dataclass
class Agreement:
    """Greedy AR on two backends from one prompt: how far they agree, and why they part."""

    prompt: str
    llama_tokens: list[int]
    mlx_tokens: list[int]
    #: first index where the greedy tokens differ; None when all ``n_tokens`` agree
    divergence: int | None
    #: at the divergence: each backend's logit of its own choice minus the other's choice
    llama_margin: float | None = None
    mlx_margin: float | None = None
    #: largest |logit difference| between the backends over the agreed positions
    max_abs_logit_diff: float = 0.0
    tokenize_equal: bool = True

    def describe(self) -> str:
        head = f"{self.prompt[:40]!r}: "
        if self.divergence is None:
            return head + f"agree on all {len(self.mlx_tokens)} tokens (max |dlogit| {self.max_abs_logit_diff:.3f})"
        i = self.divergence
        if self.llama_margin is None or self.mlx_margin is None:  # one side stopped (end of generation)
            return head + f"one backend stopped at token {i} (llama.cpp {len(self.llama_tokens)}, mlx {len(self.mlx_tokens)} tokens)"
        return head + (
            f"diverge at token {i}: llama.cpp {self.llama_tokens[i]} vs mlx {self.mlx_tokens[i]}; "
            f"margin llama.cpp {self.llama_margin:.4f}, mlx {self.mlx_margin:.4f} "
            f"(max |dlogit| before {self.max_abs_logit_diff:.3f})"
        )


def compare_backends(
    gguf: str,
    prompts: Iterable[str],
    n_tokens: int,
    *,
    chat: bool = True,
    llama: Any = None,
    mlx: Any = None,
    n_ctx: int = 1024,
    mlx_worker: bool = False,
) -> list[Agreement]:
    """Greedy AR on llama.cpp and on MLX from the same GGUF; report where they agree.

    Both backends are fed the same (llama.cpp) prompt tokens; llama.cpp runs one token at a
    time. Up to the first divergence both see the same context, so at that position the two
    margins (own choice minus the other backend's choice, in each backend's logits) say how
    close the call was: two small positive numbers mean a near-tie broken differently by
    the numerics (quantised activations in llama.cpp, float32 in MLX), not a mapping bug.

    MLX's side is evaluated as blocks (``teacher_forced``), not one token at a time: its CPU
    backend costs about the same per token either way (~0.1 s here) and its block rows equal
    one-token rows exactly (``test_mlx.test_block_rows_match_one_token_at_a_time``), so
    reading its greedy choice off llama.cpp's continuation, up to where the two part, is what
    MLX's own greedy run would give; and the chat template's opening, the same for every
    prompt, stays in its cache from one prompt to the next.

    ``mlx_worker``: half of the MLX work goes to a second process with its own MLX copy of the
    model (MLX's CPU backend computes on one core; the machine has two). It loads while
    llama.cpp runs, and computes what this process would.
    """
    from spectui.engine.backends.llamacpp import LlamaCppBackend
    from spectui.engine.backends.mlx import MLXBackend
    from spectui.models.chat import apply_chat_template

    own_llama = llama is None
    own_mlx = mlx is None
    # one llama.cpp thread: this compares numbers, not speed, and spinning workers on a busy
    # machine can slow llama.cpp down 50-fold
    llama = llama or LlamaCppBackend.open(gguf, BackendConfig(n_ctx=n_ctx, n_threads=1))
    mlx = mlx or MLXBackend.open(gguf, BackendConfig(n_ctx=n_ctx))
    pool = None
    try:
        if mlx_worker:
            pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            loaded = pool.submit(_worker_open, gguf, mlx.n_ctx)
        texts, token_lists = [], []
        for prompt in prompts:
            text = prompt
            if chat and llama.chat_template:
                text = apply_chat_template(llama.chat_template, prompt, bos_token=llama.bos_token, eos_token=llama.eos_token)
            texts.append(text)
            token_lists.append(llama.tokenize(text, special=True))
        # the worker takes every other prompt by length (the halves cost about the same), and
        # llama.cpp runs its prompts first: the worker's MLX work overlaps the rest
        order = sorted(range(len(token_lists)), key=lambda i: len(token_lists[i]))
        theirs = sorted(order[1::2]) if pool is not None else []
        runs: dict[int, tuple[list[int], list[np.ndarray]]] = {}
        for i in theirs:
            runs[i] = greedy(llama, token_lists[i], n_tokens)
        if pool is not None:
            loaded.result()
            remote = pool.submit(_worker_rows, [(token_lists[i], runs[i][0]) for i in theirs])
        mine = [i for i in range(len(token_lists)) if i not in theirs]
        for i in mine:
            runs[i] = greedy(llama, token_lists[i], n_tokens)
        mrows_of = {i: teacher_forced(mlx, token_lists[i], runs[i][0]) for i in mine}
        if pool is not None:
            mrows_of.update(zip(theirs, remote.result()))
        results = []
        for i, (prompt, text, tokens) in enumerate(zip(prompts, texts, token_lists)):
            (lt, lrows), mrows = runs[i], mrows_of[i]
            tokenize_equal = mlx.tokenize(text, special=True) == tokens
            # MLX's greedy choice after the same context, up to where it first parts from llama.cpp's
            divergence = next((j for j, row in enumerate(mrows) if int(row.argmax()) != lt[j]), None)
            mt = list(lt) if divergence is None else [*lt[:divergence], int(mrows[divergence].argmax())]
            agreed = divergence if divergence is not None else len(lt)
            diff = max((float(np.abs(lrows[j] - mrows[j]).max()) for j in range(agreed)), default=0.0)
            result = Agreement(prompt, lt, mt, divergence, max_abs_logit_diff=diff, tokenize_equal=tokenize_equal)
            if divergence is not None:
                a, b = lt[divergence], mt[divergence]
                result.llama_margin = float(lrows[divergence][a] - lrows[divergence][b])
                result.mlx_margin = float(mrows[divergence][b] - mrows[divergence][a])
            results.append(result)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if own_llama:
            llama.close()
        if own_mlx:
            mlx.close()
    return results


#: the worker process's MLX backend (``mlx_worker``)
_WORKER_MLX: Any = None


def _worker_open(gguf: str, n_ctx: int) -> None:
    global _WORKER_MLX
    from spectui.engine.backends.mlx import MLXBackend

    _WORKER_MLX = MLXBackend.open(gguf, BackendConfig(name="mlx", n_ctx=n_ctx))


def _worker_rows(jobs: list[tuple[list[int], list[int]]]) -> list[list[np.ndarray]]:
    return [teacher_forced(_WORKER_MLX, tokens, continuation) for tokens, continuation in jobs]


def greedy(backend: Any, tokens: list[int], n_tokens: int) -> tuple[list[int], list[np.ndarray]]:
    """Greedy AR from an empty cache, one token at a time: the tokens and each one's logits row."""
    backend.truncate(0)
    row = np.array(backend.eval(tokens, all_logits=False)[-1])
    out, rows = [], []
    for _ in range(n_tokens):
        tok = int(row.argmax())
        out.append(tok)
        rows.append(row)
        if tok in backend.eog_tokens or len(out) == n_tokens:
            break
        row = np.array(backend.eval((tok,), all_logits=False)[-1])
    return out, rows


#: continuation tokens per MLX block: a divergence found early spares the rest
BLOCK = 8


def teacher_forced(mlx: Any, tokens: list[int], continuation: list[int]) -> list[np.ndarray]:
    """MLX's logits rows after ``tokens`` and after each prefix of ``continuation``, as far as
    MLX's greedy choice follows ``continuation`` (the row where it first parts is the last).

    What MLX already holds of ``tokens`` (the shared chat-template opening) is kept."""
    kept = 0
    while kept < min(mlx.n_past, len(tokens) - 1) and mlx.cached[kept] == tokens[kept]:
        kept += 1
    mlx.truncate(kept)
    if kept < len(tokens) - 1:
        mlx.eval(tokens[kept:-1], all_logits=False)
    feed = [tokens[-1], *continuation[:-1]]  # row i predicts continuation[i]
    rows: list[np.ndarray] = []
    for start in range(0, len(feed), BLOCK):
        block = np.array(mlx.eval(feed[start : start + BLOCK], all_logits=True))
        for row in block:
            rows.append(row)
            if int(row.argmax()) != continuation[len(rows) - 1]:
                return rows
    return rows
