"""``python -m spectui.ui``: the dashboard on the default configuration (embedded model,
speculative n-gram drafts, the default prompt). The ``spectui`` CLI passes its flags instead."""

import sys

from spectui.ui.launch import default_config, run_dashboard

if __name__ == "__main__":
    sys.exit(run_dashboard(default_config()))
