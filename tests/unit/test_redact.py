"""Redacted copies (``spectui export --redact``, ``spectui report --redact``): no word of the
prompt or the output and no token id left in the file's bytes, every number kept, and report,
diff, gate, replay and history still working on them.

The sample recordings need no model (tests/functional/test_redact_real.py makes a fresh pair
of runs on the embedded model)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import msgspec
import pytest

from spectui.config import RunConfig
from spectui.metrics.stats import summarize
from spectui.recording.output import grade_recording, output_text, output_tokens
from spectui.recording.reader import Recording, read_recording
from spectui.recording.redact import PLACEHOLDER, STAND_IN_BASE, Redactor, redact_recording, write_copy
from spectui.recording.schema import SCHEMA_VERSION, End, Header, Step
from tests.conftest import REPO, run_cli

#: (baseline, candidate) pairs: one whose outputs part (token 183), one token-identical
PAIRS = {
    "medium-reasoning": ("recordings/medium-reasoning.ar.spectui", "recordings/medium-reasoning.spec-ngram-k4.spectui"),
    "fixed-session": ("tests/data/fixed-session-ar.spectui", "tests/data/fixed-session.spectui"),
}
WORD = re.compile(r"[A-Za-z]{4,}")


def copy_pair(name: str, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return tuple(Path(shutil.copy(Path(REPO) / p, folder / Path(p).name)) for p in PAIRS[name])  # type: ignore[return-value]


def redact(*paths: Path, out: Path) -> list[Path]:
    """``spectui export --redact`` of ``paths`` in one command (one batch) into folder ``out``;
    the copies."""
    proc = run_cli("export", "--redact", *map(str, paths), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    copies = [out / p.name for p in paths]
    assert all(f"-> {c}, redacted" in proc.stderr for c in copies)
    assert sorted(out.iterdir()) == sorted(copies) and all(p.exists() for p in paths)  # the originals stay as they were
    return copies


@pytest.fixture(scope="module", params=sorted(PAIRS))
def pair(request, tmp_path_factory):
    """(originals, copies redacted together) of one sample pair."""
    folder = tmp_path_factory.mktemp(request.param)
    originals = copy_pair(request.param, folder / "originals")
    return originals, redact(*originals, out=folder / "redacted")


# -- what is left in the bytes -----------------------------------------------------------------


def _enc(obj: object) -> bytes:
    return msgspec.msgpack.encode(obj)


def structure(original: Recording, copy: Recording) -> bytes:
    """The original with every text and token id taken out by this test itself: what a redacted
    copy may hold (field names, the model's name, numbers) and a leak may not hide behind."""
    h, c = original.header, original.header.config
    kept = msgspec.structs.replace(c, prompt="", system="", history=(), prompt_check="", prompt_name=copy.header.config.prompt_name)
    parts = [_enc(msgspec.structs.replace(h, config=kept, prompt_text="", prompt_tokens=[])), _enc(copy.header.redaction)]
    for ev in original.events[1:]:
        if type(ev) is Step:
            parts.append(_enc(msgspec.structs.replace(ev, tokens=[], pieces=[], runner_up=None)))
        elif type(ev) is End:
            parts.append(_enc(msgspec.structs.replace(ev, error="")))
        else:
            parts.append(_enc(ev))
    return b"\n".join(parts) + b"[redacted: characters] redacted prompt check"


def texts(rec: Recording) -> list[str]:
    h = rec.header
    return [h.prompt_text, h.config.prompt, h.config.system, *(m.content for m in h.config.history), output_text(rec.events)]


def id_runs(ids: list[int], n: int) -> set[bytes]:
    """Each run of ``n`` consecutive ids as msgpack writes them inside a list."""
    return {b"".join(_enc(t) for t in ids[i : i + n]) for i in range(len(ids) - n + 1)}


def assert_nothing_left(original: Recording, copy_path: Path) -> None:
    data = copy_path.read_bytes()
    copy = read_recording(copy_path)
    skeleton = structure(original, copy)
    words = {w for t in texts(original) for w in WORD.findall(t)}
    searched = {w for w in words if w.encode() not in skeleton}
    assert len(searched) >= 10, f"too few words to search for: {sorted(searched)}"
    prompt_words = {w for w in WORD.findall(original.header.prompt_text) if w in searched}
    assert prompt_words and all(w.encode() in original.path.read_bytes() for w in prompt_words)  # the search finds them
    assert {w for w in searched if w.encode() in data} == set()
    # token ids: runs of the prompt's and of each step's ids, as the original stores them
    runs = id_runs(original.header.prompt_tokens, 4)
    for ev in original.events:
        if type(ev) is Step:
            runs |= id_runs(ev.tokens, 3) | id_runs(ev.runner_up or [], 3)
    runs = {r for r in runs if r not in skeleton}
    assert runs and all(r in original.path.read_bytes() for r in runs)
    assert {r for r in runs if r in data} == set()
    # and the stand-ins: never a real id, never repeated, where the original repeats itself
    real = output_tokens(original.events)[0]
    stand_ins = output_tokens(copy.events)[0]
    assert len(stand_ins) == len(real)
    assert min(stand_ins) >= STAND_IN_BASE and len(set(stand_ins)) == len(stand_ins)
    assert min(copy.header.prompt_tokens) >= STAND_IN_BASE and len(copy.header.prompt_tokens) == len(original.header.prompt_tokens)


def test_a_redacted_copy_holds_no_word_and_no_token_id(pair):
    originals, copies = pair
    for original, copy in zip(originals, copies):
        assert_nothing_left(read_recording(original), copy)


def test_a_redacted_copy_keeps_every_number(pair):
    originals, copies = pair
    for original_path, copy_path in zip(originals, copies):
        original, copy = read_recording(original_path), read_recording(copy_path)
        assert copy.header.redaction is not None and original.header.redaction is None
        # every number and fingerprint of the models stays; their paths (a person's folders) are labels
        kept, was = copy.header.artifacts, original.header.artifacts
        assert kept.target.path.startswith("redacted model ") and kept.target.path != was.target.path
        assert msgspec.structs.replace(kept.target, path=was.target.path) == was.target
        assert copy.header.config.target in ("", kept.target.path) or copy.header.config.target.startswith("redacted model ")
        assert was.target.path not in msgspec.json.encode(copy.header).decode()
        assert msgspec.structs.replace(kept, target=was.target, draft=was.draft) == was
        assert copy.header.started_at == original.header.started_at
        assert copy.header.batch_noise == original.header.batch_noise
        assert len(copy.events) == len(original.events) and copy.complete == original.complete
        for a, b in zip(original.events, copy.events):
            assert type(a) is type(b)
            if type(a) is Step:
                assert (a.origins, a.t_us, a.k, a.drafted, a.accepted, a.draft_us, a.verify_us) == (
                    b.origins, b.t_us, b.k, b.drafted, b.accepted, b.draft_us, b.verify_us
                )
                assert a.margins_milli == b.margins_milli and b.pieces == [PLACEHOLDER.encode()] * len(a.pieces)
            elif type(a) is not Header:
                assert a == b  # prefill, memory and host samples, policy changes, the end
        assert _enc(summarize(copy.events)) == _enc(summarize(original.events))
        # one dot per token (less the end-of-generation token a stopped run's text leaves out)
        n, text = len(output_tokens(copy.events)[0]), output_text(copy.events)
        assert set(text) == {PLACEHOLDER} and len(text) in (n, n - 1)


# -- the commands on a redacted copy ------------------------------------------------------------


def test_report_of_a_copy_and_report_redact_of_the_original(pair):
    originals, copies = pair
    for original, copy in zip(originals, copies):
        text = run_cli("report", str(copy))
        assert text.returncode == 0, text.stderr
        assert "redacted" in text.stdout and "no prompt, output or token ids" in text.stdout
        doc = json.loads(run_cli("report", "--json", str(copy)).stdout)
        redacted_now = run_cli("report", "--json", "--redact", str(original))
        assert redacted_now.returncode == 0, redacted_now.stderr
        plain = json.loads(run_cli("report", "--json", str(original)).stdout)
        now = json.loads(redacted_now.stdout)
        assert doc["summary"] == now["summary"] == plain["summary"]
        assert now["header"]["redaction"]["batch"] and now["header"]["config"]["prompt"].startswith("[redacted: ")
        prompt = plain["header"]["config"]["prompt"]
        header = now["header"]
        assert all(t.startswith("[redacted: ") for t in (header["prompt_text"], header["config"]["prompt"]))
        assert prompt and prompt not in json.dumps(now, ensure_ascii=False)


def test_diff_against_its_original_says_in_one_line_that_outputs_cannot_be_compared(pair):
    originals, copies = pair
    for original, copy in zip(originals, copies):
        for baseline, candidate, side in ((original, copy, "candidate"), (copy, original, "baseline")):
            text = run_cli("diff", str(baseline), str(candidate))
            assert text.returncode == 0, text.stderr
            lines = [x for x in text.stdout.splitlines() if "outputs not compared" in x]
            assert len(lines) == 1 and f"the {side} is redacted" in lines[0]
            doc = json.loads(run_cli("diff", "--json", str(baseline), str(candidate)).stdout)
            assert doc["comparable"] and not doc["forced"] and doc["outputs"]["not_compared"] == lines[0].strip().rsplit(" (", 1)[0]
            assert doc["speedup"]["ratio"] == pytest.approx(1.0)  # the same run, timings kept
            # the copy's own version and its labelled model path at most: the model's fingerprint is the same
            assert {f["path"] for f in doc["artifacts"]} <= {"schema_version", "artifacts.target.path"}
            md = run_cli("diff", "--markdown", str(baseline), str(candidate))
            assert md.returncode == 0 and "outputs not compared" in md.stdout


def test_a_pair_redacted_together_diffs_and_gates_as_the_originals(pair):
    originals, copies = pair
    before = json.loads(run_cli("diff", "--json", *map(str, originals)).stdout)
    after = json.loads(run_cli("diff", "--json", *map(str, copies)).stdout)
    assert after["comparable"]
    assert [f["path"] for f in after["artifacts"]] == [f["path"] for f in before["artifacts"] if f["path"] != "schema_version"]
    o_before, o_after = before["outputs"], after["outputs"]
    for key in ("identical", "baseline_length", "candidate_length", "common_length", "n_differing"):
        assert o_after[key] == o_before[key], key
    if o_before["first_divergence"] is not None:
        assert o_after["first_divergence"]["index"] == o_before["first_divergence"]["index"]
        assert o_after["first_divergence"]["cause"]["verdict"] == o_before["first_divergence"]["cause"]["verdict"]
    g_before = run_cli("gate", "--json", "--baseline", str(originals[0]), "--candidate", str(originals[1]))
    g_after = run_cli("gate", "--json", "--baseline", str(copies[0]), "--candidate", str(copies[1]))
    assert g_after.returncode == g_before.returncode in (0, 1), g_after.stderr
    checks = lambda out: [(c["name"], c["passed"], c["value"]) for c in json.loads(out.stdout)["checks"]]  # noqa: E731
    assert checks(g_after) == checks(g_before)


def test_gate_fails_the_outputs_it_could_not_compare(pair, tmp_path):
    originals, copies = pair
    mixed = run_cli("gate", "--json", "--baseline", str(originals[0]), "--candidate", str(copies[1]))
    assert mixed.returncode == 1, mixed.stderr
    (outputs,) = [c for c in json.loads(mixed.stdout)["checks"] if c["name"] == "outputs"]
    assert outputs["passed"] is False and "the candidate is redacted" in outputs["detail"]
    # the same run redacted by another command: another key, nothing to match
    alone = redact(originals[0], out=tmp_path / "alone")
    separate = run_cli("diff", str(copies[0]), str(alone[0]))
    assert separate.returncode == 0, separate.stderr
    assert sum("redacted separately" in x for x in separate.stdout.splitlines()) == 1
    gate = run_cli("gate", "--json", "--baseline", str(copies[0]), "--candidate", str(alone[0]))
    (outputs,) = [c for c in json.loads(gate.stdout)["checks"] if c["name"] == "outputs"]
    assert gate.returncode == 1 and outputs["passed"] is False and "redacted separately" in outputs["detail"]


class ReplayHost:
    """The dashboard controller's host, minus Textual: replay needs no more."""

    def post_note(self, note: object) -> None:
        pass  # the test folds by draining, as the app's repaint tick does

    def notify(self, message: str, **_: object) -> None:
        raise AssertionError(message)

    def replay_mode_changed(self) -> None:
        pass


def no_engine(_config: RunConfig) -> None:
    raise AssertionError("a replay must never load an engine")


def test_replay_plays_placeholder_text_at_the_original_pace(pair):
    from spectui.metrics.live import LiveRun
    from spectui.ui.controller import DashboardController

    originals, copies = pair
    for original, copy in zip(originals, copies):
        ctl = DashboardController(RunConfig(prompt="(replay)"), ReplayHost(), record=False, engine_factory=no_engine)
        assert ctl.open_recording(copy, play=True, speed=1.0, now=0.0)
        ctl.replay_tick(1e6)
        ctl.drain(clear_wake=True)
        live, plain = ctl.live, LiveRun.from_events(read_recording(original).events)
        assert live.n_tokens == plain.n_tokens and live.origins == plain.origins
        assert live.text == PLACEHOLDER * live.n_tokens
        assert _enc(live.summary()) == _enc(plain.summary())


def test_the_compare_bar_does_not_compare_a_copy_with_its_original(pair):
    from spectui.metrics.live import LiveRun
    from spectui.ui.screens.compare import delta_text

    originals, copies = pair
    styles = dict.fromkeys(("muted", "value", "good", "bad"), "")
    runs = [LiveRun.from_events(read_recording(p).events) for p in (originals[0], copies[0], copies[1])]

    def bar(a: LiveRun, b: LiveRun) -> str:
        return delta_text(a, b, a.summary(), b.summary(), styles).plain

    assert "outputs not compared (redacted)" in bar(runs[0], runs[1])
    together = bar(runs[1], runs[2])  # redacted together: compared as the originals are
    assert "not compared" not in together and "outputs " in together
    assert together.split("outputs ")[1] == bar(*(LiveRun.from_events(read_recording(p).events) for p in originals)).split("outputs ")[1]


def test_tune_leaves_redacted_copies_out(pair):
    from spectui.tune.runner import outputs_from_recordings

    originals, copies = pair
    sha = read_recording(originals[0]).header.artifacts.target.sha256
    assert outputs_from_recordings([read_recording(p) for p in originals], sha)
    assert outputs_from_recordings([read_recording(p) for p in copies], sha) == []


def test_history_indexes_a_copy(pair, tmp_path):
    _, copies = pair
    proc = run_cli("history", "--json", "--index", str(tmp_path / "index.sqlite"), str(copies[0].parent))
    assert proc.returncode == 0, proc.stderr
    paths = {r["path"] for g in json.loads(proc.stdout)["groups"] for r in g["runs"]}
    assert {str(c) for c in copies} <= paths


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--redact", "COPY", "-o", "OUT"], "is a redacted copy already"),
        (["--redact", "ORIGINAL", "-o", "COPY"], "already exists"),
        (["--redact", "ORIGINAL", "-o", "EMPTY"], "is a directory"),
        (["--redact", "EMPTY", "-o", "OUT"], "no recordings in this folder"),
        (["--redact", "--otel-json", "ORIGINAL"], "in a second command"),
        (["--redact", "-o", "OUT", "ORIGINAL", "ORIGINAL"], "names the copy of one recording"),
    ],
)
def test_bad_export_redact_is_one_line(pair, tmp_path, args, message):
    originals, copies = pair
    (tmp_path / "empty").mkdir()
    swap = {"COPY": str(copies[0]), "ORIGINAL": str(originals[0]), "OUT": str(tmp_path / "x.spectui"), "EMPTY": str(tmp_path / "empty")}
    proc = run_cli("export", *[swap.get(a, a) for a in args])
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.spectui").exists()


def test_report_redact_of_floors_is_refused(tmp_path):
    proc = run_cli("report", "--redact", "--floors", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--redact" in proc.stderr


def test_a_conversation_folder_is_redacted_into_a_folder_that_replays_turn_by_turn(tmp_path):
    from spectui.config import ChatMessage
    from spectui.sessions.conversation import turn_paths
    from spectui.ui.controller import DashboardController

    rec = read_recording(Path(REPO) / "tests" / "data" / "fixed-session-ar.spectui")
    chat = tmp_path / "chat-2026-11-24T10-00-00"
    chat.mkdir()
    first = msgspec.structs.replace(rec.header.config, conversation="c1", prompt="Plan the Zanzibar offsite.")
    second = msgspec.structs.replace(
        first, prompt="And the Quetzalcoatl budget?", history=(ChatMessage("user", first.prompt), ChatMessage("assistant", "Sure."))
    )
    for i, config in enumerate((first, second), 1):
        write_copy([msgspec.structs.replace(rec.header, config=config), *rec.events[1:]], chat / f"turn{i}.spectui")
    out = tmp_path / "shared"
    proc = run_cli("export", "--redact", str(chat), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    copies = out / chat.name
    assert [p.name for p in turn_paths(copies)] == ["turn1.spectui", "turn2.spectui"]
    for p in copies.iterdir():
        assert b"Zanzibar" not in p.read_bytes() and b"Quetzalcoatl" not in p.read_bytes()
    ctl = DashboardController(RunConfig(prompt="(replay)"), ReplayHost(), record=False, engine_factory=no_engine)
    assert ctl.open_recording(copies)  # the conversation, turn by turn


# -- quality check, conversation, error: every text field ------------------------------------


def test_every_text_field_goes_and_the_quality_verdict_stays(tmp_path):
    from spectui.config import ChatMessage

    rec = read_recording(Path(REPO) / "tests" / "data" / "fixed-session.spectui")
    h = rec.header
    # a check the output fails, naming a key; a conversation before it; an error quoting text
    config = msgspec.structs.replace(
        h.config,
        system="Answer like Quetzalcoatl would.",
        history=(ChatMessage("user", "Remember the word marzipanfabrik."), ChatMessage("assistant", "Noted: marzipanfabrik.")),
        prompt_name="acme-private-layoffs",
        prompt_check="json; keys: zanzibarcode:str",
    )
    assert type(rec.events[-1]) is End
    end = msgspec.structs.replace(rec.events[-1], reason="error", error="ValueError: cannot decode 'Zwetschgendatschi'")
    from spectui.recording.schema import ServerArtifacts

    server = ServerArtifacts(url="http://127.0.0.1:8080", kind="llama-server", props={"system_prompt": "Be Pumpernickel.", "n_ctx": "4096"})
    artifacts = msgspec.structs.replace(h.artifacts, server=server)
    events = [msgspec.structs.replace(h, config=config, artifacts=artifacts), *rec.events[1:-1], end]
    original = tmp_path / "original.spectui"
    write_copy(events, original)
    source = read_recording(original)
    graded = grade_recording(source)
    assert graded is not None and graded.passed is False
    copy = tmp_path / "copy.spectui"
    write_copy(Redactor().recording(source), copy)
    data = copy.read_bytes()
    for secret in ("Quetzalcoatl", "marzipanfabrik", "acme-private-layoffs", "zanzibarcode", "Zwetschgendatschi", "Pumpernickel"):
        assert secret.encode() in original.read_bytes() and secret.encode() not in data, secret
    red = read_recording(copy)
    assert [m.role for m in red.header.config.history] == ["user", "assistant"]
    assert red.header.artifacts.server.props == {"system_prompt": "[redacted]", "n_ctx": "4096"}
    assert red.events[-1].error.startswith("ValueError: [redacted: ")
    again = grade_recording(red)
    assert again is not None and again.passed is graded.passed and red.header.redaction.quality_passed is False
    assert red.header.config.prompt_check.startswith("redacted check ")


def test_a_shipped_prompt_keeps_its_name_and_any_other_name_goes():
    from spectui.paths import shipped_dir
    from spectui.prompts import list_prompts

    shipped = list_prompts(shipped_dir("prompts"))[0]
    redactor = Redactor()
    same = redactor.config(RunConfig(prompt=shipped.text, prompt_name=shipped.name))
    edited = redactor.config(RunConfig(prompt=shipped.text + " (edited)", prompt_name=shipped.name))
    assert same.prompt_name == shipped.name
    assert edited.prompt_name.startswith("redacted prompt ") and shipped.name not in edited.prompt_name


def test_an_unredacted_header_reads_as_before():
    rec = read_recording(Path(REPO) / "recordings" / "short-control.ar.spectui")
    assert rec.header.redaction is None and rec.header.schema_version < "1.6"
    assert redact_recording(rec).header.schema_version == SCHEMA_VERSION
