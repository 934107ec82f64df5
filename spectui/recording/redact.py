"""Redacted copies of recordings: a run's timings without its words (``spectui export --redact``).

A recording holds people's text: the prompt, the system prompt, a conversation's earlier
messages, and every generated token as its id and its text piece. A redacted copy keeps every
number (timings, drafts and acceptance, blocks, top-2 margins, memory and host samples, the
model and runtime fingerprints) and replaces every text:

* prompt, system prompt, conversation messages, the tokenized prompt text: ``[redacted: N
  characters, <8 hex>]``. The length of a whole text says nothing of its words; the hex is
  keyed (see below), so it only tells equal texts of one batch apart from different ones.
* token pieces: one ``·`` per token, whatever its length. Per-token lengths are *not* kept:
  with a known tokenizer the sequence of piece lengths narrows a text down. Replay shows one
  dot per token, coloured by origin, at the original pace.
* token ids (prompt, output, runner-up): a stand-in, ``HMAC(key, position, id)`` with a random
  key that is never stored. Within one file every stand-in is different, so there is nothing
  to count or match; the same token at the same position of two files redacted *together*
  (one command, one key: ``Redaction.batch``) gets the same stand-in, so ``diff`` and ``gate``
  still compare such a pair token by token and find the first divergence. Stand-ins are at
  least ``2**31``: never a real token id.
* the quality check of the prompt (it names the keys a JSON answer must have): graded on the
  original output before the text goes, the verdict kept (``Redaction.quality_passed``), the
  check itself replaced by a keyed label so copies redacted together still compare checks.
* a prompt's name stays when it is one of the prompts shipped with spectui *and* the text is
  that prompt's (public either way); any other name becomes a keyed label.
* an error message keeps its exception class; a server's properties keep everything but keys
  that name a prompt.
* the command's settings (``provenance``) keep every number, yes/no and choice of a fixed set
  (``_CHOICES``); every other value, whatever its option, becomes a keyed label (fail closed:
  a new option that takes a path or a name is labelled before anyone reviews it): a prompt's
  name, the prompt, messages and workload files, the ssh host, the telemetry endpoint, the
  output path and folders. The profile's name and the config files' paths become keyed labels
  too, the same label wherever the header repeats the value (a host in ``node`` and in
  ``--host``). A chat's conversation name becomes a label.

What cannot be compared after redaction (``outputs_not_comparable``): a redacted run's output
against an unredacted one, or against one redacted separately. ``spectui diff`` then says so
in one line and compares the rest; the gate fails its outputs check (it did not look).

Headless: the recording package's schema, reader, writer and grading (``output``), and the
shipped prompts (``spectui.prompts``, ``spectui.paths``) to tell which names may stay. Stand-ins
take 5 bytes where a real id takes 1-3, so a copy is a little larger than its original.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

import msgspec

from spectui.config import ChatMessage, RunConfig
from spectui.drafting import Model, Runtime
from spectui.errors import SpectuiError
from spectui.paths import shipped_dir
from spectui.prompts import list_prompts
from spectui.recording.output import grade_recording
from spectui.recording.reader import Recording
from spectui.recording.schema import SCHEMA_VERSION, Artifacts, End, Event, Header, Provenance, Redaction, SettingOrigin, Step
from spectui.recording.writer import RecordingWriter

#: What a token's text becomes: one middle dot per token (two UTF-8 bytes, a whole character).
PLACEHOLDER = "\u00b7"
PLACEHOLDER_PIECE = PLACEHOLDER.encode()
#: Stand-in token ids start here: no vocabulary comes near it, so a stand-in is never a real id.
STAND_IN_BASE = 1 << 31
_STAND_IN_MASK = STAND_IN_BASE - 1
#: The position spaces of stand-ins: prompt tokens and output tokens (runner-ups share the
#: output's, so "each run's token was the other's runner-up" still shows between a pair).
_PROMPT, _OUTPUT = b"p", b"o"
#: The command-line options whose value is a text or names a place, by the kind of label the
#: value becomes. Every other option's value is a number or a choice, or is labelled as any
#: unlisted name is (``Redactor._setting``).
_PROVENANCE_LABELS = {
    "prompt": "text", "system": "text", "prompt-file": "path", "messages": "path", "rerun": "path",
    "out": "path", "output": "path", "record-dir": "path", "otel-file": "path", "otel-endpoint": "endpoint",
    "host": "host", "hosts": "host", "workload": "path", "prompts": "path", "from": "path", "index": "path",
    "csv": "path", "markdown": "path", "charts": "path", "write-quant": "path", "baseline": "path", "candidate": "path",
}  # fmt: skip
#: The options whose value is one of a fixed set spectui defines (argparse ``choices``): kept.
_CHOICES = frozenset({"backend", "chain", "flash-attn", "mode", "runtime", "sampling", "fallback"})
#: A value made only of numbers and yes/no words (``8``, ``0.5``, ``1,2,4``, ``true``): kept.
_NUMBER = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|true|false|none|inf|nan)"
_NUMBERS = re.compile(rf"{_NUMBER}(?:,{_NUMBER})*")


class Redactor:
    """One batch of redacted copies: one random key, never stored, shared by every recording
    redacted through this object (so their outputs still compare with each other)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        #: A public name for the batch (random, unrelated to the key): equal in two headers
        #: means their stand-ins compare.
        self.batch = secrets.token_hex(8)
        self._shipped: dict[str, str] | None = None

    # -- pieces of the work ----------------------------------------------------------------

    def stand_in(self, space: bytes, position: int, token: int) -> int:
        message = b"token\0" + space + position.to_bytes(8, "little") + token.to_bytes(8, "little", signed=True)
        mac = hmac.new(self._key, message, hashlib.sha256)
        return STAND_IN_BASE | (int.from_bytes(mac.digest()[:4], "little") & _STAND_IN_MASK)

    def _mac(self, kind: str, text: str) -> str:
        mac = hmac.new(self._key, b"label\0" + kind.encode() + b"\0" + text.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return mac.hexdigest()[:8]

    def text(self, text: str) -> str:
        """``[redacted: N characters, <8 hex>]``, ``""`` for none: the hex is keyed, so equal
        texts in this batch show as equal and nothing else can be told from it."""
        return f"[redacted: {len(text)} characters, {self._mac('text', text)}]" if text else ""

    def label(self, kind: str, text: str) -> str:
        """``redacted <kind> <8 hex>``: a keyed name for a text, equal across this batch only."""
        return f"redacted {kind} {self._mac(kind, text)}" if text else ""

    def _prompt_name(self, config: RunConfig) -> str:
        if self._shipped is None:  # name -> text of the prompts shipped with spectui
            self._shipped = {p.name: p.text for p in list_prompts(shipped_dir("prompts"))}
        if not config.prompt_name or self._shipped.get(config.prompt_name) == config.prompt:
            return config.prompt_name
        return self.label("prompt", config.prompt_name)

    def config(self, c: RunConfig) -> RunConfig:
        return msgspec.structs.replace(
            self._models(c),
            prompt=self.text(c.prompt),
            system=self.text(c.system),
            history=tuple(ChatMessage(m.role, self.text(m.content)) for m in c.history),
            prompt_name=self._prompt_name(c),
            prompt_check=self.label("check", c.prompt_check),
            conversation=self.label("conversation", c.conversation),
        )

    def model(self, path: str) -> str:
        """A model file's path as a keyed label: a path names a person's folders (their user
        name, a client's project), the shipped model's too (it sits in their environment). What
        the model is stays: its name, type, size and sha256 (``ModelArtifacts``)."""
        return self.label("model", path)

    def _models(self, c: RunConfig) -> RunConfig:
        drafter = c.draft.drafter
        if isinstance(drafter, Model):
            drafter = msgspec.structs.replace(drafter, path=self.model(drafter.path))
        elif isinstance(drafter, Runtime) and drafter.draft_model:
            drafter = msgspec.structs.replace(drafter, draft_model=self.model(drafter.draft_model))
        return msgspec.structs.replace(c, target=self.model(c.target), draft=msgspec.structs.replace(c.draft, drafter=drafter))

    def _artifacts(self, a: Artifacts) -> Artifacts:
        """The model files' paths labelled; a server's own description keeps its numbers, its
        paths (the model path, the command line that names every file) labelled."""
        server = a.server
        if server is not None:
            props = {k: ("[redacted]" if "prompt" in k.lower() else
                         self.label("path", v) if "path" in k.lower() or k.endswith("command_line") else v)
                     for k, v in server.props.items()}
            model_id = self.model(server.model_id) if "/" in server.model_id or "\\" in server.model_id else server.model_id
            server = msgspec.structs.replace(server, props=props, model_id=model_id)
        return msgspec.structs.replace(
            a,
            target=msgspec.structs.replace(a.target, path=self.model(a.target.path)),
            draft=None if a.draft is None else msgspec.structs.replace(a.draft, path=self.model(a.draft.path)),
            head=None if a.head is None else msgspec.structs.replace(a.head, path=self.model(a.head.path)),
            server=server,
        )

    def _host(self, hosts: str) -> str:
        """A host or a comma-separated list of them, each as its keyed label."""
        return ",".join(self.label("host", host) for host in hosts.split(","))

    def _setting(self, s: SettingOrigin, prompt_name: str) -> SettingOrigin:
        kind = _PROVENANCE_LABELS.get(s.option)
        if s.option == "prompt-name":
            value = prompt_name  # the config's name as redacted: shipped stays, any other goes
        elif kind == "host":
            value = self._host(s.value)
        elif kind is not None:
            value = self.label(kind, s.value)
        elif s.option in _CHOICES or _NUMBERS.fullmatch(s.value.strip().lower()):
            value = s.value
        else:  # a name or a path no one listed: labelled, never kept by default
            value = self.label("value", s.value)
        path, colon, line = s.origin.rpartition(":")  # "PATH:LINE" of a config file
        origin = f"{self.label('config', path)}:{line}" if colon and line.isdigit() and path else s.origin
        return SettingOrigin(option=s.option, value=value, origin=origin)

    def provenance(self, p: Provenance, config: RunConfig) -> Provenance:
        """The command's settings with their texts and places redacted."""
        name = self._prompt_name(config) if config.prompt_name else ""
        named = [s.value for s in p.settings if s.option == "prompt-name"]
        if named and named[0] != config.prompt_name:  # not the config's name: judged on its own
            name = self.label("prompt", named[0])
        return msgspec.structs.replace(
            p, profile=self.label("profile", p.profile), settings=[self._setting(s, name) for s in p.settings]
        )

    def header(self, h: Header, *, quality_passed: bool | None) -> Header:
        return msgspec.structs.replace(
            h,
            schema_version=SCHEMA_VERSION,  # the copy holds a field of this version (redaction)
            config=self.config(h.config),
            artifacts=self._artifacts(h.artifacts),
            prompt_text=self.text(h.prompt_text),
            prompt_tokens=[self.stand_in(_PROMPT, i, t) for i, t in enumerate(h.prompt_tokens)],
            node=self._host(h.node) if h.node else "",
            provenance=self.provenance(h.provenance, h.config) if h.provenance is not None else None,
            redaction=Redaction(
                batch=self.batch,
                redacted_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                quality_passed=quality_passed,
            ),
        )

    # -- a whole recording -----------------------------------------------------------------

    def events(self, events: Iterable[Event], *, quality_passed: bool | None = None) -> list[Event]:
        """The redacted copy of one session's events (``Header`` first)."""
        out: list[Event] = []
        position = 0  # output position of the next token: stand-ins are keyed by it
        for ev in events:
            if type(ev) is Header:
                if ev.redaction is not None:
                    raise SpectuiError("the recording is a redacted copy already")
                out.append(self.header(ev, quality_passed=quality_passed))
            elif type(ev) is Step:
                n = len(ev.tokens)
                positions = range(position, position + n)
                runners = ev.runner_up
                out.append(
                    msgspec.structs.replace(
                        ev,
                        tokens=[self.stand_in(_OUTPUT, p, t) for p, t in zip(positions, ev.tokens)],
                        pieces=[PLACEHOLDER_PIECE] * len(ev.pieces),
                        runner_up=None if runners is None else [self.stand_in(_OUTPUT, p, t) for p, t in zip(positions, runners)],
                    )
                )
                position += n
            elif type(ev) is End and ev.error:
                cls, sep, message = ev.error.partition(":")
                error = f"{cls}: {self.text(message.strip())}" if sep else self.text(ev.error)
                out.append(msgspec.structs.replace(ev, error=error))
            else:
                out.append(ev)  # prefill, memory, policy changes, an end: numbers and spectui's words
        return out

    def recording(self, rec: Recording) -> list[Event]:
        """``rec``'s events redacted, its quality check graded on the original text first."""
        if rec.header.redaction is not None:
            raise SpectuiError(f"{rec.path} is a redacted copy already")
        graded = grade_recording(rec)
        return self.events(rec.events, quality_passed=None if graded is None else graded.passed)


def outputs_not_comparable(baseline: Header, candidate: Header) -> str:
    """Why two runs' outputs cannot be compared token by token because of redaction, in one
    line; ``""`` when they can (neither is redacted, or both were redacted together)."""
    b, c = baseline.redaction, candidate.redaction
    if b is None and c is None:
        return ""
    if b is not None and c is not None:
        if b.batch != c.batch:
            return (
                "outputs not compared: the two recordings were redacted separately, so their token stand-ins do not match"
                " (redact both in one spectui export --redact to compare them)"
            )
        if baseline.artifacts.server is not None or candidate.artifacts.server is not None:
            return "outputs not compared: a redacted server recording has no text left to align"
        return ""
    side = "baseline" if b is not None else "candidate"
    return f"outputs not compared: the {side} is redacted (its text and token ids are gone), the other is not"


def write_copy(events: Iterable[Event], path: Path) -> int:
    """Write ``events`` as a new recording at ``path`` (never over an existing one); its size.
    A copy that fails half-way is removed: a partial copy would read as a torn recording."""
    writer = RecordingWriter(path)
    try:
        with writer:
            for ev in events:
                writer.write(ev)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return writer.size


def redact_recording(rec: Recording, redactor: Redactor | None = None) -> Recording:
    """``rec`` redacted, in memory (``spectui report --redact``)."""
    events = (redactor or Redactor()).recording(rec)
    header = events[0]
    assert type(header) is Header
    return Recording(header, events, rec.truncated, rec.truncated_at, rec.complete, rec.path)
