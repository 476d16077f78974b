// bp-server driven by the official OpenAI client for Node (docs/server.md,
// "Clients"), as applications use it:
//   node openai_client_test.js NODE_DIR BP_SERVER BP_GENERATE MODEL
// NODE_DIR holds node_modules/openai (openai_setup.sh, the ctest fixture
// Server.OpenAISetup). Greedy completions equal bp-generate's text; streams
// (the client's async iterator and its chat-stream helper) join to the whole
// answer; stop strings, logprobs, and errors surfacing as the client's own
// exception classes. Exit 77 (a ctest skip) when the client or the model is
// absent.
"use strict";
const assert = require("node:assert/strict");
const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");

const [NODE_DIR, SERVER, GENERATE, MODEL] = process.argv.slice(2);
if (!MODEL || !fs.existsSync(MODEL)) {
  console.log(`SKIPPED: the test model ${MODEL} is absent`);
  process.exit(77);
}
let OpenAI;
try {
  OpenAI = createRequire(path.join(path.resolve(NODE_DIR), "package.json"))("openai").OpenAI;
} catch (e) {
  console.log(`SKIPPED: the openai package is not installed in ${NODE_DIR} (${e.message})`);
  process.exit(77);
}

// One bp-server on a free port (--port 0; the first line names it).
function startServer(...args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(SERVER, ["--model", MODEL, "--port", "0", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    proc.stderr.on("data", (d) => (err += d));
    proc.stdout.on("data", (d) => {
      out += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) resolve({ proc, url: `http://127.0.0.1:${m[1]}` });
    });
    proc.on("exit", (code) => reject(new Error(`bp-server exited (${code}): ${out}${err}`)));
  });
}

function client(server, apiKey = "none") {
  return new OpenAI({ baseURL: server.url + "/v1", apiKey, maxRetries: 0, timeout: 60000 });
}

function greedy(prompt, n) {
  const r = spawnSync(GENERATE, ["--model", MODEL, "-p", prompt, "-n", String(n), "--json"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout).text;
}

async function rejectsWith(promise, cls, check) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    if (check) check(e);
    return;
  }
  assert.fail(`expected ${cls.name}, the request succeeded`);
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });
let main, keyed; // main: chatml template; keyed: --api-key, the file's (absent) template
const PROMPT = "In the beginning God created";
const N = 32;
const chatOf = (content) => [{ role: "user", content }];

test("models.list names the file", async () => {
  const list = await client(main).models.list();
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, path.basename(MODEL));
});

test("a greedy completion equals bp-generate's text", async () => {
  const r = await client(main).completions.create({ model: "x", prompt: PROMPT, max_tokens: N, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].text, greedy(PROMPT, N));
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, N);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + N);
});

test("a streamed completion joins to the same text", async () => {
  const stream = await client(main).completions.create({
    model: "x", prompt: PROMPT, max_tokens: N, temperature: 0, stream: true,
  });
  let text = "", chunks = 0, finish = null;
  for await (const c of stream) {
    chunks++;
    text += c.choices[0].text;
    finish = c.choices[0].finish_reason || finish;
  }
  assert.ok(chunks > 2, `${chunks} chunks`);
  assert.equal(text, greedy(PROMPT, N));
  assert.equal(finish, "length");
});

test("chat, whole and streamed (iterator and the stream helper), agree", async () => {
  const c = client(main);
  const req = { model: "x", messages: chatOf("And God said"), max_tokens: N, temperature: 0 };
  const whole = await c.chat.completions.create(req);
  assert.equal(whole.object, "chat.completion");
  assert.equal(whole.choices[0].message.role, "assistant");
  const content = whole.choices[0].message.content;
  assert.ok(content.length > 0);

  const stream = await c.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = "", role = null, finish = null, usage = null;
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    if (!ch.choices.length) continue;
    role = role || ch.choices[0].delta.role;
    text += ch.choices[0].delta.content || "";
    finish = ch.choices[0].finish_reason || finish;
  }
  assert.equal(role, "assistant");
  assert.equal(text, content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);

  const final = await c.chat.completions.stream(req).finalChatCompletion();
  assert.equal(final.choices[0].message.content, content);
});

test("a stop string cuts the answer, whole and streamed", async () => {
  const full = greedy(PROMPT, N);
  const words = full.trim().split(/\s+/);
  const stop = words[Math.min(3, words.length - 1)];
  const want = full.slice(0, full.indexOf(stop));
  const c = client(main);
  const req = { model: "x", prompt: PROMPT, max_tokens: N, temperature: 0, stop: [stop, "never in the text"] };
  const r = await c.completions.create(req);
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, "stop");
  let text = "", finish = null;
  for await (const ch of await c.completions.create({ ...req, stream: true })) {
    text += ch.choices[0].text;
    finish = ch.choices[0].finish_reason || finish;
  }
  assert.equal(text, want);
  assert.equal(finish, "stop");
});

test("logprobs: chat and completions, whole and streamed", async () => {
  const c = client(main);
  const req = { model: "x", messages: chatOf("Blessed are the"), max_tokens: 12, temperature: 0 };
  const r = await c.chat.completions.create({ ...req, logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].logprob, t.logprob); // greedy: the drawn token is the likeliest
  }
  assert.equal(Buffer.from(lp.flatMap((t) => t.bytes)).toString(), r.choices[0].message.content);
  const streamed = [];
  for await (const ch of await c.chat.completions.create({ ...req, logprobs: true, top_logprobs: 3, stream: true }))
    if (ch.choices.length && ch.choices[0].logprobs) streamed.push(...ch.choices[0].logprobs.content);
  assert.deepEqual(streamed, lp);

  const cr = await c.completions.create({ model: "x", prompt: PROMPT, max_tokens: 12, temperature: 0, logprobs: 2 });
  const l = cr.choices[0].logprobs;
  assert.equal(l.tokens.length, 12);
  assert.equal(l.tokens.join(""), cr.choices[0].text);
  assert.equal(l.token_logprobs.length, 12);
  l.top_logprobs.forEach((top) => assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 2));
});

test("a bad request is a BadRequestError naming the field", async () => {
  const c = client(main);
  await rejectsWith(c.completions.create({ model: "x", prompt: PROMPT, temperature: 5 }), OpenAI.BadRequestError, (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, "temperature");
    assert.equal(e.type, "invalid_request_error");
  });
  await rejectsWith(c.chat.completions.create({ model: "x", messages: chatOf("x"), max_tokens: 1e9, stream: true }),
                    OpenAI.BadRequestError, (e) => assert.equal(e.param, "max_tokens"));
  await rejectsWith(c.chat.completions.create({ model: "x", messages: [{ role: "wizard", content: "x" }] }),
                    OpenAI.BadRequestError);
  await rejectsWith(c.completions.create({ model: "x", prompt: PROMPT, n: 2 }), OpenAI.BadRequestError,
                    (e) => assert.equal(e.param, "n"));
  // and the server still answers
  const r = await c.completions.create({ model: "x", prompt: PROMPT, max_tokens: 4, temperature: 0 });
  assert.equal(r.choices[0].text, greedy(PROMPT, 4));
});

test("a wrong API key is an AuthenticationError; the right one works", async () => {
  await rejectsWith(client(keyed, "wrong").models.list(), OpenAI.AuthenticationError, (e) => assert.equal(e.status, 401));
  await rejectsWith(client(keyed, "wrong").completions.create({ model: "x", prompt: PROMPT, max_tokens: 2 }),
                    OpenAI.AuthenticationError);
  const r = await client(keyed, "s3cret").completions.create({ model: "x", prompt: PROMPT, max_tokens: 4, temperature: 0 });
  assert.equal(r.choices[0].text, greedy(PROMPT, 4));
});

test("chat on a file without a template is a BadRequestError naming --chat-template", async () => {
  await rejectsWith(client(keyed, "s3cret").chat.completions.create({ model: "x", messages: chatOf("x") }),
                    OpenAI.BadRequestError, (e) => assert.match(e.message, /--chat-template/));
});

test("an unknown path is a NotFoundError", async () => {
  await rejectsWith(client(main).get("/nope"), OpenAI.NotFoundError);
});

(async () => {
  let failed = 0;
  try {
    main = await startServer("--parallel", "4", "--slot-ctx", "256", "--chat-template", "chatml");
    keyed = await startServer("--api-key", "s3cret");
    for (const { name, fn } of tests) {
      try {
        await fn();
        console.log(`ok   ${name}`);
      } catch (e) {
        failed++;
        console.log(`FAIL ${name}\n${e.stack}`);
      }
    }
  } finally {
    for (const s of [main, keyed]) if (s) s.proc.kill("SIGTERM");
  }
  console.log(failed ? `${failed} of ${tests.length} failed` : `all ${tests.length} passed`);
  process.exit(failed ? 1 : 0);
})().catch((e) => {
  console.log(e.stack);
  process.exit(1);
});
