"""The headless core never imports the UI toolkit."""

import subprocess
import sys

CORE = [
    "spectui.cli",
    "spectui.config",
    "spectui.engine.session",
    "spectui.engine.decode",
    "spectui.engine.drafters",
    "spectui.engine.llamacpp",
    "spectui.metrics.stats",
    "spectui.recording.schema",
    "spectui.recording.writer",
    "spectui.recording.reader",
    "spectui.recording.report",
    "spectui.metrics.memory",
    "spectui.prompts",
    "spectui.engine.mlx",
    "spectui.metrics.live",
    "spectui.metrics.predict",
    "spectui.engine.policy",
    "spectui.lab.sweep",
    "spectui.lab.sweep_report",
    "spectui.lab.soak",
    "spectui.quality",
    "spectui.telemetry.otel",
    "spectui.cli_sweep",
    "spectui.cli_soak",
    "spectui.cli_export",
    "spectui.cli_quality",
    "spectui.server.session",
]


def test_core_does_not_import_textual():
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in CORE)
    code += "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext')]\n"
    code += "assert not bad, bad\n"
    subprocess.run([sys.executable, "-c", code], check=True)
