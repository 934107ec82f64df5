"""``spectui chat`` headless: stdin lines, an OpenAI messages file, --json, --rerun, bad input."""

from __future__ import annotations

import json

from spectui.recording.reader import read_recording
from spectui.recording.schema import Prefill
from spectui.sessions.conversation import Conversation, rerun_paths, turn_paths
from tests.conftest import run_cli

FAST = ("--threads", "1", "--max-tokens", "24")


def test_stdin_lines_are_turns_recorded_in_one_folder(tmp_path):
    folder = tmp_path / "chat"
    proc = run_cli("chat", *FAST, "--record-dir", str(folder), stdin="Name a colour.\n\nName another one.\n")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("spectui: turn ")]
    assert [line.split(":")[1] for line in lines] == [" turn 1", " turn 2"]  # the blank line is no turn
    assert "prefill" in lines[1] and "kept" in lines[1]
    conv = Conversation.open(folder)
    assert [t.config.prompt for t in conv.turns] == ["Name a colour.", "Name another one."]
    assert all(t.reply and t.reply in proc.stdout for t in conv.turns)
    second = read_recording(conv.turns[1].path)
    assert next(e for e in second.events if type(e) is Prefill).n_cached > 0
    report = run_cli("report", str(conv.turns[1].path))
    assert report.returncode == 0 and "turn 2" in report.stdout and "kept in the cache" in report.stdout


def test_a_messages_file_keeps_given_replies_and_answers_the_rest_as_json(tmp_path):
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps({"messages": [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Name a fruit."},
        {"role": "assistant", "content": "Apple."},
        {"role": "user", "content": [{"type": "text", "text": "Name a vegetable."}]},
    ]}))
    folder = tmp_path / "chat"
    proc = run_cli("chat", *FAST, "--json", "--messages", str(messages), "--record-dir", str(folder))
    assert proc.returncode == 0, proc.stderr
    (doc,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert doc["turn"] == 2 and doc["user"] == "Name a vegetable." and doc["reply"]
    header = read_recording(doc["recording"]).header
    assert header.config.system == "You answer in one word."
    assert [(m.role, m.content) for m in header.config.history] == [("user", "Name a fruit."), ("assistant", "Apple.")]
    assert "Apple." in header.prompt_text and "You answer in one word." in header.prompt_text
    opened = Conversation.open(folder)  # the given turn has no recording
    assert opened.turns[0].reply == "Apple." and opened.turns[0].given and opened.turns[0].path is None

    # the AR baseline of the conversation: every generated turn again, with the same messages
    rerun = run_cli("chat", "--rerun", str(folder), "--threads", "1", "--json")
    assert rerun.returncode == 0, rerun.stderr
    (again,) = [json.loads(line) for line in rerun.stdout.splitlines()]
    assert again["turn"] == 2 and read_recording(again["recording"]).header.config.mode == "ar"
    assert [str(p) for p in rerun_paths(folder)] == [again["recording"]]  # the given turn is not re-run
    assert turn_paths(folder) == [opened.turns[1].path]


def test_bad_input_is_one_line(tmp_path):
    cases = {
        "not json": "--messages {f} : not JSON",
        '[{"role": "user"}]': "needs a role",
        '[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]': "nothing to answer",
        '[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]': "two user messages in a row",
    }
    for i, (text, expected) in enumerate(cases.items()):
        f = tmp_path / f"m{i}.json"
        f.write_text(text)
        proc = run_cli("chat", "--messages", str(f))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert expected.split(" : ")[-1] in proc.stderr, proc.stderr
    missing = run_cli("chat", "--rerun", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "not a folder" in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no conversation recorded there" in run_cli("chat", "--rerun", str(empty)).stderr


def test_replay_takes_a_conversation_folder_and_refuses_other_folders(tmp_path):
    not_chat = tmp_path / "plain"
    not_chat.mkdir()
    proc = run_cli("replay", str(not_chat))
    assert proc.returncode == 2 and "no conversation recorded there" in proc.stderr and proc.stderr.count("\n") == 1
