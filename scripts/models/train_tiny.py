#!/usr/bin/python3
"""Train tiny-kjv: a small llama on the King James Bible, written as a GGUF
file that llama.cpp loads as architecture `llama` (models/tiny/README.md).

Stages (each cached in --work, so a rerun only redoes what is missing):
  corpus   `bible -l0 Gen1:1-Rev22:21` (Debian bible-kjv + bible-kjv-text)
  vocab    SentencePiece BPE, byte fallback, <unk>=0 <s>=1 </s>=2, no
           normalisation (llama.cpp's SPM tokenizer does none)
  held-out every 100th chapter (index % 100 == 50, 12 of the 1189) is kept
           out of training and written to --heldout-out
           (models/tiny/heldout.txt); the script ends by printing the
           model's perplexity on it, measured as
           tests/models/heldout_perplexity.py measures the GGUF file
  train    a llama in torch: RMSNorm, SwiGLU, grouped-query attention and
           rotary embeddings in GGUF's NORMAL mode (adjacent pairs
           x[2i], x[2i+1] rotated by pos * base^(-2i/head_dim)), so the
           weights go to GGUF as they are (no q/k permutation)
  export   GGUF v3: norms f32, matrices f16; backplane.gguf.Writer when
           the module imports (PYTHONPATH=build/python), else the small
           writer below (both give the same bytes: --check-writers)

Deterministic given the options (torch.manual_seed, 2 threads, a fixed
number of steps): the same torch build gives the same file.

  /usr/bin/python3 scripts/models/train_tiny.py --work /tmp/tiny-kjv \\
      --out models/tiny/tiny-kjv.gguf
"""
import argparse
import math
import os
import struct
import subprocess
import sys
import time

import numpy as np

CFG = dict(dim=192, n_layers=4, n_heads=6, n_kv_heads=3, ffn=512, ctx=256,
           vocab=2048, rope_base=10000.0, eps=1e-5)


# ---------------------------------------------------------------- corpus
def make_corpus(path):
    raw = subprocess.run(["bible", "-l0", "Gen1:1-Rev22:21"], check=True,
                         capture_output=True, text=True).stdout
    out = []
    for line in raw.split("\n"):
        out.append(line.strip())
    text = "\n".join(out).strip("\n") + "\n"
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def chapters(text):
    """The corpus as chapters, in order: each a heading line ("Genesis 1",
    "1 Kings 1"), a blank line and its verses. A heading is the one kind of
    line with a blank line on both sides."""
    lines = text.split("\n")
    starts = [i for i in range(1, len(lines) - 1)
              if lines[i] and not lines[i - 1] and not lines[i + 1]]
    if lines and lines[0] and len(lines) > 1 and not lines[1]:
        starts.insert(0, 0)
    out = []
    for a, b in zip(starts, starts[1:] + [len(lines)]):
        out.append("\n".join(lines[a:b]).strip("\n") + "\n")
    return out


def is_heldout(index, every):
    """Chapters index % every == every // 2 (0-based over the 1189) never
    reach training: the held-out text, spread over the whole book."""
    return every > 0 and index % every == every // 2


def heldout_chunks(text, max_bytes=700):
    """The held-out text as the perplexity is measured on it: whole lines
    (blank ones included) grouped in order while a group stays within
    max_bytes of UTF-8, each group then evaluated alone as BOS + its
    tokens. 700 bytes keeps a group under the 256-token context (3.5 bytes
    a token on average; a verse is at most about 530 bytes).
    tests/models/heldout_perplexity.py groups the same way."""
    chunks, cur, size = [], [], 0
    for line in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
        n = len(line.encode("utf-8")) + 1
        if cur and size + n > max_bytes:
            chunks.append("\n".join(cur) + "\n")
            cur, size = [], 0
        cur.append(line)
        size += n
    if cur:
        chunks.append("\n".join(cur) + "\n")
    return chunks


# ----------------------------------------------------------------- vocab
def make_vocab(corpus, prefix, vocab_size, seed):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="bpe",
        vocab_size=vocab_size, character_coverage=1.0, byte_fallback=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, split_digits=True, allow_whitespace_only_pieces=True,
        num_threads=2, minloglevel=2)


# ----------------------------------------------------------------- model
def build_model(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional
    dim, nh, nkv = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    hd = dim // nh

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg["eps"]) * self.weight

    def rope(x, cos, sin):
        # x [B, T, H, hd]: pairs (x[2i], x[2i+1]) rotated (GGUF rope NORMAL)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        r0 = x0 * cos - x1 * sin
        r1 = x0 * sin + x1 * cos
        return torch.stack((r0, r1), dim=-1).flatten(-2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm = RMSNorm()
            self.wq = nn.Linear(dim, nh * hd, bias=False)
            self.wk = nn.Linear(dim, nkv * hd, bias=False)
            self.wv = nn.Linear(dim, nkv * hd, bias=False)
            self.wo = nn.Linear(nh * hd, dim, bias=False)
            self.ffn_norm = RMSNorm()
            self.w_gate = nn.Linear(dim, cfg["ffn"], bias=False)
            self.w_up = nn.Linear(dim, cfg["ffn"], bias=False)
            self.w_down = nn.Linear(cfg["ffn"], dim, bias=False)

        def forward(self, x, cos, sin, mask):
            B, T, _ = x.shape
            h = self.attn_norm(x)
            q = rope(self.wq(h).view(B, T, nh, hd), cos, sin)
            k = rope(self.wk(h).view(B, T, nkv, hd), cos, sin)
            v = self.wv(h).view(B, T, nkv, hd)
            # query head j reads kv head j // (nh / nkv), as ggml broadcasts
            k = k.repeat_interleave(nh // nkv, dim=2)
            v = v.repeat_interleave(nh // nkv, dim=2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + mask[:T, :T]
            o = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, nh * hd)
            x = x + self.wo(o)
            h = self.ffn_norm(x)
            return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(cfg["vocab"], dim)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg["n_layers"]))
            self.norm = RMSNorm()
            self.out = nn.Linear(dim, cfg["vocab"], bias=False)
            T = cfg["ctx"]
            inv = cfg["rope_base"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
            ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
            self.register_buffer("cos", ang.cos().float()[None, :, None, :], persistent=False)
            self.register_buffer("sin", ang.sin().float()[None, :, None, :], persistent=False)
            self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1), persistent=False)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02
                    if name.endswith("wo.weight") or name.endswith("w_down.weight"):
                        std = 0.02 / math.sqrt(2 * cfg["n_layers"])
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.tok(idx)
            cos, sin = self.cos[:, :T], self.sin[:, :T]
            for b in self.blocks:
                x = b(x, cos, sin, self.mask)
            return self.out(self.norm(x))

    return Llama()


def heldout_nll(torch, model, chunk_ids):
    """Mean negative log-likelihood (nats/token) over the held-out chunks:
    each chunk is BOS + its ids, every id after BOS predicted."""
    F = torch.nn.functional
    total, count = 0.0, 0
    was = model.training
    model.eval()
    with torch.no_grad():
        for ids in chunk_ids:
            x = torch.tensor([[1] + ids[:-1]])
            y = torch.tensor(ids)
            total += F.cross_entropy(model(x)[0], y, reduction="sum").item()
            count += len(ids)
    model.train(was)
    return total / count


def train(args, ids, ckpt, heldout_ids):
    import torch
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    cfg = CFG
    model = build_model(torch, cfg)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"params {nparams}", flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    data = torch.tensor(ids, dtype=torch.long)
    T = args.seq - 1
    gen = torch.Generator().manual_seed(args.seed)
    warm = max(1, args.steps // 20)
    t0 = time.time()
    log = []
    # --stop-after ends the run early on the schedule of --steps (the
    # learning rate as a full run would have it at each step).
    for step in range(args.stop_after or args.steps):
        lr = args.lr * (step + 1) / warm if step < warm else \
            args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / (args.steps - warm))))
        for g in opt.param_groups:
            g["lr"] = lr
        off = torch.randint(0, len(data) - T - 1, (args.batch,), generator=gen)
        win = torch.stack([data[o:o + T + 1] for o in off.tolist()])
        bos = torch.full((args.batch, 1), 1, dtype=torch.long)
        x = torch.cat((bos, win[:, :-1]), 1)
        y = torch.cat((win[:, :1], win[:, 1:]), 1)
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, cfg["vocab"]), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        log.append(loss.item())
        if step < 5 or step % 25 == 0 or step == (args.stop_after or args.steps) - 1:
            el = time.time() - t0
            print(f"step {step} loss {loss.item():.4f} (avg25 {np.mean(log[-25:]):.4f}) "
                  f"lr {lr:.2e} {el:.0f}s", flush=True)
        if args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < (args.stop_after or args.steps):
            # A look at over-fitting on the way, and a checkpoint to fall back
            # on if the run has to be cut short; neither changes the result.
            nll = heldout_nll(torch, model, heldout_ids)
            print(f"step {step + 1} held-out {nll:.4f} nats/token, perplexity {math.exp(nll):.2f}", flush=True)
            torch.save(model.state_dict(), ckpt + ".partial")
    el = time.time() - t0
    print(f"trained {step + 1} steps in {el:.0f}s, final avg loss (last 25) "
          f"{np.mean(log[-25:]):.4f}", flush=True)
    torch.save(model.state_dict(), ckpt)
    return model


def load_model(ckpt, threads):
    import torch
    torch.set_num_threads(threads)
    model = build_model(torch, CFG)
    model.load_state_dict(torch.load(ckpt))
    model.eval()
    return model


def sample(model, sp, prompt, n):
    import torch
    ids = [1] + sp.encode(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids[-CFG["ctx"]:]]))[0, -1]
            ids.append(int(logits.argmax()))
    return sp.decode(ids[1:])


# ---------------------------------------------------------------- export
def gguf_tensors(model):
    """(name, array) in GGUF order; arrays in NumPy order (a Linear's
    [out, in] is GGUF ne [in, out], same bytes)."""
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    f16 = lambda a: np.ascontiguousarray(a.astype(np.float16))  # noqa: E731
    f32 = lambda a: np.ascontiguousarray(a.astype(np.float32))  # noqa: E731
    out = [("token_embd.weight", f16(sd["tok.weight"]))]
    for i in range(CFG["n_layers"]):
        p = f"blocks.{i}."
        out += [(f"blk.{i}.attn_norm.weight", f32(sd[p + "attn_norm.weight"])),
                (f"blk.{i}.attn_q.weight", f16(sd[p + "wq.weight"])),
                (f"blk.{i}.attn_k.weight", f16(sd[p + "wk.weight"])),
                (f"blk.{i}.attn_v.weight", f16(sd[p + "wv.weight"])),
                (f"blk.{i}.attn_output.weight", f16(sd[p + "wo.weight"])),
                (f"blk.{i}.ffn_norm.weight", f32(sd[p + "ffn_norm.weight"])),
                (f"blk.{i}.ffn_gate.weight", f16(sd[p + "w_gate.weight"])),
                (f"blk.{i}.ffn_up.weight", f16(sd[p + "w_up.weight"])),
                (f"blk.{i}.ffn_down.weight", f16(sd[p + "w_down.weight"]))]
    out += [("output_norm.weight", f32(sd["norm.weight"])),
            ("output.weight", f16(sd["out.weight"]))]
    return out


def gguf_metadata(sp):
    c = CFG
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i)
                     else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1)
    assert len(tokens) == c["vocab"]
    # (key, value, kind): kinds as backplane.gguf.Writer.add names them
    return [
        ("general.architecture", "llama", "str"),
        ("general.name", "tiny-kjv", "str"),
        ("general.license", "public domain (text); model: see models/tiny/README.md", "str"),
        ("general.file_type", 1, "u32"),
        ("llama.context_length", c["ctx"], "u32"),
        ("llama.embedding_length", c["dim"], "u32"),
        ("llama.block_count", c["n_layers"], "u32"),
        ("llama.feed_forward_length", c["ffn"], "u32"),
        ("llama.attention.head_count", c["n_heads"], "u32"),
        ("llama.attention.head_count_kv", c["n_kv_heads"], "u32"),
        ("llama.rope.dimension_count", c["dim"] // c["n_heads"], "u32"),
        ("llama.rope.freq_base", c["rope_base"], "f32"),
        ("llama.attention.layer_norm_rms_epsilon", c["eps"], "f32"),
        ("llama.vocab_size", c["vocab"], "u32"),
        ("tokenizer.ggml.model", "llama", "str"),
        ("tokenizer.ggml.tokens", tokens, "str"),
        ("tokenizer.ggml.scores", scores, "f32"),
        ("tokenizer.ggml.token_type", types, "i32"),
        ("tokenizer.ggml.bos_token_id", 1, "u32"),
        ("tokenizer.ggml.eos_token_id", 2, "u32"),
        ("tokenizer.ggml.unknown_token_id", 0, "u32"),
        ("tokenizer.ggml.add_bos_token", True, "bool"),
        ("tokenizer.ggml.add_eos_token", False, "bool"),
    ]


def write_builtin(path, meta, tensors, align=32):
    """A minimal GGUF v3 writer (string, u32, i32, f32, bool and arrays)."""
    T = {"u32": (4, "<I"), "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"), "str": (8, None)}

    def s(x):
        b = x.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def scalar(kind, v):
        return s(v) if kind == "str" else struct.pack(T[kind][1], v)

    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
    for key, v, kind in meta:
        out += s(key)
        if isinstance(v, list):
            out += struct.pack("<IIQ", 9, T[kind][0], len(v))
            for e in v:
                out += scalar(kind, e)
        else:
            out += struct.pack("<I", T[kind][0]) + scalar(kind, v)
    off = 0
    blobs = []
    for name, a in tensors:
        ne = list(reversed(a.shape))
        gt = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}[a.dtype]
        out += s(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", gt, off)
        b = a.tobytes()
        blobs.append(b)
        off += (len(b) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for b in blobs:
        out += b + b"\0" * (-len(b) % align)
    with open(path, "wb") as f:
        f.write(out)


def write_backplane(path, meta, tensors):
    from backplane import gguf
    w = gguf.Writer()
    for key, v, kind in meta:
        w.add(key, v, None if kind in ("str", "bool") else kind)
    for name, a in tensors:
        w.add_tensor(name, a, "f16" if a.dtype == np.float16 else "f32")
    w.write(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/tiny-kjv", help="cache folder (corpus, vocab, checkpoint)")
    ap.add_argument("--out", default="models/tiny/tiny-kjv.gguf")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after this many steps of the --steps schedule (0: run it all)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--seq", type=int, default=256, help="training window (tokens, BOS included)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dim", type=int, default=CFG["dim"], help="embedding width")
    ap.add_argument("--layers", type=int, default=CFG["n_layers"])
    ap.add_argument("--heads", type=int, default=CFG["n_heads"])
    ap.add_argument("--kv-heads", type=int, default=CFG["n_kv_heads"])
    ap.add_argument("--ffn", type=int, default=CFG["ffn"], help="FFN width")
    ap.add_argument("--heldout-every", type=int, default=100,
                    help="hold out chapters index %% N == N // 2 (0: none)")
    ap.add_argument("--heldout-out", default="models/tiny/heldout.txt",
                    help="where the held-out chapters are written")
    ap.add_argument("--eval-every", type=int, default=0,
                    help="steps between held-out evaluations (and partial checkpoints) during training")
    ap.add_argument("--writer", choices=("auto", "backplane", "builtin"), default="auto")
    ap.add_argument("--check-writers", action="store_true",
                    help="write with both writers and require identical bytes")
    ap.add_argument("--retrain", action="store_true", help="ignore a cached checkpoint")
    args = ap.parse_args()
    CFG.update(dim=args.dim, n_layers=args.layers, n_heads=args.heads,
               n_kv_heads=args.kv_heads, ffn=args.ffn)
    os.makedirs(args.work, exist_ok=True)

    corpus = os.path.join(args.work, "kjv.txt")
    if not os.path.exists(corpus):
        make_corpus(corpus)
    prefix = os.path.join(args.work, "kjv-spm")
    if not os.path.exists(prefix + ".model"):
        make_vocab(corpus, prefix, CFG["vocab"], args.seed)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")

    text = open(corpus, encoding="utf-8").read()
    chs = chapters(text)
    held = [c for i, c in enumerate(chs) if is_heldout(i, args.heldout_every)]
    heldout_text = "".join(held)
    if args.heldout_out:
        os.makedirs(os.path.dirname(os.path.abspath(args.heldout_out)), exist_ok=True)
        with open(args.heldout_out, "w", encoding="utf-8") as f:
            f.write(heldout_text)
    heldout_ids = [sp.encode(c) for c in heldout_chunks(heldout_text)]
    print(f"{len(chs)} chapters, {len(held)} held out ({len(heldout_text)} bytes, "
          f"{sum(map(len, heldout_ids))} tokens in {len(heldout_ids)} chunks)", flush=True)

    c = CFG
    ckpt = os.path.join(args.work, f"ckpt-d{c['dim']}-l{c['n_layers']}-h{c['n_heads']}-kv{c['n_kv_heads']}-f{c['ffn']}"
                        f"-s{args.seed}-n{args.steps}{f'-stop{args.stop_after}' if args.stop_after else ''}-b{args.batch}-t{args.seq}-lr{args.lr}-ho{args.heldout_every}.pt")
    if os.path.exists(ckpt) and not args.retrain:
        model = load_model(ckpt, args.threads)
    else:
        ids = []
        for i, ch in enumerate(chs):
            if not is_heldout(i, args.heldout_every):
                ids += sp.encode(ch)
        print(f"corpus {len(text)} chars, {len(ids)} training tokens", flush=True)
        model = train(args, ids, ckpt, heldout_ids)
        model.eval()
    import torch
    nll = heldout_nll(torch, model, heldout_ids)
    print(f"held-out: {nll:.4f} nats/token, perplexity {math.exp(nll):.3f} (torch, f32)", flush=True)

    for p in ("In the beginning", "And the LORD said unto Moses,", "Blessed are the"):
        print(repr(sample(model, sp, p, 40)), flush=True)

    meta, tensors = gguf_metadata(sp), gguf_tensors(model)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    writer = args.writer
    if writer == "auto":
        try:
            import backplane.gguf  # noqa: F401
            writer = "backplane"
        except ImportError:
            writer = "builtin"
    (write_backplane if writer == "backplane" else write_builtin)(args.out, meta, tensors)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes, writer {writer})")
    if args.check_writers:
        other = args.out + ".other"
        (write_builtin if writer == "backplane" else write_backplane)(other, meta, tensors)
        same = open(other, "rb").read() == open(args.out, "rb").read()
        os.unlink(other)
        print("writers agree" if same else "WRITERS DIFFER")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
