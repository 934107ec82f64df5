"""NVIDIA GPUs through NVML (``nvidia-ml-py``, the ``energy`` extra), imported only when asked.

``nvmlDeviceGetTotalEnergyConsumption`` gives each GPU's energy in millijoules since the driver
was last loaded (Volta and later; older GPUs answer "not supported"). It is a 64-bit counter that
does not wrap in practice. Each GPU is a domain, and all of them count toward the total.
"""

from __future__ import annotations

from typing import Any

from spectui.metrics.energy_base import EnergyReader, NotAvailable


def _nvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py's module
    except ImportError:
        raise NotAvailable("no NVIDIA reader: nvidia-ml-py is not installed (pip install 'spectui[energy]')") from None
    return pynvml


class NvmlReader(EnergyReader):
    """Cumulative joules per NVIDIA GPU since the reader opened."""

    source = "NVML"

    def __init__(self) -> None:
        nv = self._nv = _nvml()
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise NotAvailable(f"no NVIDIA GPU (NVML: {exc})") from None
        try:
            count = nv.nvmlDeviceGetCount()
            if count == 0:
                raise NotAvailable("no NVIDIA GPU (NVML found none)")
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._first = [self._millijoules(i, h) for i, h in enumerate(self._handles)]
        except (NotAvailable, nv.NVMLError) as exc:
            nv.nvmlShutdown()
            raise exc if isinstance(exc, NotAvailable) else NotAvailable(f"NVML failed: {exc}") from None
        self.domains = tuple(f"gpu{i}" for i in range(count))
        self.counted = self.domains

    def _millijoules(self, index: int, handle: Any) -> int:
        nv = self._nv
        try:
            return int(nv.nvmlDeviceGetTotalEnergyConsumption(handle))
        except nv.NVMLError_NotSupported:
            raise NotAvailable(f"GPU {index} does not report its total energy (NVML: not supported before Volta)") from None

    def read_joules(self) -> dict[str, float]:
        return {
            f"gpu{i}": (self._millijoules(i, h) - first) / 1e3 for i, (h, first) in enumerate(zip(self._handles, self._first))
        }

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except self._nv.NVMLError:
            pass
