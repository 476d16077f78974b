#!/usr/bin/env python3
"""The raw server-sent events of bp-server, as curl sees them (docs/server.md,
"Streaming"): every event is one 'data: ' line and a blank line, each payload
parses as JSON but the last, which is exactly 'data: [DONE]'; the chat's
first event carries the role, one event carries the finish_reason, the
usage event has empty choices. curl -N prints what it reads as it reads it.

  curl_sse_test.py BP_SERVER MODEL

Exit 77 (a ctest skip) when curl or the model is absent."""
import json
import os
import re
import shutil
import subprocess
import sys

SERVER, MODEL = sys.argv[1:3]


def curl(url, body, *extra):
    r = subprocess.run(["curl", "-sS", "-N", "-D", "-", url, "-H", "Content-Type: application/json",
                        "-d", json.dumps(body), *extra], capture_output=True, text=True, timeout=60, check=True)
    head, _, payload = r.stdout.replace("\r\n", "\n").partition("\n\n")
    return head, payload


def check_stream(head, payload, chat):
    assert re.search(r"^content-type: text/event-stream", head, re.I | re.M), head
    assert payload.endswith("data: [DONE]\n\n"), payload[-200:]
    blocks = payload.split("\n\n")
    assert blocks.pop() == ""
    events = []
    for b in blocks:
        if b.startswith(":"):
            continue  # the queue's keep-alive comment
        assert b.startswith("data: ") and "\n" not in b, repr(b)
        events.append(b[len("data: "):])
    assert events.pop() == "[DONE]"
    events = [json.loads(e) for e in events]
    obj = "chat.completion.chunk" if chat else "text_completion"
    assert all(e["object"] == obj for e in events), events
    assert len({e["id"] for e in events}) == 1
    usage = events.pop()
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 16, usage
    finishes = [e["choices"][0]["finish_reason"] for e in events]
    assert finishes[-1] == "length" and all(f is None for f in finishes[:-1]), finishes
    if chat:
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, events[0]
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events)
    else:
        text = "".join(e["choices"][0]["text"] for e in events)
    assert len(events) > 3 and text, events
    return text


def main():
    if not shutil.which("curl"):
        print("SKIPPED: curl is not installed")
        return 77
    if not os.path.exists(MODEL):
        print("SKIPPED: the test model %s is absent" % MODEL)
        return 77
    proc = subprocess.Popen([SERVER, "--model", MODEL, "--port", "0", "--chat-template", "chatml"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)
        body = {"max_tokens": 16, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
        text = check_stream(*curl(url + "/v1/completions", {**body, "prompt": "In the beginning"}), chat=False)
        _, whole = curl(url + "/v1/completions", {"prompt": "In the beginning", "max_tokens": 16, "temperature": 0})
        assert text == json.loads(whole)["choices"][0]["text"]
        check_stream(*curl(url + "/v1/chat/completions",
                           {**body, "messages": [{"role": "user", "content": "Hi"}]}), chat=True)
        # An error before the stream starts is plain JSON with its status, not an event stream.
        head, err = curl(url + "/v1/completions", {**body, "prompt": "x", "temperature": 9})
        assert head.startswith("HTTP/1.1 400"), head
        assert json.loads(err)["error"]["param"] == "temperature"
        # The page at / is HTML.
        head, page = curl(url + "/", {}, "-X", "GET", "-G")
        assert re.search(r"^content-type: text/html", head, re.I | re.M) and "<!doctype html>" in page, head
        print("ok: completions, chat, a 400 and the page, as curl reads them")
        return 0
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
