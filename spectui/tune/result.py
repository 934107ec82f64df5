"""``TuneResult``: what one ``spectui tune`` measured and planned, as one typed object.

The tune runner builds it (``runner.tune_engine``); ``report`` renders it, as the text
``spectui tune`` prints, the shorter view the dashboard's tune screen shows, the charts, and the
JSON ``tune --json`` prints and ``store`` keeps. ``TuneResult.from_json`` reads that JSON back
(a stored result), so the screen renders the very object the command printed. Values JSON
cannot hold (NaN: not measured) are null there and NaN again here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from spectui.engine.host.verify_cost import Curve
from spectui.recording.schema import BatchNoise
from spectui.tune.plan import Setting, TierPlan


@dataclass
class TuneResult:
    model: str
    quant: str
    threads: int
    drafter: str  # "ngram", "suffix" or the draft model's name
    curve: Curve
    long_curve: Curve | None
    draft_cost: float  # a draft model's token, in target one-token evaluations (0: n-gram)
    tiers: list[TierPlan]
    runtime: dict[str, str] = field(default_factory=dict)
    source: str = "runs"  # where acceptance came from: "runs" or the --from folder
    key: str = ""  # the target's cost-curve key (``models.cost_curves``): whose result this is
    measured_at: str = ""
    #: the backend's batch-shape noise at these settings (``spectui.engine.host.noise``)
    noise: BatchNoise | None = None
    #: the same under ``--deterministic``, and its one-token cost in these settings' units
    #: (1.6: 60% slower per token); None / 0 where no deterministic setting is known
    deterministic_noise: BatchNoise | None = None
    deterministic_cost: float = 0.0

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TuneResult:
        """The result a ``tune --json`` document (``report.to_json``; with ``key`` and
        ``measured_at`` as ``store`` keeps it) describes. Fields an older document lacks take
        their defaults; a document that is no tune result raises ``ValueError``."""
        try:
            return cls(
                model=str(doc["model"]),
                quant=str(doc.get("quant") or "?"),
                threads=int(doc.get("threads") or 0),
                drafter=str(doc.get("drafter") or "ngram"),
                curve=_curve(doc["curve"]),
                long_curve=_curve(doc["long_curve"]) if doc.get("long_curve") else None,
                draft_cost=_float(doc.get("draft_cost"), 0.0),
                tiers=[_tier(t) for t in doc.get("tiers") or []],
                runtime={str(k): str(v) for k, v in (doc.get("runtime") or {}).items()},
                source=str(doc.get("acceptance_from") or "runs"),
                key=str(doc.get("key") or ""),
                measured_at=str(doc.get("measured_at") or ""),
                noise=_noise((doc.get("exactness") or {}).get("noise")),
                deterministic_noise=_noise((doc.get("exactness") or {}).get("deterministic_noise")),
                deterministic_cost=_float((doc.get("exactness") or {}).get("deterministic_cost"), 0.0),
            )
        except (KeyError, TypeError, AttributeError, msgspec.ValidationError) as exc:
            raise ValueError(f"not a spectui tune result: {exc}") from None


def agreement(plan: TierPlan) -> float | None:
    """measured / predicted - 1 for the tier (None: not checked)."""
    if plan.measured is None or not plan.best_speedup or plan.disturbed:  # a shared machine's figure agrees with nothing
        return None
    return plan.measured / plan.best_speedup - 1.0


def finite(value: Any) -> Any:
    """JSON has no NaN: a value not measured is null, at any depth."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _float(value: Any, missing: float = math.nan) -> float:
    """A JSON number back as a float; null (not measured) as ``missing``."""
    return missing if value is None else float(value)


def _floats(values: Mapping[str, Any] | None) -> dict[str, float]:
    return {str(k): _float(v) for k, v in (values or {}).items()}


def _curve(doc: Mapping[str, Any]) -> Curve:
    return Curve(depth=int(doc["depth"]), unit_us=_float(doc["unit_us"]), relative=tuple(_float(v) for v in doc["relative"]))


def _noise(doc: Any) -> BatchNoise | None:
    return None if doc is None else msgspec.convert(doc, BatchNoise)


def _tier(doc: Mapping[str, Any]) -> TierPlan:
    best = doc.get("best") or {}
    measured = doc.get("measured")
    return TierPlan(
        tier=str(doc["tier"]),
        prompts=[str(p) for p in doc.get("prompts") or []],
        predicted=_floats(doc.get("predicted_by_setting")),
        per_position=[_float(v) for v in doc.get("per_position") or []],
        acceptance=_float(doc.get("acceptance")),
        best=Setting(str(best.get("drafter") or "ar"), None if best.get("k") is None else int(best["k"]),
                     _float(best.get("p_min"), 0.0)),
        best_speedup=_float(doc.get("predicted")),
        break_even=_float(doc.get("break_even")),
        verdict=str(doc.get("verdict") or ""),
        per_prompt=_floats(doc.get("predicted_per_prompt")),
        measured=None if measured is None else float(measured),
        measured_per_prompt=_floats(doc.get("measured_per_prompt")),
        copy_ceiling=_float(doc.get("copy_ceiling")),
        perfect_ceiling=_float(doc.get("perfect_ceiling")),
        lookup_bound=_float(doc.get("lookup_bound")),
        disturbed=_floats(doc.get("disturbed")),
    )
