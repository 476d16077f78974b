#!/usr/bin/env python3
"""bp-server end to end (docs/server.md): starts the binary on a free
loopback port with the tiny test model and drives it with the standard
library's HTTP client, as any OpenAI client would.

  server_test.py BP_SERVER BP_GENERATE MODEL

Greedy answers are compared with bp-generate's on the same prompt (the
single-sequence path), alone and from 8 concurrent clients; streams are
parsed as server-sent events; a client that leaves mid-stream must free its
slot and cells (seen in /metrics); a full queue is a 503 with Retry-After;
bad requests are 400s with OpenAI's error JSON and the server keeps serving.
Exit 77 (a ctest skip) when the model is absent."""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest

SERVER, GENERATE, MODEL = sys.argv[1:4] if len(sys.argv) >= 4 else (None, None, None)
PROMPTS = [
    "In the beginning God created",
    "And the LORD said unto Moses",
    "Blessed are the",
    "For God so loved the world",
    "The LORD is my shepherd",
    "And it came to pass",
    "Thus saith the LORD",
    "In the day that",
]


class Server:
    """One bp-server process on a free port (--port 0; it prints the port)."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([SERVER, "--model", MODEL, "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("bp-server did not start: " + line + self.proc.stderr.read())
        self.port = int(m.group(1))

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def request(self, method, path, body=None, headers=None, raw=None):
        c = self.conn()
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, dict(r.getheaders()), text

    def post(self, path, body, **kw):
        status, headers, text = self.request("POST", path, body, **kw)
        return status, headers, json.loads(text)

    def stream(self, path, body):
        """The events of a streamed request, parsed; the last is '[DONE]'."""
        c = self.conn()
        c.request("POST", path, body=json.dumps({**body, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, r.read()
        assert r.getheader("Content-Type").startswith("text/event-stream")
        events = []
        for block in r.read().decode().split("\n\n"):
            if not block.strip() or block.startswith(":"):
                continue
            assert block.startswith("data: "), block
            payload = block[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
        c.close()
        return events

    def metrics(self):
        _, _, text = self.request("GET", "/metrics")
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


def greedy(prompt, n):
    """bp-generate's greedy text for |prompt|, |n| tokens at most."""
    out = subprocess.run([GENERATE, "--model", MODEL, "-p", prompt, "-n", str(n), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["text"]


def wait_until(cond, seconds=10):
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


class Batched(unittest.TestCase):
    """8 slots with room for 8 prompts at once, chunks of 16 prompt tokens."""

    @classmethod
    def setUpClass(cls):
        cls.s = Server("--parallel", "8", "--slot-ctx", "256", "--batch", "16", "--chat-template", "chatml")

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def complete(self, prompt, n, **kw):
        status, _, r = self.s.post("/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0, **kw})
        self.assertEqual(status, 200, r)
        return r

    def test_health_models_metrics(self):
        status, _, text = self.s.request("GET", "/health")
        self.assertEqual((status, json.loads(text)), (200, {"status": "ok"}))
        status, _, text = self.s.request("GET", "/v1/models")
        models = json.loads(text)
        self.assertEqual(models["object"], "list")
        self.assertEqual(models["data"][0]["id"], os.path.basename(MODEL))
        m = self.s.metrics()
        for k in ["bp_server_requests_total", "bp_server_tokens_generated_total", "bp_server_queue_length",
                  "bp_server_kv_cells_used", "bp_server_slots_total"]:
            self.assertIn(k, m)
        self.assertEqual(m["bp_server_slots_total"], 8)

    def test_greedy_equals_bp_generate(self):
        r = self.complete(PROMPTS[0], 24)
        self.assertEqual(r["object"], "text_completion")
        self.assertEqual(r["choices"][0]["text"], greedy(PROMPTS[0], 24))
        self.assertEqual(r["choices"][0]["finish_reason"], "length")
        self.assertEqual(r["usage"]["completion_tokens"], 24)
        self.assertEqual(r["usage"]["prompt_tokens"], 9)  # BOS + 8 (bp-generate --json's prompt_tokens)
        self.assertEqual(r["usage"]["total_tokens"], 33)

    def test_streaming_joins_to_the_same_text(self):
        events = self.s.stream("/v1/completions", {"prompt": PROMPTS[1], "max_tokens": 20, "temperature": 0,
                                                   "stream_options": {"include_usage": True}})
        self.assertEqual(events[-1], "[DONE]")
        chunks = events[:-1]
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 20)
        text = "".join(c["choices"][0]["text"] for c in chunks[:-1])
        self.assertEqual(text, greedy(PROMPTS[1], 20))
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "length")
        self.assertTrue(all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2]))

    def test_chat_streaming_and_whole(self):
        body = {"messages": [{"role": "user", "content": "Who made the heaven?"}], "max_tokens": 12,
                "temperature": 0}
        status, _, whole = self.s.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, whole)
        self.assertEqual(whole["object"], "chat.completion")
        msg = whole["choices"][0]["message"]
        self.assertEqual(msg["role"], "assistant")
        events = self.s.stream("/v1/chat/completions", body)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual(events[0]["object"], "chat.completion.chunk")
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1])
        self.assertEqual(text, msg["content"])
        self.assertEqual(whole["usage"]["completion_tokens"], 12)
        self.assertGreater(whole["usage"]["prompt_tokens"], 5)

    def test_stop_strings_and_max_tokens(self):
        full = greedy(PROMPTS[0], 24)
        stop = "LORD"
        r = self.complete(PROMPTS[0], 24, stop=stop)
        self.assertEqual(r["choices"][0]["text"], full[:full.index(stop)])
        self.assertEqual(r["choices"][0]["finish_reason"], "stop")
        r = self.complete(PROMPTS[0], 24, stop=["zzz", "made"])
        self.assertEqual(r["choices"][0]["text"], full[:full.index("made")])
        r = self.complete(PROMPTS[0], 3)
        self.assertEqual(r["usage"]["completion_tokens"], 3)
        self.assertEqual(r["choices"][0]["text"], greedy(PROMPTS[0], 3))
        r = self.complete(PROMPTS[0], 0)
        self.assertEqual((r["choices"][0]["text"], r["usage"]["completion_tokens"]), ("", 0))

    def test_logprobs(self):
        r = self.complete(PROMPTS[0], 10, logprobs=3)
        lp = r["choices"][0]["logprobs"]
        self.assertEqual("".join(lp["tokens"]), r["choices"][0]["text"])
        self.assertEqual(len(lp["token_logprobs"]), 10)
        self.assertEqual(lp["text_offset"][0], 0)
        for tok, p, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
            self.assertLessEqual(p, 0)
            self.assertEqual(len(top), 3)
            best = max(top, key=top.get)  # greedy: the token drawn is the most likely
            self.assertEqual((best, top[best]), (tok, p))
        body = {"messages": [{"role": "user", "content": "Who?"}], "max_tokens": 6, "temperature": 0,
                "logprobs": True, "top_logprobs": 2}
        status, _, whole = self.s.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, whole)
        content = whole["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), 6)
        self.assertEqual("".join(c["token"] for c in content), whole["choices"][0]["message"]["content"])
        self.assertEqual(content[0]["top_logprobs"][0]["logprob"], content[0]["logprob"])
        self.assertEqual(bytes(content[0]["bytes"]).decode(), content[0]["token"])
        events = self.s.stream("/v1/chat/completions", body)
        streamed = [c for e in events[:-1] if e["choices"][0]["logprobs"] for c in e["choices"][0]["logprobs"]["content"]]
        self.assertEqual(streamed, content)
        status, _, body = self.s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                                "top_logprobs": 2})
        self.assertEqual(status, 400)
        self.assertIn("logprobs", body["error"]["message"])

    def test_concurrent_clients_get_their_single_run_answers(self):
        n = 40
        want = [greedy(p, n) for p in PROMPTS]
        got = [None] * len(PROMPTS)
        errors = []

        def client(i):
            try:
                if i % 2:
                    ev = self.s.stream("/v1/completions", {"prompt": PROMPTS[i], "max_tokens": n, "temperature": 0})
                    assert ev[-1] == "[DONE]"
                    got[i] = "".join(e["choices"][0]["text"] for e in ev[:-1])
                else:
                    got[i] = self.complete(PROMPTS[i], n)["choices"][0]["text"]
            except Exception as e:  # reported below, with the client's number
                errors.append((i, repr(e)))

        before = self.s.metrics()["bp_server_steps_total"]
        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for i in range(len(PROMPTS)):
            self.assertEqual(got[i], want[i], "client %d" % i)
        # Batched: 8 answers of 40 tokens took far fewer steps than 8 x 40.
        steps = self.s.metrics()["bp_server_steps_total"] - before
        self.assertLess(steps, 8 * n * 0.75)
        self.assertTrue(wait_until(lambda: self.s.metrics()["bp_server_kv_cells_used"] == 0))

    def test_bad_requests_are_400_and_the_server_keeps_serving(self):
        cases = [
            ("/v1/completions", None, "{not json", "not valid JSON"),
            ("/v1/completions", [1, 2], None, "JSON object"),
            ("/v1/completions", {"prompt": 5}, None, "prompt"),
            ("/v1/completions", {"prompt": "x", "bogus": 1}, None, "bogus"),
            ("/v1/completions", {"prompt": "x", "max_tokens": -1}, None, "max_tokens"),
            ("/v1/completions", {"prompt": "x", "max_tokens": 10 ** 9}, None, "max_tokens"),
            ("/v1/completions", {"prompt": "x", "temperature": "hot"}, None, "temperature"),
            ("/v1/completions", {"prompt": "x", "stop": [""]}, None, "stop"),
            ("/v1/completions", {"prompt": "x", "stop": 7}, None, "stop"),
            ("/v1/completions", {"max_tokens": 3}, None, "prompt"),
            ("/v1/completions", {"prompt": "x", "n": 2}, None, "n"),
            ("/v1/completions", {"prompt": "x " * 400}, None, "slot holds"),  # code context_length_exceeded
            ("/v1/chat/completions", {"messages": []}, None, "messages"),
            ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, None, "role"),
            ("/v1/chat/completions", {"messages": [{"role": "user"}], "stream": "yes"}, None, "stream"),
        ]
        for path, body, raw, words in cases:
            status, _, text = self.s.request("POST", path, body, raw=raw)
            self.assertEqual(status, 400, (body, raw, text))
            err = json.loads(text)["error"]
            self.assertIn(words, err["message"], (body, raw))
            self.assertEqual(err["type"], "invalid_request_error")
        status, _, text = self.s.request("GET", "/v1/nowhere")
        self.assertEqual(status, 404)
        self.assertIn("error", json.loads(text))
        status, _, text = self.s.request("POST", "/v1/completions", raw="x" * (2 << 20))
        self.assertEqual(status, 413)
        self.assertEqual(self.s.proc.poll(), None)
        self.assertEqual(self.complete(PROMPTS[2], 5)["choices"][0]["text"], greedy(PROMPTS[2], 5))


class Disconnect(unittest.TestCase):
    """A stream long enough to be running when its client leaves: greedy
    decoding of the tiny model loops without an end token, and 4000 tokens
    take seconds."""

    def test_a_client_that_leaves_frees_its_slot(self):
        s = Server("--parallel", "2", "--slot-ctx", "4096")
        try:
            c = s.conn()
            c.request("POST", "/v1/completions", body=json.dumps(
                {"prompt": PROMPTS[3], "max_tokens": 4000, "temperature": 0, "stream": True}),
                headers={"Content-Type": "application/json"})
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            r.fp.readline()  # the first event has come: the request holds a slot
            # (the gauge is stored at the end of the step that delivered it)
            self.assertTrue(wait_until(lambda: s.metrics()["bp_server_kv_cells_used"] > 0))
            c.sock.shutdown(2)
            c.close()
            self.assertTrue(wait_until(lambda: s.metrics()["bp_server_requests_cancelled_total"] == 1), s.metrics())
            self.assertTrue(wait_until(lambda: s.metrics()["bp_server_kv_cells_used"] == 0))
            m = s.metrics()
            self.assertEqual(m["bp_server_slots_busy"], 0)
            self.assertLess(m["bp_server_tokens_generated_total"], 4000)  # cut short, not run to its end
        finally:
            s.close()


class Busy(unittest.TestCase):
    """One slot and no queue: a second request while the first runs is a 503."""

    def test_queue_overflow_is_503_with_retry_after(self):
        s = Server("--parallel", "1", "--queue", "0", "--slot-ctx", "4096")
        try:
            c = s.conn()
            c.request("POST", "/v1/completions", body=json.dumps(
                {"prompt": PROMPTS[0], "max_tokens": 4000, "temperature": 0, "stream": True}),
                headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.fp.readline()
            status, headers, body = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
            self.assertEqual(status, 503, body)
            self.assertEqual(headers.get("Retry-After"), "1")
            self.assertEqual(body["error"]["type"], "server_busy")
            self.assertEqual(s.metrics()['bp_server_requests_rejected_total{reason="busy"}'], 1)
            c.close()
            self.assertTrue(wait_until(lambda: s.metrics()["bp_server_slots_busy"] == 0))
            status, _, body = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
            self.assertEqual(status, 200, body)
        finally:
            s.close()


class Safety(unittest.TestCase):
    def test_another_address_needs_an_api_key(self):
        r = subprocess.run([SERVER, "--model", MODEL, "--host", "0.0.0.0", "--port", "0"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--api-key", r.stderr)

    def test_api_key_is_required_when_set(self):
        s = Server("--api-key", "sesame")
        try:
            status, _, body = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
            self.assertEqual(status, 401)
            self.assertEqual(body["error"]["type"], "authentication_error")
            status, _, body = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1},
                                     headers={"Authorization": "Bearer sesame"})
            self.assertEqual(status, 200, body)
            self.assertEqual(s.request("GET", "/health")[0], 200)  # for load balancers' probes
        finally:
            s.close()

    def test_chat_without_a_template_is_a_400_naming_the_fix(self):
        s = Server()  # the tiny model's file has no chat template
        try:
            status, _, body = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
            self.assertEqual(status, 400)
            self.assertIn("--chat-template", body["error"]["message"])
        finally:
            s.close()


if __name__ == "__main__":
    if not MODEL or not os.path.exists(MODEL):
        print("SKIPPED: the test model %s is absent" % MODEL)
        sys.exit(77)
    unittest.main(argv=sys.argv[:1], verbosity=2)
