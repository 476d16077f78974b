#!/usr/bin/env node
// llama.cpp as the reference for Backplane's model runtime, through
// node-llama-cpp 3.21.1 (CPU only). Usage:
//
//   node reference.mjs MODEL.gguf --tokenize STRINGS.json [--special]
//       -> stdout: JSON list of id lists, one per string (BOS first when the
//          file says add_bos_token; special-token text parsed only with
//          --special)
//   node reference.mjs MODEL.gguf --logprobs IDS.json OUT.f32
//       -> OUT.f32: n_pos x n_vocab little-endian f32, row i the
//          log-probabilities of the token after ids[0..i]; stdout: a JSON
//          summary (n_pos, n_vocab, min_listed: the fewest vocabulary
//          entries llama.cpp reported for a position, zero_probs: entries
//          whose probability underflowed to 0 and read -inf)
//   node reference.mjs MODEL.gguf --greedy IDS.json N
//       -> stdout: JSON list of the N greedy next ids (EOS does not stop it)
//
// Options: --threads N (default 2), --node-dir DIR (the folder whose
// node_modules holds node-llama-cpp; default $BP_NLC_DIR or the
// folder of this script). IDS.json is a JSON list of ids, or "-" for stdin.
//
// The probabilities come from LlamaContextSequence.controlledEvaluate with
// generateNext {probabilities: true} at temperature 0: node-llama-cpp's
// sampler chain is then the greedy sampler alone (no top-k/top-p/min-p), so
// the list is the softmax (f32, expf) of every vocabulary entry's logit.

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL, fileURLToPath } from "node:url";

function usage(msg) {
    if (msg) process.stderr.write(`reference.mjs: ${msg}\n`);
    process.stderr.write("usage: node reference.mjs MODEL.gguf (--tokenize STRINGS.json [--special] | " +
        "--logprobs IDS.json OUT.f32 | --greedy IDS.json N) [--threads N] [--node-dir DIR]\n");
    process.exit(2);
}

const argv = process.argv.slice(2);
let modelPath = null, mode = null, modeArgs = [], special = false, threads = 2;
let nodeDir = process.env.BP_NLC_DIR || path.dirname(fileURLToPath(import.meta.url));
for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--tokenize") { mode = "tokenize"; modeArgs = [argv[++i]]; }
    else if (a === "--logprobs") { mode = "logprobs"; modeArgs = [argv[++i], argv[++i]]; }
    else if (a === "--greedy") { mode = "greedy"; modeArgs = [argv[++i], argv[++i]]; }
    else if (a === "--special") special = true;
    else if (a === "--threads") threads = parseInt(argv[++i], 10);
    else if (a === "--node-dir") nodeDir = argv[++i];
    else if (a.startsWith("--")) usage(`unknown option ${a}`);
    else if (modelPath == null) modelPath = a;
    else usage(`unexpected argument ${a}`);
}
if (modelPath == null || mode == null || modeArgs.some((x) => x == null)) usage();
if (!(threads > 0)) usage("--threads wants a positive number");

function readJson(file) {
    return JSON.parse(fs.readFileSync(file === "-" ? 0 : file, "utf8"));
}

// node-llama-cpp from nodeDir/node_modules, wherever this script lives
let nlc;
try {
    const req = createRequire(path.join(path.resolve(nodeDir), "package.json"));
    nlc = await import(pathToFileURL(req.resolve("node-llama-cpp")).href);
} catch (e) {
    process.stderr.write(`reference.mjs: cannot load node-llama-cpp from ${nodeDir}: ${e.message}\n`);
    process.exit(77);
}

const llama = await nlc.getLlama({
    gpu: false, build: "never", maxThreads: threads,
    logLevel: nlc.LlamaLogLevel.error, progressLogs: false,
});
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });

function withBos(ids) {
    const bos = model.tokens.bos;
    return (model.tokens.shouldPrependBosToken && bos != null) ? [bos, ...ids] : ids;
}

async function newSequence(nTokens) {
    const ctxSize = Math.max(nTokens + 1, 8);
    const context = await model.createContext({
        contextSize: ctxSize, batchSize: ctxSize, threads, sequences: 1,
    });
    return [context, context.getSequence()];
}

const vocabSize = () => {
    // GGUF llama.vocab_size if present, else the token list's length
    const arch = model.fileInfo.metadata.general.architecture;
    const v = model.fileInfo.metadata[arch]?.vocab_size;
    return Number(v ?? model.fileInfo.metadata.tokenizer.ggml.tokens.length);
};

if (mode === "tokenize") {
    const strings = readJson(modeArgs[0]);
    const out = strings.map((s) => withBos(Array.from(model.tokenize(s, special))));
    process.stdout.write(JSON.stringify(out) + "\n");
} else if (mode === "logprobs") {
    const ids = readJson(modeArgs[0]);
    const nv = vocabSize();
    const [context, seq] = await newSequence(ids.length);
    const input = ids.map((t) => [t, { generateNext: { probabilities: true, options: { temperature: 0 } } }]);
    const res = await seq.controlledEvaluate(input);
    const rows = new Float32Array(ids.length * nv).fill(-Infinity);
    let minListed = nv, zeroProbs = 0;
    for (let i = 0; i < ids.length; i++) {
        const probs = res[i]?.next?.probabilities;
        if (probs == null) throw new Error(`no probabilities at position ${i}`);
        minListed = Math.min(minListed, probs.size);
        for (const [tok, p] of probs) {
            if (p > 0) rows[i * nv + tok] = Math.log(p);
            else zeroProbs++;
        }
    }
    fs.writeFileSync(modeArgs[1], Buffer.from(rows.buffer));
    process.stdout.write(JSON.stringify({ n_pos: ids.length, n_vocab: nv, min_listed: minListed, zero_probs: zeroProbs }) + "\n");
    await context.dispose();
} else if (mode === "greedy") {
    const ids = readJson(modeArgs[0]);
    const n = parseInt(modeArgs[1], 10);
    const [context, seq] = await newSequence(ids.length + n);
    const gen = { generateNext: { token: true, options: { temperature: 0 } } };
    const out = [];
    let input = [...ids.slice(0, -1), [ids[ids.length - 1], gen]];
    for (let k = 0; k < n; k++) {
        const res = await seq.controlledEvaluate(input);
        const tok = res[input.length - 1]?.next?.token;
        if (tok == null) throw new Error(`no token at step ${k}`);
        out.push(tok);
        input = [[tok, gen]];
    }
    process.stdout.write(JSON.stringify(out) + "\n");
    await context.dispose();
}
await model.dispose();
await llama.dispose();
