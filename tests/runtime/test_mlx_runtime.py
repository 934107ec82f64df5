"""``--runtime mlx-lm``: mlx_lm.server started by spectui on the embedded model, measured through
the server engine, and stopped.

The AR reference runs in this process through the launcher (its first port is held by this
test, so the bind failure that mlx_lm.server survives is read from its log and another port
tried); the speculative run goes through the command line with a Q8_0 requantized copy of the
embedded model as its draft (the target's vocabulary, other weights: the draft is sometimes
wrong and the target's verification must correct it). Its greedy output must equal the AR
output token for token; mlx-lm streams no log-probabilities, so a divergence could not be
classified as a near-tie (``spectui.compare.divergence``): any is a failure, reported with
where the outputs part. mlx_lm.server reports no acceptance, and the recording, the report
and the summary line say so. No server outlives its run. MLX decodes a few tokens a second on
this CPU: 16 tokens a request, one session of each kind for the whole module.

What cannot work is refused in one line (exit 2) before any server starts; the unit tests at
the top need no model and run in the fast tier.
"""

from __future__ import annotations

import importlib.util
import json
import socket
from pathlib import Path

import psutil
import pytest

from spectui.compare.diff import diff_recordings
from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed, Runtime
from spectui.errors import SpectuiError
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Step
from spectui.runtime.mlx_lm_server import ACCEPTANCE, MlxLaunch, MlxLmServer, MlxMethod, method_of
from spectui.runtime.server import HOST, free_port
from tests.conftest import run_cli

NEEDS_MLX = pytest.mark.skipif(importlib.util.find_spec("mlx_lm") is None, reason="mlx-lm is not installed here")
PROMPT = "Say hi"
COMMON = ("--headless", "--json", "--prompt", PROMPT, "--max-tokens", "16")


# -- no model: the method and the command line --------------------------------------------------


def test_the_command_line_is_mlx_lm_servers_own_flags_on_loopback():
    launch = MlxLaunch(source="t.gguf", model="/m", method=MlxMethod("d.gguf", 4), draft_source="d.gguf", draft_dir="/d")
    argv = MlxLmServer(launch).argv(8123)
    assert argv[argv.index("--model") + 1] == "/m"
    assert argv[argv.index("--draft-model") + 1] == "/d" and argv[argv.index("--num-draft-tokens") + 1] == "4"
    assert argv[-4:] == ["--host", HOST, "--port", "8123"]
    ar = MlxLmServer(MlxLaunch(source="t.gguf", model="/m")).argv(8123)
    assert "--draft-model" not in ar and "--num-draft-tokens" not in ar
    # K not given: mlx_lm.server's own default, and the label says so
    assert "--num-draft-tokens" not in MlxLmServer(MlxLaunch(source="t", model="/m", method=MlxMethod("d"), draft_dir="/d")).argv(1)
    assert MlxMethod("d").describe() == "draft-model (--num-draft-tokens 3, its default)"
    env = MlxLmServer(launch).environment("")
    assert env["HF_HUB_OFFLINE"] == "1" and "HF_HUB_CACHE" in env


@pytest.mark.parametrize("text, kw, says", [
    ("runtime:ngram-mod", {"draft_model": "d"}, "ngram-mod is a llama-server method"),
    ("runtime:draft-simple", {"draft_model": "d"}, "draft-simple is a llama-server method"),
    ("runtime:nope", {}, "unknown mlx_lm.server method 'nope'"),
    ("runtime:draft-model", {}, "draft-model needs a draft model"),
    ("runtime:draft-model", {"draft_model": "d", "p_min": 0.5}, "mlx_lm.server has no p-min"),
    ("runtime:draft-model", {"draft_model": "d", "lookup": 3}, "has no n-gram method"),
])
def test_what_mlx_lm_server_cannot_do_is_one_line(text, kw, says):
    with pytest.raises(SpectuiError, match=says) as err:
        MlxMethod.parse(text, **kw)
    assert "\n" not in str(err.value)


def test_the_llama_server_methods_name_the_runtime_whose_method_draft_model_is():
    from spectui.runtime.methods import RuntimeMethod

    with pytest.raises(SpectuiError, match="draft-model is mlx_lm.server's method"):
        RuntimeMethod.parse("runtime:draft-model")


def test_ar_runs_without_a_draft_and_a_fixed_k_is_passed():
    config = RunConfig(mode="spec", backend=BackendConfig(name="mlx-lm"),
                       draft=DraftConfig(drafter=Runtime(method="draft-model", draft_model="d.gguf"), length=Fixed(k=5)))
    assert method_of(config) == MlxMethod("d.gguf", 5)
    assert method_of(RunConfig(mode="ar", backend=BackendConfig(name="mlx-lm"))) == MlxMethod()
    with pytest.raises(SpectuiError, match="--llama-server names llama-server's binary"):
        BackendConfig(name="mlx-lm", runtime_binary="/x/llama-server").validate()


# -- a real mlx_lm.server ------------------------------------------------------------------------


def mlx_servers(port: int | None = None) -> list[psutil.Process]:
    """mlx_lm.server processes still running (on ``port``, when given)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if p.info["status"] == psutil.STATUS_ZOMBIE or not any("mlx_lm" in c for c in cmd) or "--model" not in cmd:
            continue
        if port is None or cmd[-2:] == ["--port", str(port)]:
            out.append(p)
    return out


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def tokens(events) -> list[int]:
    return [t for e in events if type(e) is Step for t in e.tokens]


@pytest.fixture(scope="module")
def ar_run(tmp_path_factory):
    """The AR reference, through the launcher: its first port is taken, so mlx_lm.server's bind
    fails (its loader thread keeps it alive) and the launcher moves on to a free port."""
    from spectui.runtime.mlx_lm_server import mlx_engine, prepare, say_no_acceptance
    from spectui.runtime.server import start

    config = RunConfig(mode="ar", prompt=PROMPT, max_tokens=16, backend=BackendConfig(name="mlx-lm"))
    launch = prepare(config)
    log = tmp_path_factory.mktemp("mlx-logs") / "ar.log"
    with socket.socket() as busy:
        busy.bind((HOST, 0))
        busy.listen(1)
        picked: list[int] = []

        def pick_port() -> int:
            picked.append(free_port() if picked else busy.getsockname()[1])
            return picked[-1]

        with start(MlxLmServer(launch), log_path=log, pick_port=pick_port) as server:
            events = list(say_no_acceptance(mlx_engine(server, config, launch).run(config)))
            pid = server.pid
        assert len(picked) == 2 and server.port == picked[1], f"the busy port was not retried: {picked}, {server.port}"
    return events, pid, server.port, launch, log


@pytest.fixture(scope="module")
def spec_run(draft_copy, tmp_path_factory):
    out = tmp_path_factory.mktemp("mlx-spec") / "spec.spectui"
    proc = run_cli("run", *COMMON, "--runtime", "mlx-lm", "--draft", "runtime:draft-model", "--draft-model", draft_copy,
                   "--k", "4", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return read_recording(out), json.loads(proc.stdout), proc.stderr, out


@NEEDS_MLX
@pytest.mark.slow
@pytest.mark.server
def test_a_started_mlx_lm_server_is_exact_names_itself_and_stops(ar_run, spec_run, draft_copy):
    ar_events, ar_pid, ar_port, launch, log = ar_run
    spec, printed, stderr, path = spec_run

    end = ar_events[-1]
    assert isinstance(end, End) and end.reason == "length", end.error
    assert "Address already in use" not in log.read_text()  # the retry's log replaced the failed bind's
    assert not alive(ar_pid), "the stopped mlx_lm.server is still running"
    assert "--draft-model" not in ar_events[0].artifacts.server.props["runtime.command_line"]
    # the embedded GGUF, exported once into the user cache as an mlx-lm directory
    assert launch.model != launch.source and (Path(launch.model) / "config.json").is_file()

    # the header: the runtime, mlx-lm's version, the whole command line, no key and why
    s = spec.header.artifacts.server
    import mlx_lm

    assert s.kind == "mlx-lm" and s.version == mlx_lm.__version__
    assert spec.header.artifacts.runtime == {"mlx-lm": mlx_lm.__version__}
    assert s.props["runtime.name"] == "mlx_lm.server" and s.props["runtime.version"] == mlx_lm.__version__
    command = s.props["runtime.command_line"]
    assert "mlx_lm" in command and "--num-draft-tokens 4" in command and f"--host {HOST}" in command
    assert "--draft-model" in command and s.props["runtime.draft_made_from"] == draft_copy
    assert s.props["runtime.auth"].startswith("none: mlx_lm.server takes no API key") and "unauthenticated" in s.props["runtime.auth"]
    assert spec.header.config.label() == "spec mlx-lm draft-model K=4"

    # exact: the same greedy tokens as the same runtime without a draft
    spec_tokens, ar_tokens = tokens(spec.events), tokens(ar_events)
    assert len(ar_tokens) >= 12
    if spec_tokens != ar_tokens:
        diff = diff_recordings_of(ar_events, spec, path)
        div = diff.outputs.first_divergence
        pytest.fail(f"speculative output parts from AR at token {div.index if div else '?'}: {div.cause if div else diff}")

    # no acceptance is invented: the recording, the report and the summary line say so
    spec_end = spec.events[-1]
    assert isinstance(spec_end, End) and spec_end.server is not None
    assert (spec_end.server.drafted, spec_end.server.accepted) == (-1, -1)
    assert spec_end.server.acceptance_source == ACCEPTANCE == end.server.acceptance_source
    assert "acceptance not reported by mlx_lm.server" in stderr
    report = run_cli("report", str(path))
    assert report.returncode == 0 and "acceptance not reported by mlx_lm.server" in report.stdout
    assert printed["summary"]["acceptance_rate"] is None

    # no server outlives its run
    assert not mlx_servers(int(s.url.rsplit(":", 1)[1])) and not mlx_servers(ar_port)


def diff_recordings_of(ar_events, spec, spec_path):
    from spectui.recording.writer import RecordingWriter

    ar_path = Path(spec_path).with_name("ar.spectui")
    with RecordingWriter(ar_path) as w:
        for event in ar_events:
            w.write(event)
    return diff_recordings(read_recording(ar_path), spec)


@pytest.fixture(scope="module")
def other_vocab_dir(tmp_path_factory) -> str:
    """An mlx-lm directory, as far as the check reads one (config.json and the tokenizer),
    whose vocabulary differs from the embedded model's from token id 5 on."""
    from spectui.models.gguf import read_gguf
    from spectui.models.registry import embedded_model_path
    from spectui.models.tokenizer import TextTokenizer

    out = tmp_path_factory.mktemp("vocab") / "other"
    out.mkdir()
    TextTokenizer.from_gguf(read_gguf(embedded_model_path()).metadata).save(str(out))
    tj = json.loads((out / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    tj["model"]["vocab"] = {(text if i < 5 else f"<other {i}>"): i for text, i in vocab.items()}
    tj["model"]["merges"] = []
    (out / "tokenizer.json").write_text(json.dumps(tj))
    (out / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return str(out)


@NEEDS_MLX
@pytest.mark.slow
@pytest.mark.parametrize("args, says", [
    (("--draft", "runtime:ngram-mod"), "ngram-mod is a llama-server method"),
    (("--draft", "runtime:draft-model"), "draft-model needs a draft model"),
    (("--draft", "runtime:draft-model", "--draft-model", "smollm2", "--p-min", "0.5"), "mlx_lm.server has no p-min"),
    (("--draft", "runtime:draft-model", "--draft-model", "OTHER"), "cannot draft for SmolLM2-135M-Instruct.Q4_1.gguf: token id 5"),
], ids=["llama-server-method", "no-draft", "p-min", "other-vocabulary"])
def test_what_cannot_work_is_one_line_before_a_server_starts(other_vocab_dir, tmp_path, args, says):
    before = {p.pid for p in mlx_servers()}
    args = tuple(other_vocab_dir if a == "OTHER" else a for a in args)
    proc = run_cli("run", *COMMON, "--runtime", "mlx-lm", *args, "-o", str(tmp_path / "x.spectui"))
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "x.spectui").exists()
    assert {p.pid for p in mlx_servers()} <= before
