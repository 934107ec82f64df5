"""Shared fixtures: the real embedded model (SmolLM2-135M-Instruct Q4_1 GGUF), loaded once."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed, Model
from spectui.models.registry import embedded_model_path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Sessions are recorded by default; tests must not fill the repository's recordings/.
os.environ["SPECTUI_RECORDINGS"] = tempfile.mkdtemp(prefix="spectui-test-recordings-")
# Nor read or write the user's cache: verify-cost curves left there by earlier runs (or by
# `spectui tune`) would change what a cost-aware K does in a test.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="spectui-test-cache-")
# Nor the user's data directory (the history index lives there; platformdirs honours XDG_* on Linux).
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="spectui-test-data-")
# Nor the user's config files (defaults and profiles: spectui.profiles) nor the dashboard's
# remembered theme, K and mode: a test runs with built-in settings unless it writes a file.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="spectui-test-config-")
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="spectui-test-state-")
os.environ.pop("SPECTUI_PROFILE", None)
# The embedded default runs as shipped (Q4_1), the file every expected output and calibration
# here was made on, not in the weight type this host's probe would choose: that choice has its
# own tests (tests/backends/test_embedded_weights.py), which set this back to "auto".
os.environ["SPECTUI_EMBEDDED_WEIGHTS"] = "shipped"


@pytest.fixture(scope="session")
def model_path() -> str:
    return embedded_model_path()


def user_cache() -> str:
    """spectui's cache folder as it is outside the tests (the XDG_CACHE_HOME set above aside)."""
    import platformdirs

    saved = os.environ.pop("XDG_CACHE_HOME", None)
    try:
        return platformdirs.user_cache_dir("spectui", appauthor=False)
    finally:
        if saved is not None:
            os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture(scope="session")
def llama_server_binary():
    """The llama-server the runtime starts: found, or built once (minutes; a line per phase).

    The one cache the tests share with the user's: a developer or CI machine pays the build
    once per llama-cpp-python version (``~/.cache/spectui/llama.cpp/<version>/build``).
    ``$SPECTUI_LLAMA_SERVER`` or a ``llama-server`` on ``$PATH`` is used instead when there is
    one (``find_server``'s order). A fixture, not a skip decided at collection: on a clean
    machine the build happens when the first test asks for it, so every test that needs a real
    llama-server runs there too."""
    from pathlib import Path

    from spectui.runtime.build import find_server
    from spectui.runtime.cmake import STEP

    def progress(fraction: float, text: str) -> None:
        if not text.startswith(STEP):
            print(f"[llama-server build {fraction:.0%}] {text}", file=sys.stderr, flush=True)

    return find_server(progress=progress, cache=Path(user_cache()))


@pytest.fixture(scope="session")
def tiny_heads(model_path, tmp_path_factory) -> dict[str, str]:
    """Tiny draft heads for the embedded target (EAGLE-3, DFlash, DSpark, the head that keeps
    its drafts, and the misfits), written once per session: tests/runtime/tiny_heads.py."""
    from tests.runtime.tiny_heads import write_all

    return {name: str(path) for name, path in write_all(tmp_path_factory.mktemp("heads"), model_path).items()}


@pytest.fixture(scope="session")
def engine(model_path, calibrations):
    """A target and a draft model context over the same weights (the only registry model).

    The draft context is a separate KV cache, so self-drafting exercises every code path a
    second GGUF would; tests make it disagree by sampling the draft at temperature 1.0.
    Its runs find their calibration measured (``calibrations``), not re-measured deeper as
    longer runs come.
    """
    from spectui.engine.embedded import Engine

    config = RunConfig(
        target=model_path,
        mode="spec",
        prompt="x",
        draft=DraftConfig(drafter=Model(path=model_path), length=Fixed()),
        backend=BackendConfig(n_ctx=2048),
    )
    with Engine.load(config) as eng:
        yield eng


def run_cli(*args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spectui", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture(scope="session")
def mlx_engine(model_path):
    """MLX target and MLX draft model over one set of weights, through ``Engine.load``.

    Its calibration is measured once here, as far as its budget goes (~130 tokens of MLX on
    this CPU, which then serves every depth): otherwise each MLX run reaching deeper than the
    last measures it again, up to 30 s each."""
    import warnings

    from spectui.engine.embedded import Engine
    from spectui.engine.host.noise import CalibrationNotice, batch_noise

    config = RunConfig(
        target=model_path,
        mode="spec",
        prompt="x",
        draft=DraftConfig(drafter=Model(path=model_path), length=Fixed()),
        backend=BackendConfig(name="mlx", n_ctx=512),
    )
    with Engine.load(config) as eng:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationNotice)
            batch_noise(eng.target, eng.target.artifacts().sha256, CALIBRATED_REACH)
        yield eng


@pytest.fixture(params=["llamacpp", "mlx"])
def any_engine(request):
    """One test body over both backends: the llama.cpp engine, then the MLX one."""
    return request.getfixturevalue("engine" if request.param == "llamacpp" else "mlx_engine")


# -- calibrations, measured once --------------------------------------------------------------
# A greedy run first measures its backend's batch-shape noise at those settings (seconds to
# half a minute, ARCHITECTURE.md "Data flows one way": the header carries it) and caches it in
# the user cache. The tests' cache above keeps them for the whole session, but a test that
# needs a cache of its own (a tune result, a draft memory, a second home) would measure them
# again: ``calibrations`` measures the settings the tests run at, once per session and as deep
# as their runs reach, and ``seed_calibrations`` copies them into such a cache. Tests about
# the first calibration itself use an empty cache.

#: the settings tests and commands run at: all cores (the default), one thread (the dashboard
#: tests, tune's runs, ``--threads 1``), and ``--deterministic`` (what tune also measures)
CALIBRATED_BACKENDS = (
    BackendConfig(),
    BackendConfig(n_threads=1),
    BackendConfig(n_threads=1, flash_attn="on", deterministic=True),
)
#: the reach calibrated for: prompt plus budget of the longest greedy runs the tests make
CALIBRATED_REACH = 512
#: time allowed to calibrate that deep: a user's first run stops at 30 s and reuses what it
#: reached, but the tests judge divergences past depth 300 and need the whole reach (~11 s
#: here at 2 threads; a busy CI host ran out of the 30 s before depth 316)
CALIBRATION_BUDGET_S = 600.0


@pytest.fixture(scope="session")
def calibrations(model_path) -> str:
    """The session cache's batch-noise file, with ``CALIBRATED_BACKENDS`` measured in it."""
    import warnings

    import msgspec

    from spectui.engine.backends.llamacpp import LlamaCppBackend
    from spectui.engine.host.noise import CACHE_NAME, CalibrationNotice, batch_noise
    from spectui.paths import cache_dir

    first = None
    opened = []
    try:
        for settings in CALIBRATED_BACKENDS:
            backend = LlamaCppBackend.open(model_path, msgspec.structs.replace(settings, n_ctx=2 * CALIBRATED_REACH),
                                           share_with=first)
            opened.append(backend)
            first = first or backend
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CalibrationNotice)
                batch_noise(backend, backend.artifacts().sha256, CALIBRATED_REACH, budget_s=CALIBRATION_BUDGET_S)
    finally:
        for backend in reversed(opened):
            backend.close()
    return str(cache_dir() / CACHE_NAME)


@pytest.fixture(scope="session")
def tuned(tmp_path_factory, calibrations):
    """A real ``spectui tune`` result of the embedded model, made once per session: one thread,
    a context too short for the long curve, one prompt (short-greeting), 16 tokens, no check
    rounds. The tune screen shows it; the tune-kill test keeps it as the previous result."""
    from spectui.prompts import find_prompt
    from spectui.tune.runner import TunePlan, run_tune

    cache = tmp_path_factory.mktemp("tuned-cache")
    seed_calibrations(calibrations, cache)
    config = RunConfig(prompt="x", backend=BackendConfig(n_threads=1, n_ctx=1024))
    plan = TunePlan(specs=[find_prompt("short-greeting")], max_tokens=16, reps=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        return run_tune(config, plan, lambda _text: None)


def seed_calibrations(calibrations: str, cache_home) -> None:  # noqa: ANN001
    """Put the session's calibrations in the cache under ``cache_home`` (an ``XDG_CACHE_HOME``)."""
    import shutil
    from pathlib import Path

    folder = Path(cache_home) / "spectui"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(calibrations, folder / os.path.basename(calibrations))



# -- tiers ------------------------------------------------------------------------------------
# `pytest -m "not slow"` is the fast tier: no model is loaded, no wheel built, no server or
# second process with a model started. A test is slow when its folder runs real engines or
# servers throughout (backends/, server/), when it is a command-line or dashboard test outside
# the modules that work on checked-in recordings alone (FAST_MODULES), when it asks for a
# fixture that loads a model, or when its module or function says so (`@pytest.mark.slow`).
# The fast tier checks itself: a test outside the slow tier that loads a model in this
# process fails and says it must be marked.

SLOW_FOLDERS = {"backends", "server"}
#: command-line and dashboard modules whose tests read checked-in recordings and load no model
#: (a test among them that does is marked slow itself)
FAST_MODULES = {
    "functional/test_diff_cli.py", "functional/test_outputs_unchanged.py", "functional/test_otel_cli.py",
    "functional/test_writes_survive.py", "functional/test_profiles.py",
    "ui/test_snapshots.py", "ui/test_live.py", "ui/test_history_screen.py", "ui/test_envelope_header.py",
    "ui/test_workload_view.py", "ui/test_token_stream_follow.py",
}
#: fixtures that load a model (or start the engine thread on one)
MODEL_FIXTURES = {"engine", "mlx_engine", "any_engine", "runner", "llama", "tuned", "calibrations"}
#: fixtures that build a program (minutes on a clean machine)
BUILD_FIXTURES = {"llama_server_binary"}


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    tests = os.path.join(REPO, "tests")
    for item in items:
        module = os.path.relpath(str(item.fspath), tests).replace(os.sep, "/")
        folder = module.split("/")[0]
        if folder == "ui":
            item.add_marker(pytest.mark.ui)
        if folder == "server":
            item.add_marker(pytest.mark.server)
        slow_folder = folder in SLOW_FOLDERS or (folder in ("functional", "ui") and module not in FAST_MODULES)
        if slow_folder or (MODEL_FIXTURES | BUILD_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _fast_tier_loads_no_model(request, monkeypatch):
    if request.node.get_closest_marker("slow") is not None:
        return

    def refuse(*_args, **_kwargs):
        raise AssertionError(f"{request.node.nodeid} loads a model: mark it slow (pytest.mark.slow)")

    # where weights are read: llama.cpp's model load, and MLX's where MLX is already imported
    # (bad input refused before that point, as the one-line-error tests check, is fast)
    from spectui.engine.backends.llamacpp import LlamaModel

    monkeypatch.setattr(LlamaModel, "__init__", refuse)
    mlx = sys.modules.get("spectui.engine.backends.mlx")
    if mlx is not None:
        monkeypatch.setattr(mlx, "open_mlx_models", refuse)
