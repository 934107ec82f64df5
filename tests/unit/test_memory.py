"""The memory sampler: real readings on this machine, a thread that survives errors, and
MLX figures read only from an MLX the process already imported."""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Callable

import pytest

from spectui.metrics.memory import MemorySampler, headroom_bytes
from spectui.recording.schema import MemorySample


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes: the tests below wait for the
    sampler to have done something rather than sleeping a fixed time and counting, so a loaded
    machine makes them slower, not flaky."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_sampler_thread_produces_samples_and_stops() -> None:
    samples: list[MemorySample] = []
    interval_us = 200_000
    t0 = time.perf_counter_ns()
    sampler = MemorySampler(t0, samples.append, interval_s=interval_us / 1e6)
    sampler.start()
    assert wait_for(lambda: len(samples) >= 4), len(samples)  # one at start, then every 0.2 s
    sampler.stop()
    elapsed_us = (time.perf_counter_ns() - t0) / 1000
    assert sampler._thread is not None and not sampler._thread.is_alive()
    n = len(samples)
    # The deadlines sit on a 0.2 s grid; a reading that ends past its deadline is followed by one
    # at once (a resync), so at most every other gap can be short. Upper bounds that hold on any
    # machine yet catch a sampler that ignores its interval (it would take thousands):
    assert n <= 2 * elapsed_us / interval_us + 2, (n, elapsed_us)
    times = [s.t_us for s in samples]
    assert times == sorted(times) and 0 <= times[0] <= times[-1] <= elapsed_us
    assert times[-1] - times[0] >= 0.9 * interval_us * ((n - 1) // 2), times
    time.sleep(0.3)
    assert len(samples) == n  # nothing after stop
    assert sampler.errors == 0 and sampler.n_samples == n
    for s in samples:
        assert s.rss > 0 and s.available > 0 and s.headroom > 0
        assert s.swap_used >= 0 and s.swap_in_rate >= 0 and s.swap_out_rate >= 0
        assert s.pressure == -1.0 or s.pressure >= 0


def test_callback_errors_are_counted_and_sampling_goes_on() -> None:
    calls: list[int] = []

    def flaky(sample: MemorySample) -> None:
        calls.append(sample.t_us)
        if len(calls) % 2:
            raise OSError("disk full")

    with MemorySampler(time.perf_counter_ns(), flaky, interval_s=0.05) as sampler:
        assert wait_for(lambda: len(calls) >= 4), len(calls)  # every other call raised
    assert sampler.errors >= 2 and isinstance(sampler.last_error, OSError)
    assert sampler.n_samples >= 1
    assert sampler.n_samples + sampler.errors == len(calls)


def test_sampling_errors_do_not_kill_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[MemorySample] = []
    sampler = MemorySampler(time.perf_counter_ns(), got.append, interval_s=0.05)
    real = sampler.sample_now
    failures = iter([True, True, False] * 100)

    def sometimes_broken() -> MemorySample:
        if next(failures):
            raise RuntimeError("psutil hiccup")
        return real()

    monkeypatch.setattr(sampler, "sample_now", sometimes_broken)
    sampler.start()
    try:
        # two failures before each success: four failures and two samples need the thread to
        # have outlived the first failures
        assert wait_for(lambda: sampler.errors >= 4 and len(got) >= 2), (sampler.errors, len(got))
    finally:
        sampler.stop()
    assert isinstance(sampler.last_error, RuntimeError)


def test_sample_now_without_thread_and_swap_rates() -> None:
    sampler = MemorySampler(time.perf_counter_ns(), lambda s: None)
    first = sampler.sample_now()
    assert first.swap_in_rate == 0 and first.swap_out_rate == 0  # no previous reading
    second = sampler.sample_now()
    assert second.t_us >= first.t_us and second.rss > 0
    assert sampler._thread is None


def test_linux_pressure_reads_psi() -> None:
    try:
        with open("/proc/pressure/memory") as f:
            f.read()
    except OSError:
        pytest.skip("no PSI on this machine")
    assert MemorySampler(0, lambda s: None).sample_now().pressure >= 0


def test_headroom_bytes() -> None:
    assert headroom_bytes(8 * 2**30) == 8 * 2**30
    # Apple silicon: capped by what Metal recommends minus what the run's GPU allocations hold
    assert headroom_bytes(8 * 2**30, gpu_used=2 * 2**30, gpu_working_set=5 * 2**30) == 3 * 2**30
    assert headroom_bytes(2 * 2**30, gpu_used=2 * 2**30, gpu_working_set=10 * 2**30) == 2 * 2**30
    assert headroom_bytes(8 * 2**30, gpu_used=6 * 2**30, gpu_working_set=5 * 2**30) == 0  # never negative
    assert headroom_bytes(8 * 2**30, gpu_used=-1, gpu_working_set=5 * 2**30) == 8 * 2**30  # no GPU memory held


def test_mlx_figures_only_from_an_imported_mlx(monkeypatch: pytest.MonkeyPatch) -> None:
    had_mlx = "mlx.core" in sys.modules
    if not had_mlx:
        sample = MemorySampler(0, lambda s: None).sample_now()
        assert (sample.mlx_active, sample.mlx_cache, sample.mlx_peak) == (-1, -1, -1)
        assert "mlx.core" not in sys.modules and "mlx" not in sys.modules  # never imported by us

    fake = types.SimpleNamespace(
        get_active_memory=lambda: 3 * 2**30,
        get_cache_memory=lambda: 2**30,
        get_peak_memory=lambda: 4 * 2**30,
        device_info=lambda: {"max_recommended_working_set_size": 5 * 2**30},
    )
    monkeypatch.setitem(sys.modules, "mlx.core", fake)
    sample = MemorySampler(0, lambda s: None).sample_now()
    assert (sample.mlx_active, sample.mlx_cache, sample.mlx_peak) == (3 * 2**30, 2**30, 4 * 2**30)
    assert sample.headroom == min(sample.available, 2 * 2**30)

    # An older MLX: functions under mx.metal, one missing, one failing; no device_info.
    def broken() -> int:
        raise RuntimeError("no Metal device")

    old = types.SimpleNamespace(metal=types.SimpleNamespace(get_active_memory=lambda: 7, get_peak_memory=broken))
    monkeypatch.setitem(sys.modules, "mlx.core", old)
    sample = MemorySampler(0, lambda s: None).sample_now()
    assert (sample.mlx_active, sample.mlx_cache, sample.mlx_peak) == (7, -1, -1)
    assert sample.headroom == sample.available
