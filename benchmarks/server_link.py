"""The runtime's llama-server linked to llama-cpp-python's libraries against one compiled whole.

    python benchmarks/server_link.py [--reps 5] [--threads 2] [--max-tokens 128] [--static-bin PATH]

``spectui runtime build`` links the installed llama-cpp-python's libllama/libggml* and compiles
only llama.cpp's common code and the server (``spectui/runtime/linked.py``); ``--static``
compiles llama.cpp whole into the binary, with its own compile of ggml. Both come from the same
vendored source. This measures what the choice costs at run time: decode and prompt tok/s as
llama-server itself reports them (``timings``), greedy, on the embedded model.

The linked binary is the runtime's cached build (built if missing, as ``spectui runtime build``
does); the static one is ``--static-bin`` or the llama-server among llama.cpp's tools that
``native_tools.py`` builds once, compiled whole. Both servers alternate round by round (one fresh process a round each, a
warm-up request first), ``--reps`` rounds; medians, and each output checked to be identical.
Results: ``benchmarks/results/server-link-<date>.txt``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import native_tools as nt

from spectui.models.registry import embedded_model_path
from spectui.runtime.build import LINKED, SERVER, built_server, find_server
from spectui.runtime.server import free_port

RESULTS = Path(__file__).resolve().parent / "results"
#: a prompt of about 150 tokens (its prefill is timed too) that the model continues as prose
PROMPT = ("The lighthouse stood at the edge of the northern cliffs for more than two hundred years. Its keepers "
          "came and went, each leaving a logbook full of storms, ships and the slow turning of the seasons. ") * 3 + \
         "One winter night, the newest keeper opened the oldest logbook and read"


def request(url: str, body: dict) -> dict:
    req = urllib.request.Request(f"{url}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def one_round(binary: str, model: str, threads: int, max_tokens: int) -> tuple[float, float, list[int]]:
    """(decode tok/s, prompt tok/s, output tokens) of one fresh server: a warm-up request, then
    the timed one (no prompt cache: its prefill is timed every time)."""
    port = free_port()
    proc = subprocess.Popen([binary, "-m", model, "-c", "2048", "-t", str(threads), "--port", str(port), "--no-webui"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{binary} did not start") from None
                time.sleep(0.1)
        body = {"prompt": PROMPT, "n_predict": max_tokens, "temperature": 0, "ignore_eos": True, "cache_prompt": False,
                "return_tokens": True}
        request(url, {**body, "n_predict": 8})
        doc = request(url, body)
        t = doc["timings"]
        return t["predicted_per_second"], t["prompt_per_second"], list(doc.get("tokens") or [])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--static-bin", metavar="PATH", help="a llama-server compiled whole (default: built once beside the runtime's)")
    args = ap.parse_args()

    linked = built_server() or find_server()
    if linked.links != LINKED:
        raise SystemExit(f"the runtime's llama-server ({linked.path}) is not linked to llama-cpp-python's libraries: "
                         "spectui runtime build --force")
    static = args.static_bin or str(nt.ensure_tools(log=lambda text: print(text, file=sys.stderr)) / SERVER)
    model = embedded_model_path()
    binaries = {"linked": linked.path, "static": static}
    rows: dict[str, dict[str, list[float]]] = {k: {"decode": [], "prompt": []} for k in binaries}
    outputs: dict[str, list[int]] = {}
    same = True
    for rep in range(args.reps):
        for name, binary in (binaries.items() if rep % 2 == 0 else reversed(binaries.items())):
            decode, prompt, tokens = one_round(binary, model, args.threads, args.max_tokens)
            rows[name]["decode"].append(decode)
            rows[name]["prompt"].append(prompt)
            same = same and outputs.setdefault(name, tokens) == tokens
            print(f"round {rep + 1} {name:6} decode {decode:6.1f} tok/s  prompt {prompt:7.1f} tok/s", file=sys.stderr)
    same = same and outputs["linked"] == outputs["static"]
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in rows.items()}
    lines = [
        f"llama-server linked to llama-cpp-python's libraries against one compiled whole ({dt.date.today()})",
        f"linked: {linked.path} (built in {linked.build_seconds / 60:.1f} min)",
        f"static: {static}",
        f"embedded model, {args.threads} threads, greedy, {args.max_tokens} tokens, {args.reps} alternating rounds, medians",
        "",
        f"{'':8} {'decode tok/s':>13} {'prompt tok/s':>13}",
        *(f"{k:8} {m['decode']:13.1f} {m['prompt']:13.1f}" for k, m in med.items()),
        f"{'linked/static':14} x{med['linked']['decode'] / med['static']['decode']:.3f}"
        f"        x{med['linked']['prompt'] / med['static']['prompt']:.3f}",
        f"outputs identical: {'yes' if same else 'NO'}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"server-link-{dt.date.today()}.txt").write_text(text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
