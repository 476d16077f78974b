#!/usr/bin/env python3
"""bp-server's chat page (GET /, docs/server.md) in headless Chromium.

  chat_page_test.py BP_SERVER MODEL [--chromium PATH] [--screenshot FILE.png]

Chromium is driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4, no
WebSocket), so the test waits for the page's own end of the stream instead
of guessing a time. The page is opened with ?prompt=...&autosend=1 and
temperature 0; the answer it streams into the DOM must equal the server's
greedy answer to the same request, and must have come in several events.
Checked with a chat template (a second turn too, typed and sent through the
page) and without one (the page falls back to /v1/completions).
--screenshot saves the chat after the second answer (docs/images/chat-page.png).
Exit 77 (a ctest skip) when Chromium or the model is absent."""
import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

ARGS = None


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([ARGS.server, "--model", ARGS.model, "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("bp-server did not start: " + line + self.proc.stderr.read())
        self.url = "http://127.0.0.1:%s" % m.group(1)

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


class Chromium:
    """Headless Chromium with one page, spoken to over --remote-debugging-pipe."""

    def __init__(self, width=900, height=640):
        self.profile = tempfile.mkdtemp(prefix="bp-chat-page-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def fds():  # the child reads commands on fd 3 and writes answers on fd 4
            r, w = os.dup(to_child_r), os.dup(from_child_w)  # neither may be 3 or 4 itself
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [ARGS.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
             "--window-size=%d,%d" % (width, height), "about:blank"],
            close_fds=False, preexec_fn=fds,  # fds 3 and 4 stay open
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def call(self, method, session=False, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        while True:  # answers come in order; events in between are dropped
            while b"\0" not in self.buf:
                data = os.read(self.from_child, 1 << 16)
                if not data:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += data
            raw, self.buf = self.buf.split(b"\0", 1)
            m = json.loads(raw)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", session=True, expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expr, seconds=60):
        end = time.time() + seconds
        while time.time() < end:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.05)
        raise AssertionError("timed out waiting for " + expr)

    def open(self, url):
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("document.readyState === 'complete' && document.body.dataset.state !== 'loading'")

    def screenshot(self, path):
        png = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        with open(path, "wb") as f:
            f.write(png)

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_child)
        os.close(self.from_child)
        shutil.rmtree(self.profile, ignore_errors=True)


# The last assistant bubble once its stream ended: text, finish, events.
LAST_ANSWER = """(() => {
  const a = [...document.querySelectorAll('.msg.assistant')].pop();
  return a && a.dataset.finish ? {text: a.textContent, finish: a.dataset.finish, chunks: +a.dataset.chunks} : null;
})()"""


def page_url(server, prompt, n):
    q = urllib.parse.urlencode({"prompt": prompt, "autosend": 1, "temperature": 0, "max_tokens": n})
    return server.url + "/?" + q


class ChatPage(unittest.TestCase):
    """A browser per test, closed before the test's servers: a server that
    stops waits for its clients' idle keep-alive connections (5 s)."""

    def setUp(self):
        self.browser = Chromium()
        self.servers = []
        self.addCleanup(self.close)

    def close(self):
        self.browser.close()
        for s in self.servers:
            s.close()

    def server(self, *args):
        self.servers.append(Server(*args))
        return self.servers[-1]

    def test_chat_streams_the_greedy_answer_into_the_dom(self):
        s = self.server("--chat-template", "chatml", "--slot-ctx", "256")
        b = self.browser
        prompt, n = "And God said", 40
        b.open(page_url(s, prompt, n))
        self.assertEqual(b.eval("document.body.dataset.mode"), "chat")
        self.assertEqual(b.eval("document.getElementById('model').textContent"), "tiny-kjv.gguf")
        got = b.wait_for(LAST_ANSWER)
        msgs = [{"role": "user", "content": prompt}]
        want = s.post("/v1/chat/completions", {"messages": msgs, "max_tokens": n, "temperature": 0})
        want = want["choices"][0]
        self.assertTrue(want["message"]["content"])
        self.assertEqual(got["text"], want["message"]["content"])
        self.assertEqual(got["finish"], want["finish_reason"])
        self.assertGreater(got["chunks"], 1)  # streamed, not delivered whole
        self.assertIn("tokens/s", b.eval("document.getElementById('status').textContent"))
        # A second turn typed into the page: the conversation goes with it.
        b.eval("""document.getElementById('input').value = 'Blessed are the';
                  document.getElementById('send').click(); true""")
        b.wait_for("document.querySelectorAll('.msg.assistant').length === 2 && " + LAST_ANSWER)
        got2 = b.eval(LAST_ANSWER)
        msgs += [{"role": "assistant", "content": got["text"]}, {"role": "user", "content": "Blessed are the"}]
        want2 = s.post("/v1/chat/completions", {"messages": msgs, "max_tokens": n, "temperature": 0})
        self.assertEqual(got2["text"], want2["choices"][0]["message"]["content"])
        if ARGS.screenshot:
            b.screenshot(ARGS.screenshot)

    def test_without_a_chat_template_the_page_completes_the_text(self):
        s = self.server()  # the tiny model's file has no chat template
        b = self.browser
        prompt, n = "In the beginning God created", 32
        b.open(page_url(s, prompt, n))
        self.assertEqual(b.eval("document.body.dataset.mode"), "completion")
        got = b.wait_for(LAST_ANSWER)
        want = s.post("/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0})["choices"][0]
        self.assertTrue(want["text"])
        self.assertEqual(got["text"], want["text"])
        self.assertEqual(got["finish"], want["finish_reason"])
        self.assertGreater(got["chunks"], 1)

    def test_an_error_is_shown_not_swallowed(self):
        s = self.server("--max-tokens", "8")
        b = self.browser
        b.open(page_url(s, "In the beginning", 100))  # over --max-tokens: a 400
        got = b.wait_for(LAST_ANSWER)
        self.assertEqual(got["finish"], "error")
        self.assertIn("max_tokens", b.eval("document.querySelector('.msg.error').textContent"))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("server")
    p.add_argument("model")
    p.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    p.add_argument("--screenshot")
    ARGS = p.parse_args()
    if not ARGS.chromium:
        print("SKIPPED: chromium is not installed (apt-get install chromium)")
        sys.exit(77)
    if not os.path.exists(ARGS.model):
        print("SKIPPED: the test model %s is absent" % ARGS.model)
        sys.exit(77)
    unittest.main(argv=sys.argv[:1], verbosity=2)
