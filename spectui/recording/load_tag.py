"""A workload's request as its recording's header tags it (``Header.load``, schema 1.8).

Apart from ``schema`` only to keep that module short; ``schema`` imports it, and readers take it
from there.
"""

from __future__ import annotations

import msgspec


class LoadTag(msgspec.Struct, kw_only=True):
    """1.8: a request of a workload (``spectui workload``): which one, under what load, and how
    warm the server that answered it was."""

    workload: str = ""  # the workload's name
    index: int = 0  # the request's position in the workload, from 0
    conversation: str = ""  # "" = a request on its own
    turn: int = 0
    setting: str = ""  # "llama-server ngram-mod", "embedded AR", ...
    clients: int = 0  # closed-loop clients of its level (0: open loop)
    rate: float = 0.0  # open loop: requests a second, Poisson arrivals (0: closed loop)
    slots: int = 1  # requests the server serves at once
    client: int = 0  # which client sent it
    pass_no: int = 0  # the workload's pass at this level, from 0
    warmup: bool = False  # sent to warm the server, left out of every figure
    #: requests this server had answered before this one was sent (0: it met a cold server)
    served_before: int = 0
    #: how long it waited before it was sent (open loop: behind a busy client; ms)
    queue_ms: float = 0.0

    @property
    def warm(self) -> bool:
        return self.served_before > 0
