"""Memory sampling on a daemon thread: process RSS, system headroom, swap traffic, pressure,
MLX allocator state when MLX is in use, and the machine around the run (thermal state,
throttling, fans, power, other processes' CPU). Everything that differs by OS (swap counters,
pressure, the GPU working-set limit, the slow signals) comes from ``spectui.metrics.host``'s one
interface, whose implementation is chosen once per OS.

Counters that matter for a verdict are kept since the session began (the sampler's first
reading): swap-ins, time at red memory pressure, throttle events.

Each reading costs ~0.1-0.3 ms (a few /proc reads), so 4 Hz is invisible next to decoding;
the slower host readings refresh on their own schedule (``HostSignals``).
Readings go to ``on_sample`` as ``MemorySample`` records; timestamps share the engine's
origin (``t0_ns`` from ``time.perf_counter_ns``) so they line up with ``Step`` times.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from spectui.metrics.host import HostSignals, OtherLoad, new_host
from spectui.recording.schema import MemorySample

#: macOS kern.memorystatus_vm_pressure_level "critical": the brief's red state
MAC_RED_LEVEL = 4.0
#: Linux has no levels; PSI "some avg10" at or above this percent counts as red. At 10% some
#: task waited on memory for a tenth of the last 10 s: reclaim is throttling work, the Linux
#: counterpart of macOS compressing and swapping under critical pressure.
LINUX_RED_PSI = 10.0


def is_red_pressure(pressure: float, platform: str = sys.platform) -> bool:
    """Whether a ``MemorySample.pressure`` reading is the red (critical) state on ``platform``."""
    if pressure < 0:
        return False
    return pressure >= (MAC_RED_LEVEL if platform == "darwin" else LINUX_RED_PSI)


def headroom_bytes(available: int, gpu_used: int = -1, gpu_working_set: int = 0) -> int:
    """How many more bytes can be allocated before the system starts swapping.

    ``available`` is psutil's ``virtual_memory().available``: on Linux the kernel's
    MemAvailable estimate, on macOS free + inactive pages; both already count page cache
    the kernel can drop without swapping, so it is the right starting point (``free``
    alone would be far too pessimistic). On Apple silicon, GPU allocations beyond Metal's
    recommended working set get paged even while the system still looks roomy, so when the
    run holds GPU memory (``gpu_used >= 0`` and ``gpu_working_set > 0``: MLX's active memory
    and its ``max_recommended_working_set_size``, or llama.cpp's Metal buffers and the
    device's ``recommendedMaxWorkingSetSize``) headroom is capped at that working set minus
    what is held. Never negative. (Container cgroup limits are not considered: on Linux
    MemAvailable is the host's view.)
    """
    headroom = available
    if gpu_used >= 0 and gpu_working_set > 0:
        headroom = min(headroom, gpu_working_set - gpu_used)
    return max(0, headroom)


class MemorySampler:
    """Calls ``on_sample`` with a fresh ``MemorySample`` every ``interval_s`` on a daemon
    thread, starting at once. Keep ``on_sample`` cheap (e.g. a ``RecordingWriter.write``
    or a queue put): it runs on the sampling thread. Errors in sampling or in the callback
    never stop the thread: they are counted in ``errors`` (last one in ``last_error``)."""

    def __init__(self, t0_ns: int, on_sample: Callable[[MemorySample], None], interval_s: float = 0.25) -> None:
        self.t0_ns = t0_ns
        self.on_sample = on_sample
        self.interval_s = interval_s
        self.errors = 0
        self.last_error: BaseException | None = None
        self.n_samples = 0
        self._process = psutil.Process()
        self._lock = threading.Lock()  # sample_now may run on the thread and a caller at once
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._swap_prev: tuple[int, int, int] | None = None  # (t_ns, sin, sout)
        self._host = new_host()  # this OS's readers, chosen once
        self._mlx_working_set: int | None = None  # read once: a device constant
        self._slow = HostSignals(self._host)
        self._other = OtherLoad(self._process)
        # the session's baselines, set by the first reading
        self._sin0: int | None = None
        self._throttle0: int | None = None
        self._red_ms = 0.0
        self._prev_ns: int | None = None

    # -- one reading ----------------------------------------------------------------------

    def sample_now(self) -> MemorySample:
        with self._lock:
            now = time.perf_counter_ns()
            vm = psutil.virtual_memory()
            swap = psutil.swap_memory()  # ``used`` only: its sin is pageins on macOS
            # cumulative bytes since boot, from the host's own swap counters; rates come from
            # the deltas. None where the OS does not tell (swap-ins then read not available).
            swapped = self._swap_bytes()
            sin_rate = sout_rate = 0
            if swapped is not None and self._swap_prev is not None:
                t_prev, sin_prev, sout_prev = self._swap_prev
                dt = (now - t_prev) / 1e9
                if dt > 0:
                    sin_rate = int(max(0, swapped[0] - sin_prev) / dt)
                    sout_rate = int(max(0, swapped[1] - sout_prev) / dt)
            if swapped is not None:
                self._swap_prev = (now, swapped[0], swapped[1])
                if self._sin0 is None:
                    self._sin0 = swapped[0]
            mlx_active, cache, peak, mlx_working_set = self._mlx()
            if mlx_active >= 0 and mlx_working_set > 0:
                gpu_used, working_set = mlx_active, mlx_working_set
            else:  # no MLX: the Metal device llama.cpp allocates on, if any
                gpu_used, working_set = self._gpu_memory()
            pressure = self._read_pressure()
            if self._prev_ns is not None and is_red_pressure(pressure):
                self._red_ms += (now - self._prev_ns) / 1e6
            self._prev_ns = now
            host = self._slow.read(now / 1e9)
            throttles = None
            if host.throttle_count is not None:
                if self._throttle0 is None:
                    self._throttle0 = host.throttle_count
                throttles = max(0, host.throttle_count - self._throttle0)
            return MemorySample(
                t_us=(now - self.t0_ns) // 1000,
                rss=self._process.memory_info().rss,
                available=vm.available,
                headroom=headroom_bytes(vm.available, gpu_used, working_set),
                swap_used=swap.used,
                swap_in_rate=sin_rate,
                swap_out_rate=sout_rate,
                pressure=pressure,
                mlx_active=mlx_active,
                mlx_cache=cache,
                mlx_peak=peak,
                swap_in_total=max(0, swapped[0] - self._sin0) if swapped is not None and self._sin0 is not None else None,
                red_pressure_ms=round(self._red_ms) if self._host.has_pressure() else None,
                throttle_events=throttles,
                cpu_freq_pct=host.cpu_freq_pct,
                temperature_mc=host.temperature_mc,
                thermal_level=host.thermal_level,
                fan_rpm=host.fan_rpm,
                on_ac_power=host.on_ac_power,
                low_power_mode=host.low_power_mode,
                other_cpu_pct=self._other_cpu(),
            )

    def _other_cpu(self) -> int | None:
        try:
            return self._other.read()
        except Exception:  # noqa: BLE001 - e.g. psutil.AccessDenied in a locked-down container
            return None

    def _swap_bytes(self) -> tuple[int, int] | None:
        try:
            return self._host.swap_bytes()
        except Exception:  # noqa: BLE001 - e.g. psutil refused in a locked-down container
            return None

    def _gpu_memory(self) -> tuple[int, int]:
        try:
            used, limit = self._host.gpu_memory()
        except Exception:  # noqa: BLE001 - a missing GPU reading must not stop the sampler
            return -1, 0
        # only a run that holds GPU memory is bound by the GPU's working set
        return (used, limit) if used > 0 else (-1, 0)

    def _read_pressure(self) -> float:
        try:
            return self._host.pressure()
        except Exception:  # noqa: BLE001 - a missing pressure reading must not stop the sampler
            return -1.0

    def _mlx(self) -> tuple[int, int, int, int]:
        """(active, cache, peak, max recommended working set), -1/0 where unknown. MLX is
        only read if the process already imported it: importing it here would cost
        seconds and memory in runs that never use it."""
        mx: Any = sys.modules.get("mlx.core")
        if mx is None:
            return -1, -1, -1, 0
        values = []
        for name in ("get_active_memory", "get_cache_memory", "get_peak_memory"):
            # Newer MLX has these at top level; older versions under mx.metal.
            fn = getattr(mx, name, None) or getattr(getattr(mx, "metal", None), name, None)
            try:
                values.append(int(fn()) if fn is not None else -1)
            except Exception:  # noqa: BLE001 - a missing MLX reading must not stop the sampler
                values.append(-1)
        if self._mlx_working_set is None:
            self._mlx_working_set = 0
            info = getattr(mx, "device_info", None) or getattr(getattr(mx, "metal", None), "device_info", None)
            try:
                self._mlx_working_set = int(info()["max_recommended_working_set_size"]) if info else 0
            except Exception:  # noqa: BLE001 - CPU backends have no such limit
                pass
        return values[0], values[1], values[2], self._mlx_working_set

    # -- the thread -----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("MemorySampler already started")
        self._thread = threading.Thread(target=self._run, name="spectui-memory", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        # Deadlines on a fixed grid, so a slow reading does not push later ones back.
        next_at = time.perf_counter()
        while not self._stop.is_set():
            try:
                self.on_sample(self.sample_now())
                self.n_samples += 1
            except Exception as e:  # noqa: BLE001 - the sampler must outlive any failure
                self.errors += 1
                self.last_error = e
            next_at += self.interval_s
            delay = next_at - time.perf_counter()
            if delay < 0:  # fell behind (suspended laptop, stalled machine): resync
                next_at, delay = time.perf_counter(), 0.0
            self._stop.wait(delay)

    def __enter__(self) -> MemorySampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
