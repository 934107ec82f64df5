"""One default: the dashboard started as ``python -m spectui.ui`` drafts as ``spectui`` with no
flags does (n-gram, its K cost-aware), not as a bare ``DraftConfig()`` (a fixed K=4)."""

from __future__ import annotations

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.ui.launch import default_config


def test_the_dashboards_default_is_the_commands():
    cli = config_from_args(build_parser().parse_args(["run"]))
    assert default_config().draft == cli.draft
    assert cli.draft.cost_aware and cli.draft.k_label() == "K=1..16 adaptive"
