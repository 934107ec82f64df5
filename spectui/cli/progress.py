"""Progress of long headless work (tune, sweep, soak, quality) on stderr, one way for all.

In a terminal: a rich progress bar (what is being done, done/total, elapsed and time left) that
redraws in place and goes away when the work ends. Elsewhere (a log file, a pipe, cron): a plain
line per step, at most one every ``every_s`` seconds, so a log reads top to bottom. stdout is
never touched: it carries the results.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # rich loads only when a terminal shows the bar
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID


class Progress:
    """``with Progress("tune", total) as p: p.advance("verify cost")`` / ``p.update(done, text)``."""

    def __init__(self, what: str, total: float, *, unit: str = "", every_s: float = 0.0, stream: TextIO | None = None) -> None:
        self.what, self.total, self.unit, self.every_s = what, max(float(total), 1e-9), unit, every_s
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0.0
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self._last_line = -1e18
        self._started = time.monotonic()

    @property
    def terminal(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def __enter__(self) -> Progress:
        if self.terminal:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            count = MofNCompleteColumn() if not self.unit else TaskProgressColumn()
            self._bar = RichProgress(
                TextColumn("{task.description}"), BarColumn(bar_width=24), count, TimeElapsedColumn(),
                TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[step]}"),
                console=Console(file=self.stream), transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self.total, step="")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def note(self, line: str) -> None:
        """A line of its own on stderr (a result along the way), above the bar in a terminal."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=self.stream, flush=True)

    def advance(self, text: str, steps: float = 1.0) -> None:
        """One more step done (a phase of tune, a run of a sweep), ``text`` saying which."""
        self.update(min(self.done + steps, self.total), text)

    def update(self, done: float, text: str, *, total: float | None = None) -> None:
        """``done`` of the total (runs, seconds) and what is in hand now; ``total`` when the work
        learns its size on the way."""
        self.done = done
        if total is not None:
            self.total = max(float(total), 1e-9)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=self.total, step=text)
            return
        now = time.monotonic()
        if now - self._last_line < self.every_s and done < self.total:
            return
        self._last_line = now
        unit = f" {self.unit}" if self.unit else ""
        elapsed = now - self._started
        left = f", {_minutes(elapsed / done * (self.total - done))} left" if 0 < done < self.total else ""
        line = f"spectui: {self.what} [{done:.0f}/{self.total:.0f}{unit}] {done / self.total:.0%}{left}: {text}"
        print(line, file=self.stream, flush=True)


def _minutes(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 60}m{s % 60:02d}s"
