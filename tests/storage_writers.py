"""Each of spectui's own writers, driven from a child process, for the fault matrix.

``python -m tests.storage_writers WRITER write DIR N PAD`` writes version ``N`` (``PAD`` bytes
of filler, to outgrow a small disk) through the writer's real function into ``DIR``;
``... read DIR`` prints the version the next run would find (``-`` for none). A write that
reports failure the writer's way (a cache: False / None) prints ``failed``; a refusal exits 2
with one line, as the CLI does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spectui.errors import SpectuiError

VOCAB = "f" * 64
RECORDING = Path(__file__).resolve().parent / "data" / "fixed-session.spectui"


def path_of(writer: str, folder: Path) -> Path:
    """The file a writer owns in ``folder``."""
    if writer == "cache":
        return folder / "verify-cost.json"
    if writer == "tune-result":
        from spectui.tune.store import result_path

        return result_path("k", cache=folder)
    if writer == "draft-memory":
        from spectui.engine.drafters.suffix_memory import memory_path

        return memory_path(VOCAB, folder)
    if writer == "otel-export":
        return folder / "export.jsonl"
    if writer == "catalogue":
        return folder / "spectui" / "catalogue.json"
    raise SystemExit(f"unknown writer {writer}")


def write(writer: str, folder: Path, n: int, pad: int) -> bool:
    if writer == "cache":
        from spectui.models.json_cache import write_entry

        return write_entry("verify-cost.json", f"k{n}" if pad < 0 else "k", {"n": n, "pad": "x" * max(pad, 0)}, cache=folder)
    if writer == "tune-result":
        from spectui.engine.host.verify_cost import Curve
        from spectui.tune.result import TuneResult
        from spectui.tune.store import save_result

        curve = Curve(depth=pad, unit_us=1.0, relative=(1.0,) * max(pad // 8, 1))
        result = TuneResult("m", "Q4_1", 1, "ngram", curve, None, 0.0, [], key="k", measured_at=str(n))
        return save_result(result, cache=folder) is not None
    if writer == "draft-memory":
        from spectui.engine.drafters.suffix_memory import SuffixMemory

        memory = SuffixMemory.open(VOCAB, cache=folder)
        memory.add([n] * max(pad // 2, 2))  # msgpack: about 2 bytes a small token
        return memory.save()
    if writer == "otel-export":
        from spectui.recording.reader import read_recording
        from spectui.telemetry.destination import OtelDestination

        events = read_recording(RECORDING).events
        with OtelDestination(jsonl=path_of(writer, folder)) as dest:
            for _ in range(max(n, 1) + pad // 4000 if pad >= 0 else 1):  # sessions: the version
                dest.emit(events)
        return True
    if writer == "catalogue":
        import os

        os.environ["XDG_CACHE_HOME"] = str(folder)
        from spectui.models.catalogue import _FactCache

        cache = _FactCache()
        cache.known[f"model-{n}"] = {"n": n, "pad": "x" * max(pad, 0)}
        cache.dirty = True
        return cache.save()
    raise SystemExit(f"unknown writer {writer}")


def read(writer: str, folder: Path) -> str:
    """The version the next run finds (``-``: none)."""
    import json

    if writer == "cache":
        from spectui.models.json_cache import read_entries

        entries = read_entries("verify-cost.json", folder)
        return str(entries["k"]["n"]) if "k" in entries else "-"
    if writer == "tune-result":
        from spectui.tune.store import load_result

        result = load_result("k", cache=folder)
        return result.measured_at if result else "-"
    if writer == "draft-memory":
        from spectui.engine.drafters.suffix_memory import SuffixMemory

        contents = SuffixMemory.open(VOCAB, cache=folder).contents()
        return str(contents[-1][0]) if contents else "-"
    if writer == "otel-export":
        path = path_of(writer, folder)
        if not path.exists():
            return "-"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        return str(sum(1 for doc in lines if "context" in doc and doc.get("parent_id") is None))
    if writer == "catalogue":
        path = path_of(writer, folder)
        if not path.exists():
            return "-"
        facts = json.loads(path.read_text())["facts"]
        return str(max(v["n"] for v in facts.values()))
    raise SystemExit(f"unknown writer {writer}")


def main(argv: list[str]) -> int:
    writer, action, folder = argv[0], argv[1], Path(argv[2])
    try:
        if action == "read":
            print(read(writer, folder))
        else:
            print("ok" if write(writer, folder, int(argv[3]), int(argv[4])) else "failed")
    except SpectuiError as exc:
        print(f"spectui: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    import warnings

    from spectui.cli import _show_warning

    warnings.showwarning = _show_warning  # one line, as the CLI prints them
    raise SystemExit(main(sys.argv[1:]))
