"""The launcher's command line and its reading of a failed server's log (no server starts here;
test_server.py starts real ones)."""

from __future__ import annotations

from spectui.runtime.llama_server import LaunchSettings
from spectui.runtime.logs import last_log_line
from spectui.runtime.methods import RuntimeMethod


def test_the_command_line_has_metrics_no_slots_no_webui_loopback_and_no_key():
    args = LaunchSettings(model="m.gguf", method=RuntimeMethod.parse("ngram-mod", k=8), threads=3, ctx=2048).args(4567)
    joined = " ".join(args)
    for part in ("-m m.gguf", "-c 2048", "-t 3", "-tb 3", "-np 1", "--metrics", "--no-slots", "--no-webui",
                 "--host 127.0.0.1", "--port 4567", "--spec-type ngram-mod", "--spec-ngram-mod-n-max 8"):
        assert part in joined
    assert "--api-key" not in joined  # the key travels in the environment, never on argv
    assert args[-4:] == ["--host", "127.0.0.1", "--port", "4567"]  # last: nothing after them moves the server
    assert "-td" not in args  # no draft model, no draft threads


def test_a_draft_model_gets_the_same_threads_and_threads_default_to_the_usable_cores():
    args = LaunchSettings(model="m.gguf", method=RuntimeMethod.parse("draft-simple", draft_model="d.gguf")).args(1)
    assert args[args.index("-td") + 1] == args[args.index("-t") + 1] == args[args.index("-tbd") + 1]
    assert int(args[args.index("-t") + 1]) >= 1
    assert args[args.index("-md") + 1] == "d.gguf"


def test_the_last_telling_log_line_names_the_failure(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(
        "main: loading model\n"
        "llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not within the file bounds\n"
        "llama_model_load_from_file_impl: failed to load model\n"
        "srv    load_model: failed to load model, 'bad.gguf'\n"
        "srv    operator(): cleaning up before exit...\n"
        "main: exiting due to model loading error\n"
    )
    # the line with the cause, not the "failed to load" lines after it nor the generic exit
    assert last_log_line(log).startswith("llama_model_load: error loading model: tensor 'blk.0.attn_q.weight'")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert last_log_line(empty) == "(the log is empty)"
