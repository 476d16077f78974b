// ops_attention.cpp: ATTENTION, softmax(scale q k^T + mask) v per query row,
// computed over blocks of kBlock keys with a running maximum and sum (the
// online softmax): a block's scores are formed, exponentiated against the
// running maximum in one vector pass (row_exp_shift_sum), and folded into
// the output row; when a block raises the maximum, what was summed so far is
// rescaled. Only one block of scores per thread is ever in memory.
//
// Work is split over groups of up to four query rows of one token that
// share a key/value head (GQA), which run together: each key and value row
// is loaded and converted once for the group, and the value rows are folded
// into the group's outputs eight channels at a time with the accumulators
// in registers. Keys masked (-inf) for every row of a group are skipped
// before their dot product, which halves the work of a causal prompt.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "isa.hpp"
#include "kernels.hpp"
#include "simd.hpp"

namespace bp::cpu {
namespace {

constexpr int64_t kBlock = 64;

float dot_portable(const float *q, const void *k, bool f16, int64_t n) {
  float s = 0;
  if (f16) {
    const uint16_t *h = static_cast<const uint16_t *>(k);
    for (int64_t i = 0; i < n; ++i) s += q[i] * bp_fp16_to_fp32(h[i]);
  } else {
    const float *f = static_cast<const float *>(k);
    for (int64_t i = 0; i < n; ++i) s += q[i] * f[i];
  }
  return s;
}

// acc[i] += p v[i].
void fold_portable(float *acc, float p, const void *v, bool f16, int64_t n) {
  if (f16) {
    const uint16_t *h = static_cast<const uint16_t *>(v);
    for (int64_t i = 0; i < n; ++i) acc[i] += p * bp_fp16_to_fp32(h[i]);
  } else {
    const float *f = static_cast<const float *>(v);
    for (int64_t i = 0; i < n; ++i) acc[i] += p * f[i];
  }
}

#ifdef BP_X86_SIMD
BP_AVX2 inline __m256 load8(const void *p, bool f16, int64_t i) {
  if (f16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(p) + i)));
  return _mm256_loadu_ps(static_cast<const float *>(p) + i);
}

#endif

// Up to kGroup query rows that share a key/value head (GQA heads of one
// token) run together, so each key and value row is loaded and converted
// once for all of them.
constexpr int kGroup = 4;

// scores[r][j] = scale q[r] . k_j + add[r][j] for j < n (k_j = k + j *
// k_stride), -inf where add[r][j] is -inf; a key masked for every row of
// the group costs no dot product. add == NULL: no mask.
void score_portable(const float *const *q, int g, const char *k, size_t k_stride, int64_t n, bool f16, int64_t D,
                    const float *const *add, float scale, float *const *scores) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < g; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const float a = add ? add[r][j] : 0.0f;
      scores[r][j] = a == neg_inf ? neg_inf : scale * dot_portable(q[r], k + j * k_stride, f16, D) + a;
    }
}

// acc[r][i] += sum over j < n of p[r][j] v_j[i], v_j = v + j * v_stride.
void folds_portable(float *const *acc, int g, const float *const *p, int64_t n, const char *v, size_t v_stride,
                    bool f16, int64_t Dv) {
  for (int r = 0; r < g; ++r)
    for (int64_t j = 0; j < n; ++j)
      if (p[r][j] != 0.0f) fold_portable(acc[r], p[r][j], v + j * v_stride, f16, Dv);
}

#ifdef BP_X86_SIMD
BP_AVX2 inline float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

template <bool F16>
BP_AVX2 void score_avx2_t(const float *const *q, int g, const char *k, size_t k_stride, int64_t n, int64_t D,
                          const float *const *add, float scale, float *const *scores) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const size_t es = F16 ? 2 : 4;
  for (int64_t j = 0; j < n; ++j) {
    bool live = !add;
    for (int r = 0; r < g && !live; ++r) live = add[r][j] != neg_inf;
    if (!live) {
      for (int r = 0; r < g; ++r) scores[r][j] = neg_inf;
      continue;
    }
    const char *kj = k + j * k_stride;
    __m256 acc[kGroup] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 8 <= D; i += 8) {
      const __m256 kv = load8(kj, F16, i);
      for (int r = 0; r < kGroup; ++r)
        if (r < g) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + i), kv, acc[r]);
    }
    for (int r = 0; r < g; ++r) {
      const float a = add ? add[r][j] : 0.0f;
      float d = hsum8(acc[r]);
      if (i < D) d += dot_portable(q[r] + i, kj + i * es, F16, D - i);
      scores[r][j] = a == neg_inf ? neg_inf : scale * d + a;
    }
  }
}

BP_AVX2 void score_avx2(const float *const *q, int g, const char *k, size_t k_stride, int64_t n, bool f16, int64_t D,
                        const float *const *add, float scale, float *const *scores) {
  if (f16)
    score_avx2_t<true>(q, g, k, k_stride, n, D, add, scale, scores);
  else
    score_avx2_t<false>(q, g, k, k_stride, n, D, add, scale, scores);
}

BP_AVX2 void folds_avx2(float *const *acc, int g, const float *const *p, int64_t n, const char *v, size_t v_stride,
                        bool f16, int64_t Dv) {
  int64_t i = 0;
  for (; i + 8 <= Dv; i += 8) {
    __m256 a[kGroup];
    for (int r = 0; r < kGroup; ++r)
      if (r < g) a[r] = _mm256_loadu_ps(acc[r] + i);
    for (int64_t j = 0; j < n; ++j) {
      const __m256 vv = load8(v + j * v_stride, f16, i);
      for (int r = 0; r < kGroup; ++r)
        if (r < g) a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(p[r] + j), vv, a[r]);
    }
    for (int r = 0; r < kGroup; ++r)
      if (r < g) _mm256_storeu_ps(acc[r] + i, a[r]);
  }
  if (i < Dv) {
    const size_t es = f16 ? 2 : 4;
    for (int r = 0; r < g; ++r)
      for (int64_t j = 0; j < n; ++j)
        if (p[r][j] != 0.0f) fold_portable(acc[r] + i, p[r][j], v + j * v_stride + i * es, f16, Dv - i);
  }
}
#endif

struct group_ops {
  void (*score)(const float *const *, int, const char *, size_t, int64_t, bool, int64_t, const float *const *, float,
                float *const *);
  void (*folds)(float *const *, int, const float *const *, int64_t, const char *, size_t, bool, int64_t);
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
  const int64_t chunks = (r2 + kGroup - 1) / kGroup;  // groups per key head and token
  const bool f16 = k->type == BP_TYPE_F16;
  const float scale = bp_tensor_param_f32(t, 0);
  const float neg_inf = -std::numeric_limits<float>::infinity();

  float scores[kGroup][kBlock];
  const float *weights[kGroup] = {scores[0], scores[1], scores[2], scores[3]};
  float *rows[kGroup] = {scores[0], scores[1], scores[2], scores[3]};
  std::vector<float> acc_store(static_cast<size_t>(kGroup * Dv));
  float *acc[kGroup];
  for (int r = 0; r < kGroup; ++r) acc[r] = acc_store.data() + r * Dv;
  const float *qrow[kGroup], *mrow[kGroup];
  float m[kGroup], bm[kGroup];
  double l[kGroup];

  // Work units: (group chunk, key head, token, batch), the chunk fastest.
  int64_t u0, u1;
  split_range(chunks * Hk * T * B, ith, nth, &u0, &u1);
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t ci = u % chunks, hk = (u / chunks) % Hk, tok = (u / (chunks * Hk)) % T, b = u / (chunks * Hk * T);
    const int64_t h0 = hk * r2 + ci * kGroup, bk = b / r3;
    const int g = static_cast<int>(std::min<int64_t>(kGroup, r2 - ci * kGroup));
    const char *kbase = static_cast<const char *>(k->data) + hk * k->nb[2] + bk * k->nb[3];
    const char *vbase = static_cast<const char *>(v->data) + hk * v->nb[2] + bk * v->nb[3];
    for (int r = 0; r < g; ++r) {
      qrow[r] = reinterpret_cast<const float *>(row_ptr(q, tok, h0 + r, b));
      mrow[r] =
          mask ? reinterpret_cast<const float *>(row_ptr(mask, tok, (h0 + r) % mask->ne[2], b % mask->ne[3])) : nullptr;
      m[r] = neg_inf;  // the running maximum
      l[r] = 0;        // the running sum of exp(score - m)
    }
    std::fill(acc_store.begin(), acc_store.end(), 0.0f);
    for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
      const int64_t n = std::min(kBlock, N - j0);
      const float *add[kGroup];
      for (int r = 0; r < g; ++r) add[r] = mrow[r] ? mrow[r] + j0 : nullptr;
      ops.score(qrow, g, kbase + j0 * k->nb[1], k->nb[1], n, f16, D, mask ? add : nullptr, scale, rows);
      for (int r = 0; r < g; ++r) {
        float mx = neg_inf;
        for (int64_t j = 0; j < n; ++j) mx = scores[r][j] > mx ? scores[r][j] : mx;  // NaNs are skipped
        bm[r] = mx;
      }
      bool any = false;
      for (int r = 0; r < g; ++r) {
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
      if (any) ops.folds(acc, g, weights, n, vbase + j0 * v->nb[1], v->nb[1], f16, Dv);
    }
    for (int r = 0; r < g; ++r) {
      float *out = reinterpret_cast<float *>(row_ptr(t, h0 + r, tok, b));
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
