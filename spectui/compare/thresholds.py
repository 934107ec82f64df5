"""The production gate's thresholds (see ``spectui.compare.gate`` for what each check means).

Kept apart from the gate so the CLI can show the defaults in ``--help`` without importing
numpy.
"""

from __future__ import annotations

import msgspec

from spectui.config import EnvelopeConfig
from spectui.errors import SpectuiError

#: TTFT may grow by at most this share on short prompts: ``spectui diff``'s limit and the gate's
#: default (``GateThresholds.max_ttft_growth``).
MAX_TTFT_GROWTH = 0.08


class GateThresholds(msgspec.Struct, kw_only=True, frozen=True):
    #: median candidate decode tok/s / median baseline decode tok/s must reach this
    min_speedup: float = 1.16
    #: candidate p95 ITL <= baseline p95 ITL x ratio x (1 + tolerance); see the module docstring
    max_p95_itl_ratio: float = 1.0
    p95_itl_tolerance: float = 0.05
    #: median acceptance rate of speculative candidates, judged at ``expected_k``
    min_acceptance: float = 0.55
    expected_k: int = 4
    #: TTFT growth allowed on short prompts (long prompts: not applicable)
    max_ttft_growth: float = MAX_TTFT_GROWTH
    #: sampled runs: the candidates' pass rate on the quality checks their recordings carry
    #: (spectui.quality) may be at most this many percentage points below the baselines'
    #: (the brief: within +-0.5% of the AR baseline). It is judged as non-inferiority: the
    #: lower end of the difference's 95% interval must clear it. Tens of runs cannot resolve
    #: half a point; then the check says so and how many runs a side would, and fails
    #: unless unverified quality is allowed. Without any graded recording, sampled runs fail
    #: as "not measured" unless allowed.
    max_quality_drop_points: float = 0.5
    allow_unverified_quality: bool = False
    #: the brief's drift rule: acceptance below ``min_window_acceptance`` in more than
    #: ``max_low_windows`` consecutive windows of ``window_s`` seconds fails
    min_window_acceptance: float = 0.40
    max_low_windows: int = 2
    window_s: float = 300.0
    #: Envelope limits that override what each recording declared (None: the recording's own,
    #: see ``spectui.config.EnvelopeConfig``; an undeclared headroom floor scales to its host)
    min_headroom_mib: float | None = None
    max_swap_in_mib: float | None = None
    max_red_pressure_s: float | None = None
    max_throttle_events: int | None = None
    max_other_cpu: float | None = None
    #: median speculative J/token / median AR J/token must be at most this (None: no limit;
    #: the energy check then only reports). A limit that cannot be checked (no energy counter
    #: where a run was recorded) fails, unless ``energy_optional`` lets the gate pass without it
    max_energy_ratio: float | None = None
    energy_optional: bool = False

    def validate(self) -> None:
        for name in ("min_speedup", "max_p95_itl_ratio"):
            if not getattr(self, name) > 0:
                raise SpectuiError(f"{name.replace('_', '-')} must be > 0, got {getattr(self, name)}")
        for name in ("p95_itl_tolerance", "max_ttft_growth", "max_quality_drop_points"):
            if not getattr(self, name) >= 0:
                raise SpectuiError(f"{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.min_acceptance <= 1:
            raise SpectuiError(f"min-acceptance must be between 0 and 1, got {self.min_acceptance}")
        if self.expected_k < 1:
            raise SpectuiError(f"expected-k must be >= 1, got {self.expected_k}")
        if not 0 <= self.min_window_acceptance <= 1:
            raise SpectuiError(f"min-window-acceptance must be between 0 and 1, got {self.min_window_acceptance}")
        if self.max_energy_ratio is not None and not self.max_energy_ratio > 0:
            raise SpectuiError(f"max-energy-ratio must be > 0, got {self.max_energy_ratio}")
        if self.max_low_windows < 0:
            raise SpectuiError(f"max-low-windows must be >= 0, got {self.max_low_windows}")
        if not self.window_s > 0:
            raise SpectuiError(f"the window must be > 0 seconds, got {self.window_s}")
        self.envelope_overrides(EnvelopeConfig()).validate()

    def envelope_overrides(self, declared: EnvelopeConfig) -> EnvelopeConfig:
        """``declared`` with the limits given here put in its place."""
        given = {k: getattr(self, k) for k in ENVELOPE_FIELDS if getattr(self, k) is not None}
        return msgspec.structs.replace(declared, **given) if given else declared


#: the envelope limits a gate may override (``EnvelopeConfig`` fields of the same name)
ENVELOPE_FIELDS = ("min_headroom_mib", "max_swap_in_mib", "max_red_pressure_s", "max_throttle_events", "max_other_cpu")
