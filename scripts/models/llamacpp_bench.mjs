#!/usr/bin/env node
// llama.cpp's two llama-bench figures on one GGUF file, through the prebuilt
// llama.cpp of node-llama-cpp 3.21.1 (cpu):
//   pp: one prompt of --pp N random token ids evaluated in one batch;
//   tg: --tg N tokens evaluated one at a time after an empty context;
// best of --reps R, each on a fresh context. Prints one JSON object.
//
//   node llamacpp_bench.mjs MODEL.gguf [--pp 512] [--tg 128] [--reps 3] [--threads 2] [--node-dir DIR] [--vulkan]
//
// --vulkan runs llama.cpp's Vulkan build (@node-llama-cpp/linux-x64-vulkan
// installed beside node-llama-cpp) with every layer on the GPU.
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
let modelPath = null, pp = 512, tg = 128, reps = 3, threads = 2, nodeDir = process.env.BP_NLC_DIR || ".", vulkan = false;
for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--pp") pp = parseInt(argv[++i], 10);
    else if (a === "--tg") tg = parseInt(argv[++i], 10);
    else if (a === "--reps") reps = parseInt(argv[++i], 10);
    else if (a === "--threads") threads = parseInt(argv[++i], 10);
    else if (a === "--node-dir") nodeDir = argv[++i];
    else if (a === "--vulkan") vulkan = true;
    else if (modelPath == null) modelPath = a;
    else { process.stderr.write(`llamacpp_bench.mjs: unexpected ${a}\n`); process.exit(2); }
}
if (!modelPath) { process.stderr.write("usage: node llamacpp_bench.mjs MODEL.gguf [--pp N] [--tg N] [--reps R] [--threads T] [--node-dir DIR]\n"); process.exit(2); }

let nlc;
try {
    const req = createRequire(path.join(path.resolve(nodeDir), "package.json"));
    nlc = await import(pathToFileURL(req.resolve("node-llama-cpp")).href);
} catch (e) {
    process.stderr.write(`llamacpp_bench.mjs: cannot load node-llama-cpp from ${nodeDir}: ${e.message}\n`);
    process.exit(77);
}
const llama = await nlc.getLlama({ gpu: vulkan ? "vulkan" : false, build: "never", maxThreads: threads, logLevel: nlc.LlamaLogLevel.error, progressLogs: false });
const model = await llama.loadModel({ modelPath, gpuLayers: vulkan ? "max" : 0 });
const nVocab = model.tokens.vocabSize ?? 32000;
let seed = 12345;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed; };
const ids = (n) => Array.from({ length: n }, () => 3 + (rand() % (nVocab - 3)));

async function timeOnce(fn, ctxSize, batch) {
    const context = await model.createContext({ contextSize: ctxSize, batchSize: batch, threads, sequences: 1 });
    const seq = context.getSequence();
    const t0 = process.hrtime.bigint();
    await fn(seq);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    await context.dispose();
    return ms;
}

const ppRun = async (seq) => { await seq.evaluateWithoutGeneratingNewTokens(ids(pp)); };
const tgRun = async (seq) => {
    for (const t of ids(tg)) await seq.evaluateWithoutGeneratingNewTokens([t]);
};
let ppBest = Infinity, tgBest = Infinity;
await timeOnce(async (s) => { await s.evaluateWithoutGeneratingNewTokens(ids(8)); }, 64, 64);  // warm-up
for (let r = 0; r < reps; r++) {
    if (pp > 0) ppBest = Math.min(ppBest, await timeOnce(ppRun, pp + 8, pp));
    if (tg > 0) tgBest = Math.min(tgBest, await timeOnce(tgRun, tg + 8, 8));
}
process.stdout.write(JSON.stringify({
    model: modelPath, threads, pp, tg, reps, gpu: llama.gpu,
    pp_tokens_per_s: pp > 0 ? pp / (ppBest / 1000) : null,
    tg_tokens_per_s: tg > 0 ? tg / (tgBest / 1000) : null,
}) + "\n");
await model.dispose();
await llama.dispose();
