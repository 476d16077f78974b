#!/usr/bin/env python3
"""Held-out perplexity of a GGUF model, computed by Backplane itself.

The held-out text (models/tiny/heldout.txt: the chapters that
scripts/models/train_tiny.py keeps out of training) is cut into chunks the
way the training script measures it (train_tiny.heldout_chunks: whole
lines, at most 700 bytes a chunk); each chunk goes through

    bp-generate --model FILE -f CHUNK -n 0 --temp 0 --json --logits-out OUT

which evaluates BOS + the chunk's tokens and writes one logits row per
position (docs/tools.md). Row i is the distribution of token i + 1, so each
chunk scores every token after BOS. The perplexity is
exp(total negative log-likelihood / tokens scored).

With --readme, the figure must be at or below the one the README gives
after "Held-out perplexity of this file:"; a model that gets worse, a
tokenizer that splits the text differently or a kernel that changes the
logits beyond rounding fails the check.

Exit status: 0 pass, 1 fail, 77 skip (numpy missing).
"""
import argparse
import concurrent.futures
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIPPED: heldout_perplexity.py needs numpy (python3-numpy)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BOUND = re.compile(r"Held-out perplexity of this file: \*\*([0-9]+(?:\.[0-9]+)?)\*\*")


def training_script():
    # The chunking is the training script's own function, so the figure the
    # script prints while training and the one measured here are the same
    # measurement (the script imports nothing heavy at module level).
    path = os.path.join(ROOT, "scripts", "models", "train_tiny.py")
    spec = importlib.util.spec_from_file_location("train_tiny", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def score_chunk(args, tmp, index, text):
    src = os.path.join(tmp, f"chunk{index}.txt")
    out = os.path.join(tmp, f"chunk{index}.f32")
    with open(src, "w", encoding="utf-8") as f:
        f.write(text)
    cmd = [args.bp_generate, "--model", args.model, "--device", args.device, "-f", src,
           "-n", "0", "--temp", "0", "--json", "--logits-out", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    j = json.loads(p.stdout)
    ids, n_vocab = j["prompt_tokens"], j["n_vocab"]
    rows = np.fromfile(out, dtype="<f4")
    if rows.size != len(ids) * n_vocab or j["logits_rows"] != len(ids):
        raise RuntimeError(f"chunk {index}: {rows.size} floats for {len(ids)} positions of {n_vocab}")
    rows = rows.reshape(len(ids), n_vocab).astype(np.float64)[:-1]
    m = rows.max(axis=1, keepdims=True)
    logp = rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))
    nll = -logp[np.arange(len(ids) - 1), ids[1:]].sum()
    return float(nll), len(ids) - 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bp-generate", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--heldout", default=os.path.join(ROOT, "models", "tiny", "heldout.txt"))
    ap.add_argument("--readme", help="check against the figure this README gives")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()

    bound = None
    if args.readme:
        found = BOUND.search(open(args.readme, encoding="utf-8").read())
        if not found:
            print(f"FAIL: {args.readme} gives no 'Held-out perplexity of this file: **N**'")
            return 1
        bound = float(found.group(1))

    chunks = training_script().heldout_chunks(open(args.heldout, encoding="utf-8").read())
    with tempfile.TemporaryDirectory(prefix="bp-ppl-") as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        scores = list(pool.map(lambda ic: score_chunk(args, tmp, *ic), enumerate(chunks)))
    nll = sum(s for s, _ in scores)
    tokens = sum(n for _, n in scores)
    ppl = math.exp(nll / tokens)
    print(f"held-out perplexity {ppl:.3f} ({nll / tokens:.4f} nats/token over {tokens} tokens "
          f"in {len(chunks)} chunks of {os.path.basename(args.heldout)})")
    if bound is not None:
        if not ppl <= bound:
            print(f"FAIL: {ppl:.3f} is above the documented {bound}")
            return 1
        print(f"at or below the documented {bound}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
