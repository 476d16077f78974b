"""backplane.Model (model.h): a tiny random llama GGUF written with
bp.gguf.Writer (the names and scales of tests/models/tiny_model.cpp), run
through the module and checked against a NumPy float64 forward pass."""
import gc
import os
import threading

import numpy as np
import pytest

import backplane as bp

E, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, HEAD_DIM = 64, 2, 4, 2, 96, 16
N_PIECES, N_CTX_TRAIN, ROPE_BASE, EPS = 40, 256, 10000.0, 1e-5
V = 3 + 256 + N_PIECES
BOS, EOS = 1, 2


def _vocab():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    scores = [0.0] * len(tokens)
    types = [2, 3, 3] + [6] * 256
    for i in range(N_PIECES):
        piece = "\u2581" + chr(ord("a") + i % 26) + (chr(ord("a") + i // 26) if i >= 26 else "")
        tokens.append(piece)
        scores.append(-float(i))
        types.append(1)
    return tokens, np.array(scores, np.float32), np.array(types, np.int32)


def write_tiny_llama(path, seed=1, arch="llama", skip=None, script=None):
    """Writes the model and returns its weights as float64 NumPy arrays
    (matrices [out, in], as the GGUF's ne [in, out] reads in NumPy order).
    script: (first, second) pairs for a model whose greedy token after
    `first` is `second`, built as tiny_model.cpp's tiny_config::script."""
    rng = np.random.default_rng(seed)
    wr = bp.gguf.Writer()
    a = arch + "."
    wr.add("general.architecture", arch)
    wr.add("general.name", "tiny-" + arch)
    for k, v in [("context_length", N_CTX_TRAIN), ("embedding_length", E), ("block_count", N_LAYER),
                 ("feed_forward_length", N_FF), ("attention.head_count", N_HEAD),
                 ("attention.head_count_kv", N_HEAD_KV), ("rope.dimension_count", HEAD_DIM)]:
        wr.add(a + k, v, "u32")
    wr.add(a + "rope.freq_base", ROPE_BASE, "f32")
    wr.add(a + "attention.layer_norm_rms_epsilon", EPS, "f32")
    tokens, scores, types = _vocab()
    wr.add("tokenizer.ggml.model", "llama")
    wr.add("tokenizer.ggml.tokens", tokens)
    wr.add("tokenizer.ggml.scores", scores)
    wr.add("tokenizer.ggml.token_type", types)
    wr.add("tokenizer.ggml.bos_token_id", BOS, "u32")
    wr.add("tokenizer.ggml.eos_token_id", EOS, "u32")
    wr.add("tokenizer.ggml.unknown_token_id", 0, "u32")
    w = {}

    def scripted(name, arr):
        # Pair k: row `first` of the token table is e_k and output row
        # `second` gains e_k; the layers add nothing (their output matrices
        # are zero), so the last token alone picks the next.
        if name == "output_norm.weight":
            return np.ones_like(arr)
        if name in ("token_embd.weight", "output.weight") or name.endswith(("attn_output.weight", "ffn_down.weight")):
            arr = np.zeros_like(arr)
        for k, (first, second) in enumerate(script):
            if name == "token_embd.weight":
                arr[first, k] = 1.0
            if name == "output.weight":
                arr[second, k] += 1.0
        return arr

    def put(name, arr):
        if name == skip:
            return
        if script:
            arr = scripted(name, arr)
        arr = arr.astype(np.float32)
        wr.add_tensor(name, arr)
        w[name] = arr.astype(np.float64)

    def mat(name, n_in, n_out, gain=1.0):
        put(name, rng.standard_normal((n_out, n_in)) * (gain / np.sqrt(n_in)))

    def vec(name, n):
        put(name, 1.0 + 0.1 * rng.standard_normal(n))

    Q, KV = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    mat("token_embd.weight", E, V, np.sqrt(E))
    vec("output_norm.weight", E)
    mat("output.weight", E, V, 3.0)
    for il in range(N_LAYER):
        p = f"blk.{il}."
        vec(p + "attn_norm.weight", E)
        mat(p + "attn_q.weight", E, Q)
        mat(p + "attn_k.weight", E, KV)
        mat(p + "attn_v.weight", E, KV)
        mat(p + "attn_output.weight", Q, E)
        vec(p + "ffn_norm.weight", E)
        mat(p + "ffn_gate.weight", E, N_FF)
        mat(p + "ffn_up.weight", E, N_FF)
        mat(p + "ffn_down.weight", N_FF, E)
    wr.write(str(path))
    return w


def rms_norm(x, g):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * g


def rope_normal(x, pos):
    """llama's NORMAL mode: rotates the adjacent pairs (2i, 2i+1) of each
    head. x: [T, heads, HEAD_DIM]."""
    i = np.arange(HEAD_DIM // 2)
    theta = pos[:, None] * ROPE_BASE ** (-2.0 * i / HEAD_DIM)          # [T, hd/2]
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def reference_logits(w, ids):
    """float64 logits [T, V] of |ids| from position 0: RMSNorm, rope, GQA
    attention with a causal mask, SwiGLU."""
    ids = np.asarray(ids)
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = w["token_embd.weight"][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    group = N_HEAD // N_HEAD_KV
    for il in range(N_LAYER):
        p = f"blk.{il}."
        h = rms_norm(x, w[p + "attn_norm.weight"])
        q = rope_normal((h @ w[p + "attn_q.weight"].T).reshape(T, N_HEAD, HEAD_DIM), pos)
        k = rope_normal((h @ w[p + "attn_k.weight"].T).reshape(T, N_HEAD_KV, HEAD_DIM), pos)
        v = (h @ w[p + "attn_v.weight"].T).reshape(T, N_HEAD_KV, HEAD_DIM)
        k = np.repeat(k, group, axis=1)
        v = np.repeat(v, group, axis=1)
        s = np.einsum("thd,uhd->htu", q, k) / np.sqrt(HEAD_DIM) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        att = np.einsum("htu,uhd->thd", s, v).reshape(T, N_HEAD * HEAD_DIM)
        x = x + att @ w[p + "attn_output.weight"].T
        h = rms_norm(x, w[p + "ffn_norm.weight"])
        g = h @ w[p + "ffn_gate.weight"].T
        u = h @ w[p + "ffn_up.weight"].T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ w[p + "ffn_down.weight"].T
    return rms_norm(x, w["output_norm.weight"]) @ w["output.weight"].T


def rel_error(got, want):
    """Largest |got - want| relative to the rms of the reference (as
    tests/models/model_forward_test.cpp measures it)."""
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.max(np.abs(got - want)) / np.sqrt(np.mean(want * want)))


TOL = 1e-4  # f32 weights and KV cache: f32 rounding only


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny-llama.gguf"
    weights = write_tiny_llama(path)
    return str(path), weights


@pytest.fixture
def model(tiny):
    with bp.Model(tiny[0]) as m:
        yield m


def prompt_ids(n=7, seed=3):
    rng = np.random.default_rng(seed)
    return [BOS] + [int(t) for t in rng.integers(3, V, n - 1)]


def test_info_and_backends(model, tiny):
    i = model.info
    assert (i.arch, i.name, i.tokenizer) == ("llama", "tiny-llama", "llama")
    assert (i.n_vocab, i.n_ctx_train, i.n_embd, i.n_layer) == (V, N_CTX_TRAIN, E, N_LAYER)
    assert (i.n_head, i.n_head_kv, i.n_ff, i.head_dim) == (N_HEAD, N_HEAD_KV, N_FF, HEAD_DIM)
    assert (i.bos, i.eos) == (BOS, EOS) and isinstance(i.add_bos, bool)
    assert i.n_params == sum(a.size for a in tiny[1].values())
    assert i.weight_bytes >= 4 * (i.n_params - 2 * E * N_LAYER - E)
    d = i._asdict()
    assert d["n_vocab"] == V and d["arch"] == "llama" and len(d) == 16
    bks = model.backends
    assert len(bks) == 1 and set(bks[0]) == {"backend", "layers", "weight_bytes", "mapped"}
    assert "cpu" in bks[0]["backend"] and bks[0]["layers"] == N_LAYER
    assert bks[0]["weight_bytes"] > 0 and isinstance(bks[0]["mapped"], bool)
    assert "tiny-llama" in repr(model)


def test_tokenizer_calls(model):
    ids = model.tokenize("hello world")
    assert isinstance(ids, list) and ids and all(isinstance(t, int) and 0 <= t < V for t in ids)
    with_bos = model.tokenize("hello", add_bos=True)
    assert with_bos[0] == BOS
    assert BOS not in model.tokenize("hello", add_bos=False)
    assert model.tokenize(b"hello", add_bos=False) == model.tokenize("hello", add_bos=False)
    long = model.tokenize("x" * 5000, add_bos=False)  # more ids than the first buffer guess may hold
    assert len(long) >= 1
    assert isinstance(model.detokenize(ids), str)
    assert isinstance(model.detokenize(np.array(ids, np.int32), strip_leading_space=True), str)
    assert isinstance(model.token_bytes(3 + 0x41), bytes)
    assert isinstance(model.token_piece(3 + 0x41), str)
    assert model.is_end(EOS) and not model.is_end(3 + 0x41)


def test_prompt_logits_match_reference(model, tiny):
    ids = prompt_ids(9)
    want = reference_logits(tiny[1], ids)
    with model.context(n_ctx=64, kv_f32=True) as c:
        assert c.logits.shape == (0, V)
        c.eval(ids, all_logits=True)
        got = c.logits
        assert got.dtype == np.float32 and got.shape == (len(ids), V)
        assert rel_error(got, want) < TOL
        assert c.position == len(ids) and c.size == 64 and c.memory > 0
        assert c.argmax() == int(np.argmax(got[-1]))
        got[:] = 0  # a copy: the context's logits are untouched
        assert rel_error(c.logits, want) < TOL
    c2 = model.context(n_ctx=64, n_batch=4, kv_f32=True)  # the prompt split over three graphs
    c2.eval(np.array(ids, np.int64))
    assert c2.logits.shape == (1, V)
    assert rel_error(c2.logits, want[-1:]) < TOL


def test_token_by_token_equals_prompt_rows(model, tiny):
    ids = prompt_ids(8, seed=5)
    want = reference_logits(tiny[1], ids)
    c = model.context(n_ctx=32, kv_f32=True)
    for t, tok in enumerate(ids):
        c.eval([tok])
        assert c.position == t + 1
        assert rel_error(c.logits, want[t:t + 1]) < TOL, f"position {t}"
    # Rewinding forgets the tail; running it again gives the same rows.
    c.rewind(3)
    assert c.position == 3
    c.eval(ids[3:], all_logits=True)
    assert rel_error(c.logits, want[3:]) < TOL


def greedy_reference(w, ids, n):
    """Greedy ids by the float64 model, stopping at EOS or where the top two
    logits are too close for f32 to be sure of the order."""
    seq, out = list(ids), []
    for _ in range(n):
        row = reference_logits(w, seq)[-1]
        top2 = np.sort(row)[-2:]
        if top2[1] - top2[0] < 1e-3 * np.sqrt(np.mean(row * row)):
            return out, False
        tok = int(np.argmax(row))
        if tok == EOS:
            return out, True
        out.append(tok)
        seq.append(tok)
    return out, True


def test_generate_greedy_matches_reference(model, tiny):
    ids = prompt_ids(6, seed=11)
    want, sure = greedy_reference(tiny[1], ids, 10)
    ctx = model.context(n_ctx=64, kv_f32=True)
    g = model.generate(ids, n=10, temperature=0.0, context=ctx)
    assert g.stop_reason is None and g.tokens == []
    pieces = list(g)
    assert all(isinstance(p, str) and p for p in pieces)
    if sure:
        assert g.tokens == want
    else:
        assert g.tokens[:len(want)] == want
    assert g.stop_reason in ("length", "end")
    assert g.stop_reason == "end" or len(g.tokens) == 10
    # The context holds the prompt and every generated token but the last.
    assert ctx.position == len(ids) + max(len(g.tokens) - 1, 0)
    assert g.context.position == ctx.position
    # The pieces are the tokens' bytes, UTF-8 decoded as one text.
    full = b"".join(model.token_bytes(t) for t in g.tokens)
    assert "".join(pieces) == full.decode("utf-8", "replace")
    assert list(g) == [] and next(iter(g), None) is None


def test_generate_from_text_and_default_context(model):
    g = model.generate("hello", n=4)
    text = "".join(g)
    assert isinstance(text, str) and len(g.tokens) <= 4
    assert g.context.size == min(N_CTX_TRAIN, 4096)
    assert g.context.position == len(model.tokenize("hello")) + max(len(g.tokens) - 1, 0)
    assert list(model.generate("hello", n=0)) == []


def test_generate_stop_string(model):
    ids = prompt_ids(6, seed=11)
    g = model.generate(ids, n=12)
    full = "".join(g)
    if len(full) < 3:
        pytest.skip("this tokenizer gives no text for the generated tokens")
    # Two printable ASCII characters from the second half (a U+FFFD that
    # stands for invalid bytes would not match the generated bytes).
    at = [i for i in range(len(full) // 2, len(full) - 1) if full[i:i + 2].isascii() and full[i:i + 2].isprintable()]
    if not at:
        pytest.skip("no ASCII text in the second half of this generation")
    stop = full[at[0]:at[0] + 2]
    cut = full.index(stop)
    g2 = model.generate(ids, n=12, stop=[stop, "\x00never"])
    assert "".join(g2) == full[:cut] and g2.stop_reason == "stop"
    assert g2.tokens == g.tokens[:len(g2.tokens)]


def test_generate_holds_split_characters_but_not_invalid_lead_bytes(tmp_path):
    """The pieces are bp_generator's: a character split over byte tokens
    comes out whole, a byte that cannot begin a character (0xC0, 0xF5) at
    once, as U+FFFD."""
    def byte(b):
        return 3 + b
    chain = [3 + 256, byte(0x68), byte(0xC0), byte(0x69), byte(0xC3), byte(0xA9), byte(0xF5), byte(0x6A), EOS]
    path = tmp_path / "scripted.gguf"
    write_tiny_llama(path, script=list(zip(chain, chain[1:])))
    with bp.Model(str(path)) as m:
        g = m.generate([BOS, chain[0]], n=20, context=m.context(n_ctx=32, kv_f32=True))
        assert list(g) == ["h", "\ufffd", "i", "\u00e9", "\ufffd", "j"]
        assert g.stop_reason == "end" and g.tokens == chain[1:-1]
        g = m.generate([BOS, chain[0]], n=3, stop=b"\xc0i")
        assert list(g) == ["h"] and g.stop_reason == "stop"
        g = m.generate([BOS, chain[0]], n=3)
        assert "".join(g) == "h\ufffdi" and g.stop_reason == "length"


def test_generate_sampling_is_seeded(model):
    ids = prompt_ids(5, seed=2)
    kw = dict(n=12, temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.1)
    a = model.generate(ids, seed=7, **kw)
    b = model.generate(ids, seed=7, **kw)
    assert "".join(a) == "".join(b) and a.tokens == b.tokens
    assert all(0 <= t < V for t in a.tokens)
    seqs = set()
    for seed in range(4):
        g = model.generate(ids, seed=seed, **kw)
        list(g)
        seqs.add(tuple(g.tokens))
    assert len(seqs) > 1  # temperature 1.5 over the whole vocabulary: different seeds, different draws


def test_generate_stops_when_the_context_is_full(model):
    ids = prompt_ids(6)
    g = model.generate(ids, n=50, context=model.context(n_ctx=8, kv_f32=True))
    list(g)
    assert g.stop_reason in ("context", "end")
    if g.stop_reason == "context":
        assert len(g.tokens) == 3 and g.context.position == 8


def test_bad_files(tmp_path):
    with pytest.raises(bp.NotFound):
        bp.Model(str(tmp_path / "missing.gguf"))
    p = tmp_path / "no-output-norm.gguf"
    write_tiny_llama(p, skip="output_norm.weight")
    with pytest.raises(bp.InvalidArgument, match="output_norm"):
        bp.Model(str(p))
    p = tmp_path / "other-arch.gguf"
    write_tiny_llama(p, arch="gpt9")
    with pytest.raises(bp.Unimplemented):
        bp.Model(str(p))
    with pytest.raises(bp.Error):
        bp.Model(str(tmp_path / "missing.gguf"), device="nosuchplugin")


def test_misuse(model, tiny):
    c = model.context(n_ctx=8, kv_f32=True)
    with pytest.raises(bp.ResourceExhausted):
        c.eval(list(range(3, 12)))  # 9 tokens into 8 positions
    assert c.position == 0
    c.eval(list(range(3, 11)))
    with pytest.raises(bp.ResourceExhausted):
        c.eval([3])
    with pytest.raises(bp.InvalidArgument):
        c.rewind(9)
    c.rewind(0)
    for bad in (np.array([1.5, 2.0]), "hello", np.array([[1, 2]]), [1, "x"], [2**40], True):
        with pytest.raises(bp.InvalidArgument):
            c.eval(bad)
    with pytest.raises(bp.InvalidArgument):
        c.eval([V])  # outside the vocabulary
    with pytest.raises(bp.InvalidArgument):
        model.detokenize([0.5])
    with pytest.raises(bp.InvalidArgument):
        model.generate([BOS], n=-1)
    with pytest.raises(bp.InvalidArgument):
        model.generate([BOS], stop="")
    with pytest.raises(bp.InvalidArgument):
        model.generate([BOS], temperature=float("nan"))
    with pytest.raises(bp.InvalidArgument):
        model.tokenize(3)
    other = bp.Model(tiny[0])
    with pytest.raises(bp.InvalidArgument, match="another Model"):
        model.generate([BOS], context=other.context(n_ctx=8))
    c.close()
    with pytest.raises(bp.FailedPrecondition):
        c.eval([BOS])
    other.close()
    with pytest.raises(bp.FailedPrecondition):
        other.info
    assert repr(other) == "Model(closed)"


def test_context_outlives_model(tiny):
    ids = prompt_ids(5)
    want = reference_logits(tiny[1], ids)
    m = bp.Model(tiny[0])
    c = m.context(n_ctx=16, kv_f32=True)
    g = m.generate(ids, n=3, context=m.context(n_ctx=16, kv_f32=True))
    del m
    gc.collect()
    c.eval(ids, all_logits=True)
    assert rel_error(c.logits, want) < TOL
    assert c.model.info.n_vocab == V
    assert len(list(g)) >= 0 and len(g.tokens) <= 3
    with bp.Model(tiny[0]) as m2:
        c2 = m2.context(n_ctx=16, kv_f32=True)
    c2.eval(ids)  # the model closed by `with` lives on in its context
    assert rel_error(c2.logits, want[-1:]) < TOL
    del c, g, c2
    gc.collect()


def test_threads_share_a_model(model, tiny):
    ids = prompt_ids(6)
    want = reference_logits(tiny[1], ids)
    errors = []

    def run():
        try:
            c = model.context(n_ctx=16, kv_f32=True)
            for _ in range(10):
                c.rewind(0)
                c.eval(ids, all_logits=True)
                assert rel_error(c.logits, want) < TOL
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    # model.h lets threads share a model, each with its own context (and
    # backends of its own), computing at the same time: the results must
    # match and nothing may hang.
    ts = [threading.Thread(target=run) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_exports():
    for name in ("Model", "ModelContext", "ModelInfo", "Generation"):
        assert hasattr(bp, name)
    assert os.path.exists(os.path.join(os.path.dirname(bp.__file__), "__init__.pyi"))


def test_plain_weights_keeps_float_weights_mapped_either_way(tiny):
    ids = prompt_ids()
    rows = []
    for plain in (False, True):
        with bp.Model(tiny[0], plain_weights=plain) as m:
            # Float matrices never go to a weight buffer: mapped both ways.
            assert m.backends[0]["mapped"] is True
            with m.context(n_ctx=32) as c:
                c.eval(ids, all_logits=True)
                rows.append(np.array(c.logits, copy=True))
    np.testing.assert_array_equal(rows[0], rows[1])
