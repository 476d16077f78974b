// repack_gemm_scalar.cpp: the repacked products' reference tiles (plain
// C++, reading the layout of repack.hpp directly), and the choice of tiles
// per CPU.
#include "backplane/tensor.h"
#include "isa.hpp"
#include "quant_blocks.hpp"
#include "repack.hpp"

namespace bp::cpu {
namespace {

using namespace qblock;

// Value i of block j of row r, without its scale, from the block's record.
int packed_value(qtype q, const uint8_t *rec, int r, int i) {
  const int half = i / 16, v = i % 16;
  if (q == qtype::q5_0) {
    const uint8_t b = rec[24 + 32 * (r / 2) + 16 * (r % 2) + v];
    const int high = static_cast<int>((u32_at(rec + 8 + 4 * r) >> i) & 1u);
    return ((half ? b >> 4 : b & 0xF) | high << 4) - 16;
  }
  if (q == qtype::q4_0) {
    const uint8_t b = rec[8 + 32 * (r / 2) + 16 * (r % 2) + v];
    return (half ? b >> 4 : b & 0xF) - 8;
  }
  return static_cast<int8_t>(rec[8 + 64 * (r / 2) + 32 * half + 16 * (r % 2) + v]);
}

// Q4_K (Q5 false) and Q5_K: value i of sub-block j of row r (0-15, or 0-31
// with Q5_K's fifth bit), from the super-block's record.
template <bool Q5>
int packed_k(const uint8_t *rec, int r, int j, int i) {
  const int pair = 64 * (r / 2) + 32 * (i / 16) + 16 * (r % 2) + i % 16;
  const uint8_t b = rec[(Q5 ? 192 : 64) + 128 * (j / 2) + pair];
  const int nibble = j % 2 ? b >> 4 : b & 0xF;
  if constexpr (Q5) return nibble | ((rec[64 + pair] >> j) & 1) << 4;
  return nibble;
}

// A column of rkact values (repack.hpp): qs, the super-blocks' scales and
// the 16-value sums.
struct kcol {
  const int8_t *q;
  const float *d;
  const int16_t *sum16;
  kcol(const char *b, int64_t K)
      : q(reinterpret_cast<const int8_t *>(b)),
        d(reinterpret_cast<const float *>(q + K)),
        sum16(reinterpret_cast<const int16_t *>(d + K / 256)) {}
};

// Q4_K (Q5 false) and Q5_K. Per super-block, in integers: the sum over
// sub-blocks of scale * (values . b) and of minimum * (b's sum); then d and
// dmin times b's scale, once. The scales and minimums are read with
// quant_blocks.hpp's scale_min from the row's 12 bytes.
template <bool Q5>
void tile_k(const uint8_t *g, const char *b, size_t, int64_t K, float *out, int64_t) {
  constexpr size_t kRecord = (Q5 ? 176 : 144) * kPackRows;
  const kcol y(b, K);
  for (int r = 0; r < kPackRows; ++r) {
    float acc = 0.0f;
    for (int64_t s = 0; s < K / 256; ++s) {
      const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
      const float d = bp_fp16_to_fp32(u16_at(rec + 4 * r)), dmin = bp_fp16_to_fp32(u16_at(rec + 4 * r + 2));
      int32_t dots = 0, mins = 0;
      uint8_t scales[12];  // the row's 12 bytes, from its three words (repack.hpp)
      for (int w = 0; w < 3; ++w) std::memcpy(scales + 4 * w, rec + kscale_word_at(w, r), 4);
      for (int j = 0; j < 8; ++j) {
        int sc, m, dot = 0;
        scale_min(scales, j, &sc, &m);
        for (int i = 0; i < 32; ++i) dot += packed_k<Q5>(rec, r, j, i) * y.q[256 * s + 32 * j + i];
        dots += sc * dot;
        mins += m * (y.sum16[16 * s + 2 * j] + y.sum16[16 * s + 2 * j + 1]);
      }
      acc += static_cast<float>(dots) * (d * y.d[s]) - static_cast<float>(mins) * (dmin * y.d[s]);
    }
    out[r] = acc;
  }
}

// Q6_K: value i of sub-block j of row r (0-63, before its -32).
int packed_q6_k(const uint8_t *rec, int r, int j, int i) {
  const int h = j / 4, t = j % 4, pair = 64 * (r / 2) + 32 * (i / 16) + 16 * (r % 2) + i % 16;
  const uint8_t lo = rec[72 + 128 * (2 * h + (t & 1)) + pair], hi = rec[72 + 128 * (4 + h) + pair];
  return ((t < 2 ? lo & 0xF : lo >> 4) | (((hi >> (2 * t)) & 3) << 4));
}

// Per super-block, in integers: sum over the 16 halves of scale * (values .
// b), the values' -32 leaving as 32 * scale * (b's 16-value sum).
void tile_q6_k(const uint8_t *g, const char *b, size_t, int64_t K, float *out, int64_t) {
  constexpr size_t kRecord = 210 * kPackRows;
  const kcol y(b, K);
  for (int r = 0; r < kPackRows; ++r) {
    float acc = 0.0f;
    for (int64_t s = 0; s < K / 256; ++s) {
      const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
      const float d = bp_fp16_to_fp32(u16_at(rec + 2 * r));
      const auto *sc = reinterpret_cast<const int8_t *>(rec + 8 + 16 * r);
      int32_t dots = 0;
      for (int j = 0; j < 8; ++j)
        for (int half = 0; half < 2; ++half) {
          int dot = 0;
          for (int i = 16 * half; i < 16 * half + 16; ++i) dot += packed_q6_k(rec, r, j, i) * y.q[256 * s + 32 * j + i];
          dots += sc[2 * j + half] * (dot - 32 * y.sum16[16 * s + 2 * j + half]);
        }
      acc += static_cast<float>(dots) * (d * y.d[s]);
    }
    out[r] = acc;
  }
}

template <int RN>
void tile_scalar(qtype q, const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  const int64_t nb = K / 32;
  const size_t record = static_cast<size_t>(format_of(q).block_bytes) * kPackRows;
  for (int c = 0; c < RN; ++c) {
    const auto *yq = reinterpret_cast<const int8_t *>(b + c * ldb);
    const auto *yd = reinterpret_cast<const float *>(yq + nb * 32);
    for (int r = 0; r < kPackRows; ++r) {
      float acc = 0.0f;
      for (int64_t j = 0; j < nb; ++j) {
        const uint8_t *rec = g + static_cast<size_t>(j) * record;
        int dot = 0;
        for (int i = 0; i < 32; ++i) dot += packed_value(q, rec, r, i) * yq[32 * j + i];
        acc += static_cast<float>(dot) * (bp_fp16_to_fp32(u16_at(rec + 2 * r)) * yd[j]);
      }
      out[c * ldo + r] = acc;
    }
  }
}

template <qtype Q>
void tile_of(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  tile_scalar<1>(Q, g, b, ldb, K, out, ldo);
}

rtile_fn tile_baseline(qtype q, int) {
  switch (q) {
    case qtype::q4_0:
      return tile_of<qtype::q4_0>;
    case qtype::q8_0:
      return tile_of<qtype::q8_0>;
    case qtype::q5_0:
      return tile_of<qtype::q5_0>;
    case qtype::q4_k:
      return tile_k<false>;
    case qtype::q5_k:
      return tile_k<true>;
    case qtype::q6_k:
      return tile_q6_k;
    default:
      return nullptr;
  }
}

}  // namespace

const rkernels &rkernels_baseline() {
  static const rkernels k = {"baseline", [](qtype, int64_t) { return 1; }, column_bytes, quantize_column,
                             [](qtype q, int64_t, int rn) { return tile_baseline(q, rn); }};
  return k;
}

const rkernels &rkernels_for_cpu() {
  switch (plugins::cpu_isa()) {
    case plugins::isa_level::avx512:
      if (!cpu_has_vnni()) return rkernels_avx2();
      return plugins::cpu_amx() ? rkernels_amx() : rkernels_avx512_vnni();
    case plugins::isa_level::avx2:
      return rkernels_avx2();
    default:
      return rkernels_baseline();
  }
}

}  // namespace bp::cpu
