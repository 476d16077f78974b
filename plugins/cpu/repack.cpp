// repack.cpp: the repacked layout's conversions (repack.hpp) and the
// quantized columns of b its products read.
#include "repack.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace bp::cpu {

bool repack_format(qtype q) {
  return q == qtype::q4_0 || q == qtype::q8_0 || q == qtype::q5_0 || q == qtype::q4_k || q == qtype::q5_k ||
         q == qtype::q6_k;
}

namespace {

// Where the bytes of one block of one row go inside the group's record of
// that block, as (offset in the row's block, offset in the record, length)
// runs: the f16 scale, then the quants.
struct run {
  int from, to, len;
};

// Q4_0: row r's 16 nibble bytes at pair r / 2, half r % 2.
// Q8_0: row r's values 0-15 and 16-31 at pair r / 2, quarters r % 2 and 2 + r % 2.
// Q5_0: row r's 4 qh bytes at 8 + 4r, its 16 nibble bytes at 24 + pair r / 2,
// half r % 2.
// Q4_K: row r's d and dmin at 4r, its scale bytes 0-3, 4-7 and 8-11 at
// 16 + 4r, 32 + 4r and 48 + 4r, then per
// sub-block pair s its 32 nibble bytes as 16 at pair r / 2, half r % 2, and 16
// at the next 32 bytes.
// Q5_K: as Q4_K, with row r's 32 qh bytes before the nibbles (at 64, as 16 at
// pair r / 2, half r % 2, and 16 at the next 32 bytes) and the nibbles at 192.
// Q6_K: row r's d at 2r, its 16 scales at 8 + 16r, then its 4 chunks of 32
// ql bytes and 2 of 32 qh bytes, each as 16 at pair r / 2, half r % 2, and 16
// at the next 32 bytes.
template <class Fn>
void for_each_run(qtype q, int r, Fn &&fn) {
  if (q == qtype::q6_k) {
    fn(run{208, 2 * r, 2});
    fn(run{192, 8 + 16 * r, 16});
    for (int c = 0; c < 6; ++c) {  // ql chunks 0-3, then qh chunks 0-1
      const int at = 72 + 128 * c + 64 * (r / 2) + 16 * (r % 2);
      fn(run{32 * c, at, 16});
      fn(run{32 * c + 16, at + 32, 16});
    }
    return;
  }
  if (q == qtype::q4_k || q == qtype::q5_k) {
    const bool q5 = q == qtype::q5_k;
    const int qs = q5 ? 48 : 16, packed_qs = q5 ? 192 : 64, pair = 64 * (r / 2) + 16 * (r % 2);
    fn(run{0, 4 * r, 4});
    for (int w = 0; w < 3; ++w) fn(run{4 + 4 * w, kscale_word_at(w, r), 4});
    if (q5) {
      fn(run{16, 64 + pair, 16});
      fn(run{32, 64 + pair + 32, 16});
    }
    for (int s = 0; s < 4; ++s) {
      const int at = packed_qs + 128 * s + pair;
      fn(run{qs + 32 * s, at, 16});
      fn(run{qs + 32 * s + 16, at + 32, 16});
    }
    return;
  }
  fn(run{0, 2 * r, 2});
  if (q == qtype::q5_0) {
    fn(run{2, 8 + 4 * r, 4});
    fn(run{6, 24 + 32 * (r / 2) + 16 * (r % 2), 16});
  } else if (q == qtype::q4_0) {
    fn(run{2, 8 + 32 * (r / 2) + 16 * (r % 2), 16});
  } else {
    fn(run{2, 8 + 64 * (r / 2) + 16 * (r % 2), 16});
    fn(run{18, 8 + 64 * (r / 2) + 32 + 16 * (r % 2), 16});
  }
}

template <bool Pack>
void convert_group(qtype q, const uint8_t *from, uint8_t *to, int64_t k) {
  const size_t block = static_cast<size_t>(format_of(q).block_bytes), row = qrow_bytes(q, k);
  const size_t record = block * kPackRows;
  const int64_t nb = k / format_of(q).block_values;
  for (int64_t j = 0; j < nb; ++j)
    for (int r = 0; r < kPackRows; ++r)
      for_each_run(q, r, [&](run u) {
        const size_t plain =
            static_cast<size_t>(r) * row + static_cast<size_t>(j) * block + static_cast<size_t>(u.from);
        const size_t packed = static_cast<size_t>(j) * record + static_cast<size_t>(u.to);
        if constexpr (Pack) {
          std::memcpy(to + packed, from + plain, static_cast<size_t>(u.len));
        } else {
          std::memcpy(to + plain, from + packed, static_cast<size_t>(u.len));
        }
      });
}

}  // namespace

void pack_group(qtype q, const uint8_t *plain, uint8_t *packed, int64_t k) { convert_group<true>(q, plain, packed, k); }
void unpack_group(qtype q, const uint8_t *packed, uint8_t *plain, int64_t k) {
  convert_group<false>(q, packed, plain, k);
}

void quantize_ract_col(const float *src, int64_t K, void *col) {
  static const act_quantizers *simd = act_quantizers_avx2();
  if (simd) return simd->ract_col(src, K, col);
  const ract_col_parts c = ract_col_at(col, K);
  for (int64_t j = 0; j < c.blocks; ++j) {
    int8_t *qj = c.qs + 32 * j;
    c.d[j] = quantize_act_block(src + 32 * j, qj);
    int32_t all = 0;
    for (int l = 0; l < 4; ++l) {
      int32_t s = 0;
      for (int t = 0; t < 4; ++t) s += qj[4 * l + t] + qj[16 + 4 * l + t];
      c.sums[4 * j + l] = s;
      all += s;
    }
    c.bsum[j] = c.d[j] * static_cast<float>(all);
  }
}

size_t column_bytes(qtype q, int64_t K, int64_t) { return reads_rkact(q) ? rkact_col_bytes(K) : ract_col_bytes(K); }

void quantize_column(qtype q, int64_t N, const float *x, int64_t K, char *, char *cols, int64_t n) {
  char *col = cols + static_cast<size_t>(n) * column_bytes(q, K, N);
  if (reads_rkact(q)) {
    quantize_rkact_col(x, K, col);
  } else {
    quantize_ract_col(x, K, col);
  }
}

void quantize_rkact_col(const float *src, int64_t K, void *col) {
  static const act_quantizers *simd = act_quantizers_avx2();
  if (simd) return simd->rkact_col(src, K, col);
  const rkact_col_parts parts = rkact_col_at(col, K);
  for (int64_t s = 0; s < parts.supers; ++s) {
    const float *x = src + 256 * s;
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    parts.d[s] = amax / 127.0f;
    int8_t *q = parts.qs + 256 * s;
    for (int i = 0; i < 256; ++i) {
      const float v = x[i] * id;  // a NaN value quantizes as quantize_act_block's do: to -127
      q[i] = static_cast<int8_t>(v == v ? std::nearbyint(std::clamp(v, -127.0f, 127.0f)) : -127.0f);
    }
    for (int h = 0; h < 16; ++h) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[16 * h + i];
      parts.sums[16 * s + h] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace bp::cpu
