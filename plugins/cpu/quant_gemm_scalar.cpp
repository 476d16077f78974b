// quant_gemm_scalar.cpp: quantized MUL_MAT's tiles for the baseline ISA
// (one row by one column, plain C++), and the choice of tiles per CPU.
#include "backplane/tensor.h"
#include "isa.hpp"
#include "quant.hpp"
#include "quant_blocks.hpp"

namespace bp::cpu {
namespace {

using namespace qblock;

// Block |j| (32 values) of a row: value i = scale[i / 16] * q[i] + off[i / 16].
template <qtype Q>
void block_terms(const uint8_t *row, int64_t j, int q[32], float scale[2], float off[2]) {
  off[0] = off[1] = 0.0f;
  if constexpr (Q == qtype::q8_0 || Q == qtype::q4_0 || Q == qtype::q5_0) {
    const uint8_t *b = row + j * format_of(Q).block_bytes;
    scale[0] = scale[1] = bp_fp16_to_fp32(u16_at(b));
    if constexpr (Q == qtype::q8_0) {
      for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(b[2 + i]);
    } else if constexpr (Q == qtype::q4_0) {
      for (int i = 0; i < 16; ++i) {
        q[i] = (b[2 + i] & 0xF) - 8;
        q[i + 16] = (b[2 + i] >> 4) - 8;
      }
    } else {
      const uint32_t qh = u32_at(b + kQ5QhOff);
      for (int i = 0; i < 16; ++i) {
        q[i] = ((b[kQ5QsOff + i] & 0xF) | static_cast<int>(((qh >> i) & 1u) << 4)) - 16;
        q[i + 16] = ((b[kQ5QsOff + i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4)) - 16;
      }
    }
  } else if constexpr (Q == qtype::q4_k || Q == qtype::q5_k) {
    const uint8_t *b = row + (j / 8) * format_of(Q).block_bytes;
    const int sub = static_cast<int>(j % 8);
    int sc, m;
    scale_min(b + kQ4KScalesOff, sub, &sc, &m);
    scale[0] = scale[1] = bp_fp16_to_fp32(u16_at(b)) * static_cast<float>(sc);
    off[0] = off[1] = -(bp_fp16_to_fp32(u16_at(b + kQ4KDminOff)) * static_cast<float>(m));
    const uint8_t *qs = b + (Q == qtype::q4_k ? kQ4KQsOff : kQ5KQsOff) + 32 * (sub / 2);
    for (int i = 0; i < 32; ++i) q[i] = (sub & 1) ? qs[i] >> 4 : qs[i] & 0xF;
    if constexpr (Q == qtype::q5_k) {
      for (int i = 0; i < 32; ++i) q[i] |= ((b[kQ5KQhOff + i] >> sub) & 1) << 4;
    }
  } else if constexpr (Q == qtype::q4_1 || Q == qtype::q5_1) {
    const uint8_t *b = row + j * format_of(Q).block_bytes;
    scale[0] = scale[1] = bp_fp16_to_fp32(u16_at(b));
    off[0] = off[1] = bp_fp16_to_fp32(u16_at(b + kQ41MOff));
    if constexpr (Q == qtype::q4_1) {
      for (int i = 0; i < 16; ++i) {
        q[i] = b[kQ41QsOff + i] & 0xF;
        q[i + 16] = b[kQ41QsOff + i] >> 4;
      }
    } else {
      const uint32_t qh = u32_at(b + kQ51QhOff);
      for (int i = 0; i < 16; ++i) {
        q[i] = (b[kQ51QsOff + i] & 0xF) | static_cast<int>(((qh >> i) & 1u) << 4);
        q[i + 16] = (b[kQ51QsOff + i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
      }
    }
  } else if constexpr (Q == qtype::q2_k || Q == qtype::q3_k) {
    const uint8_t *b = row + (j / 8) * format_of(Q).block_bytes;
    const int sub = static_cast<int>(j % 8);
    const uint8_t *qs = b + (Q == qtype::q2_k ? kQ2KQsOff : kQ3KQsOff) + 32 * (sub / 4);
    for (int i = 0; i < 32; ++i) q[i] = (qs[i] >> (2 * (sub % 4))) & 3;
    if constexpr (Q == qtype::q2_k) {
      const float d = bp_fp16_to_fp32(u16_at(b + kQ2KDOff)), dmin = bp_fp16_to_fp32(u16_at(b + kQ2KDminOff));
      for (int h = 0; h < 2; ++h) {
        scale[h] = d * static_cast<float>(b[2 * sub + h] & 0xF);
        off[h] = -(dmin * static_cast<float>(b[2 * sub + h] >> 4));
      }
    } else {
      const float d = bp_fp16_to_fp32(u16_at(b + kQ3KDOff));
      for (int h = 0; h < 2; ++h) scale[h] = d * static_cast<float>(q3k_scale(b + kQ3KScalesOff, 2 * sub + h) - 32);
      for (int i = 0; i < 32; ++i) q[i] += ((b[i] >> sub) & 1) ? 0 : -4;
    }
  } else if constexpr (Q == qtype::iq4_nl || Q == qtype::iq4_xs || Q == qtype::mxfp4) {
    const int8_t *book = Q == qtype::mxfp4 ? kMxfp4Doubled : kIq4Book;
    const uint8_t *qs;
    if constexpr (Q == qtype::iq4_xs) {
      const uint8_t *b = row + (j / 8) * format_of(Q).block_bytes;
      const int sub = static_cast<int>(j % 8);
      scale[0] = scale[1] = bp_fp16_to_fp32(u16_at(b)) * static_cast<float>(iq4xs_scale(b, sub) - 32);
      qs = b + kIq4XsQsOff + 16 * sub;
    } else {
      const uint8_t *b = row + j * format_of(Q).block_bytes;
      scale[0] = scale[1] = Q == qtype::mxfp4 ? e8m0_half(b[0]) : bp_fp16_to_fp32(u16_at(b));
      qs = b + (Q == qtype::mxfp4 ? 1 : 2);
    }
    for (int i = 0; i < 16; ++i) {
      q[i] = book[qs[i] & 0xF];
      q[i + 16] = book[qs[i] >> 4];
    }
  } else {
    const uint8_t *b = row + (j / 8) * 210;
    const int sub = static_cast<int>(j % 8), h = sub / 4, t = sub % 4;
    const float d = bp_fp16_to_fp32(u16_at(b + kQ6KDOff));
    const int8_t *sc = reinterpret_cast<const int8_t *>(b + kQ6KScalesOff);
    scale[0] = d * static_cast<float>(sc[2 * sub]);
    scale[1] = d * static_cast<float>(sc[2 * sub + 1]);
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo = b[64 * h + 32 * (t & 1) + l];
      q[l] = ((t < 2 ? lo & 0xF : lo >> 4) | (((b[kQ6KQhOff + 32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
    }
  }
}

template <qtype Q>
void pair_tile(const char *a, size_t, const char *b, size_t, int64_t K, float *out, int64_t) {
  const int64_t nb = K / 32, nbp = act_blocks(K);
  const auto *row = reinterpret_cast<const uint8_t *>(a);
  const auto *yq = reinterpret_cast<const int8_t *>(b);
  const float *yd = reinterpret_cast<const float *>(yq + nbp * 32), *ylo = yd + nbp, *yhi = ylo + nbp;
  float acc = 0.0f;
  int q[32];
  float scale[2], off[2];
  for (int64_t j = 0; j < nb; ++j) {
    block_terms<Q>(row, j, q, scale, off);
    const int8_t *y = yq + 32 * j;
    int s0 = 0, s1 = 0;
    for (int i = 0; i < 16; ++i) s0 += q[i] * y[i];
    for (int i = 16; i < 32; ++i) s1 += q[i] * y[i];
    acc += (scale[0] * yd[j]) * static_cast<float>(s0) + (scale[1] * yd[j]) * static_cast<float>(s1);
    acc += off[0] * ylo[j] + off[1] * yhi[j];
  }
  out[0] = acc;
}

qtile_fn tile_baseline(qtype q, int, int) {
  switch (q) {
    case qtype::q8_0:
      return pair_tile<qtype::q8_0>;
    case qtype::q4_0:
      return pair_tile<qtype::q4_0>;
    case qtype::q5_0:
      return pair_tile<qtype::q5_0>;
    case qtype::q4_k:
      return pair_tile<qtype::q4_k>;
    case qtype::q6_k:
      return pair_tile<qtype::q6_k>;
    case qtype::q5_k:
      return pair_tile<qtype::q5_k>;
    case qtype::q4_1:
      return pair_tile<qtype::q4_1>;
    case qtype::q5_1:
      return pair_tile<qtype::q5_1>;
    case qtype::q2_k:
      return pair_tile<qtype::q2_k>;
    case qtype::q3_k:
      return pair_tile<qtype::q3_k>;
    case qtype::iq4_nl:
      return pair_tile<qtype::iq4_nl>;
    case qtype::iq4_xs:
      return pair_tile<qtype::iq4_xs>;
    case qtype::mxfp4:
      return pair_tile<qtype::mxfp4>;
    case qtype::bf16:  // float kernels of its own (ops_matmul_bf16.cpp)
      break;
  }
  return nullptr;
}

int rows_baseline(int) { return 1; }

}  // namespace

bool cpu_has_vnni() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

const qkernels &qkernels_baseline() {
  static const qkernels k = {"baseline", 1, rows_baseline, tile_baseline};
  return k;
}

const qkernels &qkernels_for_cpu() {
  switch (plugins::cpu_isa()) {
    case plugins::isa_level::avx512:
      return cpu_has_vnni() ? qkernels_avx512_vnni() : qkernels_avx512();
    case plugins::isa_level::avx2:
      return qkernels_avx2();
    default:
      return qkernels_baseline();
  }
}

}  // namespace bp::cpu
