// ops_attention.cpp: ATTENTION, softmax(scale q k^T + mask) v per query row,
// computed over blocks of kBlock keys with a running maximum and sum (the
// online softmax): a block's scores are formed, exponentiated against the
// running maximum in one vector pass (row_exp_shift_sum), and folded into
// the output row; when a block raises the maximum, what was summed so far is
// rescaled. Only one block of scores per thread is ever in memory.
//
// Work is split over query rows ordered head fastest, so the heads that
// share a key/value head (GQA) run one after another on one thread and find
// its rows in cache. Keys whose mask entry is -inf are skipped before their
// dot product, which halves the work of a causal prompt.
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

// acc[i] = acc[i] * keep + p v[i].
void fold_portable(float *acc, float keep, float p, const void *v, bool f16, int64_t n) {
  if (f16) {
    const uint16_t *h = static_cast<const uint16_t *>(v);
    for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] * keep + p * bp_fp16_to_fp32(h[i]);
  } else {
    const float *f = static_cast<const float *>(v);
    for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] * keep + p * f[i];
  }
}

#ifdef BP_X86_SIMD
BP_AVX2 inline __m256 load8(const void *p, bool f16, int64_t i) {
  if (f16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(p) + i)));
  return _mm256_loadu_ps(static_cast<const float *>(p) + i);
}

BP_AVX2 float dot_avx2(const float *q, const void *k, bool f16, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k, f16, i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(k, f16, i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k, f16, i), s0);
  s0 = _mm256_add_ps(s0, s1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float s = _mm_cvtss_f32(h);
  if (i < n) {
    const size_t es = f16 ? 2 : 4;
    s += dot_portable(q + i, static_cast<const char *>(k) + i * es, f16, n - i);
  }
  return s;
}

BP_AVX2 void fold_avx2(float *acc, float keep, float p, const void *v, bool f16, int64_t n) {
  const __m256 vk = _mm256_set1_ps(keep), vp = _mm256_set1_ps(p);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, load8(v, f16, i), _mm256_mul_ps(_mm256_loadu_ps(acc + i), vk)));
  if (i < n) {
    const size_t es = f16 ? 2 : 4;
    fold_portable(acc + i, keep, p, static_cast<const char *>(v) + i * es, f16, n - i);
  }
}
#endif

struct row_ops {
  float (*dot)(const float *, const void *, bool, int64_t);
  void (*fold)(float *, float, float, const void *, bool, int64_t);
};

row_ops pick_ops() {
#ifdef BP_X86_SIMD
  if (plugins::cpu_isa() >= plugins::isa_level::avx2) return {dot_avx2, fold_avx2};
#endif
  return {dot_portable, fold_portable};
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
  static const row_ops ops = pick_ops();
  const bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *mask = t->src[3];
  const int64_t D = q->ne[0], T = q->ne[1], H = q->ne[2], B = q->ne[3];
  const int64_t N = k->ne[1], Dv = v->ne[0];
  const int64_t r2 = H / k->ne[2], r3 = B / k->ne[3];
  const bool f16 = k->type == BP_TYPE_F16;
  const float scale = bp_tensor_param_f32(t, 0);
  const float neg_inf = -std::numeric_limits<float>::infinity();

  float scores[kBlock];
  std::vector<float> acc(static_cast<size_t>(Dv));
  int64_t r0, r1;
  split_range(H * T * B, ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t h = r % H, tok = (r / H) % T, b = r / (H * T);
    const int64_t hk = h / r2, bk = b / r3;
    const float *qrow = reinterpret_cast<const float *>(row_ptr(q, tok, h, b));
    const char *kbase = static_cast<const char *>(k->data) + hk * k->nb[2] + bk * k->nb[3];
    const char *vbase = static_cast<const char *>(v->data) + hk * v->nb[2] + bk * v->nb[3];
    const float *mrow =
        mask ? reinterpret_cast<const float *>(row_ptr(mask, tok, h % mask->ne[2], b % mask->ne[3])) : nullptr;
    float m = neg_inf;  // the running maximum
    double l = 0;       // the running sum of exp(score - m)
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
      const int64_t n = std::min(kBlock, N - j0);
      float bm = neg_inf;
      for (int64_t j = 0; j < n; ++j) {
        const float add = mrow ? mrow[j0 + j] : 0.0f;
        if (add == neg_inf) {
          scores[j] = neg_inf;
          continue;
        }
        scores[j] = scale * ops.dot(qrow, kbase + (j0 + j) * k->nb[1], f16, D) + add;
        bm = std::fmax(bm, scores[j]);
      }
      if (bm == neg_inf) continue;  // every key of the block masked
      float keep = 1.0f;
      if (bm > m) {
        keep = m == neg_inf ? 0.0f : std::exp(m - bm);
        l *= keep;
        m = bm;
      }
      l += row_exp_shift_sum(scores, n, m);
      // The first key with weight folds the rescale in; the rest add.
      for (int64_t j = 0; j < n; ++j) {
        if (scores[j] == 0.0f && keep == 1.0f) continue;
        ops.fold(acc.data(), keep, scores[j], vbase + (j0 + j) * v->nb[1], f16, Dv);
        keep = 1.0f;
      }
      if (keep != 1.0f)
        for (float &a : acc) a *= keep;
    }
    float *out = reinterpret_cast<float *>(row_ptr(t, h, tok, b));
    if (l == 0) {  // fully masked: zeros (docs/ops.md)
      std::memset(out, 0, static_cast<size_t>(Dv) * sizeof(float));
      continue;
    }
    const float inv = static_cast<float>(1.0 / l);
    for (int64_t d = 0; d < Dv; ++d) out[d] = acc[d] * inv;
  }
}

}  // namespace bp::cpu
