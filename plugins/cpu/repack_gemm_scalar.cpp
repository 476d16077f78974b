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
  if (q == qtype::q4_0) {
    const uint8_t b = rec[8 + 32 * (r / 2) + 16 * (r % 2) + v];
    return (half ? b >> 4 : b & 0xF) - 8;
  }
  return static_cast<int8_t>(rec[8 + 64 * (r / 2) + 32 * half + 16 * (r % 2) + v]);
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
    default:
      return nullptr;
  }
}

}  // namespace

const rkernels &rkernels_baseline() {
  static const rkernels k = {"baseline", 1, tile_baseline};
  return k;
}

const rkernels &rkernels_for_cpu() {
  return plugins::cpu_isa() >= plugins::isa_level::avx2 ? rkernels_avx2() : rkernels_baseline();
}

}  // namespace bp::cpu
