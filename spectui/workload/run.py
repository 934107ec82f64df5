"""Running a workload: one engine per setting kept up for the whole run, every level of load
against each, every request recorded, paired with AR and judged for exactness.

**Warm, as deployed.** Each setting gets one server (llama-server with ``slots`` slots, each slot
the context the workload needs) or one loaded embedded engine (suffix memory on), started once
and kept up across every level and pass, so what a server learns across requests
(ngram-mod's pool, the prompt cache) shows as it would after hours of traffic. ``warmup``
requests go to each first and count in no figure; every request's header says how many the
server had answered before it (``LoadTag.served_before``: 0 = it met a cold server).

**The order.** Levels run in the order asked, and within a level the settings one after the
other, each family's AR first; every setting gets the same units in the same order (and, open
loop, the same arrival times). AR at one client is always run first: it is every request's
reference for exactness (where the requests must stay unseen by the servers measured, tune's
check at another load, it runs on a server of its own: ``WorkloadPlan.reference_apart``).

The embedded engine serves one request at a time (it is one process's decode loop): under N
clients its requests wait their turn, and that wait is its queue time.
"""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import msgspec
import psutil

from spectui import file_kinds, storage
from spectui.metrics.conditions import LoadSpan, MachineLoad
from spectui.metrics.energy import EnergyProbe, open_energy
from spectui.metrics.processes import tree_cpu_s, tree_rss_mib
from spectui.recording.schema import BatchNoise, End, Event, LoadTag
from spectui.sessions.protocol import EngineProtocol
from spectui.sessions.record import record_session
from spectui.workload.clients import LevelStopped, closed_loop, open_loop
from spectui.workload.engines import Spread
from spectui.workload.judge import Judge
from spectui.workload.plan import EMBEDDED, Setting, WorkloadPlan
from spectui.workload.request import TaggedEngine, outcome_of, request_config
from spectui.workload.result import (
    RESULT_NAME,
    LevelResult,
    RequestOutcome,
    WorkloadResult,
    count_verdicts,
    fill_stats,
    knee_line,
    pair_speedup,
)
from spectui.workload.source import WorkRequest

RESULT_KIND = file_kinds.json_kind("spectui workload result", lambda doc: isinstance(doc, dict) and "workload" in doc and "levels" in doc)
@dataclass
class _Live:
    """A setting's engine, kept up for the whole workload."""

    setting: Setting
    engine: EngineProtocol
    server_pid: int | None  # whose CPU and memory are the server's (None: this process)
    alive: Callable[[], str]  # "" while it serves, else why not
    served: int = 0
    #: the thread every call into llama.cpp in this process is made on (an embedded engine's)
    worker: ThreadPoolExecutor | None = None


@dataclass(frozen=True)
class Snapshot:
    """A workload as it stands, for a live view: requests done of all, each client's request
    in flight, the levels so far (with speedups and knees), the level running last (partial)."""

    done: int
    total: int
    in_flight: dict[int, int]
    result: WorkloadResult


T = TypeVar("T")
#: ``on_progress(done, total, what)``
Progress = Callable[[int, int, str], object]
#: opens a setting's engine: (setting, slots, log beside) -> (engine, server pid, liveness)
Opener = Callable[[Setting, int, Path], tuple[EngineProtocol, int | None, Callable[[], str]]]


class WorkloadRun:
    """One workload over its settings and levels, into ``folder``."""

    def __init__(self, plan: WorkloadPlan, folder: Path, opener: Opener, *, stop: threading.Event | None = None,
                 on_progress: Progress | None = None, noise: Callable[[Setting, int], BatchNoise | None] | None = None,
                 on_update: Callable[[Snapshot], object] | None = None) -> None:
        plan.check()
        self.plan, self.folder, self.opener = plan, folder, opener
        self.stop = stop or threading.Event()
        self.on_progress = on_progress or (lambda *_: None)
        self.noise_for = noise or (lambda *_: None)
        self.result = WorkloadResult(
            workload=plan.workload.name, path=plan.workload.path, n_requests=len(plan.workload.requests),
            settings=[s.label for s in plan.settings], clients=[c for c, _ in plan.levels() if c], rates=list(plan.rates),
            slots=plan.server_slots, warmup=plan.warmup + len(plan.warm_with), passes=plan.passes,
            sampling="as each request says" if plan.keep_sampling else "greedy (the file's sampling fields set aside)",
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), host=_host(),
        )
        #: every request's reference (AR at one client, first pass): tokens and top-two facts
        self.judge = Judge(folder=folder)
        self.energy: EnergyProbe | None = None
        self._done = 0
        self._here_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spectui-llama")
        self._lock = threading.Lock()
        #: client -> the request it has in flight, and the level running: what a live view shows
        self.in_flight: dict[int, int] = {}
        self.live: LevelResult | None = None
        self.on_update = on_update
        runs = len(plan.levels()) * len(plan.settings) * plan.passes
        runs += sum(s.ar for s in plan.settings) if plan.reference and plan.reference_apart else 0
        self._total = runs * len(plan.workload.requests)

    def __call__(self) -> WorkloadResult:
        storage.prepare_dir(self.folder)
        live: dict[str, _Live] = {}
        self.energy = open_energy()
        self.result.energy = self.energy.sources or self.energy.why_not
        try:
            if self.plan.reference and self.plan.reference_apart:
                self._references()
            for setting in self._ordered():
                if self.stop.is_set():
                    break
                self.on_progress(self._done, self._total, f"starting {setting.label}")
                live[setting.label] = self._open(setting)
                self._warm_up(live[setting.label])
            for clients, rate in self.plan.levels():
                for setting in self._ordered():
                    for pass_no in range(self.plan.passes):
                        if self.stop.is_set():
                            break
                        level = self._level(live[setting.label], clients, rate, pass_no)
                        with self._lock:
                            self.result.levels.append(level)
                            self.live = None
                        self._pair()
                        self._save()
                        self._notify()
                        if level.stopped:
                            self.result.stopped = level.stopped
                            self.stop.set()
            self._pair()
            self.result.complete = not self.stop.is_set() and not self.result.stopped
            if self.stop.is_set() and not self.result.stopped:
                self.result.stopped = "interrupted"
        finally:
            self.energy.close()
            for one in live.values():
                if one.worker is not None:
                    self._here(one.engine.close)
                else:
                    one.engine.close()
            self._here_thread.shutdown(wait=True)
            self._pair()
            self._save()
        return self.result

    def _references(self) -> None:
        """Each family's AR at one client on a server of its own, closed once it has answered:
        every request's reference, and no measured server has seen the requests before its own
        level (``WorkloadPlan.reference_apart``). Its level is in no figure, and kept among the
        result's ``references`` for the judge."""
        for setting in self._ordered():
            if not setting.ar or self.stop.is_set():
                continue
            one = self._open(replace(setting, label=f"{setting.label} (reference)"))
            try:
                level = self._level(one, 1, 0.0, 0)
            finally:
                if one.worker is not None:
                    self._here(one.engine.close)
                else:
                    one.engine.close()
            with self._lock:
                self.result.references.append(level)
            if level.stopped:
                self.result.stopped = level.stopped
                self.stop.set()

    def _here(self, work: Callable[[], T]) -> T:
        """``work`` on the one thread that calls llama.cpp in this process: its OpenMP team belongs
        to the calling thread, and a second team (another client's thread, a second embedded
        engine's) spins beside the first: decoding ran 2.5x slower (28 ms a token, not 11.5)."""
        return self._here_thread.submit(work).result()

    def _notify(self) -> None:
        """Hand ``on_update`` a snapshot: the levels done, the one running so far, who is on what."""
        if self.on_update is None:
            return  # nobody watches (headless): no snapshot to make
        with self._lock:
            levels = list(self.result.levels)
            live = self.live
            if live is not None and live not in levels:
                live = msgspec.structs.replace(live, requests=list(live.requests))
                fill_stats(live)
                levels.append(live)
            snapshot = Snapshot(done=self._done, total=self._total, in_flight=dict(self.in_flight),
                                result=msgspec.structs.replace(self.result, levels=levels))
        self.on_update(snapshot)

    def _ordered(self) -> list[Setting]:
        """Each family's AR first: the references exist before anything is judged."""
        return sorted(self.plan.settings, key=lambda s: (s.family, not s.ar))

    def _open(self, setting: Setting) -> _Live:
        def opened() -> tuple[EngineProtocol, int | None, Callable[[], str]]:
            return self.opener(setting, self.plan.server_slots, self.folder / setting_slug(setting.label))

        embedded = setting.family == EMBEDDED
        engine, pid, alive = self._here(opened) if embedded else opened()
        one = _Live(setting, engine, pid, alive, worker=self._here_thread if embedded else None)
        if setting.config.sampling.greedy and setting.family not in self.judge.noises:
            # the deepest a request reaches, its text counted as a token per two characters (more than
            # any tokenizer makes: a calibration a little deeper than needed, never one too shallow)
            reach = max((len(r.prompt) + len(r.system) + sum(len(m.content) for m in r.history)) // 2 + r.max_tokens
                        for r in self.plan.workload.requests)
            # measured by an engine loaded here: on the llama.cpp thread too
            self.judge.noises[setting.family] = self._here(lambda: self.noise_for(setting, reach))
        return one

    def _warm_up(self, one: _Live) -> None:
        folder = self.folder / setting_slug(one.setting.label) / "warmup"
        for r in (*self.plan.warm_with, *self.plan.workload.requests[: self.plan.warmup]):
            tag = self._tag(one, r, 1, 0.0, 0, 0, warmup=True)
            self._record(one, r, tag, folder / f"{r.index:04d}.spectui")
        if folder.is_dir():
            storage.fsync_dir(folder)

    def _tag(self, one: _Live, r: WorkRequest, clients: int, rate: float, pass_no: int, client: int, *, warmup: bool = False,
             queue_ms: float = 0.0) -> LoadTag:
        return LoadTag(workload=self.plan.workload.name, index=r.index, conversation=r.conversation, turn=r.turn,
                       setting=one.setting.label, clients=clients, rate=rate, slots=self.plan.server_slots, client=client,
                       pass_no=pass_no, warmup=warmup, served_before=one.served, queue_ms=queue_ms)

    def _record(self, one: _Live, r: WorkRequest, tag: LoadTag, path: Path) -> list[Event]:
        config = request_config(one.setting.config, r, self.plan.workload.name, self.plan.keep_sampling)
        engine = one.engine.for_client(tag.client) if isinstance(one.engine, Spread) else one.engine

        def record(waited: float) -> list[Event]:
            queued = msgspec.structs.replace(tag, queue_ms=tag.queue_ms + (time.perf_counter() - waited) * 1000)
            # host readings (energy, other processes) are the level's, not each of many requests at once
            # and the level's folder is synced once the level ends, not once a request
            noise = self.judge.noises.get(one.setting.family) if config.sampling.greedy else None
            return list(record_session(TaggedEngine(engine, queued, noise), config, path, stop=self.stop, host_readings=False,
                                       sync_folder=False))

        events = one.worker.submit(record, time.perf_counter()).result() if one.worker is not None else record(time.perf_counter())
        with self._lock:
            one.served += 1
        end = events[-1] if events else None
        if type(end) is End and end.reason == "error":
            why = one.alive()
            if why:
                raise LevelStopped(f"{one.setting.label}: {why} (request {r.index}: {end.error})")
        return events

    def _level(self, one: _Live, clients: int, rate: float, pass_no: int) -> LevelResult:
        s = one.setting
        level = LevelResult(setting=s.label, family=s.family, ar=s.ar, clients=clients, rate=rate, slots=self.plan.server_slots,
                            pass_no=pass_no)
        sub = self.folder / setting_slug(s.label) / (f"c{clients}" if clients else f"r{rate:g}") / f"pass{pass_no}"
        counters = self._counters(one)
        cpu0, client0 = tree_cpu_s(one.server_pid), time.process_time()
        others = LoadSpan().start()  # other processes' load: the server's own is taken out below
        joules0 = self.energy.total_joules() if self.energy is not None and one.server_pid is not None else None

        self.live = level

        def send(r: WorkRequest, client: int, queue_ms: float) -> RequestOutcome:
            tag = self._tag(one, r, clients, rate, pass_no, client, queue_ms=queue_ms)
            path = sub / f"{r.index:04d}.spectui"
            with self._lock:
                self.in_flight[client] = r.index
            self._notify()
            try:
                events = self._record(one, r, tag, path)
            finally:
                with self._lock:
                    self.in_flight.pop(client, None)
            out = outcome_of(events, r, tag, str(path.relative_to(self.folder)))
            self.judge(s, out, events, (clients, rate, pass_no))
            with self._lock:
                self._done += 1
                level.requests.append(out)
            self.on_progress(self._done, self._total, f"{s.label}, {_load(clients, rate)}: request {r.index}")
            self._notify()
            return out

        units = self.plan.workload.units()
        if clients:
            outcomes, level.wall_s, level.stopped = closed_loop(units, clients, send, self.stop)
        else:
            outcomes, level.wall_s, level.stopped = open_loop(units, rate, send, self.stop, seed=self.plan.seed)
        with self._lock:
            level.requests = sorted(outcomes, key=lambda o: o.index)
        if sub.is_dir():
            storage.fsync_dir(sub)  # every request's entry in the folder survives a crash from here
        level.client_cpu_s = time.process_time() - client0
        cpu1 = tree_cpu_s(one.server_pid)
        if cpu0 is not None and cpu1 is not None:
            level.server_cpu_s = cpu1 - cpu0
        level.server_rss_mib = tree_rss_mib(one.server_pid)
        load = others.load()
        if load.share is not None and level.wall_s > 0:
            server = 0.0 if math.isnan(level.server_cpu_s) else level.server_cpu_s / (level.wall_s * (psutil.cpu_count() or 1))
            level.other_load = max(0.0, load.share - server)
            level.disturbed = MachineLoad(level.other_load, load.limit).shared
        joules1 = self.energy.total_joules() if joules0 is not None and self.energy is not None else None
        produced = sum(r.n_tokens for r in level.requests)
        if joules0 is not None and joules1 is not None and produced:
            # the machine's, over the level: a server spectui started runs here, and nothing else of spectui's decodes
            level.joules_per_token = (joules1 - joules0) / produced
        self._acceptance(one, counters, level)
        fill_stats(level)
        return level

    def _counters(self, one: _Live) -> dict[str, float]:
        reader = getattr(one.engine, "metrics_reading", None)
        return reader() if reader is not None else {}

    def _acceptance(self, one: _Live, before: dict[str, float], level: LevelResult) -> None:
        if not before:
            return
        after = self._counters(one)
        delta = {k: after[k] - before.get(k, 0.0) for k in after}
        drafted = next((v for k, v in delta.items() if k.endswith("num_draft_tokens_total")), None)
        accepted = next((v for k, v in delta.items() if k.endswith("num_accepted_tokens_total")), None)
        if drafted is None or accepted is None:
            return
        level.drafted, level.accepted = int(drafted), int(accepted)
        level.acceptance_source = "the server's /metrics counters, their change across the level"
        per = {}
        for k, v in delta.items():
            if "accepted_tokens_per_pos_total" in k and 'position="' in k:
                pos = k.split('position="', 1)[1].split('"', 1)[0]
                if pos.isdigit() and int(pos) < 256:
                    per[int(pos)] = v
        drafts = next((v for k, v in delta.items() if k.endswith("num_drafts_total")), 0.0)
        if per and drafts > 0:
            level.per_position = [per.get(i, 0.0) / drafts for i in range(max(per) + 1)]

    def _pair(self) -> None:
        """The verdicts against what load moved AR so far; speedups against each family's AR
        at the same level and pass, and the knees."""
        self.judge.settle()
        levels = self.result.levels
        for lv in levels:
            count_verdicts(lv)  # after ``settle``
        for lv in levels:
            if lv.ar:
                continue
            at = (lv.clients, lv.rate, lv.pass_no)
            twin = next((t for t in levels if t.ar and t.family == lv.family and (t.clients, t.rate, t.pass_no) == at), None)
            if twin is not None:
                pair_speedup(lv, twin)
        self.result.knees = {}
        for s in self.plan.settings:
            if s.ar:
                continue
            closed = [(str(lv.clients), lv.speedup) for lv in levels if lv.setting == s.label and lv.clients and lv.pass_no == self.plan.passes - 1]
            if closed:
                self.result.knees[s.label] = knee_line(s.label, closed)
            rates = [(f"{lv.rate:g}/s", lv.speedup) for lv in levels if lv.setting == s.label and lv.rate and lv.pass_no == self.plan.passes - 1]
            if rates:
                self.result.knees[f"{s.label} (open loop)"] = knee_line(s.label, rates, unit="request rate")

    def _save(self) -> None:
        storage.write_atomic(self.folder / RESULT_NAME, msgspec.json.encode(self.result), RESULT_KIND)


def _host() -> str:
    from spectui.models.artifacts import host_info

    h = host_info()
    return f"{h.cpu or h.machine or 'unknown'} x{h.cpu_count}"


def _load(clients: int, rate: float) -> str:
    return f"{clients} client{'s' if clients != 1 else ''}" if clients else f"{rate:g} requests/s"


def setting_slug(label: str) -> str:
    """A setting's label as a folder name."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label).strip("-") or "setting"
