#!/usr/bin/env python3
"""Cross-check bp-generate against llama.cpp (node-llama-cpp, reference.mjs)
on one GGUF model:

 1. tokenization: `bp-generate --model FILE --tokenize -p TEXT` prints the
    ids as a JSON list (BOS included when the file says add_bos_token); they
    must equal llama.cpp's (special-token text not parsed) for every string
    of strings.json;
 2. logits: `bp-generate --model FILE -p TEXT -n N --temp 0 --json
    --logits-out OUT.f32` writes n_vocab f32 per evaluated position (the
    prompt's, then each generated token's) and prints a JSON object with
    prompt_tokens and tokens (the generated ids); llama.cpp evaluates the
    same ids, and log_softmax of every row must be within --tol of
    llama.cpp's log-probabilities (max abs difference over the entries
    whose llama.cpp probability is above --min-prob);
 3. greedy: the generated ids equal llama.cpp's greedy ids up to the first
    position where llama.cpp's top-two log-prob margin is below --tol.

Exit status: 0 pass, 1 fail, 77 skip (node or node-llama-cpp missing).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIPPED: crosscheck.py needs numpy (python3-numpy)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
DEFAULT_PROMPTS = [
    "In the beginning God created",
    "And the LORD spake unto Moses, saying,",
    "Blessed are the poor in spirit:",
    "The quick brown fox jumps over the lazy dog.",
]


class Skip(Exception):
    pass


def log_softmax(rows):
    rows = rows.astype(np.float64)
    m = rows.max(axis=1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))


class Reference:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.node = shutil.which("node")
        if self.node is None:
            raise Skip("node is not installed")
        if not os.path.isdir(os.path.join(args.node_dir, "node_modules", "node-llama-cpp")):
            raise Skip(f"node-llama-cpp is not installed in {args.node_dir} (setup.sh)")
        self.n = 0

    def run(self, *extra):
        cmd = [self.node, os.path.join(HERE, "reference.mjs"), self.args.model, *extra,
               "--threads", str(self.args.threads), "--node-dir", self.args.node_dir]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.args.timeout)
        if p.returncode == SKIP:
            raise Skip(f"reference.mjs: {p.stderr.strip()}")
        if p.returncode != 0:
            raise RuntimeError(f"reference.mjs {' '.join(extra)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
        return p.stdout

    def file(self, obj):
        self.n += 1
        path = os.path.join(self.tmp, f"ref{self.n}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False)
        return path

    def tokenize(self, strings, special=False):
        return json.loads(self.run("--tokenize", self.file(strings), *(["--special"] if special else [])))

    def logprobs(self, ids):
        out = os.path.join(self.tmp, f"ref{self.n}.f32")
        info = json.loads(self.run("--logprobs", self.file(ids), out))
        rows = np.fromfile(out, dtype="<f4").reshape(info["n_pos"], info["n_vocab"])
        return rows, info

    def greedy(self, ids, n):
        return json.loads(self.run("--greedy", self.file(ids), str(n)))


def bp(args, *extra):
    cmd = [args.bp_generate, "--model", args.model, *extra]
    p = subprocess.run(cmd, capture_output=True, timeout=args.timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def parse_json_output(out):
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        for line in reversed(out.strip().splitlines()):
            line = line.strip()
            if line.startswith("{") or line.startswith("["):
                return json.loads(line)
        raise


def short(s, n=60):
    r = repr(s)
    return r if len(r) <= n else r[:n - 5] + "...'"


def check_tokenize(args, ref):
    with open(args.strings, encoding="utf-8") as f:
        strings = json.load(f)
    want = ref.tokenize(strings)
    bad = 0
    for s, w in zip(strings, want):
        rc, out, err = bp(args, "--tokenize", "-p", s)
        got = None
        if rc == 0:
            try:
                got = parse_json_output(out)
            except (json.JSONDecodeError, ValueError):
                got = None
        if got != w:
            bad += 1
            if bad <= args.show:
                why = f"rc {rc}: {err.strip()[-200:]}" if rc != 0 else f"bp {got}\n        llama.cpp {w}"
                print(f"  tokenize MISMATCH {short(s)}\n        {why}")
    print(f"tokenize: {len(strings) - bad}/{len(strings)} strings agree with llama.cpp")
    return bad == 0


def check_generate(args, ref, tmp, prompt, idx):
    out_f32 = os.path.join(tmp, f"bp{idx}.f32")
    extra = ["-p", prompt, "-n", str(args.n), "--temp", "0", "--json", "--logits-out", out_f32]
    if args.device:
        extra += ["--device", args.device]
    rc, out, err = bp(args, *extra)
    label = short(prompt, 48)
    if rc != 0:
        print(f"  {label}: bp-generate failed ({rc}): {err.strip()[-500:]}")
        return False
    try:
        res = parse_json_output(out)
        ptoks, gtoks = list(res["prompt_tokens"]), list(res["tokens"])
    except (json.JSONDecodeError, ValueError, KeyError, TypeError) as e:
        print(f"  {label}: bp-generate --json output unreadable ({e}): {out[-300:]!r}")
        return False
    ok = True
    want_p = ref.tokenize([prompt])[0]
    if ptoks != want_p:
        print(f"  {label}: prompt_tokens {ptoks} != llama.cpp {want_p}")
        return False
    P = len(ptoks)
    # llama.cpp evaluates bp's own sequence: every row compares like with like
    ids = ptoks + gtoks[:-1] if gtoks else ptoks
    ref_lp, info = ref.logprobs(ids)
    nv = ref_lp.shape[1]
    raw = np.fromfile(out_f32, dtype="<f4")
    if raw.size % nv != 0 or raw.size // nv < len(ids):
        print(f"  {label}: {out_f32} holds {raw.size} floats, want {len(ids)} rows of {nv} "
              f"(prompt {P} + generated {len(gtoks)})")
        return False
    bp_lp = log_softmax(raw.reshape(-1, nv)[:len(ids)])
    if not np.isfinite(bp_lp).all():
        print(f"  {label}: bp-generate's logits hold NaN or inf")
        return False
    mask = ref_lp > np.log(args.min_prob)
    diff = np.where(mask, np.abs(bp_lp - ref_lp), 0.0)
    per_row = diff.max(axis=1)
    worst = int(per_row.argmax())
    maxd_prompt = float(per_row[:P].max())
    maxd_gen = float(per_row[P:].max()) if len(ids) > P else 0.0
    if per_row.max() > args.tol:
        ok = False
        tok = int(diff[worst].argmax())
        print(f"  {label}: log-prob difference {per_row.max():.4g} > tol {args.tol} at position {worst} "
              f"(token {tok}: bp {bp_lp[worst, tok]:.4f}, llama.cpp {ref_lp[worst, tok]:.4f})")
    agree_top = int((bp_lp.argmax(1) == ref_lp.argmax(1)).sum())

    # greedy: llama.cpp's own greedy continuation of the prompt
    want_g = ref.greedy(ptoks, args.n)
    srt = np.sort(ref_lp, axis=1)
    margins = srt[:, -1] - srt[:, -2]
    n_same = 0
    while n_same < min(len(gtoks), len(want_g)) and gtoks[n_same] == want_g[n_same]:
        n_same += 1
    greedy_note = f"{n_same}/{len(want_g)} greedy ids agree"
    if n_same < len(want_g):
        if n_same == len(gtoks):
            # bp-generate stopped early (an end-of-generation token) in agreement
            greedy_note += f" (bp-generate stopped after {len(gtoks)}, at id {gtoks[-1] if gtoks else None})"
        else:
            m = float(margins[P - 1 + n_same])
            if m < args.tol:
                greedy_note += f" (then a near-tie: llama.cpp's top-two margin {m:.2g} < tol)"
            else:
                ok = False
                greedy_note += (f"; FAIL at step {n_same}: bp {gtoks[n_same]}, llama.cpp {want_g[n_same]}, "
                                f"margin {m:.3g}")
    print(f"  {label}: {P} prompt + {len(gtoks)} generated; max |dlogp| prompt {maxd_prompt:.2e}, "
          f"generated {maxd_gen:.2e}; top-1 agrees {agree_top}/{len(ids)}; {greedy_note}"
          + ("" if info["min_listed"] == nv else f" [llama.cpp listed only {info['min_listed']} of {nv}]")
          + ("" if ok else "  FAIL"))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bp-generate", required=True, help="path of the bp-generate program")
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--device", help="passed to bp-generate as --device")
    ap.add_argument("--node-dir", required=True, help="folder whose node_modules holds node-llama-cpp (setup.sh)")
    ap.add_argument("--tol", type=float, default=0.02,
                    help="max abs log-prob difference; also the greedy near-tie margin (default 0.02)")
    ap.add_argument("--min-prob", type=float, default=1e-4,
                    help="compare log-probs only where llama.cpp's probability exceeds this")
    ap.add_argument("-n", type=int, default=32, help="tokens to generate per prompt")
    ap.add_argument("--prompt", action="append", help="prompt for checks 2 and 3 (repeatable)")
    ap.add_argument("--strings", default=os.path.join(HERE, "strings.json"))
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per command")
    ap.add_argument("--show", type=int, default=10, help="mismatches shown per check")
    ap.add_argument("--skip-tokenize", action="store_true")
    args = ap.parse_args()
    args.model = os.path.abspath(args.model)
    args.node_dir = os.path.abspath(args.node_dir)

    print(f"crosscheck: {args.model}\n  bp-generate {args.bp_generate}"
          f"{' --device ' + args.device if args.device else ''}; llama.cpp (node-llama-cpp) in {args.node_dir}; "
          f"tol {args.tol}, min prob {args.min_prob}")
    if not os.access(args.bp_generate, os.X_OK):
        print(f"FAIL: {args.bp_generate} is not an executable program")
        return 1
    if not os.path.isfile(args.model):
        print(f"FAIL: no model file {args.model}")
        return 1
    results = {}
    with tempfile.TemporaryDirectory(prefix="bp-crosscheck-") as tmp:
        try:
            ref = Reference(args, tmp)
            if not args.skip_tokenize:
                results["tokenize"] = check_tokenize(args, ref)
            oks = [check_generate(args, ref, tmp, p, i) for i, p in enumerate(args.prompt or DEFAULT_PROMPTS)]
            print(f"logits+greedy: {sum(oks)}/{len(oks)} prompts pass")
            results["logits+greedy"] = all(oks)
        except Skip as e:
            print(f"SKIPPED: {e}")
            return SKIP
    failed = [k for k, v in results.items() if not v]
    print("PASS" if not failed else f"FAIL: {', '.join(failed)}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
