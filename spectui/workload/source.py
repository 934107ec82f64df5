"""Reading a workload: the requests a person's own traffic is made of, in the order sent.

Three forms, told apart by what the path is:

* a **JSONL file** of OpenAI chat or completions requests, one a line: ``messages`` (chat) or
  ``prompt`` (completions), ``max_tokens`` (or ``max_completion_tokens``), the sampling fields
  (``temperature``, ``top_p``, ``top_k``, ``seed``); a line of the OpenAI batch form
  (``{"custom_id": ..., "body": {...}}``) is read from its ``body``. Other fields (``model``,
  ``stream``, ...) are ignored. A ``conversation`` id ties lines into one conversation: its turns
  are sent in file order by one client, each after the one before has ended, and each later
  turn must extend the earlier turn's messages (a follow-up carries its history), which is how
  a conversation out of order is caught;
* a **folder** of prompt files (``*.txt``, the format of ``prompts/``) and/or spectui
  recordings (``*.spectui``), each one request, in name order;
* a **recording** (``*.spectui``): its prompt and settings as one request.

Bytes from a file are bounded before they are believed: the file's size, a line's length, the
number of requests and messages, a request's text, ``max_tokens``. What is refused is one line
naming ``FILE:LINE`` (``SpectuiError``), and it is refused before anything starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import msgspec

from spectui.config import ChatMessage, SamplingConfig
from spectui.errors import SpectuiError
from spectui.prompts import parse_prompt

#: What one workload may hold: far past any replay a person runs on one machine, well short of
#: what would exhaust memory before the first request
MAX_FILE_BYTES = 64 << 20
MAX_LINE_BYTES = 4 << 20
MAX_REQUESTS = 10_000
MAX_MESSAGES = 1_000
MAX_REQUEST_CHARS = 1 << 20
MAX_TOKENS_CAP = 32_768
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class WorkRequest:
    """One request of a workload, as it will be sent."""

    index: int  # its position in the workload, from 0
    where: str  # FILE:LINE, or the file it came from
    prompt: str  # the last user message (chat), or the whole prompt (completions)
    chat: bool = True
    system: str = ""
    history: tuple[ChatMessage, ...] = ()  # the messages before the last one
    max_tokens: int = 128
    sampling: SamplingConfig | None = None  # None: the request names no sampling field
    conversation: str = ""  # "" = a request on its own
    turn: int = 0  # its turn in the conversation, from 0

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        return self.history + (ChatMessage("user", self.prompt),)


@dataclass(frozen=True)
class Workload:
    name: str
    path: str
    requests: tuple[WorkRequest, ...]

    def units(self) -> list[tuple[WorkRequest, ...]]:
        """What one client takes at a time: a conversation (its turns in order) or one request,
        in the order each first appears in the workload."""
        out: list[list[WorkRequest]] = []
        by_conversation: dict[str, list[WorkRequest]] = {}
        for r in self.requests:
            if not r.conversation:
                out.append([r])
            elif r.conversation in by_conversation:
                by_conversation[r.conversation].append(r)
            else:
                by_conversation[r.conversation] = [r]
                out.append(by_conversation[r.conversation])
        return [tuple(u) for u in out]


class _Message(msgspec.Struct):
    role: str
    content: str | list[dict[str, object]] | None = None


class _Request(msgspec.Struct):
    messages: list[_Message] | None = None
    prompt: str | list[str] | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    conversation: str | int | None = None
    turn: int | None = None


class _Line(_Request):
    body: _Request | None = None  # the OpenAI batch form


def read_workload(path: str | os.PathLike[str], *, default_max_tokens: int = 128) -> Workload:
    """The workload at ``path`` (see the module doc); one line and no request on bad input."""
    p = Path(path)
    if p.is_dir():
        requests = list(_folder(p, default_max_tokens))
    elif not p.exists():
        raise SpectuiError(f"workload {p}: no such file or folder")
    elif p.suffix == ".spectui":
        requests = [_from_recording(p, 0)]
    else:
        requests = list(_jsonl(p, default_max_tokens))
    if not requests:
        raise SpectuiError(f"workload {p}: no requests in it")
    _check_conversations(requests)
    return Workload(name=p.stem if p.is_file() else p.name, path=str(p), requests=tuple(requests))


def _read_bytes(p: Path) -> bytes:
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SpectuiError(f"workload {p}: {size} bytes, more than the {MAX_FILE_BYTES >> 20} MiB a workload may be")
        with open(p, "rb") as f:
            return f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpectuiError(f"workload {p}: cannot read it ({exc.strerror or exc})") from None


def _jsonl(p: Path, default_max_tokens: int) -> Iterator[WorkRequest]:
    data = _read_bytes(p)
    n = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{p}:{number}"
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            raise SpectuiError(f"{where}: a line of {len(raw)} bytes, more than {MAX_LINE_BYTES >> 20} MiB")
        try:
            line = msgspec.json.decode(raw, type=_Line)
        except msgspec.ValidationError as exc:
            raise SpectuiError(f"{where}: not a chat or completions request ({exc})") from None
        except msgspec.DecodeError as exc:
            raise SpectuiError(f"{where}: not JSON ({exc})") from None
        except RecursionError:
            raise SpectuiError(f"{where}: JSON nested too deeply") from None
        if n >= MAX_REQUESTS:
            raise SpectuiError(f"{where}: more than {MAX_REQUESTS} requests in one workload")
        yield _request(line.body if line.body is not None else line, n, where, default_max_tokens, line)
        n += 1


def _text(content: str | list[dict[str, object]] | None, where: str) -> str:
    """A message's text: a string, or the ``text`` parts of OpenAI's content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise SpectuiError(f"{where}: a message part of type {str(part.get('type'))[:40]!r}: only text is sent")
        parts.append(str(part["text"]))
    return "".join(parts)


def _request(req: _Request, index: int, where: str, default_max_tokens: int, outer: _Request) -> WorkRequest:
    max_tokens = req.max_tokens if req.max_tokens is not None else req.max_completion_tokens
    max_tokens = default_max_tokens if max_tokens is None else max_tokens
    if not 1 <= max_tokens <= MAX_TOKENS_CAP:
        raise SpectuiError(f"{where}: max_tokens {max_tokens}: a request must ask for 1 to {MAX_TOKENS_CAP} tokens")
    sampling = _sampling(req, where)
    conv = outer.conversation if outer.conversation is not None else req.conversation
    conversation = "" if conv is None else str(conv)
    turn = outer.turn if outer.turn is not None else req.turn
    common = WorkRequest(index=index, where=where, prompt="", max_tokens=max_tokens, sampling=sampling, conversation=conversation,
                         turn=-1 if turn is None else turn)
    if (req.messages is None) == (req.prompt is None):
        raise SpectuiError(f"{where}: a request needs either messages (chat) or prompt (completions)")
    if req.prompt is not None:
        if isinstance(req.prompt, list):
            if len(req.prompt) != 1:
                raise SpectuiError(f"{where}: a prompt list of {len(req.prompt)}: one prompt a request")
            text = req.prompt[0]
        else:
            text = req.prompt
        _check_size(text, where)
        if not text.strip():
            raise SpectuiError(f"{where}: an empty prompt")
        return replace(common, prompt=text, chat=False)
    assert req.messages is not None
    if not req.messages or len(req.messages) > MAX_MESSAGES:
        raise SpectuiError(f"{where}: {len(req.messages)} messages: a request holds 1 to {MAX_MESSAGES}")
    said: list[tuple[str, str]] = []
    for m in req.messages:
        if m.role not in ROLES:
            raise SpectuiError(f"{where}: a message of role {m.role[:40]!r} (sent: {', '.join(ROLES)})")
        said.append((m.role, _text(m.content, where)))
    _check_size("".join(text for _, text in said), where)
    system = ""
    if said[0][0] == "system":
        system, said = said[0][1], said[1:]
    if not said or said[-1][0] != "user":
        raise SpectuiError(f"{where}: the last message must be the user's (what the model answers)")
    if any(role == "system" for role, _ in said):
        raise SpectuiError(f"{where}: a system message after the first")
    history = tuple(ChatMessage("user" if role == "user" else "assistant", text) for role, text in said[:-1])
    return replace(common, prompt=said[-1][1], system=system, history=history)


def _check_size(text: str, where: str) -> None:
    if len(text) > MAX_REQUEST_CHARS:
        raise SpectuiError(f"{where}: {len(text)} characters of text, more than {MAX_REQUEST_CHARS} in one request")


def _sampling(req: _Request, where: str) -> SamplingConfig | None:
    if all(v is None for v in (req.temperature, req.top_p, req.top_k, req.seed)):
        return None
    temperature = 1.0 if req.temperature is None else req.temperature  # OpenAI's default
    top_p = 1.0 if req.top_p is None else req.top_p
    if not (math.isfinite(temperature) and 0 <= temperature <= 100) or not (math.isfinite(top_p) and 0 < top_p <= 1):
        raise SpectuiError(f"{where}: temperature {temperature} / top_p {top_p} out of range")
    if req.top_k is not None and req.top_k < 0:
        raise SpectuiError(f"{where}: top_k {req.top_k} is negative")
    return SamplingConfig(temperature=temperature, top_p=top_p, top_k=req.top_k or 0, seed=req.seed or 0)


def _folder(p: Path, default_max_tokens: int) -> Iterator[WorkRequest]:
    try:
        files = sorted(f for f in p.iterdir() if f.suffix in (".txt", ".spectui") and f.is_file())
    except OSError as exc:
        raise SpectuiError(f"workload {p}: cannot list it ({exc.strerror or exc})") from None
    if len(files) > MAX_REQUESTS:
        raise SpectuiError(f"workload {p}: {len(files)} files, more than {MAX_REQUESTS} requests in one workload")
    for i, f in enumerate(files):
        if f.suffix == ".spectui":
            yield _from_recording(f, i)
            continue
        data = _read_bytes(f)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SpectuiError(f"{f}: not UTF-8 text") from None
        spec = parse_prompt(text, f.stem, str(f))
        _check_size(spec.text, str(f))
        max_tokens = spec.max_tokens if "max_tokens" in text.split("\n\n", 1)[0] else default_max_tokens
        if not 1 <= max_tokens <= MAX_TOKENS_CAP:
            raise SpectuiError(f"{f}: max_tokens {max_tokens}: a request must ask for 1 to {MAX_TOKENS_CAP} tokens")
        yield WorkRequest(index=i, where=str(f), prompt=spec.text, max_tokens=max_tokens)


def _from_recording(p: Path, index: int) -> WorkRequest:
    from spectui.recording.reader import read_header

    try:
        header = read_header(p)
    except SpectuiError as exc:
        raise SpectuiError(f"workload {p}: {exc}") from None
    c = header.config
    if not c.prompt.strip():
        raise SpectuiError(f"workload {p}: the recording keeps no prompt (a redacted copy?)")
    return WorkRequest(index=index, where=str(p), prompt=c.prompt, chat=c.chat, system=c.system, history=c.history,
                       max_tokens=c.max_tokens, sampling=c.sampling, conversation=c.conversation)


def _check_conversations(requests: list[WorkRequest]) -> None:
    """Each conversation's turns in order: a later turn extends the earlier one's messages, and
    explicit ``turn`` numbers rise. Numbers each request's turn from 0."""
    last: dict[str, WorkRequest] = {}
    numbered: dict[str, int] = {}  # the last explicit turn number seen per conversation
    for i, r in enumerate(requests):
        if not r.conversation:
            continue
        before = last.get(r.conversation)
        if r.turn >= 0:
            if r.conversation in numbered and r.turn <= numbered[r.conversation]:
                raise SpectuiError(f"{r.where}: conversation {r.conversation!r} out of order: turn {r.turn} "
                                   f"after turn {numbered[r.conversation]}")
            numbered[r.conversation] = r.turn
        if before is not None:
            if r.chat != before.chat:
                raise SpectuiError(f"{r.where}: conversation {r.conversation!r} mixes chat and completions requests")
            if r.chat and (r.history[: len(before.messages)] != before.messages or r.system != before.system):
                raise SpectuiError(f"{r.where}: conversation {r.conversation!r} out of order: this turn does not carry "
                                   f"the messages of the turn before it ({before.where})")
        requests[i] = replace(r, turn=0 if before is None else before.turn + 1)
        last[r.conversation] = requests[i]
    for i, r in enumerate(requests):
        if not r.conversation and r.turn:
            requests[i] = replace(r, turn=0)
