"""Top-2 log-probabilities from a server: what to ask each kind for, how to read what it
streams back, and the margin and runner-up they give for each token. No I/O.

Why: a greedy embedded run records, per token, the target's best logit minus its second best
(``Step.margins_milli``) so a divergence from another run can be judged a numerical near-tie or
a real change (``spectui.compare.divergence``). For a log-softmax over the model's unscaled
logits, ``logprob_1 - logprob_2`` *is* that logit difference (the normaliser cancels), so a
server that reports the model's own log-probabilities gives the same number.

What the servers do, read in their sources and checked against running servers on SmolLM2-135M
(llama-server built from the llama.cpp that llama-cpp-python 0.3.36 vendors):

* llama-server (``tools/server``): ``n_probs`` on either endpoint; chat's ``logprobs: true`` +
  ``top_logprobs: N`` becomes ``n_probs = N`` (``server-common.cpp``), completions' integer
  ``logprobs`` does too when ``n_probs`` is absent (``server-task.cpp``). Without
  ``post_sampling_probs`` the values are ``log(softmax(raw logits))`` in float32
  (``get_token_probabilities``: before temperature), with ids, and ``p == 0`` written as the
  lowest float (JSON has no -inf). Each chunk carries ``logprobs.content[]`` for its token on
  both endpoints: the entry's ``token``/``bytes`` are the chunk's text, each alternative's
  ``bytes`` that token's own piece. Measured: margins and runner-ups equal the embedded
  engine's to the thousandth; decoding 0-6% slower (7.4 -> 7.8 ms a token at most). Gaps: a token that
  ends inside a UTF-8 character sends no chunk (the completing token's chunk carries the whole
  character and one entry), and tokens from a speculative draft block carry none ("TODO: set
  result.probs" in ``server-context.cpp``; measured: 1 of 19 tokens with a draft model).
  ``post_sampling_probs`` would give ``prob: 1.0`` and one alternative at temperature 0: useless,
  never asked.
* llama-cpp-python (``llama.py``): ``log_softmax`` of the raw logits row, keyed by token
  *text* (no ids); chat ``content[]``, completions ``top_logprobs: [{text: logprob}]`` plus
  the chosen token's text. Margins equal the embedded engine's, but the cost is high: a Python
  sort of the whole vocabulary per token (decoding 3.2-3.8x slower, measured), and the
  log-probability stream decodes each token alone with ``errors="ignore"``, so a character split
  across tokens vanishes from the streamed text (an emoji prompt streamed ", , , ," where it
  streams "🍕, 🌮, ..." otherwise). So it is not asked unless the caller insists
  (``ServerEngine(logprobs="always")``).
* mlx-lm 0.32 (``server.py``): validates ``logprobs`` as a bool and ``top_logprobs`` <= 11 on
  both endpoints (an integer ``logprobs`` is an HTTP 400, "logprobs must be of type bool"), but
  writes log-probabilities only into non-streamed answers: a streamed session gets none. Asked anyway (an argpartition per
  token), so a version that streams them is read without a change here.
* OpenAI-style servers (unidentified): chat ``logprobs: true, top_logprobs: 2``; legacy
  completions integer ``logprobs: 2``.

A margin is recorded only when it can be trusted: the chosen token must be found among the
alternatives and be the most probable of them (a greedy pick from these very numbers), and the
runner-up's log-probability must be finite and above llama-server's "p = 0" stand-in (so
post-sampling values at temperature 0, 1.0 and 0.0, give none rather than a huge margin).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

#: How many alternatives are asked for: the best and the runner-up.
TOP_N = 2
#: At or below this a log-probability stands for p = 0 (llama-server writes the lowest float
#: because JSON has no -inf): no margin can be taken against it.
ZERO_PROB = -1e30
#: The chosen token may trail the best alternative by float noise only (servers print floats
#: from float32 values); more means it was not a greedy pick from these numbers.
GREEDY_SLACK = 1e-5

#: "auto": ask where it is cheap and harmless (everything but llama-cpp-python); "always":
#: ask every greedy session; "never": ask nothing.
Policy = Literal["auto", "always", "never"]

# spectui.server.probe's kind names (imported, they would make a cycle: probe -> wire -> here)
_LLAMA_SERVER, _LLAMA_CPP_PYTHON, _MLX_LM = "llama-server", "llama-cpp-python", "mlx-lm"
LLAMA_CPP_PYTHON_COST = (
    "not asked: llama-cpp-python computes log-probabilities with a Python sort of the whole vocabulary"
    " per token (decoding measured 3.2-3.8x slower) and its log-probability stream drops characters"
    " split across tokens"
)
LOGPROB_FIELDS = ("logprobs", "top_logprobs", "n_probs")


@dataclass(frozen=True)
class Alternative:
    """One of the top tokens a server listed at a position."""

    logprob: float
    id: int | None = None
    text: str | None = None
    piece: bytes | None = None  # its own bytes, where the server sends them


@dataclass(frozen=True)
class TokenLogprobs:
    """What a server said about one generated token."""

    id: int | None
    text: str | None
    logprob: float | None
    top: tuple[Alternative, ...]


@dataclass(frozen=True)
class TopTwo:
    """A trusted margin: in logits, and the runner-up alternative."""

    margin: float
    runner_up: Alternative


def request_fields(kind: str, chat: bool) -> dict[str, Any]:
    """The body fields asking ``kind`` for the top ``TOP_N`` log-probabilities per token."""
    openai_chat = {"logprobs": True, "top_logprobs": TOP_N}
    if kind == _LLAMA_SERVER:
        # n_probs is llama-server's own field (every build); chat also gets the OpenAI form
        return {"n_probs": TOP_N, **(openai_chat if chat else {})}
    if kind == _MLX_LM:
        return openai_chat  # mlx-lm refuses an integer "logprobs" (HTTP 400), even on /v1/completions
    return openai_chat if chat else {"logprobs": TOP_N}


def plan(kind: str, greedy: bool, policy: Policy) -> tuple[bool, str]:
    """(ask?, why not). Margins are for greedy runs: a sampled token need not be the best."""
    if policy == "never":
        return False, "not asked (turned off for this session)"
    if not greedy:
        return False, "not asked: a sampled session (margins are recorded for greedy runs)"
    if kind == _LLAMA_CPP_PYTHON and policy == "auto":
        return False, LLAMA_CPP_PYTHON_COST
    return True, ""


def describe(fields: dict[str, Any]) -> str:
    return ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in fields.items())


def without_logprobs(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in LOGPROB_FIELDS}


# -- reading ---------------------------------------------------------------------------------


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _piece(v: Any) -> bytes | None:
    if isinstance(v, list) and all(isinstance(b, int) and 0 <= b < 256 for b in v):
        return bytes(v)
    return None


def _alternative(obj: Any) -> Alternative | None:
    if not isinstance(obj, dict):
        return None
    lp = _number(obj.get("logprob"))
    if lp is None:  # post-sampling "prob" values, or garbage: not a log-probability
        return None
    text = obj.get("token")
    return Alternative(lp, _int(obj.get("id")), text if isinstance(text, str) else None, _piece(obj.get("bytes")))


def parse_logprobs(obj: Any) -> list[TokenLogprobs] | None:
    """A choice's ``logprobs`` -> one entry per token; None when absent or unreadable.

    Two shapes: ``{"content": [{id?, token, bytes?, logprob, top_logprobs: [...]}]}`` (OpenAI
    chat; llama-server on both endpoints; llama-cpp-python chat) and the legacy completions
    ``{"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: logprob}]}`` (OpenAI,
    llama-cpp-python). Never raises: a server's odd log-probabilities must not end a session.
    """
    if not isinstance(obj, dict):
        return None
    content = obj.get("content")
    if isinstance(content, list):
        out = []
        for entry in content:
            if not isinstance(entry, dict):
                return None
            tops = entry.get("top_logprobs")
            alts = [a for a in map(_alternative, tops) if a is not None] if isinstance(tops, list) else []
            text = entry.get("token")
            out.append(TokenLogprobs(_int(entry.get("id")), text if isinstance(text, str) else None, _number(entry.get("logprob")), tuple(alts)))
        return out
    tokens, lps, tops = obj.get("tokens"), obj.get("token_logprobs"), obj.get("top_logprobs")
    if not (isinstance(tokens, list) and isinstance(lps, list) and isinstance(tops, list) and len(tokens) == len(lps) == len(tops)):
        return None
    out = []
    for text, lp, top in zip(tokens, lps, tops):
        alts = []
        if isinstance(top, dict):
            alts = [Alternative(v, text=k) for k, v in ((k, _number(v)) for k, v in top.items()) if v is not None]
        out.append(TokenLogprobs(None, text if isinstance(text, str) else None, _number(lp), tuple(alts)))
    return out


def top_two(tok: TokenLogprobs) -> TopTwo | str:
    """The chosen token's margin over the runner-up, or why none can be trusted."""
    if not tok.top:  # llama-server's post-sampling "prob"/"top_probs", or nothing usable
        return "no alternatives with log-probabilities sent"
    alts = sorted(tok.top, key=lambda a: -a.logprob)  # stable: a server's order breaks exact ties
    by_id = tok.id is not None and all(a.id is not None for a in alts)
    if by_id:
        chosen = next((a for a in alts if a.id == tok.id), None)
    else:  # llama-cpp-python and legacy completions: texts only
        chosen = next((a for a in alts if tok.text is not None and a.text == tok.text), None)
    if chosen is None:
        return "the chosen token is not among the alternatives sent"
    others = [a for a in alts if a is not chosen and (a.id != tok.id if by_id else a.text != chosen.text)]
    if not others:
        return "no second alternative sent"
    runner = others[0]
    if not math.isfinite(chosen.logprob) or alts[0].logprob > chosen.logprob + GREEDY_SLACK:
        return "the chosen token is not the most probable alternative (not these numbers' greedy pick)"
    if not math.isfinite(runner.logprob) or runner.logprob <= ZERO_PROB:
        return "the runner-up's probability is 0 (post-sampling values, or a margin past float32 range)"
    return TopTwo(max(0.0, chosen.logprob - runner.logprob), runner)


def margin_milli(margin: float) -> int:
    """Thousandths of a logit, as ``Step.margins_milli`` holds them."""
    return round(1000.0 * margin)


def spelled_by_server(entries: list[TokenLogprobs], ids: list[int], raw: bytes) -> bool | None:
    """Whether the pieces a server sent for ``ids`` (llama-server's ``bytes`` of each listed
    alternative: the token's own piece) spell ``raw``; None when it did not send them all."""
    if [e.id for e in entries] != ids:
        return None
    pieces = [next((a.piece for a in e.top if a.id == e.id), None) for e in entries]
    if any(p is None for p in pieces):
        return None
    return b"".join(p for p in pieces if p is not None) == raw


class MarginTally:
    """One request's margins: what was asked, what came, and ``End.server.margins_source``."""

    def __init__(self, asked: dict[str, Any], not_asked: str) -> None:
        self.asked = asked  # the body fields sent ({} when not asked)
        self.not_asked = not_asked  # why not, when not
        self.refused = ""  # set when the server refused them and was asked again without
        self.sent = False  # whether any step came with log-probabilities
        self.n_tokens = 0  # tokens given a margin
        self.missed: dict[str, int] = {}  # tokens given none, by why

    def take(
        self, entries: list[TokenLogprobs], ids: list[int], raw: bytes, token_of: Callable[[str], int] | None
    ) -> tuple[list[int], list[int]] | None:
        """A step's (margins, runner-up ids), or None unless every token has a trusted one.

        The entries must be the step's tokens, one each, in order: the same ids where the server
        sends ids, else texts that spell the chunk (a token whose entry never came, or whose
        text the server's decoding dropped, breaks that and the step gets none). A runner-up
        known by its text only gets its id from ``token_of`` (the local vocabulary), else -1.
        """
        why = self._why(entries, ids, raw)
        if why:
            self.missed[why] = self.missed.get(why, 0) + len(ids)
            return None
        margins, runners = [], []
        for e in entries:
            top = top_two(e)
            if isinstance(top, str):
                self.missed[top] = self.missed.get(top, 0) + len(ids)
                return None
            alt = top.runner_up
            runners.append(alt.id if alt.id is not None else (token_of(alt.text or "") if token_of is not None else -1))
            margins.append(margin_milli(top.margin))
        self.n_tokens += len(ids)
        return margins, runners

    def _why(self, entries: list[TokenLogprobs], ids: list[int], raw: bytes) -> str:
        """Why ``entries`` cannot be this step's tokens' ("" when they are)."""
        if not entries:
            return "sent without log-probabilities"
        self.sent = True
        if len(entries) != len(ids):
            return "log-probabilities came for fewer or more tokens than the text's"
        if all(e.id is not None for e in entries):
            aligned = [e.id for e in entries] == ids
        else:
            aligned = "".join(e.text or "" for e in entries).encode("utf-8") == raw
        return "" if aligned else "log-probabilities came for other tokens than the text's"

    def source(self, n_tokens: int) -> str:
        if self.refused:
            return self.refused
        if not self.asked:
            return self.not_asked
        asked = f"asked with {describe(self.asked)}"
        if not self.sent:
            return f"not sent by the server ({asked})"
        text = f"server log-probabilities ({asked}): margins for {self.n_tokens} of {n_tokens} tokens"
        missed = "; ".join(f"none for {n} ({why})" for why, n in sorted(self.missed.items(), key=lambda kv: -kv[1]))
        return f"{text}; {missed}" if missed else text
