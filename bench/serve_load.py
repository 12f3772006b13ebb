"""A locust user for `bench/run.sh serve-load`: streamed OpenAI completions and chat completions against
`bin/xla-actors serve`, each client disconnecting at a random point.

Each request draws what its client does: read the stream to its end (`data: [DONE]`); close the connection
after a random number of events (DISCONNECT_FRACTION of requests, default 0.5); or give up while waiting for
the answer (IMPATIENT_FRACTION, default 0.1: a read timeout of 10..500 ms, then the connection is closed).
Every request ends as exactly one of:
  completed     [DONE] seen, each choice with a finish_reason before it
  disconnected  the client closed the connection on purpose before the end
  error         a clean error: an HTTP error status with OpenAI's {"error": {...}} body, or an error event
                followed by [DONE]
  lost          anything else: the server reset or ended the stream early, malformed events, a timeout
                nobody asked for
The counts go to the JSON file $LOAD_OUTCOMES when the run stops. Environment: LOAD_COMPLETION_MODEL (gpt2),
LOAD_CHAT_MODEL (llama), LOAD_MAX_TOKENS (24).
"""

import collections
import json
import os
import random

import requests
from locust import HttpUser, between, events, task

DISCONNECT_FRACTION = float(os.environ.get("DISCONNECT_FRACTION", "0.5"))
IMPATIENT_FRACTION = float(os.environ.get("IMPATIENT_FRACTION", "0.1"))
COMPLETION_MODEL = os.environ.get("LOAD_COMPLETION_MODEL", "gpt2")
CHAT_MODEL = os.environ.get("LOAD_CHAT_MODEL", "llama")
MAX_TOKENS = int(os.environ.get("LOAD_MAX_TOKENS", "24"))
WORDS = ["the", "model", "serves", "tokens", "over", "HTTP", "actors", "stream", "and", "a", "cat", "sat"]

OUTCOMES = collections.Counter()
ERRORS = collections.Counter()  # clean errors by status (or "event")
LOST = collections.Counter()  # lost requests by why


def prompt(words=12):
    """1..words words (the chat template adds about 20 tokens; the tiny models take prompts of 32)."""
    return " ".join(random.choice(WORDS) for _ in range(random.randint(1, words)))


class StreamingClient(HttpUser):
    wait_time = between(0, 0.1)

    @task(2)
    def completion(self):
        self.stream("/v1/completions", {"model": COMPLETION_MODEL, "prompt": prompt(), "stream": True,
                                        "max_tokens": random.randint(1, MAX_TOKENS), "temperature": 0.8,
                                        "n": random.choice([1, 1, 1, 2])})

    @task(1)
    def chat(self):
        self.stream("/v1/chat/completions", {"model": CHAT_MODEL, "stream": True, "max_tokens": random.randint(1, MAX_TOKENS),
                                             "messages": [{"role": "user", "content": prompt(4)}], "temperature": 0.8,
                                             "stream_options": {"include_usage": True}})

    def stream(self, path, body):
        choices = body.get("n", 1)
        roll = random.random()
        disconnect_after = random.randint(0, body["max_tokens"] * choices) if roll < DISCONNECT_FRACTION else None
        read_timeout = random.uniform(0.01, 0.5) if DISCONNECT_FRACTION <= roll < DISCONNECT_FRACTION + IMPATIENT_FRACTION else 120
        try:
            with self.client.post(path, json=body, stream=True, catch_response=True, name=path, timeout=(10, read_timeout)) as r:
                if r.status_code == 0:  # locust caught the request's exception: no response came
                    gave_up = read_timeout < 120 and "timed out" in repr(r.error)
                    outcome = "disconnected" if gave_up else "lost: " + type(r.error).__name__
                else:
                    outcome = self.read(r, choices, disconnect_after)
                if outcome.startswith("lost"):
                    r.failure(outcome)
                else:
                    r.success()
        except requests.exceptions.ReadTimeout:
            outcome = "disconnected" if read_timeout < 120 else "lost: read timeout"
        except requests.exceptions.RequestException as e:
            outcome = "disconnected" if read_timeout < 120 and "timed out" in str(e) else "lost: " + type(e).__name__
        kind = outcome.split(":")[0]
        OUTCOMES[kind] += 1
        if kind == "lost":
            LOST[outcome] += 1

    def read(self, r, choices, disconnect_after):
        if r.status_code != 200:
            try:
                e = r.json()["error"]
                assert isinstance(e["message"], str) and "type" in e
            except Exception:
                return "lost: HTTP %d without an OpenAI error body" % r.status_code
            ERRORS[str(r.status_code)] += 1
            return "error"
        finished = set()
        seen = 0
        error_event = False
        for line in r.iter_lines():
            if not line:
                continue
            if not line.startswith(b"data: "):
                return "lost: not an event line: %r" % line[:60]
            data = line[6:]
            if data == b"[DONE]":
                if error_event:
                    ERRORS["event"] += 1
                    return "error"
                return "completed" if len(finished) == choices else "lost: [DONE] with %d of %d choices finished" % (len(finished), choices)
            chunk = json.loads(data)
            if "error" in chunk:
                error_event = True
                continue
            for c in chunk.get("choices", []):
                if c.get("finish_reason"):
                    finished.add(c["index"])
            seen += 1
            if disconnect_after is not None and seen >= disconnect_after:
                r.close()  # closes the connection: the stream is not read to its end
                return "disconnected"
        return "lost: the stream ended without [DONE]"


@events.test_stop.add_listener
def write_outcomes(environment, **kwargs):
    path = os.environ.get("LOAD_OUTCOMES")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"outcomes": OUTCOMES, "errors": ERRORS, "lost": LOST}, f)
