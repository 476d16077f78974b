// repack_amx.hpp: the steps both AMX tile files share (repack_gemm_amx.cpp,
// the 32-value formats; repack_gemm_amx_k.cpp, Q4_K and Q5_K): the tiles'
// configuration, B's layout from decoded rows, the thread's scratch, and the
// products of 32-value blocks in batches. Include it inside the file's AMX
// target region, within an anonymous namespace in bp::cpu. The files
// including this one include <algorithm> and <vector>.
#ifndef BP_PLUGIN_CPU_REPACK_AMX_HPP_
#define BP_PLUGIN_CPU_REPACK_AMX_HPP_

constexpr int kAmxGroups = 4;  // 16 rows: the tiles' M
constexpr int kAmxRows = kAmxGroups * kPackRows;
// A tile of b's columns: A's rows, C's rows.
constexpr int kAmxTileCols = 16;
// Columns per call: 4 tiles of 16 share one decode of the rows.
constexpr int kAmxCallCols = 4 * kAmxTileCols;
// One 32-value block of 16 rows as B (8 rows of 64 bytes), or of 16 columns
// as A (16 rows of 32 bytes): 512 bytes either way.
constexpr size_t kAmxTileBytes = 512;

// The tiles' shapes (palette 1): tmm0-1 A (16 x 32 bytes), tmm2-3 B (8 x 64),
// tmm4-7 C (16 x 16 int32): 4 blocks' products in flight (tile_dots).
struct alignas(64) tile_config {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {32, 32, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 8, 8, 16, 16, 16, 16};
};

// 4x4 transpose of 128-bit lanes: lane k of out[i] is lane i of in[k].
inline void transpose_lanes(const __m512i *in, __m512i *out) {
  const __m512i t0 = _mm512_shuffle_i64x2(in[0], in[1], 0x44), t1 = _mm512_shuffle_i64x2(in[0], in[1], 0xEE);
  const __m512i t2 = _mm512_shuffle_i64x2(in[2], in[3], 0x44), t3 = _mm512_shuffle_i64x2(in[2], in[3], 0xEE);
  out[0] = _mm512_shuffle_i64x2(t0, t2, 0x88);
  out[1] = _mm512_shuffle_i64x2(t0, t2, 0xDD);
  out[2] = _mm512_shuffle_i64x2(t1, t3, 0x88);
  out[3] = _mm512_shuffle_i64x2(t1, t3, 0xDD);
}

// B for one 32-value block of the 16 rows, into |dst|: each group's signed
// values 0-15 (lo) and 16-31 (hi) of its 4 rows (row r in 128-bit lane r,
// quad k in dword 4r + k), transposed within the register so that lane k
// is quad k of rows 0-3; the 4 groups' lanes k side by side are B's row k.
inline void store_b_tile(__m512i *lo, __m512i *hi, uint8_t *dst) {
  const __m512i quads = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int q = 0; q < kAmxGroups; ++q) {
    lo[q] = _mm512_permutexvar_epi32(quads, lo[q]);
    hi[q] = _mm512_permutexvar_epi32(quads, hi[q]);
  }
  __m512i rows[8];
  transpose_lanes(lo, rows);
  transpose_lanes(hi, rows + 4);
  for (int k = 0; k < 8; ++k) _mm512_storeu_si512(dst + 64 * k, rows[k]);
}

// A thread's scratch of |bytes| (64-byte aligned) for its decoded rows, kept
// between calls so the vector is allocated once. Bytes past what a call
// writes keep their earlier contents.
inline uint8_t *amx_rows(size_t bytes) {
  thread_local std::vector<uint8_t> v;
  if (v.size() < bytes + 64) v.resize(bytes + 64);
  return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
}

// C = the 16 columns' block at |cols| (tile A) times the rows' block at
// |blk| (B). GCC's tile intrinsics paste the tile number into
// the instruction text, so each slot's tiles are spelled out: slot s loads A
// into tmm(s % 2), B into tmm(2 + s % 2), and sums into tmm(4 + s).
template <int Slot>
inline void tile_mul(const char *cols, const uint8_t *blk) {
  constexpr long stride = 32;
  if constexpr (Slot == 0) {
    _tile_loadd(0, cols, stride);
    _tile_loadd(2, blk, 64);
    _tile_zero(4);
    _tile_dpbssd(4, 0, 2);
  } else if constexpr (Slot == 1) {
    _tile_loadd(1, cols, stride);
    _tile_loadd(3, blk, 64);
    _tile_zero(5);
    _tile_dpbssd(5, 1, 3);
  } else if constexpr (Slot == 2) {
    _tile_loadd(0, cols, stride);
    _tile_loadd(2, blk, 64);
    _tile_zero(6);
    _tile_dpbssd(6, 0, 2);
  } else {
    _tile_loadd(1, cols, stride);
    _tile_loadd(3, blk, 64);
    _tile_zero(7);
    _tile_dpbssd(7, 1, 3);
  }
}

// |count| (up to kSlots) blocks' tile products, block i's A at a + i *
// |step| and its B at b + i * |step|, each into its own C, then stored to
// c[i]. The stores come after all the products: a store waits for its
// product, and the later products run meanwhile.
constexpr int kSlots = 4;
using c_tiles = int32_t[kSlots][kAmxTileCols * kAmxRows];
inline void tile_dots(const char *a, const uint8_t *b, size_t step, int64_t count, c_tiles &c) {
  tile_mul<0>(a, b);
  if (count > 1) tile_mul<1>(a + step, b + step);
  if (count > 2) tile_mul<2>(a + 2 * step, b + 2 * step);
  if (count > 3) tile_mul<3>(a + 3 * step, b + 3 * step);
  _tile_stored(4, c[0], 64);
  if (count > 1) _tile_stored(5, c[1], 64);
  if (count > 2) _tile_stored(6, c[2], 64);
  if (count > 3) _tile_stored(7, c[3], 64);
}

// |batches| batches of tile products (issue(t, c) fills c), each consumed
// (consume(t, c)) after the next batch is issued: a vector load of a tile
// store's bytes waits for the store to finish, which a batch's scaling then
// need not do.
template <class Issue, class Consume>
inline void pipelined(int64_t batches, Issue issue, Consume consume) {
  alignas(64) c_tiles c[2];
  issue(0, c[0]);
  for (int64_t t = 0; t < batches; ++t) {
    if (t + 1 < batches) issue(t + 1, c[(t + 1) % 2]);
    consume(t, c[t % 2]);
  }
}

// One call's tile work on rows decoded into the thread's scratch: the tile
// configuration loaded, fn(n0, acc) for each tile of 16 columns from n0
// (acc[n]: column n0 + n's outputs for the 16 rows), those of the columns
// below rn stored at out + column * ldo, and the tiles released, so the
// thread's context switches between products carry no tile state.
template <class Fn>
inline void for_column_tiles(int rn, float *out, int64_t ldo, Fn fn) {
  // GCC's tile loads are asm statements that do not say they read memory:
  // the decoded rows must be in memory before them.
  __asm__ volatile("" ::: "memory");
  static const tile_config cfg;
  _tile_loadconfig(&cfg);
  for (int n0 = 0; n0 < rn; n0 += kAmxTileCols) {
    __m512 acc[kAmxTileCols];
    for (int n = 0; n < kAmxTileCols; ++n) acc[n] = _mm512_setzero_ps();
    fn(n0, acc);
    for (int n = 0; n < kAmxTileCols && n0 + n < rn; ++n) _mm512_storeu_ps(out + (n0 + n) * ldo, acc[n]);
  }
  _tile_release();
}

#endif  // BP_PLUGIN_CPU_REPACK_AMX_HPP_
