"""What users script against stays put: ``spectui report --json`` and ``spectui diff --json`` of
the sample recordings equal the outputs checked in under tests/data/expected/.

The expected files were made by the code before the layering rework (commit 34875a0), so a
refactor that changes a number, a label or a key fails here. A deliberate change regenerates
them (``python tests/functional/test_outputs_unchanged.py --update``) and says so in its commit.
Floats compare to 1e-9 relative: a library computing the same statistic may round the last bit
differently, which no reader sees.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

EXPECTED = Path(REPO) / "tests" / "data" / "expected"
SAMPLES = ["recordings/" + p.name for p in sorted((Path(REPO) / "recordings").glob("*.spectui"))] + [
    "tests/data/fixed-session-ar.spectui",
    "tests/data/fixed-session.spectui",
]
PAIRS = {
    **{t: (f"recordings/{t}.ar.spectui", f"recordings/{t}.spec-ngram-k4.spectui") for t in ("load-typo-fix", "medium-reasoning", "short-control")},
    "fixed-session": ("tests/data/fixed-session-ar.spectui", "tests/data/fixed-session.spectui"),
}


def commands() -> dict[str, list[str]]:
    out = {f"report-{Path(p).name.removesuffix('.spectui')}": ["report", "--json", p] for p in SAMPLES}
    out.update({f"diff-{name}": ["diff", "--json", b, c] for name, (b, c) in PAIRS.items()})
    return out


def same(a: object, b: object, where: str = "") -> list[str]:
    """Where two JSON documents differ (floats to 1e-9 relative), as paths."""
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) else [f"{where}: {a!r} != {b!r}"]
    if type(a) is not type(b):
        return [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        keys = a.keys() | b.keys()
        return [d for k in sorted(keys)
                for d in (same(a.get(k), b.get(k), f"{where}.{k}") if k in a and k in b else [f"{where}.{k}: only on one side"])]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in same(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def test_every_sample_is_covered():
    assert len(SAMPLES) == 8 and all((Path(REPO) / p).is_file() for p in SAMPLES)
    assert {p.stem for p in EXPECTED.glob("*.json")} == set(commands())


@pytest.mark.parametrize("name", sorted(commands()))
def test_json_output_is_unchanged(name):
    out = run_cli(*commands()[name])
    assert out.returncode == 0, out.stderr
    expected = json.loads((EXPECTED / f"{name}.json").read_text())
    differences = same(expected, json.loads(out.stdout))
    assert not differences, "\n".join(differences[:20])


def test_the_comparison_can_fail():
    doc = json.loads((EXPECTED / "diff-fixed-session.json").read_text())
    changed = json.loads(json.dumps(doc))
    changed["baseline"]["summary"]["decode_tok_s"] *= 1.001
    changed["baseline"]["mode"] = "speculative"
    assert len(same(doc, changed)) == 2


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    for name, args in commands().items():
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
        (EXPECTED / f"{name}.json").write_text(result.stdout)
