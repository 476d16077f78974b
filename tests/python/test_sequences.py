"""Several sequences in one ModelContext (model.h, "Sequences"): a batch of
tokens from several sequences gives each the logits it has alone, a copied
prefix continues as the full text alone, a rewound sequence equals a fresh
run, and bad batches raise with the cause named.

Tolerance as tests/models/sequences_test.cpp states it: with an f32 cache
the batch and the lone run differ by f32 summation order only (measured
about 1e-6 of the logits' rms), so 1e-5."""
import numpy as np
import pytest

import backplane as bp
from test_model import V, reference_logits, rel_error, tiny, model  # noqa: F401 (fixtures)

TOL = 1e-5


def ids_of(n, seed):
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(3, V, n)]


def alone(model, ids):
    with model.context(n_ctx=64, kv_f32=True) as c:
        c.eval(ids, all_logits=True)
        return c.logits


def test_a_batch_of_sequences_gives_each_its_logits_alone(model, tiny):
    seqs = [ids_of(7, 1), ids_of(4, 2), ids_of(9, 3)]
    toks, seq_ids, positions = [], [], []
    for p in range(9):
        for s, ids in enumerate(seqs):
            if p < len(ids):
                toks.append(ids[p])
                seq_ids.append(s)
                positions.append(p)
    want = [alone(model, ids) for ids in seqs]
    c = model.context(n_ctx=64, kv_f32=True, n_seq=3)
    assert c.n_seq == 3
    c.eval_batch(toks, seq_ids=seq_ids, positions=positions, logits=[True] * len(toks))
    assert c.logits.shape == (len(toks), V)
    for i, (s, p) in enumerate(zip(seq_ids, positions)):
        assert rel_error(c.batch_logits(i), want[s][p]) < TOL, (i, s, p)
    assert [c.seq_length(s) for s in range(3)] == [7, 4, 9]
    assert c.cells_used == len(toks)
    # The lone runs themselves are the float64 model's.
    assert rel_error(want[2], reference_logits(tiny[1], seqs[2])) < 1e-4


def test_a_copied_prefix_then_a_rewind(model):
    P, A, B = ids_of(6, 4), ids_of(3, 5), ids_of(2, 6)
    c = model.context(n_ctx=64, kv_f32=True, n_seq=2)
    c.eval_batch(P)  # sequence 0
    assert c.logits.shape == (1, V)
    c.seq_copy(0, 1)
    assert c.seq_length(1) == 6 and c.cells_used == 6
    c.eval_batch(A + B, seq_ids=[0] * 3 + [1] * 2)  # the last token of each keeps its row
    assert c.batch_logits(0) is None
    assert rel_error(c.batch_logits(2), alone(model, P + A)[-1]) < TOL
    assert rel_error(c.batch_logits(4), alone(model, P + B)[-1]) < TOL
    assert c.cells_used == 11
    # Rewinding sequence 1 into the shared prompt and going on equals a fresh run.
    c.seq_rewind(1, 2)
    c.eval_batch(B, seq_ids=1, logits=[True, True])
    assert rel_error(c.logits, alone(model, P[:2] + B)[2:]) < TOL
    c.seq_remove(0, 5)
    assert c.seq_length(0) == 5
    c.seq_clear(0)
    assert c.seq_length(0) == 0 and c.cells_used == 4


def test_bad_batches_and_sequence_calls(model):
    c = model.context(n_ctx=8, kv_f32=True, n_seq=2)
    c.eval_batch([5, 6], seq_ids=[0, 1])
    with pytest.raises(bp.InvalidArgument, match="out of range"):
        c.eval_batch([5], seq_ids=[2])
    with pytest.raises(bp.InvalidArgument, match="continues at position 1"):
        c.eval_batch([5], seq_ids=[0], positions=[3])
    with pytest.raises(bp.InvalidArgument, match="one per token"):
        c.eval_batch([5, 6], seq_ids=[0])
    with pytest.raises(bp.InvalidArgument, match="one per token"):
        c.eval_batch([5, 6], logits=[True])
    with pytest.raises(bp.InvalidArgument, match="negative"):
        c.eval_batch([5], seq_ids=[-1])
    with pytest.raises(bp.ResourceExhausted, match="6 are left"):
        c.eval_batch(ids_of(7, 7), seq_ids=1)
    assert c.cells_used == 2
    with pytest.raises(bp.InvalidArgument, match="out of range"):
        c.seq_clear(2)
    with pytest.raises(bp.InvalidArgument, match="past the 1 positions"):
        c.seq_rewind(0, 2)
    with pytest.raises(bp.InvalidArgument, match="both sequence 0"):
        c.seq_copy(0, 0)
    with pytest.raises(bp.InvalidArgument, match="at most 256 sequences"):
        model.context(n_ctx=8, n_seq=257)
    assert model.context(n_ctx=8).n_seq == 1
