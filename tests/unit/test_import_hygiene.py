"""The layers run one way (import-linter's contracts in pyproject.toml), and the headless core
loads without the UI toolkit at run time too (an import-time check import-linter cannot make:
a lazy import inside a function is invisible to it until it runs, and the reverse)."""

import os
import pkgutil
import subprocess
import sys

import spectui

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def contracts() -> list[dict]:
    """pyproject.toml's import-linter contracts."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # tomllib is 3.11+; the project depends on tomli below that (pyproject.toml)
        import tomli as tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["contracts"]


def test_lint_imports_passes():
    """``lint-imports`` with the contracts of pyproject.toml: layers, no textual below the UI, no cycles."""
    script = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    command = [script] if os.path.exists(script) else [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"]
    out = subprocess.run([*command, "--no-cache"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken" in out.stdout  # every contract ran


def test_every_package_has_a_layer():
    """A new package or top-level module cannot slip past the layers contract unlisted."""
    layers = next(c for c in contracts() if c["id"] == "layers")["layers"]
    listed = {name.strip() for layer in layers for name in layer.split("|")}
    top = {f"spectui.{info.name}" for info in pkgutil.iter_modules(spectui.__path__) if info.name != "__main__"}
    assert top == listed, f"unlisted: {sorted(top - listed)}; listed but gone: {sorted(listed - top)}"


def headless_modules() -> list[str]:
    """Every module of spectui outside the UI package: found by walking, never a hand-kept list."""
    names = []
    for info in pkgutil.walk_packages(spectui.__path__, "spectui."):
        if info.name == "spectui.ui" or info.name.startswith(("spectui.ui.", "spectui.__main__")):
            continue
        names.append(info.name)
    return names


def test_walk_finds_the_core():
    names = headless_modules()
    assert {"spectui.engine.loop.decode", "spectui.sessions.record", "spectui.cli"} <= set(names)
    assert len(names) > 50


def test_headless_core_does_not_load_the_ui_toolkit():
    code = (
        "import importlib, sys\n"
        f"for m in {headless_modules()!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext') or m.startswith('spectui.ui'))\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]



def test_a_command_that_may_load_a_model_loads_llama_cpp_before_numpy():
    """spectui/cli/__init__.py: a CUDA build of llama.cpp segfaulted on every model load when
    numpy had been loaded first (measured on an H200). A command that may load a model loads the
    llama.cpp library (``llama_cpp.llama_cpp``) first; one that reads recordings loads neither."""
    code = (
        "import sys\nfrom spectui.cli import main\n"
        "rc = main(sys.argv[1:]); m = list(sys.modules)\n"
        "print(rc, 'llama_cpp.llama_cpp' in m and m.index('llama_cpp.llama_cpp') < m.index('numpy'), 'llama_cpp' in m)"
    )
    run = subprocess.run([sys.executable, "-c", code, "run", "--headless", "--target", "/nonexistent/model.gguf"],
                         capture_output=True, text=True, cwd=REPO)
    assert run.stdout.split() == ["2", "True", "True"], run.stdout + run.stderr  # refused in one line, after the load order
    report = subprocess.run([sys.executable, "-c", code, "report", "/nonexistent.spectui"], capture_output=True, text=True, cwd=REPO)
    assert report.stdout.split()[::2] == ["2", "False"], report.stdout + report.stderr
