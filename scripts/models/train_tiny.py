#!/usr/bin/python3
"""Train tiny-kjv: a small llama on the King James Bible, written as a GGUF
file that llama.cpp loads as architecture `llama` (models/tiny/README.md).

Stages (each cached in --work, so a rerun only redoes what is missing):
  corpus   `bible -l0 Gen1:1-Rev22:21` (Debian bible-kjv + bible-kjv-text)
  vocab    SentencePiece BPE, byte fallback, <unk>=0 <s>=1 </s>=2, no
           normalisation (llama.cpp's SPM tokenizer does none)
  train    a llama in torch: RMSNorm, SwiGLU, grouped-query attention and
           rotary embeddings in GGUF's NORMAL mode (adjacent pairs
           x[2i], x[2i+1] rotated by pos * base^(-2i/head_dim)), so the
           weights go to GGUF as they are (no q/k permutation)
  export   GGUF v3: norms f32, matrices f16; backplane.gguf.Writer when
           the module imports (PYTHONPATH=build/python), else the small
           writer below (both give the same bytes: --check-writers)

Deterministic given --seed and --steps (torch.manual_seed, 2 threads, a
fixed number of steps): the same torch build gives the same file.

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

CFG = dict(dim=128, n_layers=4, n_heads=4, n_kv_heads=2, ffn=352, ctx=256,
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
    """Chunks for the tokenizer: split before each chapter heading that
    starts with a letter ("Genesis 1"; "1 Kings 1" stays with the chunk
    before it). The chunks only bound SentencePiece calls; their ids are
    concatenated into one stream."""
    parts, cur = [], []
    for line in text.split("\n"):
        if line and not line[0].isdigit() and cur and any(c.strip() for c in cur):
            parts.append("\n".join(cur) + "\n")
            cur = []
        cur.append(line)
    if cur:
        parts.append("\n".join(cur))
    return parts


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


def train(args, ids, ckpt):
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
    for step in range(args.steps):
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
        if step % 25 == 0 or step == args.steps - 1:
            el = time.time() - t0
            print(f"step {step} loss {loss.item():.4f} (avg25 {np.mean(log[-25:]):.4f}) "
                  f"lr {lr:.2e} {el:.0f}s", flush=True)
    el = time.time() - t0
    print(f"trained {args.steps} steps in {el:.0f}s, final avg loss (last 25) "
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
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--seq", type=int, default=128, help="training window (tokens, BOS included)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--writer", choices=("auto", "backplane", "builtin"), default="auto")
    ap.add_argument("--check-writers", action="store_true",
                    help="write with both writers and require identical bytes")
    ap.add_argument("--retrain", action="store_true", help="ignore a cached checkpoint")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    corpus = os.path.join(args.work, "kjv.txt")
    if not os.path.exists(corpus):
        make_corpus(corpus)
    prefix = os.path.join(args.work, "kjv-spm")
    if not os.path.exists(prefix + ".model"):
        make_vocab(corpus, prefix, CFG["vocab"], args.seed)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")

    ckpt = os.path.join(args.work, f"ckpt-s{args.seed}-n{args.steps}-b{args.batch}-t{args.seq}-lr{args.lr}.pt")
    if os.path.exists(ckpt) and not args.retrain:
        model = load_model(ckpt, args.threads)
    else:
        text = open(corpus, encoding="utf-8").read()
        ids = []
        for ch in chapters(text):
            ids += sp.encode(ch)
        print(f"corpus {len(text)} chars, {len(ids)} tokens", flush=True)
        model = train(args, ids, ckpt)
        model.eval()

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
