"""A watch of the real ``llama-server`` while a client in this test sends it requests.

The server runs the embedded model with n-gram drafting and ``--metrics``; a ``WatchSampler``
polls it every quarter second on its own thread while the client sends a few completions with
a count worth going on with. Checked: the watch saw the speculative counters move and the acceptance
per position; what it counted equals what the client's own replies say (tokens generated,
tokens drafted and accepted, summed over the client's requests), so the watch itself generated
nothing; and the server's log shows exactly the client's requests processed (llama-server logs
"processing task" once per completion it runs; ``/metrics`` and ``/slots`` reads run no slot).

Skipped where no llama-server is found (a clean CI machine): ``spectui runtime build`` makes one
in the user cache (``tests/runtime``'s tests build it there); ``$SPECTUI_LLAMA_SERVER`` may name
another.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from spectui.server.client import ServerClient, parse_server_url
from spectui.watch.sampler import WatchSample, WatchSampler
from spectui.watch.source import open_watch
from tests.server.conftest import start_server

#: a count the model goes on with, whose n-grams are all in the prompt: llama-server's n-gram
#: drafts land (measured with the embedded model: 30 of 30 drafted tokens accepted). A list to
#: copy did not: the model wrote about the list instead, and nothing was drafted.
PROMPT = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3,"
REQUESTS = 3
MAX_TOKENS = 32


pytestmark = [
    pytest.mark.slow,
    pytest.mark.server,
]


@pytest.fixture
def spec_server(llama_server_binary, model_path, tmp_path):
    args = ["-m", model_path, "-c", "2048", "-t", "2", "-np", "1", "--metrics", "--no-webui", "--spec-type", "ngram-simple"]
    server = start_server(args, "/health", str(tmp_path), program=llama_server_binary.path)
    yield server
    server.stop()


def complete(url: str) -> dict:
    body = {"prompt": PROMPT, "n_predict": MAX_TOKENS, "temperature": 0, "cache_prompt": False}
    req = urllib.request.Request(f"{url}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def test_watch_sees_acceptance_move_and_adds_no_request(spec_server):
    client = ServerClient(parse_server_url(spec_server.url))
    target = open_watch(client)
    assert target.families.server == "llama-server" and target.has_slots
    samples: list[WatchSample] = []
    sampler = WatchSampler(client, target, samples.append, interval_s=0.25)
    sampler.start()
    try:
        timings = []
        for _ in range(REQUESTS):
            timings.append(complete(spec_server.url)["timings"])
            time.sleep(0.3)  # a reading or more between requests
        time.sleep(0.6)  # the counters of the last request are read after it finished
    finally:
        sampler.stop()

    assert sampler.errors == 0 and not any(s.error for s in samples), [s.error for s in samples if s.error]
    totals = sampler.totals
    drafted = sum(int(t.get("draft_n", 0)) for t in timings)
    accepted = sum(int(t.get("draft_n_accepted", 0)) for t in timings)
    assert drafted > 0 and accepted > 0, timings  # the count makes n-gram drafts land
    # the watch's counts are the client's counts: nothing else ran on the server meanwhile
    assert totals.generated_tokens == sum(int(t["predicted_n"]) for t in timings)
    assert (totals.draft_tokens, totals.accepted_tokens) == (drafted, accepted)
    assert totals.drafts and totals.drafts > 0
    assert totals.per_position and totals.per_position[0] > 0
    assert sum(totals.accepted_per_position) == pytest.approx(accepted)
    assert totals.mean_accepted_length == pytest.approx(1 + accepted / totals.drafts)
    moved = [s for s in samples if s.interval is not None and s.interval.draft_tokens]
    assert moved, "no interval saw the speculative counters move"
    assert any(s.live is not None and s.live.speculative == 1 for s in samples)  # its one slot drafts

    log = Path(spec_server.log).read_text(errors="replace")
    assert log.count("processing task") == REQUESTS, "the server ran a completion the client did not send"
