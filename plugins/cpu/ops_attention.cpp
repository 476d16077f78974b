// ops_attention.cpp: ATTENTION, softmax(scale q k^T + mask) v per query row,
// computed over blocks of kBlock keys with a running maximum and sum (the
// online softmax): a block's scores are formed, exponentiated against the
// running maximum in one vector pass (row_exp_shift_sum), and folded into
// the output row; when a block raises the maximum, what was summed so far is
// rescaled. Only one block of scores per thread is ever in memory.
//
// Work is split over units of up to four query heads that share a
// key/value head (GQA) times up to four tokens: each block of key and value
// rows is converted to f32 once for the unit's rows (an f16 cache), scored
// one row against 8 keys at a time, and folded into the outputs of four
// rows at a time, eight channels at a time, with the accumulators in
// registers. Keys masked (-inf) for every row of a unit are neither
// converted nor read, and 8 keys masked for a row cost it no dot product,
// which halves the work of a causal prompt.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "f16.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "simd.hpp"

namespace bp::cpu {
namespace {

constexpr int64_t kBlock = 64;

// Up to kGroup query rows that share a key/value head (GQA heads of one
// token) are scored and folded together.
constexpr int kGroup = 4;
// A prompt's unit takes up to kTokens tokens of such a group (kRows query
// rows), so each key and value row of a block is converted once for all.
constexpr int kTokens = 4;
constexpr int kRows = kGroup * kTokens;

// The kernels below read a block's keys and values as f32 rows (an f16
// cache is converted once per block and unit, attention_run).

float dot_portable(const float *q, const float *k, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += q[i] * k[i];
  return s;
}

// scores[r][j] = scale q[r] . k_j + add[r][j] for j < n (k_j = k + j *
// k_stride floats), -inf where add[r][j] is -inf, which costs no dot
// product. add == NULL: no mask.
void score_portable(const float *const *q, int g, const float *k, size_t k_stride, int64_t n, int64_t D,
                    const float *const *add, float scale, float *const *scores) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < g; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const float a = add ? add[r][j] : 0.0f;
      scores[r][j] = a == neg_inf ? neg_inf : scale * dot_portable(q[r], k + j * k_stride, D) + a;
    }
}

// acc[r][i] += sum over j < n of p[r][j] v_j[i], v_j = v + j * v_stride floats.
void folds_portable(float *const *acc, int g, const float *const *p, int64_t n, const float *v, size_t v_stride,
                    int64_t Dv) {
  for (int r = 0; r < g; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const float pj = p[r][j];
      if (pj == 0.0f) continue;
      const float *vj = v + j * v_stride;
      for (int64_t i = 0; i < Dv; ++i) acc[r][i] += pj * vj[i];
    }
}

#ifdef BP_X86_SIMD
// One query row against 8 keys: the 8 dot products as one vector, each
// key's 8 partial sums reduced by a tree of horizontal adds (one tree for
// all 8 keys, instead of a reduction per key). D is a multiple of 8.
BP_AVX2 inline __m256 dots8(const float *q, const float *k, size_t k_stride, int64_t D) {
  __m256 a[8];
  for (int j = 0; j < 8; ++j) a[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < D; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    for (int j = 0; j < 8; ++j) a[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + j * k_stride + i), a[j]);
  }
  // Lane l of u0 (u1) sums half (l / 4) of key l % 4 (4 + l % 4).
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

BP_AVX2 void score_avx2(const float *const *q, int g, const float *k, size_t k_stride, int64_t n, int64_t D,
                        const float *const *add, float scale, float *const *scores) {
  if (D % 8 != 0) return score_portable(q, g, k, k_stride, n, D, add, scale, scores);
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), vscale = _mm256_set1_ps(scale);
  for (int r = 0; r < g; ++r) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 a = add ? _mm256_loadu_ps(add[r] + j) : _mm256_setzero_ps();
      const __m256 dead = _mm256_cmp_ps(a, neg_inf, _CMP_EQ_OQ);
      if (_mm256_movemask_ps(dead) == 0xFF) {  // 8 keys this row does not see
        _mm256_storeu_ps(scores[r] + j, neg_inf);
        continue;
      }
      const __m256 s = _mm256_fmadd_ps(dots8(q[r], k + j * k_stride, k_stride, D), vscale, a);
      _mm256_storeu_ps(scores[r] + j, _mm256_blendv_ps(s, neg_inf, dead));
    }
    if (j < n) {
      const float *tail_add = add ? add[r] + j : nullptr;
      float *tail = scores[r] + j;
      score_portable(q + r, 1, k + j * k_stride, k_stride, n - j, D, add ? &tail_add : nullptr, scale, &tail);
    }
  }
}

BP_AVX2 void folds_avx2(float *const *acc, int g, const float *const *p, int64_t n, const float *v, size_t v_stride,
                        int64_t Dv) {
  int64_t i = 0;
  for (; i + 8 <= Dv; i += 8) {
    __m256 a[kGroup];
    for (int r = 0; r < kGroup; ++r)
      if (r < g) a[r] = _mm256_loadu_ps(acc[r] + i);
    for (int64_t j = 0; j < n; ++j) {
      const __m256 vv = _mm256_loadu_ps(v + j * v_stride + i);
      for (int r = 0; r < kGroup; ++r)
        if (r < g) a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(p[r] + j), vv, a[r]);
    }
    for (int r = 0; r < kGroup; ++r)
      if (r < g) _mm256_storeu_ps(acc[r] + i, a[r]);
  }
  if (i < Dv) {
    float *rest[kGroup];
    for (int r = 0; r < g; ++r) rest[r] = acc[r] + i;
    folds_portable(rest, g, p, n, v + i, v_stride, Dv - i);
  }
}
#endif

struct group_ops {
  void (*score)(const float *const *, int, const float *, size_t, int64_t, int64_t, const float *const *, float,
                float *const *);
  void (*folds)(float *const *, int, const float *const *, int64_t, const float *, size_t, int64_t);
};

group_ops pick_ops() {
#ifdef BP_X86_SIMD
  if (plugins::cpu_isa() >= plugins::isa_level::avx2) return {score_avx2, folds_avx2};
#endif
  return {score_portable, folds_portable};
}

bool dense_rows(const bp_tensor *t) { return t->ne[0] == 1 || t->nb[0] == bp_type_size(t->type); }

// ---- attention_run's steps ------------------------------------------------

// The op's operands and shapes.
struct attention_shape {
  const bp_tensor *t, *q, *k, *v, *mask;
  int64_t D, T, B, N, Dv, Hk;
  int64_t r2, r3;         // query heads per key head; batches per key batch
  int64_t chunks, tiles;  // head groups per key head; token tiles
  bool f16;               // an f16 cache, converted block by block
  float scale;
  int64_t units() const { return chunks * Hk * tiles * B; }
};

attention_shape shape_of(const bp_tensor *t) {
  attention_shape s{};
  s.t = t;
  s.q = t->src[0];
  s.k = t->src[1];
  s.v = t->src[2];
  s.mask = t->src[3];
  s.D = s.q->ne[0];
  s.T = s.q->ne[1];
  s.B = s.q->ne[3];
  s.N = s.k->ne[1];
  s.Dv = s.v->ne[0];
  s.Hk = s.k->ne[2];
  s.r2 = s.q->ne[2] / s.Hk;
  s.r3 = s.B / s.k->ne[3];
  s.chunks = (s.r2 + kGroup - 1) / kGroup;
  s.tiles = (s.T + kTokens - 1) / kTokens;
  s.f16 = s.k->type == BP_TYPE_F16;
  s.scale = bp_tensor_param_f32(t, 0);
  return s;
}

// One work unit: R query rows (row i: token tok0 + i / g, head h0 + i % g,
// batch b) against key head hk of key batch bk.
struct attention_unit {
  int64_t h0, tok0, b, hk, bk;
  int g, R;
  const char *kbase, *vbase;
};

// Units are (head group, key head, token tile, batch), the group fastest.
attention_unit unit_of(const attention_shape &s, int64_t u) {
  attention_unit w{};
  const int64_t ci = u % s.chunks, tile = (u / (s.chunks * s.Hk)) % s.tiles;
  w.hk = (u / s.chunks) % s.Hk;
  w.b = u / (s.chunks * s.Hk * s.tiles);
  w.h0 = w.hk * s.r2 + ci * kGroup;
  w.bk = w.b / s.r3;
  w.tok0 = tile * kTokens;
  w.g = static_cast<int>(std::min<int64_t>(kGroup, s.r2 - ci * kGroup));
  w.R = w.g * static_cast<int>(std::min<int64_t>(kTokens, s.T - w.tok0));
  w.kbase = static_cast<const char *>(s.k->data) + w.hk * s.k->nb[2] + w.bk * s.k->nb[3];
  w.vbase = static_cast<const char *>(s.v->data) + w.hk * s.v->nb[2] + w.bk * s.v->nb[3];
  return w;
}

// A block of keys and values as f32 rows, |stride| floats apart.
struct kv_block {
  const float *k, *v;
  size_t k_stride, v_stride;
};

// One thread's rows of a unit: the online softmax's state and one block of
// scores per row.
class attention_rows {
 public:
  explicit attention_rows(const attention_shape &s)
      : s_(s),
        acc_store_(static_cast<size_t>(kRows * s.Dv)),
        kf_(s.f16 ? static_cast<size_t>(kBlock * s.D) : 0),
        vf_(s.f16 ? static_cast<size_t>(kBlock * s.Dv) : 0) {
    for (int r = 0; r < kRows; ++r) {
      weights_[r] = rows_[r] = scores_[r];
      acc_[r] = acc_store_.data() + r * s.Dv;
    }
  }

  // The unit's query and mask rows; the running maxima, sums and outputs
  // start empty.
  void start(const attention_unit &w) {
    w_ = w;
    for (int r = 0; r < w.R; ++r) {
      const int64_t tok = w.tok0 + r / w.g, h = w.h0 + r % w.g;
      qrow_[r] = reinterpret_cast<const float *>(row_ptr(s_.q, tok, h, w.b));
      mrow_[r] = s_.mask
                     ? reinterpret_cast<const float *>(row_ptr(s_.mask, tok, h % s_.mask->ne[2], w.b % s_.mask->ne[3]))
                     : nullptr;
      m_[r] = kNegInf;  // the running maximum
      l_[r] = 0;        // the running sum of exp(score - m)
    }
    std::fill(acc_store_.begin(), acc_store_.end(), 0.0f);
  }

  // The keys of the block at j0 that some row sees: up to the last one not
  // masked (-inf) for every row, so the rest are neither converted nor
  // read; 0 when no row sees any.
  int64_t live_keys(int64_t j0, int64_t n) {
    for (int r = 0; r < w_.R; ++r) add_[r] = mrow_[r] ? mrow_[r] + j0 : nullptr;
    if (!s_.mask) return n;
    int64_t live = 0;
    for (int r = 0; r < w_.R; ++r)
      for (int64_t j = n; j > live; --j)
        if (add_[r][j - 1] != kNegInf) {
          live = j;
          break;
        }
    return live;
  }

  // n keys and values from j0 as f32 rows: an f16 cache converted once for
  // every row of the unit, an f32 cache read where it is.
  kv_block block_f32(int64_t j0, int64_t n) {
    const bp_tensor *k = s_.k, *v = s_.v;
    const char *kraw = w_.kbase + j0 * k->nb[1], *vraw = w_.vbase + j0 * v->nb[1];
    if (!s_.f16)
      return {reinterpret_cast<const float *>(kraw), reinterpret_cast<const float *>(vraw), k->nb[1] / sizeof(float),
              v->nb[1] / sizeof(float)};
    for (int64_t j = 0; j < n; ++j) {
      plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(kraw + j * k->nb[1]), s_.D, kf_.data() + j * s_.D);
      plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(vraw + j * v->nb[1]), s_.Dv, vf_.data() + j * s_.Dv);
    }
    return {kf_.data(), vf_.data(), static_cast<size_t>(s_.D), static_cast<size_t>(s_.Dv)};
  }

  void score(const group_ops &ops, const kv_block &kv, int64_t n) {
    for (int r0 = 0; r0 < w_.R; r0 += kGroup) {
      const int gr = std::min(kGroup, w_.R - r0);
      ops.score(qrow_ + r0, gr, kv.k, kv.k_stride, n, s_.D, s_.mask ? add_ + r0 : nullptr, s_.scale, rows_ + r0);
    }
  }

  // The online softmax's step: each row's block maximum; where it raises
  // the running one, what was summed so far is rescaled; the scores become
  // their weights exp(score - m) (zeros for a row that sees no key of the
  // block). False when no row sees a key of the block.
  bool softmax(int64_t n) {
    for (int r = 0; r < w_.R; ++r) {
      float mx = kNegInf;
      for (int64_t j = 0; j < n; ++j) mx = scores_[r][j] > mx ? scores_[r][j] : mx;  // NaNs are skipped
      bm_[r] = mx;
    }
    bool any = false;
    for (int r = 0; r < w_.R; ++r) {
      if (bm_[r] == kNegInf) {  // this row sees no key of the block
        std::fill(scores_[r], scores_[r] + n, 0.0f);
        continue;
      }
      any = true;
      if (bm_[r] > m_[r]) {
        const float keep = m_[r] == kNegInf ? 0.0f : std::exp(m_[r] - bm_[r]);
        l_[r] *= keep;
        for (int64_t d = 0; d < s_.Dv; ++d) acc_[r][d] *= keep;
        m_[r] = bm_[r];
      }
      l_[r] += row_exp_shift_sum(scores_[r], n, m_[r]);
    }
    return any;
  }

  void fold(const group_ops &ops, const kv_block &kv, int64_t n) {
    for (int r0 = 0; r0 < w_.R; r0 += kGroup)
      ops.folds(acc_ + r0, std::min(kGroup, w_.R - r0), weights_ + r0, n, kv.v, kv.v_stride, s_.Dv);
  }

  // Each row's output: its sum of weighted values over its sum of weights.
  void finish() {
    for (int r = 0; r < w_.R; ++r) {
      float *out = reinterpret_cast<float *>(row_ptr(s_.t, w_.h0 + r % w_.g, w_.tok0 + r / w_.g, w_.b));
      if (l_[r] == 0) {  // fully masked: zeros (docs/ops.md)
        std::memset(out, 0, static_cast<size_t>(s_.Dv) * sizeof(float));
        continue;
      }
      const float inv = static_cast<float>(1.0 / l_[r]);
      for (int64_t d = 0; d < s_.Dv; ++d) out[d] = acc_[r][d] * inv;
    }
  }

 private:
  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const attention_shape &s_;
  attention_unit w_{};
  float scores_[kRows][kBlock];
  const float *weights_[kRows];
  float *rows_[kRows];
  std::vector<float> acc_store_;
  float *acc_[kRows];
  std::vector<float> kf_, vf_;  // an f16 cache's block as f32 rows
  const float *qrow_[kRows], *mrow_[kRows], *add_[kRows];
  float m_[kRows], bm_[kRows];
  double l_[kRows];
};

}  // namespace

bool attention_supports(const bp_tensor *t) {
  const bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *mask = t->src[3];
  if (!has_valid_shape(t) || !has_valid_shape(q) || !has_valid_shape(k) || !has_valid_shape(v)) return false;
  if (t->type != BP_TYPE_F32 || q->type != BP_TYPE_F32 || !is_float_type(k->type) || k->type != v->type) return false;
  if (!dense_rows(q) || !dense_rows(k) || !dense_rows(v) || !bp_tensor_is_contiguous(t)) return false;
  if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || q->ne[2] % k->ne[2] != 0 || q->ne[3] % k->ne[3] != 0)
    return false;
  if (t->ne[0] != v->ne[0] || t->ne[1] != q->ne[2] || t->ne[2] != q->ne[1] || t->ne[3] != q->ne[3]) return false;
  if (mask) {
    if (!has_valid_shape(mask) || mask->type != BP_TYPE_F32 || !dense_rows(mask)) return false;
    if (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1] || q->ne[2] % mask->ne[2] || q->ne[3] % mask->ne[3])
      return false;
  }
  return true;
}

int64_t attention_work(const bp_tensor *t) {
  const bp_tensor *q = t->src[0], *k = t->src[1];
  return bp_tensor_nrows(q) * k->ne[1] * (q->ne[0] + t->ne[0]);
}

void attention_run(const bp_tensor *t, int ith, int nth) {
  static const group_ops ops = pick_ops();
  const attention_shape s = shape_of(t);
  attention_rows rows(s);
  // Units dealt out in turn: under a causal mask a later token sees more
  // keys, so contiguous ranges would give the last thread most of the work.
  for (int64_t u = ith; u < s.units(); u += nth) {
    rows.start(unit_of(s, u));
    for (int64_t j0 = 0; j0 < s.N; j0 += kBlock) {
      const int64_t n = rows.live_keys(j0, std::min(kBlock, s.N - j0));
      if (n == 0) continue;  // no row sees a key of this block
      const kv_block kv = rows.block_f32(j0, n);
      rows.score(ops, kv, n);
      if (!rows.softmax(n)) continue;
      rows.fold(ops, kv, n);
    }
    rows.finish();
  }
}

}  // namespace bp::cpu
