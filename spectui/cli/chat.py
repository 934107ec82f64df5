"""``spectui chat``: a conversation over several turns, headless.

The user's messages come from stdin (a line each; typed at a terminal, or piped) or from an
OpenAI messages file (``--messages FILE.json``). Each user message without a reply in the file
is one turn: the model answers it through its chat template with the whole conversation so
far, keeping the KV cache's shared prefix (only the new tokens are evaluated), and the turn is
recorded as ``turn-NN_<mode>.spectui`` in the conversation's folder. Replies go to stdout, a
line of figures per turn to stderr; ``--json`` prints one JSON object per turn instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.cli.host_flag import add_host_argument
from spectui.cli.parsing import add_old_spelling
from spectui.cli.run import end_output, engine_failed
from spectui.cli.run_flags import add_run_arguments, config_from_args, gave_prompt
from spectui.cli.signals import StopOnSignal
from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import RunConfig
    from spectui.metrics.stats import Summary
    from spectui.sessions.conversation import Conversation


def register(sub: argparse._SubParsersAction) -> None:
    chat = sub.add_parser("chat", help="a conversation over several turns: stdin lines or an OpenAI messages file")
    chat.add_argument("--messages", metavar="FILE", default=None,
                      help="an OpenAI messages JSON file (a list, or {\"messages\": [...]}): every user message without a reply is a turn")
    chat.add_argument("--json", action="store_true", help="one JSON object per turn on stdout (reply, tokens, figures)")
    chat.add_argument("--rerun", metavar="DIR", default=None,
                      help="re-run every turn of the conversation recorded in DIR with its messages, in --mode"
                      " (default: the other mode: its AR baseline), recorded beside it")
    rec = chat.add_mutually_exclusive_group()
    rec.add_argument("--out", metavar="DIR", default=None, help="the conversation's folder (default: recordings/chat-<time>/)")
    add_old_spelling(chat, "--record-dir", "out", metavar="DIR")  # outside the group: argparse cannot list a hidden member
    rec.add_argument("--no-record", action="store_true", help="do not record the turns")
    add_run_arguments(chat)
    add_host_argument(chat)
    chat.set_defaults(func=cmd_chat)


def read_messages(path: str) -> tuple[str, list[tuple[str, str | None]]]:
    """(system prompt, [(user message, its given reply or None)]) from an OpenAI messages file."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpectuiError(f"--messages {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpectuiError(f"--messages {path}: not JSON ({exc})") from None
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list) or not messages:
        raise SpectuiError(f"--messages {path}: expected a list of messages (or {{\"messages\": [...]}})")
    system: list[str] = []
    turns: list[tuple[str, str | None]] = []
    for i, m in enumerate(messages, 1):
        role, content = (m.get("role"), _content(m.get("content"))) if isinstance(m, dict) else (None, None)
        if content is None or role not in ("system", "developer", "user", "assistant"):
            raise SpectuiError(f"--messages {path}: message {i} needs a role (system, user, assistant) and text content")
        if role in ("system", "developer"):
            if turns:
                raise SpectuiError(f"--messages {path}: message {i}: a system message after the conversation began")
            system.append(content)
        elif role == "user":
            if turns and turns[-1][1] is None:
                raise SpectuiError(f"--messages {path}: message {i}: two user messages in a row (merge them, or reply between)")
            turns.append((content, None))
        else:
            if not turns or turns[-1][1] is not None:
                raise SpectuiError(f"--messages {path}: message {i}: an assistant message that answers no user message")
            turns[-1] = (turns[-1][0], content)
    if all(reply is not None for _, reply in turns):
        raise SpectuiError(f"--messages {path}: nothing to answer: every user message has its reply")
    return "\n\n".join(system), turns


def _content(value: object) -> str | None:
    """A message's text: a string, or OpenAI's list of parts (text parts joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in value):
        return "".join(str(p.get("text", "")) for p in value)
    return None


def _stdin_turns(first: str | None) -> Iterator[tuple[str, str | None]]:
    """The user's messages: ``first`` (--prompt), then a line each from stdin until EOF."""
    if first is not None:
        yield first, None
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            print("you> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            return
        text = line.rstrip("\n")
        if text.strip():
            yield text, None


def cmd_chat(args: argparse.Namespace) -> int:
    """Exit 0 when every turn ran (or a signal stopped it), 1 when the engine failed."""
    from spectui.sessions.conversation import Conversation

    if (args.messages is not None or args.rerun is not None) and gave_prompt(args):
        raise SpectuiError("--messages and --rerun hold the conversation: leave out --prompt/--prompt-file/--prompt-name")
    if args.messages is not None and args.rerun is not None:
        raise SpectuiError("--messages or --rerun, not both")
    base = config_from_args(args)  # validated here: bad flags are refused before a model loads
    if args.rerun is not None:
        return _rerun(args)
    system, given = read_messages(args.messages) if args.messages is not None else (args.system, None)
    first = base.prompt if gave_prompt(args) else None
    folder = Path(args.out) if args.out else None
    conv = Conversation.start(system=system or base.system, record=not args.no_record, folder=folder)
    turns = iter(given) if given is not None else _stdin_turns(first)
    to_run = (conv.next_config(base, user) if reply is None else (conv.next_config(base, user), reply) for user, reply in turns)
    return _converse(args, base, conv, to_run)


def _rerun(args: argparse.Namespace) -> int:
    from spectui.sessions.conversation import Conversation

    original = Conversation.open(args.rerun)
    configs = original.rerun(mode=args.mode)
    # the re-runs are a conversation of their own, recorded beside the original's turns
    conv = Conversation(system=original.system, folder=None if args.no_record else original.folder, id=configs[0].conversation)
    return _converse(args, configs[0], conv, iter(configs))


def _converse(args: argparse.Namespace, base: RunConfig, conv: Conversation, turns: Iterator) -> int:
    """Run each turn ``turns`` yields (a config, or a (config, given reply) pair to keep as is)."""
    import msgspec

    from spectui.metrics.stats import summarize
    from spectui.recording.output import OutputText
    from spectui.recording.schema import Step
    from spectui.sessions.open import open_engine
    from spectui.sessions.record import record_session

    out = sys.stdout
    failed = False
    with open_engine(base, host=args.host) as engine, StopOnSignal() as stop:
        for item in turns:
            if isinstance(item, tuple):  # a turn given in the file: history, not generated
                conv.add(*item, given=True)
                continue
            config = item
            engine.check(config)  # a conversation grown past the context: refused in one line
            record_to = conv.record_path if conv.folder is not None else None
            recorded: list[Path | None] = []
            events, tokens, text = [], [], OutputText()
            for ev in record_session(engine, config, record_to, stop=stop, on_start=recorded.append):
                events.append(ev)
                if type(ev) is Step:
                    tokens.extend(ev.tokens)
                chunk = text.feed(ev)
                if chunk and not args.json:
                    out.write(chunk)
                    out.flush()
            path = recorded[0] if recorded else None
            turn = conv.add(config, events, path)
            summary = summarize(events)
            doc = {
                "conversation": conv.id,
                "turn": config.turn,
                "user": config.prompt,
                "reply": turn.reply if turn is not None else None,
                "tokens": tokens,
                "summary": msgspec.to_builtins(summary),
                "recording": str(path) if path is not None else None,
            }
            end_output(out, doc if args.json else None)
            print(turn_line(config, summary), file=sys.stderr)
            if engine_failed(events):
                failed = True
                break
            if stop.is_set():
                break
    if conv.folder is not None and conv.folder.exists():
        print(f"spectui: conversation recorded in {conv.folder} ({len(conv.turns)} turns)", file=sys.stderr)
    return 1 if failed else 0


def turn_line(config: RunConfig, s: Summary) -> str:
    """One turn's figures: what the prefill evaluated (and kept from the cache), speed, acceptance."""
    from spectui.format import num_or_na as f

    evaluated = s.n_prompt_tokens - s.n_cached_tokens
    line = (
        f"spectui: turn {config.turn}: {s.n_tokens} tokens ({s.finish_reason})"
        f" | prefill {evaluated} of {s.n_prompt_tokens} prompt tokens ({s.n_cached_tokens} kept) in {f(s.prefill_ms)} ms"
        f" | TTFT {f(s.ttft_ms)} ms | decode {f(s.decode_tok_s)} tok/s"
    )
    if config.mode == "spec" and config.backend.name != "server":
        line += f" | acceptance {f(s.acceptance_rate, '.3f')} ({s.accepted}/{s.drafted})"
    return line
