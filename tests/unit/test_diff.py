"""``diff_recordings`` on the real sample recordings and on hand-edited copies of them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from spectui.compare.diff import diff_recordings
from spectui.compare.diff_format import format_diff_markdown, format_diff_text
from spectui.compare.speedup import decode_steps, speedup_ci
from spectui.errors import SpectuiError
from spectui.metrics.stats import summarize
from spectui.recording.reader import Recording, read_recording
from spectui.recording.schema import End, Event, Header, MemorySample, Prefill, Step
from spectui.recording.writer import RecordingWriter

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
PAIRS = ["short-control", "medium-reasoning", "load-typo-fix"]


# -- helpers shared with test_gate.py and tests/functional/test_diff_cli.py -------------------


def sample(name: str, mode: str = "ar") -> Path:
    """``mode``: "ar" or "spec" (the n-gram K=4 recording)."""
    return RECORDINGS / f"{name}.{'ar' if mode == 'ar' else 'spec-ngram-k4'}.spectui"


def tokens_of(rec: Recording) -> list[int]:
    return [t for ev in rec.events if type(ev) is Step for t in ev.tokens]


def write_events(path: Path, events: list[Event]) -> Path:
    with RecordingWriter(path) as w:
        for ev in events:
            w.write(ev)
    return path


def rewritten(path: Path, tmp_path: Path) -> Path:
    """A committed recording as this spectui writes it (its header stamped with this schema's
    version, as any edited copy is), so a diff against an edited copy lists only the edit."""
    return write_events(tmp_path / f"rewritten-{path.name}", read_recording(path).events)


def edit_header(events: list[Event], edit: Callable[[Header], Header]) -> list[Event]:
    return [edit(ev) if type(ev) is Header else ev for ev in events]


def replace_token(events: list[Event], index: int, token: int, piece: bytes) -> list[Event]:
    """The output token at ``index`` (over all steps) becomes ``token`` / ``piece``."""
    out: list[Event] = []
    seen = 0
    for ev in events:
        if type(ev) is Step and seen <= index < seen + len(ev.tokens):
            j = index - seen
            tokens, pieces = list(ev.tokens), list(ev.pieces)
            tokens[j], pieces[j] = token, piece
            ev = msgspec.structs.replace(ev, tokens=tokens, pieces=pieces)
        if type(ev) is Step:
            seen += len(ev.tokens)
        out.append(ev)
    return out


def scale_time(events: list[Event], factor: int) -> list[Event]:
    """Every timestamp times ``factor``: the same run, ``factor`` times slower."""
    out: list[Event] = []
    for ev in events:
        if type(ev) is Step:
            ev = msgspec.structs.replace(ev, t_us=[t * factor for t in ev.t_us])
        elif type(ev) is Prefill:
            ev = msgspec.structs.replace(ev, t_start_us=ev.t_start_us * factor, t_end_us=ev.t_end_us * factor)
        elif type(ev) in (MemorySample, End):
            ev = msgspec.structs.replace(ev, t_us=ev.t_us * factor)
        out.append(ev)
    return out


def cut_in_half(src: Path, dst: Path) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


def with_runtime(h: Header, **runtime: str) -> Header:
    return msgspec.structs.replace(h, artifacts=msgspec.structs.replace(h.artifacts, runtime={**h.artifacts.runtime, **runtime}))


def with_target_sha(h: Header, sha: str) -> Header:
    target = msgspec.structs.replace(h.artifacts.target, sha256=sha)
    return msgspec.structs.replace(h, artifacts=msgspec.structs.replace(h.artifacts, target=target))


# -- outputs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["short-control", "load-typo-fix"])
def test_real_pairs_with_identical_outputs(name):
    ar, spec = read_recording(sample(name)), read_recording(sample(name, "spec"))
    assert tokens_of(ar) == tokens_of(spec)  # the premise, checked independently
    d = diff_recordings(ar, spec)
    o = d.outputs
    assert o.identical and o.first_divergence is None and o.n_differing == 0
    assert o.baseline_length == o.candidate_length == len(tokens_of(ar))
    assert d.comparable and not d.forced and d.artifacts == []
    # AR vs speculative is configuration, not a suspicious artifact change
    assert {f.path for f in d.configuration} == {"config.mode", "config.draft.drafter", "config.draft.length"}
    assert f"identical: {len(tokens_of(ar))} tokens" in format_diff_text(d)


def test_real_divergence_of_medium_reasoning():
    ar, spec = read_recording(sample("medium-reasoning")), read_recording(sample("medium-reasoning", "spec"))
    a, b = tokens_of(ar), tokens_of(spec)
    common = min(len(a), len(b))
    expected = next(i for i in range(common) if a[i] != b[i])
    differing = sum(a[i] != b[i] for i in range(common))

    d = diff_recordings(ar, spec)
    o, div = d.outputs, d.outputs.first_divergence
    assert not o.identical and div is not None
    assert div.index == expected
    assert 170 <= expected <= 190  # the llama.cpp near-tie the recordings README describes
    assert (div.baseline_token, div.candidate_token) == (a[expected], b[expected])
    assert (o.n_differing, o.common_length, o.baseline_length, o.candidate_length) == (differing, common, len(a), len(b))
    pieces_a = [p for ev in ar.events if type(ev) is Step for p in ev.pieces]
    pieces_b = [p for ev in spec.events if type(ev) is Step for p in ev.pieces]
    assert div.baseline_piece == pieces_a[expected].decode()
    assert div.candidate_piece == pieces_b[expected].decode()
    # the contexts share the text before the divergence and part at context_offset
    off = div.context_offset
    assert div.baseline_context[:off] == div.candidate_context[:off]
    assert b"".join(pieces_a[:expected]).decode().endswith(div.baseline_context[:off])
    assert div.baseline_context[off:].startswith(div.baseline_piece)
    assert div.candidate_context[off:].startswith(div.candidate_piece)
    assert 30 <= len(div.baseline_context) <= 40

    text = format_diff_text(d)
    assert f"diverge at token {expected}" in text
    assert f"{differing} of {common} common positions differ" in text
    assert f"lengths differ: {len(a)} vs {len(b)} tokens" in text
    # the caret sits under the first differing character of the candidate line
    lines = text.splitlines()
    cand = next(i for i, line in enumerate(lines) if line.lstrip().startswith("candidate: "))
    caret = lines[cand + 1].index("^")
    assert lines[cand][caret] == div.candidate_context[off]


def test_one_changed_token(tmp_path):
    src = read_recording(sample("load-typo-fix", "spec"))
    i = 30
    original = tokens_of(src)
    edited = write_events(tmp_path / "edited.spectui", replace_token(src.events, i, 12345, b" banana"))
    d = diff_recordings(read_recording(sample("load-typo-fix")), read_recording(edited))
    div = d.outputs.first_divergence
    assert div is not None and div.index == i
    assert d.outputs.n_differing == 1 and d.outputs.baseline_length == d.outputs.candidate_length == len(original)
    assert (div.baseline_token, div.candidate_token) == (original[i], 12345)
    assert div.candidate_piece == " banana"
    assert div.candidate_context[div.context_offset :].startswith(" banana")
    assert div.baseline_context[: div.context_offset] == div.candidate_context[: div.context_offset]
    assert len(div.baseline_context[: div.context_offset]) == 20  # ~20 characters before, ~20 after
    assert div.baseline_context in format_diff_text(d).replace("\\n", "\n")


# -- artifacts and comparability ---------------------------------------------------------------


def test_an_interleaved_clock_is_listed(tmp_path):
    from spectui.recording.schema import INTERLEAVED_CLOCK

    src = read_recording(sample("short-control", "spec"))
    cand = write_events(
        tmp_path / "interleaved.spectui", edit_header(src.events, lambda h: msgspec.structs.replace(h, clock=INTERLEAVED_CLOCK))
    )
    d = diff_recordings(read_recording(rewritten(sample("short-control"), tmp_path)), read_recording(cand))
    assert {f.path: (f.baseline, f.candidate) for f in d.artifacts} == {"clock": ("wall", INTERLEAVED_CLOCK)}


def test_artifact_change_is_listed_first(tmp_path):
    src = read_recording(sample("short-control", "spec"))

    def edit(h: Header) -> Header:
        host = msgspec.structs.replace(h.artifacts.host, cpu="Apple M4")
        h = with_runtime(h, **{"llama-cpp-python": "0.3.99"})
        return msgspec.structs.replace(h, artifacts=msgspec.structs.replace(h.artifacts, host=host))

    cand = write_events(tmp_path / "changed.spectui", edit_header(src.events, edit))
    d = diff_recordings(read_recording(rewritten(sample("short-control"), tmp_path)), read_recording(cand))
    found = {f.path: (f.baseline, f.candidate) for f in d.artifacts}
    assert found == {
        "artifacts.runtime.llama-cpp-python": ("0.3.36", "0.3.99"),
        "artifacts.host.cpu": ("Intel(R) Xeon(R) Processor @ 2.80GHz", "Apple M4"),
    }
    assert d.comparable  # a runtime or host change is suspicious, not a refusal
    text = format_diff_text(d)
    assert text.index("artifacts.runtime.llama-cpp-python") < text.index("-- configuration") < text.index("-- outputs")
    assert text.index("Apple M4") < text.index("-- speed")
    doc = msgspec.json.decode(msgspec.json.encode(d))
    assert {"path": "artifacts.host.cpu", "baseline": "Intel(R) Xeon(R) Processor @ 2.80GHz", "candidate": "Apple M4", "note": ""} in doc[
        "artifacts"
    ]
    md = format_diff_markdown(d)
    assert "| `artifacts.runtime.llama-cpp-python` | 0.3.36 | 0.3.99 |" in md
    assert md.index("### Artifacts") < md.index("### Outputs")


def test_sampling_and_version_changes_are_artifacts(tmp_path):
    src = read_recording(sample("short-control"))

    def edit(h: Header) -> Header:
        sampling = msgspec.structs.replace(h.config.sampling, temperature=0.7, seed=3)
        return msgspec.structs.replace(h, spectui_version="0.2.0", config=msgspec.structs.replace(h.config, sampling=sampling))

    d = diff_recordings(read_recording(rewritten(sample("short-control"), tmp_path)),
                        read_recording(write_events(tmp_path / "s.spectui", edit_header(src.events, edit))))
    assert [f.path for f in d.artifacts] == ["config.sampling.temperature", "config.sampling.seed", "spectui_version"]
    assert d.configuration == [] and not d.candidate.greedy


def test_target_or_prompt_change_is_refused_unless_forced(tmp_path):
    base = read_recording(sample("short-control"))
    other_sha = write_events(tmp_path / "sha.spectui", edit_header(base.events, lambda h: with_target_sha(h, "f" * 64)))
    with pytest.raises(SpectuiError, match=r"not comparable: the target models differ \(sha256 b179c9523d0e vs ffffffffffff\)"):
        diff_recordings(base, read_recording(other_sha))
    d = diff_recordings(base, read_recording(other_sha), force=True)
    assert d.forced and not d.comparable and "target models differ" in d.not_comparable[0]
    assert "artifacts.target.sha256" in [f.path for f in d.artifacts]
    assert format_diff_text(d).splitlines()[2].startswith("COMPARED BY FORCE: the target models differ")

    other_prompt = read_recording(sample("load-typo-fix"))
    with pytest.raises(SpectuiError, match="prompt tokens differ") as exc:
        diff_recordings(base, other_prompt)
    assert "\n" not in str(exc.value) and "--force" in str(exc.value)
    assert diff_recordings(base, other_prompt, force=True).forced


# -- speed ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAIRS)
def test_speedup_matches_summaries_and_ci_contains_it(name):
    ar, spec = read_recording(sample(name)), read_recording(sample(name, "spec"))
    sp = speedup_ci(ar, spec)
    b, c = summarize(ar.events).decode_tok_s, summarize(spec.events).decode_tok_s
    if sp.parted_at >= 0:  # outputs that part are compared over the text they share only
        assert sp.compared_tokens == sp.parted_at > 1 and "they part at token" in sp.same_text
        (bt, bs), (ct, cs) = decode_steps(ar, sp.parted_at), decode_steps(spec, sp.parted_at)
        assert bt.sum() == ct.sum() == sp.parted_at - 1  # the first token is prefill's, not decode's
        b, c = bt.sum() / bs.sum(), ct.sum() / cs.sum()
    assert sp.baseline_tok_s == pytest.approx(b) and sp.candidate_tok_s == pytest.approx(c)
    assert sp.ratio == pytest.approx(c / b)
    assert sp.ci_low < sp.ratio < sp.ci_high
    assert speedup_ci(ar, spec) == sp  # fixed seed: same files, same interval


def test_speedup_of_a_run_against_itself_and_a_slower_copy(tmp_path):
    rec = read_recording(sample("medium-reasoning", "spec"))
    same = speedup_ci(rec, rec)
    assert same.ratio == 1.0 and same.ci_low < 1.0 < same.ci_high
    slower = read_recording(write_events(tmp_path / "slow.spectui", scale_time(rec.events, 2)))
    half = speedup_ci(rec, slower)
    assert half.ratio == pytest.approx(0.5)
    assert half.ci_low < 0.5 < half.ci_high
    assert half.ci_high - half.ci_low == pytest.approx((same.ci_high - same.ci_low) / 2, rel=0.02)  # scales with the ratio
    # more steps of the same kind narrow the interval: the run followed by itself again
    steps = [ev for ev in rec.events if type(ev) is Step]
    # the decode steps again (not the first, whose time includes the prefill), each gap as before
    shift = steps[-1].t_us[-1] - steps[0].t_us[-1]
    again = [msgspec.structs.replace(s, t_us=[t + shift for t in s.t_us]) for s in steps[1:]]
    longer = read_recording(write_events(tmp_path / "long.spectui", [*rec.events[:-1], *again]))
    wide = same.ci_high - same.ci_low
    assert speedup_ci(longer, longer).ci_high - speedup_ci(longer, longer).ci_low < wide


def test_ttft_and_memory_fields():
    ar, spec = read_recording(sample("load-typo-fix")), read_recording(sample("load-typo-fix", "spec"))
    d = diff_recordings(ar, spec)
    sa, ss = summarize(ar.events), summarize(spec.events)
    assert d.ttft_growth == pytest.approx(ss.ttft_ms / sa.ttft_ms - 1)
    assert d.short_prompt and d.ttft_within_limit == (d.ttft_growth <= 0.08)
    first = next(ev.rss for ev in spec.events if type(ev) is MemorySample)
    assert d.candidate.rss_growth_bytes == ss.peak_rss_bytes - first > 0
    assert d.candidate.summary.acceptance_rate == ss.acceptance_rate
    text = format_diff_text(d)
    for label in ("decode tok/s", "95% CI", "steady tok/s", "TTFT ms", "prefill ms", "ITL p99 ms", "acceptance rate",
                  "per-position acceptance", "draft forwards", "peak RSS", "RSS growth", "minimum headroom", "swap delta"):
        assert label in text, label


# -- damaged files -----------------------------------------------------------------------------------


def test_truncated_recording_is_still_diffable(tmp_path):
    cut = read_recording(cut_in_half(sample("medium-reasoning", "spec"), tmp_path / "cut.spectui"))
    assert cut.truncated and not cut.complete
    d = diff_recordings(read_recording(sample("medium-reasoning")), cut)
    assert d.candidate.truncated and not d.candidate.complete
    assert d.outputs.candidate_length == len(tokens_of(cut)) < 237
    assert f"truncated at byte {cut.truncated_at}" in format_diff_text(d)
    assert "truncated at byte" in format_diff_markdown(d)


def test_json_round_trip():
    d = diff_recordings(read_recording(sample("short-control")), read_recording(sample("short-control", "spec")))
    doc = msgspec.json.decode(msgspec.json.encode(d))
    assert doc["outputs"]["identical"] is True
    assert doc["speedup"]["ratio"] == pytest.approx(d.speedup.ratio)
    assert doc["baseline"]["summary"]["acceptance_rate"] is None  # NaN (AR) encodes as null
    assert doc["candidate"]["summary"]["per_position_acceptance"]


def test_compare_stays_headless():
    code = (
        "import sys, spectui.compare.diff, spectui.compare.gate\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
