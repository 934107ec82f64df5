"""An mlx-lm prompt cache that rolls back exactly, whatever its layers are.

mlx-lm's ``trim_prompt_cache`` trims nothing unless every layer ``is_trimmable()``: a
``KVCache`` always is, an ``ArraysCache`` (the recurrent layers of Mamba, LFM2, Qwen3-Next,
Granite-H...) never is, and a ``RotatingKVCache`` (a sliding window: Gemma 3, gpt-oss) stops
being once the window is full. A speculative step must drop its rejected drafts all the same.

So a cache with any layer that cannot always be trimmed keeps a checkpoint: before a
verification block (and before a draft model's proposal) each such layer's state is kept,
and a plain KV layer's offset. A rollback to any position from the checkpoint on restores
those states, trims the KV layers to the checkpoint, and the caller evaluates the kept tokens
past it again. MLX arrays are immutable values except for in-place slice assignment (the
rotating cache writes single tokens that way), so the kept state holds its own array handles,
which an in-place write to the live cache does not reach.
"""

from __future__ import annotations

from typing import Any, cast


def _copy(state: Any) -> Any:
    """``state`` with every array replaced by its own handle (no data is copied until an
    in-place write to the original would change it)."""
    import mlx.core as mx

    if isinstance(state, mx.array):
        return mx.array(state)
    if isinstance(state, (list, tuple)):
        return type(state)(_copy(s) for s in state)
    return state


def _always_trimmable(layer: Any) -> bool:
    from mlx_lm.models.cache import ConcatenateKVCache, KVCache, QuantizedKVCache

    return type(layer) in (KVCache, QuantizedKVCache, ConcatenateKVCache)


class PromptCache:
    """The per-layer caches of one sequence (``layers``, what the model is called with)."""

    def __init__(self, net: Any) -> None:
        self._net = net
        self.reset()
        #: "trim": every layer trims back any distance; "checkpoint": some layer cannot
        self.rollback = "trim" if all(_always_trimmable(c) for c in self.layers) else "checkpoint"
        #: which layers cannot be trimmed, for the header ("RotatingKVCache x2, ArraysCache x1")
        kinds: dict[str, int] = {}
        for c in self.layers:
            if not _always_trimmable(c):
                kinds[type(c).__name__] = kinds.get(type(c).__name__, 0) + 1
        self.untrimmable = ", ".join(f"{k} x{v}" for k, v in kinds.items())

    def reset(self) -> None:
        """An empty cache (a fresh one: nothing left of a failed rollback)."""
        from mlx_lm.models.cache import make_prompt_cache

        self.layers = make_prompt_cache(self._net)
        self._checkpoint: tuple[int, list[Any]] | None = None

    def close(self) -> None:
        """Let go of the caches and the model (a closed backend must not keep the weights)."""
        self._net = None
        self.layers = []
        self._checkpoint = None

    def checkpoint(self, position: int) -> None:
        """Keep the state at ``position`` (the number of tokens in the cache now)."""
        if self.rollback != "checkpoint" or (self._checkpoint is not None and self._checkpoint[0] == position):
            return
        self._checkpoint = (position, [c.offset if _always_trimmable(c) else _copy(c.state) for c in self.layers])

    def roll_back(self, n_past: int, n: int) -> int | None:
        """Drop the tokens from ``n`` on; the position the cache is at afterwards (``n``, or
        the checkpoint's, at most ``n``: the caller evaluates the tokens between again), or
        None when there is no way back in place (the caller rebuilds)."""
        if self.rollback == "trim":
            from mlx_lm.models.cache import trim_prompt_cache

            # it returns how many tokens it trimmed (mlx-lm annotates the return as List[Any])
            trimmed = cast(int, trim_prompt_cache(self.layers, n_past - n))
            return n if trimmed == n_past - n else None
        if self._checkpoint is None or self._checkpoint[0] > n:
            return None
        position, saved = self._checkpoint
        for layer, state in zip(self.layers, saved):
            if isinstance(state, int):
                layer.trim(layer.offset - state)
            else:
                layer.state = _copy(state)  # the checkpoint stays whole for the next rollback
        return position
