"""The UI thread's CPU allowance (``spectui.ui.cpu_budget``), on clocks the test moves."""

from __future__ import annotations

from spectui.ui.cpu_budget import CpuBudget


class Clocks:
    def __init__(self) -> None:
        self.wall = self.cpu = 0.0


def budget(clocks: Clocks) -> CpuBudget:
    return CpuBudget(0.02, 0.05, wall=lambda: clocks.wall, cpu=lambda: clocks.cpu)


def test_a_thread_over_its_share_while_a_run_decodes_waits_until_it_has_earned_it_back():
    c = Clocks()
    b = budget(c)
    c.wall, c.cpu = 1.0, 0.08  # 80 ms of CPU in a second: 20 ms earned, 50 ms saved up
    assert not b.allows(busy=True)
    c.wall += 0.25  # 5 ms earned: still 5 ms short
    assert not b.allows(busy=True)
    c.wall += 0.5  # 10 ms more: 5 ms to spend
    assert b.allows(busy=True)


def test_the_allowance_saved_up_is_capped_and_full_while_nothing_decodes():
    c = Clocks()
    b = budget(c)
    c.wall = 100.0  # a long quiet spell saves no more than the burst
    assert b.allows(busy=True) and b.allowance == 0.05
    c.wall, c.cpu = 101.0, 1.0  # a second of CPU: far over
    assert not b.allows(busy=True)
    c.wall, c.cpu = 101.1, 1.5  # idle: nothing to take CPU from, the allowance refills at once
    assert b.allows(busy=False) and b.allowance == 0.05
