"""macOS: the kernel's own swap counters, thermal pressure, power, memory pressure, Metal's limit.

Read without root, and without a new dependency (ctypes on the system's own libraries):

* swap: ``vm_statistics64.swapins`` / ``swapouts`` from ``host_statistics64`` (what ``vm_stat``
  prints as "Swapins" / "Swapouts"), times the kernel's page size. Not psutil's
  ``swap_memory().sin``, which on macOS is ``pageins``: every page read from a file, the
  memory-mapped model a run loads included, so a Mac run of any model over the swap-in budget
  would read as swapping. When the Mach call is unavailable, ``vm_stat`` is parsed instead (a
  subprocess, so at most once per ``VM_STAT_EVERY_S``).
* thermal pressure: ``NSProcessInfo.processInfo.thermalState`` through the Objective-C runtime
  (0 nominal, 1 fair, 2 serious, 3 critical), the signal Apple recommends and the only one
  Apple silicon gives without root: ``pmset -g therm`` prints no speed limit there. Entering
  "serious" or above counts as a throttle event; on an Intel Mac a ``pmset -g therm`` CPU speed
  limit under 100 does too, and is the clock percent.
* power: ``pmset -g batt`` (AC or battery); low-power mode from
  ``NSProcessInfo.isLowPowerModeEnabled`` (macOS 12+), else the ``lowpowermode`` line of
  ``pmset -g``. pmset is a subprocess (~10 ms), so these refresh every ``MAC_EVERY_S``.
* memory pressure: ``kern.memorystatus_vm_pressure_level`` by ``sysctlbyname`` (1 normal,
  2 warn, 4 critical; no subprocess, ~1 µs).
* GPU limit: Metal's ``MTLDevice.recommendedMaxWorkingSetSize`` and ``currentAllocatedSize``
  (``MTLCreateSystemDefaultDevice``). Past that working set the GPU's allocations are paged
  while the system still looks roomy, so headroom is capped by it whichever backend allocates
  (llama.cpp's Metal buffers, or MLX, which reports the same limit itself).

Fans need the SMC (IOKit, undocumented keys): not read. Everything here is written from Apple's
documentation and headers; the text parsers (``macos_text``) are tested against outputs captured
on real Macs, the ctypes calls only run on a Mac.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import subprocess
import time
from collections.abc import Callable
from typing import Any

from spectui import subprocesses
from spectui.metrics.host.base import Host, HostReading
from spectui.metrics.host.macos_text import (
    THROTTLED_STATE,
    parse_pmset_batt,
    parse_pmset_lowpower,
    parse_pmset_therm,
    parse_sysctl,
    swap_bytes_from_counts,
    thermal_state_level,
    vm_stat_swap_bytes,
)

#: pmset is a subprocess: the power and thermal readings refresh this often
MAC_EVERY_S = 10.0
#: the vm_stat fallback is a subprocess too; its counters are cumulative, so reading them less
#: often only coarsens the rate
VM_STAT_EVERY_S = 1.0
_HOST_VM_INFO64 = 4  # mach/host_info.h
_FOUNDATION = "/System/Library/Frameworks/Foundation.framework/Foundation"
_METAL = "/System/Library/Frameworks/Metal.framework/Metal"


class VMStatistics64(ctypes.Structure):
    """``struct vm_statistics64`` (xnu ``osfmk/mach/vm_statistics.h``), field for field."""

    _fields_ = [
        ("free_count", ctypes.c_uint32),
        ("active_count", ctypes.c_uint32),
        ("inactive_count", ctypes.c_uint32),
        ("wire_count", ctypes.c_uint32),
        ("zero_fill_count", ctypes.c_uint64),
        ("reactivations", ctypes.c_uint64),
        ("pageins", ctypes.c_uint64),
        ("pageouts", ctypes.c_uint64),
        ("faults", ctypes.c_uint64),
        ("cow_faults", ctypes.c_uint64),
        ("lookups", ctypes.c_uint64),
        ("hits", ctypes.c_uint64),
        ("purges", ctypes.c_uint64),
        ("purgeable_count", ctypes.c_uint32),
        ("speculative_count", ctypes.c_uint32),
        ("decompressions", ctypes.c_uint64),
        ("compressions", ctypes.c_uint64),
        ("swapins", ctypes.c_uint64),
        ("swapouts", ctypes.c_uint64),
        ("compressor_page_count", ctypes.c_uint32),
        ("throttled_count", ctypes.c_uint32),
        ("external_page_count", ctypes.c_uint32),
        ("internal_page_count", ctypes.c_uint32),
        ("total_uncompressed_pages_in_compressor", ctypes.c_uint64),
    ]


#: HOST_VM_INFO64_COUNT: the struct's size in ``natural_t`` (4-byte) units
HOST_VM_INFO64_COUNT = ctypes.sizeof(VMStatistics64) // 4


def _run(*argv: str) -> str | None:
    try:
        return subprocesses.run(list(argv), capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None


class _MachSwap:
    """host_statistics64(HOST_VM_INFO64): the kernel's swap counters, no subprocess."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._stats = libc.host_statistics64
        self._stats.argtypes = [ctypes.c_uint, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint)]
        self._stats.restype = ctypes.c_int
        libc.mach_host_self.restype = ctypes.c_uint
        self._host = libc.mach_host_self()  # a send right, taken once for the process
        self.page_size = _kernel_page_size(libc)
        self.read()  # probe: raises if the call fails here

    def read(self) -> tuple[int, int]:
        info = VMStatistics64()
        count = ctypes.c_uint(HOST_VM_INFO64_COUNT)
        if self._stats(self._host, _HOST_VM_INFO64, ctypes.byref(info), ctypes.byref(count)) != 0:
            raise OSError("host_statistics64 failed")
        return swap_bytes_from_counts(info.swapins, info.swapouts, self.page_size)


def _kernel_page_size(libc: ctypes.CDLL) -> int:
    """The page size the kernel counts in (16 KiB on Apple silicon, even for a process under
    Rosetta, whose own pages are 4 KiB): ``vm_kernel_page_size``, else ``sysctl hw.pagesize``."""
    with contextlib.suppress(ValueError, OSError):
        size = ctypes.c_size_t.in_dll(libc, "vm_kernel_page_size").value
        if size > 0:
            return size
    text = _run("sysctl", "hw.pagesize")
    value = parse_sysctl(text or "").get("hw.pagesize", "")
    return int(value) if value.isdigit() else os.sysconf("SC_PAGE_SIZE")


class _ObjC:
    """Just enough of the Objective-C runtime to send a message with no or one argument."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL(ctypes.util.find_library("objc") or "libobjc.dylib")
        self.lib.objc_getClass.restype = ctypes.c_void_p
        self.lib.objc_getClass.argtypes = [ctypes.c_char_p]
        self.lib.sel_registerName.restype = ctypes.c_void_p
        self.lib.sel_registerName.argtypes = [ctypes.c_char_p]

    def send(self, restype: Any, receiver: int, selector: str, *args: int) -> Any:
        # a fresh function object per signature: objc_msgSend takes the callee's prototype
        fn = self.lib["objc_msgSend"]
        fn.restype = restype
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_void_p] * len(args)
        return fn(receiver, self.lib.sel_registerName(selector.encode()), *args)

    def responds(self, receiver: int, selector: str) -> bool:
        return bool(self.send(ctypes.c_bool, receiver, "respondsToSelector:", self.lib.sel_registerName(selector.encode())))


class _ProcessInfo:
    """NSProcessInfo.processInfo: thermal state and low-power mode."""

    def __init__(self, objc: _ObjC) -> None:
        ctypes.CDLL(_FOUNDATION)  # registers NSProcessInfo with the runtime
        self.objc = objc
        cls = objc.lib.objc_getClass(b"NSProcessInfo")
        info = objc.send(ctypes.c_void_p, cls, "processInfo") if cls else None
        if not info or not objc.responds(info, "thermalState"):
            raise OSError("NSProcessInfo.thermalState is not available")
        self.info: int = info
        self.has_low_power = objc.responds(self.info, "isLowPowerModeEnabled")

    def thermal_level(self) -> int | None:
        return thermal_state_level(int(self.objc.send(ctypes.c_long, self.info, "thermalState")))

    def low_power_mode(self) -> bool | None:
        if not self.has_low_power:
            return None
        return bool(self.objc.send(ctypes.c_bool, self.info, "isLowPowerModeEnabled"))


class _MetalDevice:
    """The default Metal device's working-set limit and what this process has allocated on it."""

    def __init__(self, objc: _ObjC) -> None:
        metal = ctypes.CDLL(_METAL)
        metal.MTLCreateSystemDefaultDevice.restype = ctypes.c_void_p
        self.device = metal.MTLCreateSystemDefaultDevice()  # kept for the process's life
        if not self.device:
            raise OSError("no Metal device")
        self.objc = objc
        self.limit = int(objc.send(ctypes.c_uint64, self.device, "recommendedMaxWorkingSetSize"))

    def allocated(self) -> int:
        return int(self.objc.send(ctypes.c_uint64, self.device, "currentAllocatedSize"))


_SHARED: dict[str, Any] = {}


def _once(name: str, make: Callable[[], Any]) -> Any:
    """A reader, made once per process and shared by every sampler (the Metal device and the
    Mach port are process-wide), or None where this Mac (or macOS version) lacks its source."""
    if name not in _SHARED:
        try:
            _SHARED[name] = make()
        except Exception:  # noqa: BLE001 - a missing source of any kind reads as not available
            _SHARED[name] = None
    return _SHARED[name]


class MacHost(Host):
    """The macOS readers, each probed once; a source that fails its probe is not used again."""

    platform = "darwin"
    slow_every_s = MAC_EVERY_S

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.dylib", use_errno=True)
        self._sysctlbyname = libc.sysctlbyname
        self._sysctlbyname.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_size_t]
        self._sysctlbyname.restype = ctypes.c_int
        self._has_pressure = self.pressure() >= 0
        self._mach = _once("mach", lambda: _MachSwap(libc))
        self._vm_stat_at = -1e18
        self._vm_stat_last: tuple[int, int] | None = None
        objc = _once("objc", _ObjC)
        self._process = _once("process", lambda: _ProcessInfo(objc)) if objc else None
        self._metal = _once("metal", lambda: _MetalDevice(objc)) if objc else None
        self.throttles = 0
        self._throttled = False

    # -- fast readings --------------------------------------------------------------------

    def swap_bytes(self) -> tuple[int, int] | None:
        if self._mach is not None:
            with contextlib.suppress(OSError):
                return self._mach.read()
        now = time.monotonic()
        if now - self._vm_stat_at >= VM_STAT_EVERY_S:
            self._vm_stat_at = now
            text = _run("vm_stat")
            self._vm_stat_last = vm_stat_swap_bytes(text) if text else None
        return self._vm_stat_last

    def pressure(self) -> float:
        value = ctypes.c_int(0)
        size = ctypes.c_size_t(ctypes.sizeof(value))
        if self._sysctlbyname(b"kern.memorystatus_vm_pressure_level", ctypes.byref(value), ctypes.byref(size), None, 0):
            return -1.0
        return float(value.value)

    def has_pressure(self) -> bool:
        return self._has_pressure

    def gpu_memory(self) -> tuple[int, int]:
        if self._metal is None or self._metal.limit <= 0:
            return -1, 0
        try:
            return self._metal.allocated(), self._metal.limit
        except Exception:  # noqa: BLE001 - a failed message send is a missing reading
            return -1, 0

    # -- slow readings --------------------------------------------------------------------

    def slow(self) -> HostReading:
        therm, batt = _run("pmset", "-g", "therm"), _run("pmset", "-g", "batt")
        limit, warning = parse_pmset_therm(therm) if therm is not None else (None, None)
        state = self._process.thermal_level() if self._process is not None else None
        low_power = self._process.low_power_mode() if self._process is not None else None
        if low_power is None:
            general = _run("pmset", "-g")
            low_power = parse_pmset_lowpower(general) if general is not None else None
        known = limit is not None or state is not None
        throttled = (limit is not None and limit < 100) or (state is not None and state >= THROTTLED_STATE)
        if throttled and not self._throttled:
            self.throttles += 1
        self._throttled = throttled
        return HostReading(
            throttle_count=self.throttles if known else None,
            cpu_freq_pct=limit,  # the OS's own cap on the CPU clock (Intel Macs), percent
            thermal_level=state if state is not None else warning,
            on_ac_power=parse_pmset_batt(batt) if batt is not None else None,
            low_power_mode=low_power,
        )
