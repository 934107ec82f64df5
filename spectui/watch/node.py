"""A watch run on a node (``spectui watch URL --host NODE``), its readings streamed back.

As remote runs do (``spectui.remote``): the handshake first (``NodeChannel.connect``: the node
reachable, the same spectui there, or one line), then ``spectui node watch URL ...`` over the
system ssh, whose stdout is the watch's recording streamed record by record (the recording
format's frames, ``spectui.remote.wire.FrameReader``): a ``Header`` naming the server as the
node found it (a loopback URL is the node's own server, and its process the node's), then a
``WatchReading`` per reading. Here each reading is folded through the same ``WatchCore`` as a
local watch, written to the local recording (its header names the node) and handed on. A node
that cannot watch answers one ``Reply`` with its one-line error instead of the header.

Stopping closes the node command's stdin: the node ends its watch after the reading in progress
and exits, and the stream ends. A dropped link ends the stream too, every reading that arrived
kept.
"""

from __future__ import annotations

import subprocess
import threading

import msgspec

from spectui import subprocesses
from spectui.errors import SpectuiError
from spectui.metrics.watch_rates import WatchTotals
from spectui.recording.schema import FinishReason, Header
from spectui.recording.watch_records import WatchInfo, WatchReading
from spectui.remote.ssh import HELLO_TIMEOUT_S, NodeChannel, ssh_command
from spectui.remote.wire import BrokenStream, FrameReader, Reply
from spectui.watch.feed import OnEnd, OnSample
from spectui.watch.record import WatchRecorder, poll_of
from spectui.watch.sampler import WatchCore
from spectui.watch.source import WatchUnavailable


class NodeFeed:
    """The node's watch, read here: ``info`` and ``header`` once it answered."""

    def __init__(self, host: str, words: list[str]) -> None:
        """``words``: the node command's arguments after ``spectui node watch`` (the URL and the
        watch's flags, each a separate word: ``ssh_command`` quotes them for the node's shell)."""
        NodeChannel.connect(host).close()  # unreachable, a refused key, another spectui: one line
        self.host = host
        command = ssh_command(host, "node", "watch", *words)
        # its own session: Ctrl-C here stops the watch over the channel, not by cutting ssh
        self.proc = subprocesses.popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     bufsize=0, start_new_session=True)  # fmt: skip
        self._stderr: list[str] = []
        threading.Thread(target=self._drain, name="spectui-watch-node-stderr", daemon=True).start()
        assert self.proc.stdout is not None
        self.reader = FrameReader(self.proc.stdout.fileno())
        first = self._next(HELLO_TIMEOUT_S)
        if isinstance(first, Reply):
            self._close()
            raise WatchUnavailable(f"node {host}: {first.error}")
        if not isinstance(first, Header) or first.watch is None:
            self._close()
            raise SpectuiError(f"node {host} did not start its watch ({self._last_words()})")
        self.info: WatchInfo = first.watch
        self.header = msgspec.structs.replace(first, node=host)
        self.recorder: WatchRecorder | None = None
        self.core = WatchCore(0.0)
        self.done = threading.Event()
        self.probe = None  # the process is the node's: its numbers arrive in the readings
        self._stopped_by_user = False
        self._lost = ""
        self._thread: threading.Thread | None = None

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip())
            del self._stderr[:-20]

    def _last_words(self) -> str:
        said = [line for line in self._stderr if line.strip()]
        return said[-1].removeprefix("ssh: ") if said else f"ssh exited with status {self.proc.poll()}"

    def _next(self, timeout: float | None = None) -> object | None:
        try:
            return self.reader.next(timeout=timeout)
        except TimeoutError:
            return None
        except BrokenStream as exc:
            self._lost = f"the node's stream broke: {exc}"
            return None

    @property
    def totals(self) -> WatchTotals:
        return self.core.fold.totals

    def start(self, on_sample: OnSample, on_end: OnEnd | None = None) -> None:
        self._thread = threading.Thread(target=self._run, args=(on_sample, on_end), name="spectui-watch-node", daemon=True)
        self._thread.start()

    def _run(self, on_sample: OnSample, on_end: OnEnd | None) -> None:
        try:
            while (record := self._next()) is not None:
                if type(record) is not WatchReading:
                    continue  # the End the node writes as it stops: this side writes its own
                sample = self.core.take(poll_of(record, self.info.server), record.t_us / 1e6, record.process)
                if self.recorder is not None:
                    self.recorder.write(sample)
                on_sample(sample)
        finally:
            self.done.set()
        if on_end is not None and not self._stopped_by_user:
            why = self._lost or ("the node's watch ended" if self.proc.wait() == 0 else f"the link to {self.host} dropped ({self._last_words()})")
            on_end(f"{why} after {self.core.n} readings")

    def request_stop(self) -> None:
        """End of file on the node command's stdin: the node ends its watch."""
        self._stopped_by_user = True
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def _close(self) -> None:
        self.request_stop()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def finish(self) -> None:
        self._close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.recorder is not None:
            reason: FinishReason = "interrupted" if self._stopped_by_user else "length"
            self.recorder.close(self.totals, reason)
