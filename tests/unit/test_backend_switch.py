"""The dashboard's ``x`` (``spectui.ui.backends``) without a model: the order it cycles in, an
engine that cannot run here skipped with one line, and the drafting carried to a runtime's
methods and back. The switch onto a real llama-server and a run there: tests/ui/test_runtime_dashboard.py."""

from __future__ import annotations

import pytest

from spectui.config import RUNTIMES, BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed, Lookup, Model, Runtime, RuntimeDefault
from spectui.engine.backends import backend_names
from spectui.errors import SpectuiError
from spectui.sessions.runner import SessionRunner
from spectui.ui.backends import BackendCycle, engine_names
from spectui.ui.controller import DashboardController
from tests.unit.test_ui_controller import Host

DRAFT = "/models/draft.gguf"


def test_x_cycles_the_embedded_backends_then_the_runtimes():
    names = engine_names()
    assert names[: len(backend_names())] == backend_names() and names[len(backend_names()):] == list(RUNTIMES)
    assert names[:3] == ["llamacpp", "mlx", "llama-server"]


def test_what_cannot_run_here_is_skipped_with_one_line_each(tmp_path, monkeypatch):
    import spectui.engine.openers

    monkeypatch.setattr(spectui.engine.openers, "mlx_missing", lambda: "MLX is not installed here")
    host = Host()
    missing = str(tmp_path / "no-llama-server")
    config = RunConfig(prompt="x", backend=BackendConfig(runtime_binary=missing))
    ctl = DashboardController(config, host, record=False, runner=SessionRunner())

    assert ctl.toggle_backend() is False  # nothing else can run: the next run stays where it was
    assert ctl.config.backend.name == "llamacpp" and ctl.config.draft == config.draft
    said = [message for _, _, message in host.notices]
    assert said[0] == "MLX skipped: MLX is not installed here"
    assert said[1].startswith("llama-server skipped: --llama-server ") and "no executable llama-server there" in said[1]
    if "mlx-lm" in RUNTIMES:  # its one method needs a draft model, and this run drafts with n-gram lookup
        assert said[2].startswith("mlx-lm skipped:")
    assert all("\n" not in line for line in said)


def test_the_drafting_carries_to_a_runtimes_methods_and_back():
    cycle = BackendCycle(RunConfig(prompt="x", draft=DraftConfig().drafting_with(Lookup())))  # the flags' default
    cost_aware = cycle.runtime_draft("llama-server", "spec")
    assert cost_aware.flag == "runtime:ngram-mod" and cost_aware.length == RuntimeDefault()  # the runtime keeps its own K
    assert cost_aware.k_label() == "K=runtime default"

    cycle.embedded_draft = DraftConfig().drafting_with(Lookup(), fixed_k=5)
    fixed = cycle.runtime_draft("llama-server", "spec")
    assert (fixed.flag, fixed.length) == ("runtime:ngram-mod", Fixed(k=5))

    cycle.embedded_draft = DraftConfig().drafting_with(Model(path=DRAFT), fixed_k=4)
    model = cycle.runtime_draft("llama-server", "spec")
    assert (model.drafter, model.length) == (Runtime(method="draft-simple", draft_model=DRAFT), Fixed(k=4))
    assert cycle.runtime_draft("mlx-lm", "spec").flag == "runtime:draft-model"

    cycle.embedded_draft = DraftConfig().drafting_with(Lookup())
    with pytest.raises(SpectuiError, match="drafts only with a draft model"):
        cycle.runtime_draft("mlx-lm", "spec")
    assert cycle.runtime_draft("mlx-lm", "ar").is_runtime  # AR needs no method; a later spec run says what is missing

    # a dashboard started on a runtime goes back to the draft model it ran there, else spectui's default
    started = BackendCycle(RunConfig(prompt="x", backend=BackendConfig(name="llama-server"),
                                     draft=DraftConfig().drafting_with(Runtime(method="ngram-simple"), fixed_k=3)))
    assert (started.embedded_draft.flag, started.embedded_draft.fixed_k) == ("ngram", 3)
    with_model = DraftConfig(drafter=Runtime(method="draft-simple", draft_model=DRAFT), length=Fixed(k=3))
    back = BackendCycle(RunConfig(prompt="x", backend=BackendConfig(name="llama-server"), draft=with_model))
    assert (back.embedded_draft.drafter, back.embedded_draft.length) == (Model(path=DRAFT), Fixed(k=3))
