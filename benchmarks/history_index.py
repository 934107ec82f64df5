"""How long ``spectui history``'s index takes over a nightly node's worth of recordings.

Records one short real run (the embedded model, a few tokens), then writes N copies of it
(default 10,000) across dated folders, each with its own start time and, for a third of them, a
newer runtime version in the header, the way months of nightly runs on a few hosts would leave
them. Then times:

* the first index (every file read and summarised): target under a minute for 10,000;
* a second look with nothing changed (a walk and a stat per file): target a few seconds;
* a look after 1% of the files changed;
* the grouping and the text report over everything.

Run: flock /tmp/spectui-model.lock python benchmarks/history_index.py [--files N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from spectui.history.index import HistoryIndex
from spectui.history.render import format_history
from spectui.history.trend import build_groups
from spectui.recording.reader import read_recording
from spectui.recording.schema import Header
from spectui.recording.writer import RecordingWriter


def make_files(src: Path, root: Path, n: int) -> None:
    rec = read_recording(src)
    h = rec.header
    now = dt.datetime.now(dt.timezone.utc)
    for i in range(n):
        runtime = {**h.artifacts.runtime, **({"llama-cpp-python": "9.9.9"} if i > 2 * n // 3 else {})}
        host = msgspec.structs.replace(h.artifacts.host, cpu=f"bench host {i % 4}")
        header = msgspec.structs.replace(
            h,
            started_at=(now - dt.timedelta(hours=(n - i))).isoformat(),
            artifacts=msgspec.structs.replace(h.artifacts, runtime=runtime, host=host),
        )
        folder = root / f"host{i % 4}" / f"night-{i // 40:04d}"
        with RecordingWriter(folder / f"run-{i:05d}.spectui") as w:
            for ev in rec.events:
                w.write(header if type(ev) is Header else ev)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--keep", default=None, help="work in this folder and leave it (default: a temporary one)")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="spectui-history-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        src = work / "source.spectui"
        if not src.exists():
            subprocess.run(
                [sys.executable, "-m", "spectui", "run", "--headless", "--mode", "spec", "--k", "4", "--max-tokens", "16",
                 "--prompt", "Repeat: the quick brown fox.", "--record", str(src)],
                check=True, capture_output=True,
            )
        root = work / "recordings"
        if not root.exists():
            t = time.perf_counter()
            make_files(src, root, args.files)
            print(f"wrote {args.files} recordings ({src.stat().st_size} bytes each) in {time.perf_counter() - t:.1f} s")
        index = work / "history.sqlite"
        index.unlink(missing_ok=True)
        with HistoryIndex(index) as idx:
            first = idx.refresh([root])
            again = idx.refresh([root])
            for path in sorted(root.rglob("*.spectui"))[:: 100]:
                os.utime(path)  # 1% touched: a changed mtime means read again
            touched = idx.refresh([root])
            t = time.perf_counter()
            runs = idx.runs([root])
            groups = build_groups(runs)
            text = format_history(groups, touched, stale_days=14, charts=False)
            report_s = time.perf_counter() - t
        per_file_ms = first.seconds / max(1, first.read) * 1e3
        print(f"first index:       {first.read:6d} read in {first.seconds:6.2f} s  ({per_file_ms:.2f} ms a file; target < 60 s)")
        print(f"nothing changed:   {again.read:6d} read, {again.unchanged} unchanged, in {again.seconds:6.2f} s  (target: seconds)")
        print(f"1% touched:        {touched.read:6d} read, {touched.unchanged} unchanged, in {touched.seconds:6.2f} s")
        print(f"group + report:    {len(runs)} runs, {len(groups)} groups, {len(text.splitlines())} lines in {report_s:.2f} s")
        print(f"index file:        {index.stat().st_size / 2**20:.1f} MiB")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
