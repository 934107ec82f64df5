"""``spectui tune --workload``'s measurements, run as ``spectui workload`` runs them.

Every measurement is a ``WorkloadRun`` (warm servers kept up across the requests, the asked
load, every request recorded) and every speedup its AR pairing (``pair_speedup``), so a tuned
figure and a ``spectui workload`` figure are the same kind of number. The search's candidates
each run alone (one server up at a time, whatever the space's size), against one AR run of the
whole tuning half; the check runs AR, the tuned setting and the defaults in one
``WorkloadRun`` with the workload's judge (AR at one client is every request's reference), then
each of them once more in the other order on servers of their own, so that each request's time is
two runs' mean and the host's run-to-run spread is measured where it is reported.

The space, the split, the halving and the report are ``spectui.tune``'s (``traffic_*``): they
know nothing of servers; this module is where they meet the workload's runner.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from spectui import file_kinds, storage
from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.format import model_name
from spectui.recording.schema import BatchNoise
from spectui.runtime.methods import METHODS
from spectui.runtime.spec_replay import Counts, Stream, prompt_tokens, replay, replay_tool
from spectui.tune.runtime import paste_command
from spectui.tune.traffic_price import ArRequest, ar_request, beta_of_run, fit_beta, priced_speedup
from spectui.tune.traffic_report import AR, DEFAULT, TUNED, CheckRow, RequestRow, TrafficResult, ratio_of_sums, save
from spectui.tune.traffic_search import (
    FINALISTS,
    MIN_TOKENS,
    RACE_ROUNDS,
    Search,
    Status,
    Trial,
    check_budget,
    check_runs,
    min_budget_s,
    next_entrant,
    race_winner,
)
from spectui.tune.traffic_space import Candidate, candidate_config, defaults_of
from spectui.tune.traffic_split import split_units
from spectui.workload.engines import embedded_noise, open_setting
from spectui.workload.plan import LLAMA_SERVER, Setting, WorkloadPlan
from spectui.workload.request import request_config
from spectui.workload.result import LevelResult, RequestOutcome, pair_speedup, time_to
from spectui.workload.run import Opener, WorkloadRun, setting_slug
from spectui.workload.source import Workload, WorkRequest

PRICES_KIND = file_kinds.json_kind("spectui tune's replayed drafting counts", lambda doc: isinstance(doc, dict) and "counts" in doc)


def halves(workload: Workload) -> tuple[Workload, Workload]:
    """The tuning and check halves (``split_units``), each a workload of its own."""
    tuning, check = split_units(workload.units(), name=f"workload {workload.name}", n_requests=len(workload.requests))

    def part(units: Sequence[tuple[WorkRequest, ...]], what: str) -> Workload:
        return Workload(name=f"{workload.name} ({what})", path=workload.path, requests=tuple(r for u in units for r in u))

    return part(tuning, "tuning half"), part(check, "check half")


def portion(workload: Workload, share: float, *, clients: int = 1) -> Workload:
    """The first ``share`` of a workload's units. Under ``clients`` units' worth, the first
    request of each of the first ``clients`` units (a client's stream each, so the part still
    runs at the asked load; a conversation's first turn, which its later turns only lengthen)
    with its share of the tokens, never under ``MIN_TOKENS``: a share that small is a screen, and
    what it costs is mostly the server's start, so it measures as little as can still rank."""
    units = workload.units()
    want = share * len(units)
    streams = max(1, min(clients, len(units)))
    if want >= streams - 1e-9:
        taken = units[: max(streams, round(want))]
        return replace(workload, requests=tuple(r for u in taken for r in u))
    each = want / streams  # of one unit's tokens, per stream
    cut = tuple(replace(u[0], max_tokens=min(u[0].max_tokens, max(MIN_TOKENS, math.ceil(each * sum(r.max_tokens for r in u)))))
                for u in units[:streams])
    return replace(workload, requests=cut)


def tokens(workload: Workload) -> int:
    return sum(r.max_tokens for r in workload.requests)


@dataclass
class TrafficTune:
    """One tune of ``candidates`` on ``workload`` at one load, into ``folder``."""

    base: RunConfig  # the runtime, target and sampling (greedy) every setting shares
    workload: Workload
    candidates: list[Candidate]
    folder: Path
    budget_s: float
    clients: int = 1
    rate: float = 0.0
    draft_model: str = ""
    opener: Opener = open_setting
    noise: Callable[[Setting, int], BatchNoise | None] | None = embedded_noise
    stop: threading.Event = field(default_factory=threading.Event)
    progress: Callable[[str], object] = lambda _: None
    space_by_method: dict[str, int] = field(default_factory=dict)
    #: what a view follows besides the progress line (both called on the tune's thread): each
    #: ``Status`` the search reports, and each ``Trial`` as it ends
    on_status: Callable[[Status], object] = lambda _: None
    on_trial: Callable[[Trial], object] = lambda _: None
    #: True while the search runs (after AR on the tuning half, before the check): a view can
    #: tell a rung still running from the search's end, when its last trials are final
    searching: bool = field(default=False, init=False)
    #: the pricing's inputs, once the tuning half's AR ran: AR's figures per request, each priced
    #: setting's replayed counts, and the beta the race fitted (NaN: nothing was priced)
    priced_ar: list[ArRequest | None] = field(default_factory=list, init=False)
    counts: dict[Candidate, list[Counts]] = field(default_factory=dict, init=False)
    beta: float = field(default=math.nan, init=False)

    def __post_init__(self) -> None:
        self.tuning, self.check = halves(self.workload)
        self.defaults = defaults_of(self.candidates)
        if self.clients < 1 and not self.rate > 0:
            raise SpectuiError(f"--clients {self.clients}: the load needs 1 client or more")
        check_budget(self.budget_s, min_budget_s(tokens(self.tuning), tokens(self.check), len(self.defaults)))
        self.result = TrafficResult(
            workload=self.workload.name, path=self.workload.path, runtime=LLAMA_SERVER, model=model_name(self.base.target or ""),
            clients=0 if self.rate else self.clients, rate=self.rate, budget_s=self.budget_s, space=len(self.candidates),
            space_by_method=self.space_by_method, tuning=[r.index for r in self.tuning.requests],
            check=[r.index for r in self.check.requests])

    # -- one measurement ------------------------------------------------------------------------

    def _levels(self) -> dict[str, tuple[int, ...] | tuple[float, ...]]:
        return {"clients": (), "rates": (self.rate,)} if self.rate else {"clients": (self.clients,), "rates": ()}

    @property
    def reference_apart(self) -> bool:
        """At another load than one client, the check's reference (AR at one client) runs on a
        server of its own: the check's requests stay unseen by the servers measured on them."""
        return self.rate > 0 or self.clients != 1

    def _setting(self, c: Candidate | None) -> Setting:
        label = f"{LLAMA_SERVER} AR" if c is None else f"{LLAMA_SERVER} {c.label()}"
        return Setting(label, LLAMA_SERVER, candidate_config(self.base, c, self.draft_model))

    def run_settings(self, workload: Workload, settings: Sequence[Setting], folder: Path, *, judged: bool,
                     warm: Workload | None = None) -> list[LevelResult]:
        """The settings over ``workload`` at the asked load (``judged``: AR at one client first,
        every request judged against it, as ``spectui workload`` does; ``warm``: requests each
        server answers first, in no figure)."""
        levels = self._levels()
        plan = WorkloadPlan(workload=workload, settings=tuple(settings), clients=tuple(int(c) for c in levels["clients"]),
                            rates=tuple(float(r) for r in levels["rates"]), slots=max(self.clients, 1), reference=judged,
                            reference_apart=judged and self.reference_apart,
                            warm_with=warm.requests if warm is not None else ())
        run = WorkloadRun(plan, folder, self.opener, stop=self.stop, noise=self.noise if judged else None)
        result = run()
        if result.stopped and result.stopped != "interrupted":
            raise SpectuiError(result.stopped)
        at = (0, self.rate) if self.rate else (self.clients, 0.0)
        return [lv for lv in result.levels if (lv.clients, lv.rate) == at]

    def _at_load(self, levels: Sequence[LevelResult], label: str) -> LevelResult | None:
        return next((lv for lv in levels if lv.setting == label), None)

    # -- the tune -------------------------------------------------------------------------------

    def __call__(self) -> TrafficResult:
        started = time.monotonic()
        search_folder = self.folder / "search"
        self.progress(f"AR on the tuning half ({len(self.tuning.requests)} requests)")
        ar_setting = self._setting(None)
        ar_level = self._at_load(self.run_settings(self.tuning, [ar_setting], search_folder / "AR", judged=False), ar_setting.label)
        if ar_level is None:  # stopped (q, Ctrl-C) while AR ran: nothing to pair a candidate with
            if not self.stop.is_set():
                raise SpectuiError("AR on the tuning half did not run")
            self.result.stopped = "stopped during AR on the tuning half: no setting was measured"
            save(self.result, self.folder)
            return self.result
        ar_s = time.monotonic() - started
        # the check's runs (and the reference apart) on a half of about the tuning half's size
        runs = check_runs(len(self.defaults)) + self.reference_apart
        reserve = ar_s * runs * max(tokens(self.check), 1) / max(tokens(self.tuning), 1)

        def measure(c: Candidate, rung: int, share: float) -> Trial:
            trial = measure_one(c, rung, share)
            self.on_trial(trial)
            return trial

        # AR on each rung's share, on a fresh server as the candidates' are; every candidate of a
        # rung is paired with this one run, so its luck moves them all alike and no ranking (the
        # last rung's share is the whole tuning half: the AR run above)
        ar_at: dict[float, LevelResult] = {1.0: ar_level}

        def ar_for(rung: int, share: float, part: Workload) -> LevelResult | None:
            if share not in ar_at:
                level = self._at_load(self.run_settings(part, [ar_setting], search_folder / f"rung{rung + 1}" / "AR", judged=False),
                                      ar_setting.label)
                if level is None:
                    return None
                ar_at[share] = level
            return ar_at[share]

        def measure_one(c: Candidate, rung: int, share: float) -> Trial:
            part = portion(self.tuning, share, clients=self.clients)
            setting = self._setting(c)
            try:
                ar = ar_for(rung, share, part)
                t0 = time.monotonic()  # a trial's time is its own: the rung's AR is shared by all
                level = None if ar is None else self._at_load(
                    self.run_settings(part, [setting], search_folder / f"rung{rung + 1}" / setting_slug(c.label()), judged=False),
                    setting.label)
            except SpectuiError as exc:
                return Trial(rung, c, share, math.nan, 0.0, len(part.requests), error=str(exc))
            if level is None or ar is None:
                return Trial(rung, c, share, math.nan, 0.0, len(part.requests), error="stopped")
            pair_speedup(level, ar)
            return Trial(rung, c, share, level.speedup, time.monotonic() - t0, len(part.requests))

        def shown(status: Status) -> None:
            self.progress(status.line())
            self.on_status(status)

        prices = self._prices(ar_level, search_folder / "prices")
        rest = [c for c in self.candidates if c not in prices]
        search = Search(rest, budget_s=self.budget_s - ar_s, reserve_s=reserve)
        self.searching = True
        try:
            winner = search.run(measure, progress=shown, stop=self.stop.is_set) if rest else None
            if prices:
                winner = self._race(prices, ar_level, [winner] if winner is not None else [], search_folder / "race",
                                    budget_s=self.budget_s - (time.monotonic() - started), reserve_s=reserve, trials=search.trials)
        finally:
            self.searching = False
            self.result.trials = [t.to_dict() for t in search.trials]
            self.result.stopped = search.stopped
            self.result.search_s = time.monotonic() - started
            save(self.result, self.folder)
        if winner is None or self.stop.is_set():
            self.result.stopped = self.result.stopped or "no candidate was measured"
            save(self.result, self.folder)
            return self.result
        self._check(winner)
        self.result.complete = not self.stop.is_set()
        save(self.result, self.folder)
        return self.result

    # -- pricing and the race -------------------------------------------------------------------

    def _prices(self, ar_level: LevelResult, folder: Path) -> dict[Candidate, Callable[[float], float]]:
        """Each setting whose drafter can be replayed, priced on the tuning half
        (``traffic_price``) as a function of beta; {} (every setting is then run) where the
        replay cannot be had, with one line saying why."""
        replayable = [c for c in self.candidates if not any(METHODS[t].draft_model or METHODS[t].needs_nextn for t in c.types)]
        if not replayable:
            return {}
        try:
            counts, order = self._replayed(replayable, ar_level, folder)
        except SpectuiError as exc:
            self.progress(f"every setting is run, none priced: {exc}")
            return {}
        by_index = {r.index: r for r in ar_level.requests}
        ar = [ar_request(by_index[i].token_ms) for i in order]
        self.priced_ar = ar
        self.counts = dict(zip(replayable, counts))
        # what each setting would do, request by request, kept beside the runs that measured it
        storage.write_atomic(folder / "prices.json", json.dumps({"requests": order, "counts": {
            c.label(): [[k.passes, k.drafted, k.accepted] for k in cs] for c, cs in self.counts.items()}}).encode(), PRICES_KIND)
        self.progress(f"{len(replayable)} settings priced on the tuning half from their drafters replayed over AR's tokens")
        return {c: functools.partial(priced_speedup, ar, k) for c, k in self.counts.items()}

    def _replayed(self, cands: Sequence[Candidate], ar_level: LevelResult, folder: Path) -> tuple[list[list[Counts]], list[int]]:
        """(each candidate's counts, the request indices they are in): the replay over AR's
        output on the tuning half, each client's requests as one stream, the prompts tokenized
        by an AR server of the runtime's own."""
        from spectui.runtime.build import BuildError, find_server

        try:
            binary = find_server(self.base.backend.runtime_binary or None, build=False)
        except BuildError as exc:
            raise SpectuiError(str(exc)) from None
        tool, why = replay_tool(binary.path)
        if tool is None:
            raise SpectuiError(why)
        requests = {r.index: r for r in self.tuning.requests}
        ar_setting = self._setting(None)
        engine, _, _ = self.opener(ar_setting, 1, folder)
        try:
            client = getattr(getattr(engine, "engine", None), "client", None)
            if client is None:
                raise SpectuiError("the runtime's engine is not a server that tokenizes")
            prompts = {i: prompt_tokens(client, request_config(ar_setting.config, r, self.tuning.name, False))
                       for i, r in requests.items()}
        finally:
            engine.close()
        done = sorted((r for r in ar_level.requests if r.index in requests), key=lambda r: r.sent_s)
        clients = sorted({r.client for r in done})
        streams = [[Stream(prompts[r.index], tuple(r.tokens), requests[r.index].max_tokens, r.reason == "stop")
                    for r in done if r.client == c] for c in clients]
        order = [r.index for c in clients for r in done if r.client == c]
        flags = [c.runtime_method().args() for c in cands]
        return replay(tool, flags, streams, n_ctx=self.base.backend.n_ctx), order

    def _race(self, prices: dict[Candidate, Callable[[float], float]], ar_level: LevelResult, also: Sequence[Candidate],
              folder: Path, *, budget_s: float, reserve_s: float, trials: list[Trial]) -> Candidate | None:
        """The best priced settings run for real on the whole tuning half, chosen one at a time
        (the price's beta refitted on every run so far), with ``also`` (the best of the settings
        that cannot be priced): ``RACE_ROUNDS`` rounds, the first paired with the search's AR run,
        each later one in the other order with an AR run of its own after it; the winner has the
        best speedup over its rounds. Its trials follow ``trials``' rungs: the prices, then a
        rung a round."""
        started = time.monotonic()
        base = max((t.rung for t in trials), default=-1) + 1
        ar_setting = self._setting(None)
        race: list[Trial] = []
        run_s: list[float] = []
        betas: list[float] = []
        beta = 0.0

        def room() -> bool:
            left = budget_s - (time.monotonic() - started) - reserve_s
            return not self.stop.is_set() and (sum(run_s) / len(run_s) if run_s else 0.0) <= left

        def run(setting: Setting, rnd: int) -> LevelResult | None:
            t0 = time.monotonic()
            try:
                return self._at_load(self.run_settings(self.tuning, [setting], folder / f"round{rnd}" / setting_slug(setting.label),
                                                       judged=False), setting.label)
            except SpectuiError as exc:
                self.progress(f"race round {rnd}: {setting.label} did not run ({exc})")
                return None
            finally:
                run_s.append(time.monotonic() - t0)

        def ran(c: Candidate, rnd: int, level: LevelResult, ar: LevelResult) -> Trial:
            pair_speedup(level, ar)
            t = Trial(base + rnd, c, 1.0, level.speedup, run_s[-1], len(self.tuning.requests))
            race.append(t)
            trials.append(t)
            self.on_trial(t)
            price = f" (priced {prices[c](beta):.2f}x)" if c in prices else ""
            self.progress(f"race round {rnd}: {c.label()} {t.speedup:.2f}x AR on the tuning half{price}")
            return t

        # round 1: the entrants one at a time, each the best priced at the beta so far (0 before
        # any run: the fewest passes, whose long drafts measure beta best)
        entered: list[Candidate] = []
        for extra in also:
            if room() and (level := run(self._setting(extra), 1)) is not None:
                entered.append(extra)
                ran(extra, 1, level, ar_level)
        while len(entered) < FINALISTS + len(also) and room():
            nxt = next_entrant(prices, beta, entered)
            if nxt is None:
                break
            entered.append(nxt)
            if (level := run(self._setting(nxt), 1)) is not None:
                betas.append(beta_of_run(self.priced_ar, self.counts[nxt], ran(nxt, 1, level, ar_level).speedup))
                beta = fit_beta(betas)
        # later rounds: the other way round, then AR, each paired with that AR
        for rnd in range(2, RACE_ROUNDS + 1):
            runs = []
            for c in reversed(entered):
                if not room():
                    break
                if (level := run(self._setting(c), rnd)) is not None:
                    runs.append((c, level, run_s[-1]))
            ar = run(ar_setting, rnd) if runs and not self.stop.is_set() else None
            if ar is None:
                break
            for c, level, seconds in runs:
                run_s.append(seconds)  # ``ran`` reads the setting's own time
                ran(c, rnd, level, ar)
        self.beta = beta
        trials += [Trial(base, c, 1.0, price(beta), 0.0, len(self.tuning.requests), priced=True) for c, price in prices.items()]
        return race_winner(race, lambda c: prices[c](beta) if c in prices else math.nan)

    def _check(self, winner: Candidate) -> None:
        t0 = time.monotonic()
        roles: list[tuple[str, Candidate | None]] = [(AR, None), (TUNED, winner)]
        roles += [(DEFAULT, d) for d in self.defaults if d != winner]
        self.progress(f"the check half ({len(self.check.requests)} requests): AR, {winner.label()} and {len(roles) - 2}"
                      " default(s), then each again in the other order")
        self.result.rows = self.measure_twice(roles, self.folder)
        self.result.check_s = time.monotonic() - t0

    def measure_twice(self, roles: Sequence[tuple[str, Candidate | None]], folder: Path) -> list[CheckRow]:
        """AR (``roles[0]``) and the settings on the check half at the asked load, judged, in
        ``folder/check``; then each once more the other way round, each request's time the mean
        of its two runs. Every server is warm, as deployed: it has answered the tuning half
        before the check's requests."""
        settings = [self._setting(c) for _, c in roles]
        levels = self.run_settings(self.check, settings, folder / "check", judged=True, warm=self.tuning)
        first = {s.label: lv for s in settings if (lv := self._at_load(levels, s.label)) is not None}
        # every setting once more, mirrored: the settings backwards on fresh servers warmed alike,
        # then AR, so each request's time is two runs' mean, a drift through the check moves every
        # setting alike, and the two runs of each say how far this host moves between runs. One
        # run is one draw of a few seconds of a shared machine: on document-qa at 2 clients the
        # check's one AR took 5.2 s where ten other runs of it took 5.6-8.3 s; on mixed-12 at one
        # client ngram-mod as shipped read 1.14x in one check, 0.85x in another, 1.01x in the grid
        # (benchmarks/results/tune-traffic-2026-12-03d.txt).
        second: dict[str, LevelResult] = {}
        if settings[0].label in first and not self.stop.is_set():
            second.update(self._again(settings[:0:-1], folder / "check-again"))
            if not self.stop.is_set():
                second.update(self._again(settings[:1], folder / "check-AR-again"))
        ar_runs = [_by_index(runs.get(settings[0].label)) for runs in (first, second)]
        rows = []
        for (role, c), s in zip(roles, settings):
            level = first.get(s.label)
            if level is None:
                continue
            again = _by_index(second.get(s.label))
            requests = []
            for r in level.requests:
                twin = again.get(r.index)
                # AR's own row: the tokens both its runs reached; a setting's: those it shares with AR
                n = min(len(r.token_ms), len(twin.token_ms) if twin is not None else len(r.token_ms)) if role == AR else r.common
                runs = [_num(time_to(t, n)) for t in (r, twin) if t is not None]
                ar = [_num(time_to(t, n)) for t in (runs_of.get(r.index) for runs_of in ar_runs) if t is not None]
                requests.append(RequestRow(index=r.index, exact=r.exact, why=r.why, ms=_mean_known(runs) if n else None,
                                           ar_ms=_mean_known(ar) if n else None, runs_ms=runs if n else [],
                                           ar_runs_ms=ar if n else []))
            rows.append(CheckRow(role=role, label="AR" if c is None else c.label(), candidate=None if c is None else c.to_dict(),
                                 command=self._command(level, folder / "check"),
                                 speedup=None if role == AR else _num(ratio_of_sums(requests)), requests=requests))
        return rows

    def _again(self, settings: Sequence[Setting], folder: Path) -> dict[str, LevelResult]:
        """``settings`` over the check half at the asked load once more, in this order, each on a
        fresh server warmed alike, in ``folder``: their levels by the first run's labels (none
        where it did not run: stopped, or a server failed, and the first run alone is then that
        setting's figure)."""
        named = {f"{s.label} again": s.label for s in settings}
        try:
            levels = self.run_settings(self.check, [replace(s, label=f"{s.label} again") for s in settings], folder,
                                       judged=False, warm=self.tuning)
        except SpectuiError as exc:
            self.progress(f"the check's second run ({folder.name}) did not run ({exc}): the first run alone is those settings' figure")
            return {}
        return {named[lv.setting]: lv for lv in levels if lv.setting in named}

    def _command(self, level: LevelResult, folder: Path) -> str:
        """The command line the server ran as, host and port left off: the one to paste."""
        from spectui.recording.reader import read_header

        for r in level.requests:
            try:
                header = read_header(folder / r.recording)
            except (SpectuiError, OSError):
                continue
            server = header.artifacts.server
            if server is not None and server.props.get("runtime.command_line"):
                return paste_command(server.props["runtime.command_line"])
        return ""


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _mean_known(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _by_index(level: LevelResult | None) -> dict[int, RequestOutcome]:
    return {r.index: r for r in level.requests} if level is not None else {}
