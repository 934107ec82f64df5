"""The production gate's thresholds (see ``spectui.compare.gate`` for what each check means).

Kept apart from the gate so the CLI can show the defaults in ``--help`` without importing
numpy.
"""

from __future__ import annotations

import msgspec

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
    #: (spectui.quality) may be at most this many percentage points below the baselines'.
    #: Speculative sampling is exact in distribution, so any real drop is a bug and the
    #: threshold is about noise. The rule compares the two measured rates, and at a few dozen
    #: runs a side those move by +-15 points or more (the check's detail prints the
    #: difference's 95% interval): a verdict that should not flake needs hundreds of runs.
    #: Without any graded recording, sampled runs fail as "not measured" unless allowed.
    max_quality_drop_points: float = 5.0
    allow_unverified_quality: bool = False

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
