// chat_page.cpp: the chat page GET / serves, one HTML document with its CSS
// and script inline: nothing to build, nothing fetched but the server's own
// API. It asks /v1/models whether the model has a chat template
// (meta.chat_template) and streams the answer (fetch, a ReadableStream over
// the server-sent events) from /v1/chat/completions, keeping the
// conversation, or from /v1/completions with the text as the prompt when
// there is none. The query ?prompt=TEXT&autosend=1 (with temperature=,
// max_tokens=) sends a prompt at load: tests/server/chat_page_test.py drives
// it so in headless Chromium.
#include "chat_page.hpp"

namespace bp::server {

const char *const chat_page_html = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bp-server</title>
<style>
:root { --bg: #f6f7f9; --fg: #1d2330; --muted: #6b7280; --user: #dbe7ff; --bot: #ffffff; --line: #d7dbe2; --accent: #2f6fed; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #16181d; --fg: #e6e8ec; --muted: #9aa1ad; --user: #263556; --bot: #21252d; --line: #343a45; --accent: #6d9bff; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; background: var(--bg); color: var(--fg);
       display: flex; flex-direction: column; height: 100vh; }
header { display: flex; gap: 12px; align-items: baseline; padding: 10px 16px; border-bottom: 1px solid var(--line); flex-wrap: wrap; }
header h1 { font-size: 16px; margin: 0; }
header .meta { color: var(--muted); font-size: 13px; }
header label { font-size: 13px; color: var(--muted); }
header input { width: 70px; font: inherit; font-size: 13px; padding: 2px 4px; background: var(--bot); color: var(--fg);
               border: 1px solid var(--line); border-radius: 4px; }
header input#key { width: 130px; }
.spacer { flex: 1; }
#log { flex: 1; overflow-y: auto; padding: 16px; display: flex; flex-direction: column; gap: 10px; }
.msg { max-width: 80%; padding: 8px 12px; border-radius: 10px; white-space: pre-wrap; word-wrap: break-word; border: 1px solid var(--line); }
.msg.user { align-self: flex-end; background: var(--user); }
.msg.assistant { align-self: flex-start; background: var(--bot); }
.msg.assistant:empty::after { content: "\2026"; color: var(--muted); }
.msg.error { align-self: center; color: #c0392b; background: none; border-style: dashed; }
#status { color: var(--muted); font-size: 12px; padding: 0 16px 4px; min-height: 1.4em; }
form { display: flex; gap: 8px; padding: 10px 16px 16px; }
textarea { flex: 1; font: inherit; padding: 8px; border-radius: 8px; border: 1px solid var(--line); background: var(--bot); color: var(--fg); resize: vertical; }
button { font: inherit; padding: 6px 14px; border-radius: 8px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
button.secondary { background: none; color: var(--accent); }
button:disabled { opacity: .5; cursor: default; }
</style>
</head>
<body data-state="loading">
<header>
  <h1>bp-server</h1>
  <span class="meta"><span id="model">&hellip;</span> &middot; <span id="mode"></span></span>
  <span class="spacer"></span>
  <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7"></label>
  <label>max tokens <input id="max_tokens" type="number" min="1" step="1" value="256"></label>
  <label>API key <input id="key" type="password" autocomplete="off" placeholder="(none)"></label>
  <button type="button" class="secondary" id="clear">New chat</button>
</header>
<main id="log" aria-live="polite"></main>
<div id="status"></div>
<form id="form">
  <textarea id="input" rows="2" placeholder="Message (Enter sends, Shift+Enter is a new line)"></textarea>
  <button type="submit" id="send">Send</button>
  <button type="button" class="secondary" id="stop" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const state = { chat: false, messages: [], busy: false, abort: null };

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("key").value.trim();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

function status(text) { $("status").textContent = text; }

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("log").appendChild(div);
  $("log").scrollTop = $("log").scrollHeight;
  return div;
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  document.body.dataset.state = busy ? "busy" : "ready";
}

async function errorOf(r) {
  try { const j = await r.json(); if (j.error) return j.error.message; } catch (e) {}
  return "HTTP " + r.status;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    if (!r.ok) throw new Error(await errorOf(r));
    const m = (await r.json()).data[0];
    state.chat = !!(m.meta && m.meta.chat_template);
    $("model").textContent = m.id;
    $("mode").textContent = state.chat ? "chat" : "text completion (the model has no chat template)";
    document.body.dataset.mode = state.chat ? "chat" : "completion";
    status("");
    return true;
  } catch (e) {
    $("model").textContent = "(unavailable)";
    status("cannot read /v1/models: " + e.message);
    return false;
  }
}

// Reads the server-sent events of |r| and calls onEvent with each parsed
// "data:" payload; ":" comment lines (the queue's keep-alive) are skipped.
async function readEvents(r, onEvent) {
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of block.split("\n"))
        if (line.startsWith("data: ") && line !== "data: [DONE]") onEvent(JSON.parse(line.slice(6)));
    }
  }
}

async function send() {
  const text = $("input").value;
  if (state.busy || !text.trim()) return;
  $("input").value = "";
  addMessage("user", text);
  const out = addMessage("assistant", "");
  out.dataset.chunks = "0";
  const body = { stream: true, stream_options: { include_usage: true } };
  const t = parseFloat($("temperature").value), n = parseInt($("max_tokens").value, 10);
  if (!isNaN(t)) body.temperature = t;
  if (!isNaN(n)) body.max_tokens = n;
  let path;
  if (state.chat) {
    state.messages.push({ role: "user", content: text });
    body.messages = state.messages.slice();
    path = "/v1/chat/completions";
  } else {
    body.prompt = text;
    path = "/v1/completions";
  }
  setBusy(true);
  status("generating\u2026");
  state.abort = new AbortController();
  const start = performance.now();
  let answer = "", finish = null, usage = null;
  try {
    const r = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body), signal: state.abort.signal });
    if (!r.ok) throw new Error(await errorOf(r));
    await readEvents(r, (ev) => {
      if (ev.error) throw new Error(ev.error.message);
      if (ev.usage) usage = ev.usage;
      const c = ev.choices && ev.choices[0];
      if (!c) return;
      const piece = (state.chat ? c.delta && c.delta.content : c.text) || "";
      if (piece) {
        answer += piece;
        out.textContent = answer;
        out.dataset.chunks = String(+out.dataset.chunks + 1);
        $("log").scrollTop = $("log").scrollHeight;
      }
      if (c.finish_reason) finish = c.finish_reason;
    });
    out.dataset.finish = finish || "none";
    const s = (performance.now() - start) / 1000;
    status(usage ? usage.completion_tokens + " tokens in " + s.toFixed(1) + " s (" +
                   (usage.completion_tokens / s).toFixed(1) + " tokens/s), finish: " + finish
                 : "finish: " + finish);
  } catch (e) {
    const stopped = e.name === "AbortError";
    out.dataset.finish = stopped ? "stopped" : "error";
    if (!stopped) addMessage("error", e.message);
    status(stopped ? "stopped" : "failed");
  }
  // The conversation keeps what was shown, a stopped answer included; a
  // failed request leaves no turn behind.
  if (state.chat) {
    if (out.dataset.finish === "error") state.messages.pop();
    else state.messages.push({ role: "assistant", content: answer });
  }
  setBusy(false);
}

$("form").addEventListener("submit", (e) => { e.preventDefault(); send(); });
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
$("stop").addEventListener("click", () => { if (state.abort) state.abort.abort(); });
$("clear").addEventListener("click", () => {
  if (state.busy) return;
  state.messages = [];
  $("log").textContent = "";
  status("");
});
$("key").value = localStorage.getItem("bp-server-key") || "";
$("key").addEventListener("change", () => { localStorage.setItem("bp-server-key", $("key").value); loadModel(); });
for (const p of ["temperature", "max_tokens"]) if (params.has(p)) $(p).value = params.get(p);

loadModel().then((ok) => {
  setBusy(false);
  if (params.has("prompt")) {
    $("input").value = params.get("prompt");
    if (ok && params.get("autosend") === "1") send();
  }
});
</script>
</body>
</html>
)html";

}  // namespace bp::server
