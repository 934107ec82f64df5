"""What a workload runs: its settings (each with the family whose AR it is compared with) and
its levels of load, checked before anything starts."""

from __future__ import annotations

from dataclasses import dataclass

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.workload.source import Workload, WorkRequest

LLAMA_SERVER, EMBEDDED, SERVER = "llama-server", "embedded", "server"


@dataclass(frozen=True)
class Setting:
    label: str  # "llama-server ngram-mod", "embedded AR", ...
    family: str  # whose AR it is compared with
    config: RunConfig

    @property
    def ar(self) -> bool:
        return self.config.mode == "ar"


@dataclass(frozen=True)
class WorkloadPlan:
    workload: Workload
    settings: tuple[Setting, ...]
    clients: tuple[int, ...] = (1,)
    rates: tuple[float, ...] = ()
    slots: int = 0  # 0: the most clients of any level
    warmup: int = 0
    #: requests sent to each server before any measured, besides the workload's first ``warmup``:
    #: tune's check warms its servers with the tuning half, as a deployed server has seen traffic
    warm_with: tuple[WorkRequest, ...] = ()
    passes: int = 1
    keep_sampling: bool = False  # False: every request greedy, so that exactness is judged
    seed: int = 0
    #: run AR at one client first, whatever the levels: every request's reference for exactness
    reference: bool = True
    #: the reference runs on a server of its own, closed once it has answered, so that no
    #: measured server meets a request before its own level: where the requests must be unseen
    #: (tune's check at 2 clients: as a level of every setting, AR at one client first let
    #: ngram-mod copy its own earlier answers to the very requests measured, 2.14x against
    #: 1.01x on unseen ones). Else it is every setting's first level, on the servers measured.
    reference_apart: bool = False

    def check(self) -> None:
        """Everything that can be refused before an engine starts, in one line."""
        if not self.settings:
            raise SpectuiError("a workload needs at least one setting to run")
        if any(c < 1 for c in self.clients):
            raise SpectuiError(f"--clients {','.join(map(str, self.clients))}: each level needs 1 client or more")
        if any(not r > 0 for r in self.rates):
            raise SpectuiError("--rate: requests a second must be above 0")
        if self.warmup < 0 or self.passes < 1 or self.slots < 0:
            raise SpectuiError("--warmup must be 0 or more, --passes 1 or more, --slots 0 or more")
        if self.warmup > len(self.workload.requests):
            raise SpectuiError(f"--warmup {self.warmup}: the workload has {len(self.workload.requests)} requests")
        labels = [s.label for s in self.settings]
        if len(set(labels)) != len(labels):
            raise SpectuiError(f"settings named twice: {', '.join(labels)}")

    @property
    def server_slots(self) -> int:
        return self.slots or max(self.clients or (1,))

    def levels(self) -> list[tuple[int, float]]:
        """(clients, rate) per level: closed loops first, then open loops; one client first."""
        closed = sorted(set(self.clients) | ({1} if self.reference and not self.reference_apart else set()))
        return [(c, 0.0) for c in closed] + [(0, r) for r in self.rates]
