"""The workload's load client against the thinnest one, and speedup against clients, warm.

    python benchmarks/workload.py [--workload mixed-12] [--clients 1,2,4,8] [--threads 2] [--json FILE]

1. **What the load client costs.** One llama-server AR with 8 slots, the workload sent by 8
   closed-loop clients twice: through spectui's client (``spectui.workload``: every request
   streamed, parsed, tokenized, recorded and judged) and through the thinnest client there is
   (``urllib``, streaming, one request at a time a thread, the bytes read and dropped), the two
   alternating, round by round. Reported: each client's CPU seconds (this process,
   ``time.process_time``) over the server's (its process's CPU time over the same interval),
   medians over the rounds. llama.cpp's vendored tree has no HTTP load client (its
   ``llama-bench`` drives the library, not a server), so ``urllib`` is the peer.
2. **Speedup against clients**: ``spectui workload`` with ngram-mod and ngram-simple on
   llama-server and spectui's embedded defaults (suffix memory on), each against its own AR,
   warm (``--warmup`` the whole workload first), at each level of ``--clients``, with the knee
   line and the exactness counts.

The machine is shared: read medians, and compare ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil

from spectui.cli import build_parser
from spectui.cli.workload import print_result, settings_from, workload_path
from spectui.runtime.build import find_server
from spectui.workload.engines import embedded_noise, open_setting
from spectui.workload.plan import WorkloadPlan
from spectui.workload.result import to_json
from spectui.workload.run import WorkloadRun
from spectui.workload.source import Workload, read_workload


def thin_client(url: str, key: str, workload: Workload, clients: int) -> None:
    """The workload sent by ``clients`` threads with urllib, streamed, every byte read."""
    todo = list(workload.requests)
    lock = threading.Lock()

    def one() -> None:
        while True:
            with lock:
                if not todo:
                    return
                r = todo.pop(0)
            body: dict[str, object] = {"stream": True, "max_tokens": r.max_tokens, "temperature": 0}
            if r.chat:
                system = [{"role": "system", "content": r.system}] if r.system else []
                body["messages"] = system + [{"role": m.role, "content": m.content} for m in r.messages]
                path = "/v1/chat/completions"
            else:
                body["prompt"], path = r.prompt, "/v1/completions"
            req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
            with urllib.request.urlopen(req, timeout=300) as resp:
                while resp.read(4096):
                    pass

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def cpu_of(pid: int) -> float:
    p = psutil.Process(pid)
    return sum(p.cpu_times()[:2])


class _Kept:
    """The server stays up across rounds: the workload's close is the benchmark's to do."""

    def __init__(self, engine: object) -> None:
        self.engine = engine

    def __getattr__(self, name: str) -> object:
        return getattr(self.engine, name)

    def close(self) -> None:
        pass


def client_cost(args: argparse.Namespace, workload: Workload, folder: Path) -> dict[str, float]:
    """Client CPU over server CPU at 8 clients: spectui's load client against urllib's."""
    ns = build_parser().parse_args(["workload", "x", "--llama-server", args.llama_server, "--threads", str(args.threads),
                                    "--draft", "runtime:ngram-mod"])
    ar = next(s for s in settings_from(ns) if s.ar)
    engine, pid, alive = open_setting(ar, 8, folder / "client-cost")
    assert pid is not None
    client = engine.engine.client  # type: ignore[attr-defined]  # the started server's URL and key, for urllib
    shares: dict[str, list[float]] = {"spectui": [], "urllib": []}
    try:
        for rnd in range(args.rounds + 1):
            for who in ("spectui", "urllib"):
                c0, s0 = time.process_time(), cpu_of(pid)
                if who == "urllib":
                    thin_client(str(client.url), client._api_key, workload, 8)
                else:
                    plan = WorkloadPlan(workload=workload, settings=(ar,), clients=(8,), reference=False)
                    WorkloadRun(plan, folder / f"client-cost-{rnd}", lambda *_: (_Kept(engine), pid, alive))()  # type: ignore[arg-type]
                share = (time.process_time() - c0) / max(cpu_of(pid) - s0, 1e-9)
                if rnd:
                    shares[who].append(share)
                print(f"round {rnd} {who}: client CPU {share:.2%} of the server's", file=sys.stderr, flush=True)
    finally:
        engine.close()
    return {who: statistics.median(v) for who, v in shares.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="mixed-12")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llama-server", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    a.llama_server = a.llama_server or find_server().path
    folder = Path(a.out or f"/tmp/spectui-bench-workload-{int(time.time())}")
    workload = read_workload(workload_path(a.workload))
    cost = client_cost(a, workload, folder)
    print(f"client CPU over server CPU at 8 clients (median of {a.rounds}): spectui {cost['spectui']:.2%}, urllib {cost['urllib']:.2%}")
    ns = build_parser().parse_args(["workload", a.workload, "--llama-server", a.llama_server, "--threads", str(a.threads),
                                    "--draft", "runtime:ngram-mod,runtime:ngram-simple,defaults", "--clients", a.clients,
                                    "--warmup", str(len(workload.requests))])
    plan = WorkloadPlan(workload=workload, settings=tuple(settings_from(ns)), clients=tuple(int(c) for c in a.clients.split(",")),
                        warmup=len(workload.requests))
    result = WorkloadRun(plan, folder / "speedup", open_setting, noise=embedded_noise,
                         on_progress=lambda d, t, w: print(f"[{d}/{t}] {w}", file=sys.stderr, flush=True))()
    print_result(result, ns)
    if a.json:
        with open(a.json, "x") as f:
            json.dump({"client_cpu_over_server": cost, "workload": to_json(result)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
