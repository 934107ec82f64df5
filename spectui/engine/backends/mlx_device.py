"""What the MLX device has and holds, apart from any model on it: its description, the
allocator's figures, and the wired-memory limit a run sets (on Apple Silicon, unified memory
that the weights keep instead of being paged out between tokens). MLX is imported when first
asked for, so this module loads where MLX is absent.
"""

from __future__ import annotations

from typing import Any


def mlx_core() -> Any:
    import mlx.core as mx

    return mx


def device_info() -> dict[str, Any]:
    """``mx.device_info()`` where this MLX has it (names, memory size, working-set limit)."""
    mx = mlx_core()
    fn = getattr(mx, "device_info", None) or getattr(getattr(mx, "metal", None), "device_info", None)
    try:
        return {f"device_{k}" if not k.startswith("device") else k: v for k, v in (fn() if fn else {}).items()}
    except Exception:  # noqa: BLE001 - a device without the query  # pragma: no cover
        return {}


def memory_info() -> dict[str, int]:
    """MLX's allocator figures in bytes: active, peak, cache and the configured limit."""
    mx = mlx_core()
    out: dict[str, int] = {}
    for key, name in (
        ("active_memory_bytes", "get_active_memory"),
        ("peak_memory_bytes", "get_peak_memory"),
        ("cache_memory_bytes", "get_cache_memory"),
        ("memory_limit_bytes", "get_memory_limit"),
    ):
        fn = getattr(mx, name, None)
        if fn is not None:
            out[key] = int(fn())
    return out


#: the wired-memory limit set for the runs (bytes; 0: this device recommends none)
_wired_limit = 0


def set_wired_limit() -> int:
    """Wire up to the device's recommended working set, as ``mlx_lm.generate`` does on macOS
    15+ (``mlx_lm.utils.maybe_set_recommended_wired_limit``): the weights stay resident
    instead of being paged out between tokens. Returns the limit (0: none recommended)."""
    global _wired_limit
    from mlx_lm.utils import maybe_set_recommended_wired_limit

    try:
        if maybe_set_recommended_wired_limit() is not None:
            _wired_limit = int(mlx_core().device_info()["max_recommended_working_set_size"])
    except Exception:  # noqa: BLE001 - a device or OS that cannot wire memory: nothing is wired
        _wired_limit = 0
    return _wired_limit


def wired_limit() -> int:
    """The limit the last ``set_wired_limit`` set (bytes; 0: none)."""
    return _wired_limit
