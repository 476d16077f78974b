// quant_gemm_simd.hpp: the integer-dot tiles of quantized MUL_MAT at 8
// int32 lanes (one 32-value block per 256-bit register), for one ISA.
// Included by quant_gemm_avx2.cpp and quant_gemm_avx512.cpp inside an
// anonymous namespace, under a `#pragma GCC target` for their ISA, after
// they define `Isa`:
//   Isa::dot_u(u, s): int32 lane i = sum of u[k] * s[k] over bytes
//     4i..4i+3, u unsigned (at most 63), s signed;
//   Isa::dot_s(x, y): the same for two signed operands (|x|, |y| <= 127).
// Lane i of a block's dot covers values 4i..4i+3, so lanes 0-3 are the
// block's first 16 values and lanes 4-7 its last 16 (Q6_K's two scales).
//
// Per pair (row r of a, column c of b) the tile keeps one vector
// accumulator: per block, acc += float(dot) * (scale of a's block, lane-wise)
// * (b's block scale); per super-block, acc += offsets of a (a lane per
// block) * b's scaled block sums (lo and hi halves). The lanes are summed
// once at the end, in a fixed order. Nothing depends on the tile's size, so
// every split of the rows gives the same bits.

inline __m256i load32(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
inline __m128i load16(const uint8_t *p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); }

// 8 halves, |stride| bytes apart, as floats (lanes past |n| are 0),
// gathered in a register (stores then one wide load would stall the
// store-to-load forwarding).
inline __m256 halves8(const uint8_t *p, size_t stride, int n) {
  short h[8];
  for (int j = 0; j < 8; ++j) {
    uint16_t v = 0;
    if (j < n) std::memcpy(&v, p + j * stride, 2);
    h[j] = static_cast<short>(v);
  }
  return _mm256_cvtph_ps(_mm_setr_epi16(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]));
}
inline float half1(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 16 bytes: their low nibbles in the low 128 bits, high nibbles in the high.
inline __m256i nibbles_lo_hi(const uint8_t *p) {
  const __m256i v = _mm256_broadcastsi128_si256(load16(p));
  return _mm256_and_si256(_mm256_blend_epi32(v, _mm256_srli_epi16(v, 4), 0xF0), _mm256_set1_epi8(0x0F));
}

// A row's scales for one super-block: lane-wise per block (da[8 * j + l])
// or one per block (da[j]); offsets per block for the lo and hi halves.
struct row_prep {
  alignas(32) float da[64];
  alignas(32) float lo[8];
  alignas(32) float hi[8];
};

// The 32-value formats, 8 blocks to a super-block.
template <int Bytes, int QsOff, int Offset>
struct simple_format {
  static constexpr bool kLane = false, kMin = Offset != 0;
  static constexpr size_t kSuper = 8 * Bytes;
  static void prep(const uint8_t *sb, int nsub, row_prep *p) {
    const __m256 d = halves8(sb, Bytes, nsub);
    _mm256_store_ps(p->da, d);
    if constexpr (kMin) {
      const __m256 o = _mm256_mul_ps(d, _mm256_set1_ps(-static_cast<float>(Offset)));
      _mm256_store_ps(p->lo, o);
      _mm256_store_ps(p->hi, o);
    }
  }
};

struct f_q8_0 : simple_format<34, 2, 0> {
  static constexpr bool kSigned = true;
  static __m256i quants(const uint8_t *sb, int j) { return load32(sb + 34 * j + 2); }
};
struct f_q4_0 : simple_format<18, 2, 8> {
  static constexpr bool kSigned = false;
  static __m256i quants(const uint8_t *sb, int j) { return nibbles_lo_hi(sb + 18 * j + 2); }
};
// Q5_0's and Q5_1's fifth bits: byte i takes byte i / 8 of qh, keeps bit
// i % 8, and becomes 0x10 where it is set.
inline __m256i fifth_bits(const uint8_t *qh_at) {
  uint32_t qh;
  std::memcpy(&qh, qh_at, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                          _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

struct f_q5_0 : simple_format<22, 6, 16> {
  static constexpr bool kSigned = false;
  static __m256i quants(const uint8_t *sb, int j) {
    const uint8_t *b = sb + 22 * j;
    return _mm256_or_si256(nibbles_lo_hi(b + 6), fifth_bits(b + 2));
  }
};

// Q4_1 and Q5_1: a scale and a minimum per 32-value block.
template <int Bytes>
struct min_format {
  static constexpr bool kLane = false, kMin = true, kSigned = false;
  static constexpr size_t kSuper = 8 * Bytes;
  static void prep(const uint8_t *sb, int nsub, row_prep *p) {
    _mm256_store_ps(p->da, halves8(sb, Bytes, nsub));
    const __m256 m = halves8(sb + 2, Bytes, nsub);
    _mm256_store_ps(p->lo, m);
    _mm256_store_ps(p->hi, m);
  }
};
struct f_q4_1 : min_format<20> {
  static __m256i quants(const uint8_t *sb, int j) { return nibbles_lo_hi(sb + 20 * j + 4); }
};
struct f_q5_1 : min_format<24> {
  static __m256i quants(const uint8_t *sb, int j) {
    const uint8_t *b = sb + 24 * j;
    return _mm256_or_si256(nibbles_lo_hi(b + 8), fifth_bits(b + 4));
  }
};

// The codebook formats: 4-bit codes looked up as int8 values.
inline __m256i book_values(const int8_t *book, const uint8_t *qs) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(book)));
  return _mm256_shuffle_epi8(table, nibbles_lo_hi(qs));
}
struct f_iq4_nl : simple_format<18, 2, 0> {
  static constexpr bool kSigned = true;
  static __m256i quants(const uint8_t *sb, int j) { return book_values(qblock::kIq4Book, sb + 18 * j + 2); }
};
struct f_mxfp4 {
  static constexpr bool kLane = false, kMin = false, kSigned = true;
  static constexpr size_t kSuper = 8 * 17;
  static void prep(const uint8_t *sb, int nsub, row_prep *p) {
    for (int j = 0; j < 8; ++j) p->da[j] = j < nsub ? qblock::e8m0_half(sb[17 * j]) : 0.0f;
  }
  static __m256i quants(const uint8_t *sb, int j) { return book_values(qblock::kMxfp4Doubled, sb + 17 * j + 1); }
};
struct f_iq4_xs {
  static constexpr bool kLane = false, kMin = false, kSigned = true;
  static constexpr size_t kSuper = 136;
  static void prep(const uint8_t *sb, int, row_prep *p) {
    const float d = half1(sb);
    for (int j = 0; j < 8; ++j) p->da[j] = d * static_cast<float>(qblock::iq4xs_scale(sb, j) - 32);
  }
  static __m256i quants(const uint8_t *sb, int j) {
    return book_values(qblock::kIq4Book, sb + qblock::kIq4XsQsOff + 16 * j);
  }
};

// Lane-wise scales (even: the first 16 values of each block, odd: the last
// 16) and per-half offsets offset * scale, for the formats with a scale per
// 16 values.
inline void lane_scales(const __m256 even, const __m256 odd, row_prep *p) {
  alignas(32) float e[8], o[8];
  _mm256_store_ps(e, even);
  _mm256_store_ps(o, odd);
  for (int j = 0; j < 8; ++j)
    _mm256_store_ps(p->da + 8 * j, _mm256_blend_ps(_mm256_broadcast_ss(e + j), _mm256_broadcast_ss(o + j), 0xF0));
}
// 16 bytes split into even and odd ones (low and high 8 bytes).
inline __m128i evens_odds(__m128i v) {
  return _mm_shuffle_epi8(v, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
}
// The 2-bit codes of block j (Q2_K, and Q3_K's low bits) from the 64 qs.
inline __m256i codes2(const uint8_t *qs, int j) {
  return _mm256_and_si256(_mm256_srl_epi16(load32(qs + 32 * (j / 4)), _mm_cvtsi32_si128(2 * (j % 4))),
                          _mm256_set1_epi8(3));
}

struct f_q2_k {
  static constexpr bool kLane = true, kMin = true, kSigned = false;
  static constexpr size_t kSuper = 84;
  static void prep(const uint8_t *sb, int, row_prep *p) {
    const __m128i s = evens_odds(load16(sb));
    const __m128i sc = _mm_and_si128(s, _mm_set1_epi8(0x0F));
    const __m128i m = _mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F));
    const __m256 d = _mm256_set1_ps(half1(sb + qblock::kQ2KDOff));
    const __m256 dmin = _mm256_set1_ps(-half1(sb + qblock::kQ2KDminOff));
    lane_scales(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))),
                _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sc, 8)))), p);
    _mm256_store_ps(p->lo, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m))));
    _mm256_store_ps(p->hi, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(m, 8)))));
  }
  static __m256i quants(const uint8_t *sb, int j) { return codes2(sb + qblock::kQ2KQsOff, j); }
};

// Q3_K: codes 0..7 (the high bit set for the upper half), offset -4.
struct f_q3_k {
  static constexpr bool kLane = true, kMin = true, kSigned = false;
  static constexpr size_t kSuper = 110;
  static void prep(const uint8_t *sb, int, row_prep *p) {
    alignas(16) int8_t sc[16];
    for (int g = 0; g < 16; ++g) sc[g] = static_cast<int8_t>(qblock::q3k_scale(sb + qblock::kQ3KScalesOff, g) - 32);
    const __m128i s = evens_odds(_mm_load_si128(reinterpret_cast<const __m128i *>(sc)));
    const __m256 d = _mm256_set1_ps(half1(sb + qblock::kQ3KDOff));
    const __m256 even = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s)));
    const __m256 odd = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s, 8))));
    lane_scales(even, odd, p);
    const __m256 m4 = _mm256_set1_ps(-4.0f);
    _mm256_store_ps(p->lo, _mm256_mul_ps(m4, even));
    _mm256_store_ps(p->hi, _mm256_mul_ps(m4, odd));
  }
  static __m256i quants(const uint8_t *sb, int j) {
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(load32(sb), _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    return _mm256_or_si256(codes2(sb + qblock::kQ3KQsOff, j), _mm256_slli_epi16(high, 2));
  }
};

// Q4_K and Q5_K: 8 sub-blocks of 32 with a 6-bit scale and min each.
template <size_t Bytes>
struct kmin_format {
  static constexpr bool kLane = false, kMin = true, kSigned = false;
  static constexpr size_t kSuper = Bytes;
  // The 6-bit scales and mins of the 8 sub-blocks, unpacked 4 at a time in
  // 32-bit words (quant_blocks.hpp's scale_min, byte-parallel).
  static void prep(const uint8_t *sb, int, row_prep *p) {
    uint32_t w[3];
    std::memcpy(w, sb + 4, 12);
    const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu, m_lo = w[1] & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u);
    const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u);
    const __m256 sc = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), 0, 0)));
    const __m256 m =
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(m_lo), static_cast<int>(m_hi), 0, 0)));
    _mm256_store_ps(p->da, _mm256_mul_ps(_mm256_set1_ps(half1(sb)), sc));
    const __m256 mins = _mm256_mul_ps(_mm256_set1_ps(-half1(sb + 2)), m);
    _mm256_store_ps(p->lo, mins);
    _mm256_store_ps(p->hi, mins);
  }
};

struct f_q4_k : kmin_format<144> {
  static __m256i quants(const uint8_t *sb, int j) {
    const __m256i v = load32(sb + 16 + 32 * (j / 2));
    const __m256i m = _mm256_set1_epi8(0x0F);
    return (j & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m) : _mm256_and_si256(v, m);
  }
};

struct f_q5_k : kmin_format<176> {
  // Q4_K's nibbles (at byte 48), and bit j of each of the 32 qh bytes as 16.
  static __m256i quants(const uint8_t *sb, int j) {
    const __m256i v = load32(sb + 48 + 32 * (j / 2));
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = (j & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m) : _mm256_and_si256(v, m);
    const __m256i qh = _mm256_srl_epi16(load32(sb + 16), _mm_cvtsi32_si128(j));
    return _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), _mm256_set1_epi8(0x10)));
  }
};

struct f_q6_k {
  static constexpr bool kLane = true, kMin = true, kSigned = false;
  static constexpr size_t kSuper = 210;
  static void prep(const uint8_t *sb, int, row_prep *p) {
    const __m256 d = _mm256_set1_ps(half1(sb + 208));
    // The 16 int8 scales split into even (first half of each block) and odd.
    const __m128i sc = evens_odds(load16(sb + 192));
    const __m256 even = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
    const __m256 odd = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))));
    const __m256 m32 = _mm256_set1_ps(-32.0f);
    _mm256_store_ps(p->lo, _mm256_mul_ps(m32, even));
    _mm256_store_ps(p->hi, _mm256_mul_ps(m32, odd));
    lane_scales(even, odd, p);
  }
  static __m256i quants(const uint8_t *sb, int j) {
    const int h = j / 4, t = j % 4;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i lo = load32(sb + 64 * h + 32 * (t & 1));
    lo = t < 2 ? _mm256_and_si256(lo, m4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4);
    const __m256i qh = load32(sb + 128 + 32 * h);
    const __m256i top = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * t)), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(top, 4));
  }
};

inline float hsum8(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  return ((f[0] + f[4]) + (f[1] + f[5])) + ((f[2] + f[6]) + (f[3] + f[7]));
}

// How far ahead of its reads a tile requests each row into cache.
constexpr size_t kPrefetchBytes = 1024;

// One super-block of a tile: NS blocks (8 known at compile time, so the
// block loop unrolls, or 0 for a last, partial one of |nsub| blocks).
template <class F, int RM, int RN, int NS>
inline void super_step(const uint8_t *const *rows, size_t at, int nsub, int64_t s, const int8_t *const *yq,
                       const float *const *yd, const float *const *ylo, const float *const *yhi,
                       __m256 (&acc)[RM][RN]) {
  row_prep prep[RM];
  for (int r = 0; r < RM; ++r) {
    for (size_t o = 0; o < F::kSuper; o += 64)
      _mm_prefetch(reinterpret_cast<const char *>(rows[r] + at + kPrefetchBytes + o), _MM_HINT_T0);
    F::prep(rows[r] + at, NS ? NS : nsub, &prep[r]);
  }
  // Per pair, the 8 blocks' products of a's and b's scales (one lane each),
  // where a's scale is one per block.
  alignas(32) float scale[F::kLane ? 1 : RM][F::kLane ? 1 : RN][8];
  if constexpr (!F::kLane) {
    for (int c = 0; c < RN; ++c) {
      const __m256 dy = _mm256_loadu_ps(yd[c] + 8 * s);
      for (int r = 0; r < RM; ++r) _mm256_store_ps(scale[r][c], _mm256_mul_ps(_mm256_load_ps(prep[r].da), dy));
    }
  }
  const int n = NS ? NS : nsub;
  // Unrolled, each block's offsets and shifts are constants.
#pragma GCC unroll 8
  for (int j = 0; j < n; ++j) {
    __m256i q[RM];
    for (int r = 0; r < RM; ++r) q[r] = F::quants(rows[r] + at, j);
    const int64_t blk = 8 * s + j;
    for (int c = 0; c < RN; ++c) {
      const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(yq[c] + 32 * blk));
      for (int r = 0; r < RM; ++r) {
        const __m256i dot = F::kSigned ? Isa::dot_s(q[r], y) : Isa::dot_u(q[r], y);
        __m256 w;
        if constexpr (F::kLane) {
          w = _mm256_mul_ps(_mm256_load_ps(prep[r].da + 8 * j), _mm256_broadcast_ss(yd[c] + blk));
        } else {
          w = _mm256_broadcast_ss(&scale[r][c][j]);
        }
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), w, acc[r][c]);
      }
    }
  }
  if constexpr (F::kMin) {
    for (int c = 0; c < RN; ++c) {
      const __m256 lo = _mm256_loadu_ps(ylo[c] + 8 * s), hi = _mm256_loadu_ps(yhi[c] + 8 * s);
      if constexpr (F::kLane) {
        for (int r = 0; r < RM; ++r) {
          acc[r][c] = _mm256_fmadd_ps(_mm256_load_ps(prep[r].lo), lo, acc[r][c]);
          acc[r][c] = _mm256_fmadd_ps(_mm256_load_ps(prep[r].hi), hi, acc[r][c]);
        }
      } else {  // one offset per block: lo and hi together
        const __m256 sum = _mm256_add_ps(lo, hi);
        for (int r = 0; r < RM; ++r) acc[r][c] = _mm256_fmadd_ps(_mm256_load_ps(prep[r].lo), sum, acc[r][c]);
      }
    }
  }
}

template <class F, int RM, int RN>
void qtile(const char *a, size_t lda, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  const int64_t nb = K / 32, nbp = act_blocks(K), nsuper = nbp / 8;
  const uint8_t *rows[RM];
  for (int r = 0; r < RM; ++r) rows[r] = reinterpret_cast<const uint8_t *>(a + r * lda);
  const int8_t *yq[RN];
  const float *yd[RN], *ylo[RN], *yhi[RN];
  for (int c = 0; c < RN; ++c) {
    yq[c] = reinterpret_cast<const int8_t *>(b + c * ldb);
    yd[c] = reinterpret_cast<const float *>(yq[c] + nbp * 32);
    ylo[c] = yd[c] + nbp;
    yhi[c] = ylo[c] + nbp;
  }
  __m256 acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) acc[r][c] = _mm256_setzero_ps();
  const int64_t full = nb / 8;
  for (int64_t s = 0; s < full; ++s)
    super_step<F, RM, RN, 8>(rows, static_cast<size_t>(s) * F::kSuper, 8, s, yq, yd, ylo, yhi, acc);
  if (full < nsuper)
    super_step<F, RM, RN, 0>(rows, static_cast<size_t>(full) * F::kSuper, static_cast<int>(nb - 8 * full), full, yq, yd,
                             ylo, yhi, acc);
  for (int c = 0; c < RN; ++c)
    for (int r = 0; r < RM; ++r) out[c * ldo + r] = hsum8(acc[r][c]);
}

// The table of one format's tiles: [rn - 1] for RM rows, and for 1 row.
template <class F, int RM, int... RNs>
struct tiles_of {
  static qtile_fn get(int rm, int rn) {
    static const qtile_fn full[] = {qtile<F, RM, RNs>...};
    static const qtile_fn one[] = {qtile<F, 1, RNs>...};
    return rm == RM ? full[rn - 1] : one[rn - 1];
  }
};

// Every block format's tiles of RM rows by RNs columns (BF16 has float
// kernels of its own, ops_matmul_bf16.cpp).
template <int RM, int... RNs>
qtile_fn tile_of_format(qtype q, int rm, int rn) {
  switch (q) {
    case qtype::q8_0:
      return tiles_of<f_q8_0, RM, RNs...>::get(rm, rn);
    case qtype::q4_0:
      return tiles_of<f_q4_0, RM, RNs...>::get(rm, rn);
    case qtype::q5_0:
      return tiles_of<f_q5_0, RM, RNs...>::get(rm, rn);
    case qtype::q4_k:
      return tiles_of<f_q4_k, RM, RNs...>::get(rm, rn);
    case qtype::q6_k:
      return tiles_of<f_q6_k, RM, RNs...>::get(rm, rn);
    case qtype::q5_k:
      return tiles_of<f_q5_k, RM, RNs...>::get(rm, rn);
    case qtype::q4_1:
      return tiles_of<f_q4_1, RM, RNs...>::get(rm, rn);
    case qtype::q5_1:
      return tiles_of<f_q5_1, RM, RNs...>::get(rm, rn);
    case qtype::q2_k:
      return tiles_of<f_q2_k, RM, RNs...>::get(rm, rn);
    case qtype::q3_k:
      return tiles_of<f_q3_k, RM, RNs...>::get(rm, rn);
    case qtype::iq4_nl:
      return tiles_of<f_iq4_nl, RM, RNs...>::get(rm, rn);
    case qtype::iq4_xs:
      return tiles_of<f_iq4_xs, RM, RNs...>::get(rm, rn);
    case qtype::mxfp4:
      return tiles_of<f_mxfp4, RM, RNs...>::get(rm, rn);
    case qtype::bf16:
      break;
  }
  return nullptr;
}
