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
  const bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *mask = t->src[3];
  const int64_t D = q->ne[0], T = q->ne[1], H = q->ne[2], B = q->ne[3];
  const int64_t N = k->ne[1], Dv = v->ne[0], Hk = k->ne[2];
  const int64_t r2 = H / Hk, r3 = B / k->ne[3];
  const int64_t chunks = (r2 + kGroup - 1) / kGroup;  // head groups per key head
  const int64_t tiles = (T + kTokens - 1) / kTokens;  // token tiles
  const bool f16 = k->type == BP_TYPE_F16;
  const float scale = bp_tensor_param_f32(t, 0);
  const float neg_inf = -std::numeric_limits<float>::infinity();

  float scores[kRows][kBlock];
  const float *weights[kRows];
  float *rows[kRows];
  for (int r = 0; r < kRows; ++r) weights[r] = rows[r] = scores[r];
  std::vector<float> acc_store(static_cast<size_t>(kRows * Dv));
  float *acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = acc_store.data() + r * Dv;
  // A block's keys and values as f32 rows, converted once for every row of
  // the unit (f16 caches; an f32 cache is read where it is).
  std::vector<float> kf(f16 ? static_cast<size_t>(kBlock * D) : 0), vf(f16 ? static_cast<size_t>(kBlock * Dv) : 0);
  const float *qrow[kRows], *mrow[kRows];
  float m[kRows], bm[kRows];
  double l[kRows];

  // Work units: (head group, key head, token tile, batch), the group
  // fastest, dealt out in turn: under a causal mask a later token sees more
  // keys, so contiguous ranges would give the last thread most of the work.
  for (int64_t u = ith; u < chunks * Hk * tiles * B; u += nth) {
    const int64_t ci = u % chunks, hk = (u / chunks) % Hk, tile = (u / (chunks * Hk)) % tiles,
                  b = u / (chunks * Hk * tiles);
    const int64_t h0 = hk * r2 + ci * kGroup, bk = b / r3, tok0 = tile * kTokens;
    const int g = static_cast<int>(std::min<int64_t>(kGroup, r2 - ci * kGroup));
    const int R = g * static_cast<int>(std::min<int64_t>(kTokens, T - tok0));  // row i: token i / g, head i % g
    const char *kbase = static_cast<const char *>(k->data) + hk * k->nb[2] + bk * k->nb[3];
    const char *vbase = static_cast<const char *>(v->data) + hk * v->nb[2] + bk * v->nb[3];
    for (int r = 0; r < R; ++r) {
      const int64_t tok = tok0 + r / g, h = h0 + r % g;
      qrow[r] = reinterpret_cast<const float *>(row_ptr(q, tok, h, b));
      mrow[r] = mask ? reinterpret_cast<const float *>(row_ptr(mask, tok, h % mask->ne[2], b % mask->ne[3])) : nullptr;
      m[r] = neg_inf;  // the running maximum
      l[r] = 0;        // the running sum of exp(score - m)
    }
    std::fill(acc_store.begin(), acc_store.end(), 0.0f);
    for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
      int64_t n = std::min(kBlock, N - j0);
      const float *add[kRows];
      for (int r = 0; r < R; ++r) add[r] = mrow[r] ? mrow[r] + j0 : nullptr;
      // Keys past the last one any row sees are neither converted nor read.
      if (mask) {
        int64_t live = 0;
        for (int r = 0; r < R; ++r)
          for (int64_t j = n; j > live; --j)
            if (add[r][j - 1] != neg_inf) {
              live = j;
              break;
            }
        if (live == 0) continue;  // no row sees a key of this block
        n = live;
      }
      const char *kraw = kbase + j0 * k->nb[1], *vraw = vbase + j0 * v->nb[1];
      const float *kb = reinterpret_cast<const float *>(kraw), *vb = reinterpret_cast<const float *>(vraw);
      size_t k_stride = k->nb[1] / sizeof(float), v_stride = v->nb[1] / sizeof(float);
      if (f16) {
        for (int64_t j = 0; j < n; ++j) {
          plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(kraw + j * k->nb[1]), D, kf.data() + j * D);
          plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(vraw + j * v->nb[1]), Dv, vf.data() + j * Dv);
        }
        kb = kf.data();
        vb = vf.data();
        k_stride = static_cast<size_t>(D);
        v_stride = static_cast<size_t>(Dv);
      }
      for (int r0 = 0; r0 < R; r0 += kGroup) {
        const int gr = std::min(kGroup, R - r0);
        ops.score(qrow + r0, gr, kb, k_stride, n, D, mask ? add + r0 : nullptr, scale, rows + r0);
      }
      for (int r = 0; r < R; ++r) {
        float mx = neg_inf;
        for (int64_t j = 0; j < n; ++j) mx = scores[r][j] > mx ? scores[r][j] : mx;  // NaNs are skipped
        bm[r] = mx;
      }
      bool any = false;
      for (int r = 0; r < R; ++r) {
        if (bm[r] == neg_inf) {  // this row sees no key of the block
          std::fill(scores[r], scores[r] + n, 0.0f);
          continue;
        }
        any = true;
        if (bm[r] > m[r]) {
          const float keep = m[r] == neg_inf ? 0.0f : std::exp(m[r] - bm[r]);
          l[r] *= keep;
          for (int64_t d = 0; d < Dv; ++d) acc[r][d] *= keep;
          m[r] = bm[r];
        }
        l[r] += row_exp_shift_sum(scores[r], n, m[r]);
      }
      if (!any) continue;
      for (int r0 = 0; r0 < R; r0 += kGroup)
        ops.folds(acc + r0, std::min(kGroup, R - r0), weights + r0, n, vb, v_stride, Dv);
    }
    for (int r = 0; r < R; ++r) {
      float *out = reinterpret_cast<float *>(row_ptr(t, h0 + r % g, tok0 + r / g, b));
      if (l[r] == 0) {  // fully masked: zeros (docs/ops.md)
        std::memset(out, 0, static_cast<size_t>(Dv) * sizeof(float));
        continue;
      }
      const float inv = static_cast<float>(1.0 / l[r]);
      for (int64_t d = 0; d < Dv; ++d) out[d] = acc[r][d] * inv;
    }
  }
}

}  // namespace bp::cpu
