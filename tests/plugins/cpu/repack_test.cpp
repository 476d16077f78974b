// repack_test.cpp: the cpu plugin's weight buffer type and its repacked
// products, through the C ABI alone: bytes written in any ranges (partial
// groups, rows past the last group, several matrices) read back as they
// were written, while the buffer holds them in another order; MUL_MAT with
// repacked a against a double-precision product of the plain weights, with
// row tails, odd column counts and broadcast batches, bit-equal across
// thread counts; every other reader of repacked bytes declined. ctest runs
// this binary once per BP_CPU_ISA level, so the baseline tiles (the
// reference) and the AVX2 ones both meet every case.
#include <cmath>
#include <cstdint>

#include "backplane/backplane.h"
#include "cpu_harness.hpp"
#include "quant_harness.hpp"

using namespace cpu_test;

namespace {

// The formats the weight buffer repacks: Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, Q5_K
// (the harness lists them first; the others stay in the file's layout).
const qt kRepacked[] = {kTypes[0], kTypes[1], kTypes[2], kTypes[3], kTypes[4], kTypes[5]};

// A weight buffer of |p|'s device holding a copy of the dense tensor |x|,
// and the tensor that lives in it (same type, shape and strides).
class weight_copy {
 public:
  weight_copy(loaded_plugin &p, tensor_pool &pool, const bp_tensor *x, size_t chunk = 0) {
    bp_buffer_type_ref bt = p.dev.iface->weight_buffer_type(p.dev.ctx);
    const size_t n = bytes_of(x);
    bp_error err{};
    if (!bt.iface || bt.iface->alloc(bt.ctx, n, &buf_, &err) != BP_OK) {
      ADD_FAILURE() << "weight buffer: " << err.message;
      return;
    }
    t = pool.make(x->type, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]});
    for (int i = 0; i < 4; ++i) t->nb[i] = x->nb[i];
    t->data = buf_.iface->base(buf_.ctx);
    t->buffer_ctx = buf_.ctx;
    ok_ = write(x->data, 0, n, chunk ? chunk : n);
  }
  ~weight_copy() {
    if (buf_.iface) buf_.iface->free(buf_.ctx);
  }
  static size_t bytes_of(const bp_tensor *x) { return x->nb[3] * static_cast<size_t>(x->ne[3]); }
  bool ok() const { return ok_; }
  // Writes |n| bytes at |offset| of the tensor in pieces of |chunk|.
  bool write(const void *src, size_t offset, size_t n, size_t chunk) {
    for (size_t at = 0; at < n; at += chunk) {
      bp_error err{};
      const size_t len = std::min(chunk, n - at);
      if (buf_.iface->set_tensor(buf_.ctx, t, static_cast<const uint8_t *>(src) + at, offset + at, len, &err) !=
          BP_OK) {
        ADD_FAILURE() << err.message;
        return false;
      }
    }
    return true;
  }
  std::vector<uint8_t> read(size_t chunk) {
    std::vector<uint8_t> out(bytes_of(t));
    for (size_t at = 0; at < out.size(); at += chunk) {
      bp_error err{};
      if (buf_.iface->get_tensor(buf_.ctx, t, out.data() + at, at, std::min(chunk, out.size() - at), &err) != BP_OK)
        ADD_FAILURE() << err.message;
    }
    return out;
  }
  bool fill(uint8_t value, size_t offset, size_t n) {
    bp_error err{};
    return buf_.iface->memset_tensor(buf_.ctx, t, value, offset, n, &err) == BP_OK;
  }
  const uint8_t *raw() const { return static_cast<const uint8_t *>(t->data); }

  bp_tensor *t = nullptr;

 private:
  bp_buffer_ref buf_{};
  bool ok_ = false;
};

std::vector<uint8_t> bytes(const bp_tensor *x) {
  const auto *p = static_cast<const uint8_t *>(x->data);
  return {p, p + weight_copy::bytes_of(x)};
}

// MUL_MAT(a moved into a weight buffer, b) on |threads| threads.
product run_repacked(int threads, const bp_tensor *a, bp_tensor *b, tensor_pool &pool) {
  loaded_plugin p{threads};
  if (!p.ok()) return {};
  weight_copy w(p, pool, a);
  return w.ok() ? compute_mul_mat(p, w.t, b, pool) : product{};
}

}  // namespace

TEST(CpuRepack, TheDeviceOffersAWeightBufferTypeThatIsNotHostMemory) {
  loaded_plugin p{1};
  ASSERT_TRUE(p.ok());
  ASSERT_GE(p.dev.iface->struct_size, offsetof(bp_device_i, weight_buffer_type) + sizeof(void *));
  bp_buffer_type_ref bt = p.dev.iface->weight_buffer_type(p.dev.ctx);
  ASSERT_NE(bt.iface, nullptr);
  EXPECT_STREQ(bt.iface->name(bt.ctx), "CPU_weights");
  // The host must go through get/set_tensor, which convert.
  EXPECT_EQ(bt.iface->is_host(bt.ctx), 0);
  EXPECT_EQ(p.backend.iface->supports_buft(p.backend.ctx, bt), 1);
}

// Whole tensors in pieces of every awkward size: 1 byte, less than a block,
// not a divisor of a group, more than a group; 3 matrices of 7 rows (one
// group and 3 rows past it each).
TEST(CpuRepack, BytesReadBackAsWrittenInAnyPieces) {
  std::mt19937 rng{11};
  for (const qt &t : kRepacked)
    for (size_t chunk : {size_t{1}, size_t{7}, size_t{100}, size_t{333}, size_t{100000}}) {
      SCOPED_TRACE(std::string(bp_type_name(t.type)) + " chunk " + std::to_string(chunk));
      loaded_plugin p{1};
      ASSERT_TRUE(p.ok());
      tensor_pool pool;
      bp_tensor *x = make_q(pool, t, {3 * t.block, 7, 3});
      fill_q(x, t, rng);
      weight_copy w(p, pool, x, chunk);
      ASSERT_TRUE(w.ok());
      const std::vector<uint8_t> want = bytes(x);
      EXPECT_EQ(w.read(chunk), want);
      // The first group is stored in another order, the rows past it as they are.
      const size_t row = x->nb[1];
      EXPECT_NE(0, std::memcmp(w.raw(), want.data(), 4 * row));
      EXPECT_EQ(0, std::memcmp(w.raw() + 4 * row, want.data() + 4 * row, 3 * row));
    }
}

// A range that covers part of a group changes just those bytes; memset too.
TEST(CpuRepack, PartialWritesAndFillsChangeOnlyTheirRange) {
  std::mt19937 rng{12};
  for (const qt &t : kRepacked) {
    SCOPED_TRACE(bp_type_name(t.type));
    loaded_plugin p{1};
    ASSERT_TRUE(p.ok());
    tensor_pool pool;
    bp_tensor *x = make_q(pool, t, {2 * t.block, 9});
    fill_q(x, t, rng);
    weight_copy w(p, pool, x);
    ASSERT_TRUE(w.ok());
    std::vector<uint8_t> want = bytes(x);
    std::uniform_int_distribution<size_t> at(0, want.size() - 1);
    for (int i = 0; i < 20; ++i) {
      size_t a = at(rng), b = at(rng);
      if (a > b) std::swap(a, b);
      std::vector<uint8_t> patch(b - a + 1);
      for (uint8_t &v : patch) v = static_cast<uint8_t>(rng());
      if (i % 2) {
        ASSERT_TRUE(w.write(patch.data(), a, patch.size(), patch.size()));
        std::copy(patch.begin(), patch.end(), want.begin() + static_cast<ptrdiff_t>(a));
      } else {
        ASSERT_TRUE(w.fill(patch[0], a, patch.size()));
        std::fill(want.begin() + static_cast<ptrdiff_t>(a), want.begin() + static_cast<ptrdiff_t>(b + 1), patch[0]);
      }
      ASSERT_EQ(w.read(want.size()), want) << "after change " << i;
    }
  }
}

// Integer-exact b: the only rounding left is the float scales and sums. One
// power-of-two scale per block of a (per super-block for the K-quants, as
// their products quantize b).
TEST(CpuRepack, MatMulMatchesPlainWeightsInDouble) {
  std::mt19937 rng{2025};
  for (const qt &t : kRepacked)
    for (int kb : {1, 2, 7})
      for (int64_t M : {4, 5, 13, 40})
        for (int64_t N : {1, 2, 3, 4, 5, 9, 16, 21}) {
          SCOPED_TRACE(std::string(bp_type_name(t.type)) + " K blocks " + std::to_string(kb) + " M " +
                       std::to_string(M) + " N " + std::to_string(N));
          tensor_pool pool;
          const int64_t K = static_cast<int64_t>(kb) * t.block;
          bp_tensor *a = make_q(pool, t, {K, M});
          bp_tensor *b = pool.make(BP_TYPE_F32, {K, N});
          fill_q(a, t, rng);
          fill_exact_b(b, rng, t.block);
          const product got = run_repacked(2, a, b, pool);
          ASSERT_TRUE(got.ok);
          expect_matches_decoded(got, a, t, b);
        }
}

TEST(CpuRepack, MatMulBitsDoNotDependOnThreads) {
  std::mt19937 rng{98};
  for (const qt &t : kRepacked)
    for (int64_t N : {1, 6, 11, 19, 70}) {
      SCOPED_TRACE(std::string(bp_type_name(t.type)) + " N " + std::to_string(N));
      tensor_pool pool;
      bp_tensor *a = make_q(pool, t, {256, 203});
      bp_tensor *b = pool.make(BP_TYPE_F32, {256, N});
      fill_q(a, t, rng);
      fill(b, rng);
      const product one = run_repacked(1, a, b, pool), two = run_repacked(2, a, b, pool),
                    three = run_repacked(3, a, b, pool);
      ASSERT_TRUE(one.ok && two.ok && three.ok);
      EXPECT_EQ(0, std::memcmp(one.out.data(), two.out.data(), one.out.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(one.out.data(), three.out.data(), one.out.size() * sizeof(float)));
    }
}

// The AMX tiles (16 or more columns of b under BP_CPU_ISA=amx) scale each
// block's int32 dot into the same f32 sum in the same order as the AVX-512
// VNNI wide tiles do (docs/plugins/cpu.md): 4-15 columns for Q8_0, Q4_0 and
// Q5_0, 9-15 for Q4_K and Q5_K. So a product of 70 columns equals, bit for
// bit, the same columns taken 7 (10) at a time; the rows (203: 12 tiles of
// 16, a last unit of 2 groups, 3 rows past the last group) and K (7 blocks,
// or 3 super-blocks: odd counts) meet every edge. Only the avx512 and amx
// paths promise this.
TEST(CpuRepack, WideAndNarrowColumnTilesAgreeBitForBit) {
  loaded_plugin probe{1};
  ASSERT_TRUE(probe.ok());
  bp_device_props props{};
  props.struct_size = sizeof props;
  bp_error err{};
  ASSERT_EQ(probe.dev.iface->get_props(probe.dev.ctx, &props, &err), BP_OK) << err.message;
  const std::string desc = props.description;
  if (desc.find("kernels avx512") == std::string::npos && desc.find("kernels amx") == std::string::npos)
    GTEST_SKIP() << "the AVX-512 and AMX tiles only: " << desc;
  std::mt19937 rng{53};
  // Q8_0, Q4_0, Q5_0, Q4_K, Q5_K (kTypes[4] is Q6_K, which has no AMX tiles).
  for (const qt &t : {kTypes[0], kTypes[1], kTypes[2], kTypes[3], kTypes[5]}) {
    SCOPED_TRACE(bp_type_name(t.type));
    tensor_pool pool;
    const bool kquant = t.block == 256;
    const int64_t K = (kquant ? 3 : 7) * t.block, M = 203, N = 70, part = kquant ? 10 : 7;
    bp_tensor *a = make_q(pool, t, {K, M});
    bp_tensor *b = pool.make(BP_TYPE_F32, {K, N});
    fill_q(a, t, rng);
    fill(b, rng);
    const product all = run_repacked(2, a, b, pool);
    ASSERT_TRUE(all.ok);
    for (int64_t n0 = 0; n0 < N; n0 += part) {
      bp_tensor *bp = pool.make(BP_TYPE_F32, {K, part});
      for (int64_t n = 0; n < part; ++n)
        for (int64_t k = 0; k < K; ++k) put(bp, get(b, k, n0 + n), k, n);
      const product some = run_repacked(2, a, bp, pool);
      ASSERT_TRUE(some.ok);
      ASSERT_EQ(0, std::memcmp(all.out.data() + n0 * M, some.out.data(), some.out.size() * sizeof(float)))
          << "columns " << n0 << "-" << n0 + part - 1;
    }
  }
}

// a [K, M, 2] repeats over b [K, N, 4]: batch i2 uses a's i2 / 2.
TEST(CpuRepack, MatMulBroadcastsOverBatches) {
  std::mt19937 rng{6};
  for (const qt &t : kRepacked) {
    tensor_pool pool;
    const int64_t K = 2 * t.block, M = 10, N = 3;
    bp_tensor *a = make_q(pool, t, {K, M, 2});
    bp_tensor *b = pool.make(BP_TYPE_F32, {K, N, 4});
    fill_q(a, t, rng);
    fill_exact_b(b, rng, t.block);
    const product got = run_repacked(2, a, b, pool);
    ASSERT_TRUE(got.ok);
    expect_matches_decoded(got, a, t, b);
  }
}

// Repacked bytes mean nothing to any other kernel: GET_ROWS, CPY and a
// MUL_MAT through a view are declined (the scheduler then copies the plain
// bytes out through get_tensor). A type without a repacked layout, or a
// matrix of fewer rows than a group, stays plain and every kernel reads it.
TEST(CpuRepack, OnlyMulMatReadsRepackedBytes) {
  std::mt19937 rng{3};
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  tensor_pool pool;
  const qt &t = kTypes[1];
  bp_tensor *a = make_q(pool, t, {64, 8});
  fill_q(a, t, rng);
  weight_copy w(p, pool, a);
  ASSERT_TRUE(w.ok());
  bp_tensor *ids = pool.make(BP_TYPE_I32, {2});
  bp_tensor *rows = pool.node(BP_OP_GET_ROWS, BP_TYPE_F32, {64, 2}, {w.t, ids});
  EXPECT_FALSE(p.supports(rows));
  bp_tensor *f = pool.make(BP_TYPE_F32, {64, 8});
  EXPECT_FALSE(p.supports(pool.node(BP_OP_CPY, BP_TYPE_F32, {64, 8}, {w.t, f})));
  bp_tensor *b = pool.make(BP_TYPE_F32, {64, 1});
  bp_tensor *v = pool.view(w.t, {64, 4}, {static_cast<size_t>(t.bytes), w.t->nb[1]}, 0);
  EXPECT_FALSE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {4, 1}, {v, b})));
  EXPECT_TRUE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {8, 1}, {w.t, b})));

  // 3-row Q4_0 and Q5_K matrices: plain in the weight buffer, GET_ROWS works.
  for (auto [type, rows_n] : {std::pair<qt, int64_t>{kTypes[5], 3}, std::pair<qt, int64_t>{kTypes[1], 3}}) {
    bp_tensor *x = make_q(pool, type, {256, rows_n});
    fill_q(x, type, rng);
    weight_copy wx(p, pool, x);
    ASSERT_TRUE(wx.ok());
    EXPECT_EQ(0, std::memcmp(wx.raw(), x->data, weight_copy::bytes_of(x)));
    bp_tensor *i1 = pool.make(BP_TYPE_I32, {1});
    *static_cast<int32_t *>(i1->data) = 1;
    bp_tensor *g = pool.node(BP_OP_GET_ROWS, BP_TYPE_F32, {256, 1}, {wx.t, i1});
    ASSERT_TRUE(p.supports(g));
    ASSERT_EQ(p.compute({g}), BP_OK);
    const std::vector<double> want = decode_row(x, type, 1);
    for (int64_t k = 0; k < 256; ++k) EXPECT_NEAR(get(g, k, 0), want[k], 1e-6 * std::fabs(want[k]) + 1e-7);
  }

  // BF16 has no repacked layout: plain, and GET_ROWS widens it exactly.
  bp_tensor *x = pool.make(BP_TYPE_BF16, {64, 8});
  auto *h = static_cast<uint16_t *>(x->data);
  for (int64_t i = 0; i < 64 * 8; ++i) h[i] = static_cast<uint16_t>(0x3f80 + (rng() & 0x7f) + (rng() & 1) * 0x8000);
  weight_copy wx(p, pool, x);
  ASSERT_TRUE(wx.ok());
  EXPECT_EQ(0, std::memcmp(wx.raw(), x->data, weight_copy::bytes_of(x)));
  bp_tensor *i5 = pool.make(BP_TYPE_I32, {1});
  *static_cast<int32_t *>(i5->data) = 5;
  bp_tensor *g = pool.node(BP_OP_GET_ROWS, BP_TYPE_F32, {64, 1}, {wx.t, i5});
  ASSERT_TRUE(p.supports(g));
  ASSERT_EQ(p.compute({g}), BP_OK);
  for (int64_t k = 0; k < 64; ++k) {
    const uint32_t u = static_cast<uint32_t>(h[5 * 64 + k]) << 16;
    float want;
    std::memcpy(&want, &u, sizeof want);
    EXPECT_EQ(get(g, k, 0), want) << k;
  }
}

namespace {

// Weights whose row m is 1.0 at position m and 0 elsewhere (K = M): the
// product's output (n, m) is then exactly how b's value (m, n) was quantized,
// d times the int8 code, with no sum around it. Q8_0: code 1 at m, scale 1.
// Q4_K: code 1 at m, 0 elsewhere, every sub-block's scale 1 and minimum 0.
// (Q6_K, the other K-quant reading the same format of b, would not do: its
// -32 leaves through sums split over other lanes than its dots, so the
// output is not one product.)
void fill_one_hot(const bp_tensor *a, const qt &t) {
  const int64_t K = a->ne[0];
  auto *p = static_cast<uint8_t *>(a->data);
  std::memset(p, 0, static_cast<size_t>(a->nb[1] * a->ne[1]));
  for (int64_t m = 0; m < a->ne[1]; ++m) {
    uint8_t *row = p + m * a->nb[1];
    for (int64_t k0 = 0; k0 < K; k0 += t.block) {
      uint8_t *b = row + k0 / t.block * t.bytes;
      const bool hot = m >= k0 && m < k0 + t.block;
      const int at = static_cast<int>(m - k0);
      if (t.type == BP_TYPE_Q8_0) {
        put_half(b, 1.0f);
        if (hot) b[2 + at] = 1;
      } else {  // Q4_K, laid out as quant_harness.hpp's decoder reads it
        put_half(b, 1.0f);
        put_half(b + 2, 0.0f);
        std::memset(b + 4, 1, 4);   // scales of sub-blocks 0-3
        std::memset(b + 12, 1, 4);  // low bits of 4-7's (their minimums' bits stay 0)
        if (hot) b[16 + 32 * (at / 64) + at % 32] = static_cast<uint8_t>(at / 32 % 2 ? 0x10 : 0x01);
      }
    }
  }
}

// The documented quantization of b (docs/plugins/cpu.md): per |span| values
// d = max |x| / 127 (NaNs skipped), code = x * (127 / max |x|) rounded half to
// even and clamped to +-127, NaN to -127; returns d * code per value in float.
std::vector<float> quantized_b(const bp_tensor *b, int64_t n, int64_t span) {
  const int64_t K = b->ne[0];
  std::vector<float> out(static_cast<size_t>(K));
  for (int64_t k0 = 0; k0 < K; k0 += span) {
    float amax = 0.0f;
    for (int64_t k = k0; k < k0 + span; ++k) {
      const float x = static_cast<float>(get(b, k, n));
      if (std::fabs(x) > amax) amax = std::fabs(x);
    }
    const float d = amax / 127.0f;
    // A block of 32 tests d, a super-block of 256 the largest magnitude:
    // they differ only where amax / 127 underflows to zero.
    const bool scaled = span == 32 ? d != 0.0f : amax != 0.0f;
    const float id = scaled ? 127.0f / amax : 0.0f;
    for (int64_t k = k0; k < k0 + span; ++k) {
      const float v = static_cast<float>(get(b, k, n)) * id;
      const float code = std::isnan(v) ? -127.0f : std::min(127.0f, std::max(-127.0f, std::nearbyint(v)));
      out[static_cast<size_t>(k)] = d * code;
    }
  }
  return out;
}

// Columns that reach every branch of the rule: random magnitudes, exact
// halves (ties, both parities, with 127 the largest so that the inverse is
// 1), a NaN, an all-zero block, denormals, a block whose d underflows.
void fill_rule_cases(const bp_tensor *b, std::mt19937 &rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-20, 20);
  const int64_t K = b->ne[0];
  for (int64_t n = 0; n < b->ne[1]; ++n)
    for (int64_t k = 0; k < K; ++k) put(b, std::ldexp(g(rng), e(rng) / 4), k, n);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t k = 0; k < 32; ++k) put(b, k == 0 ? 127.0 : (k % 2 ? 1 : -1) * (k / 4 + 0.5), k, 0);  // ties
  put(b, nan, 40, 0);
  for (int64_t k = 64; k < 96; ++k) put(b, 0.0, k, 0);
  for (int64_t k = 96; k < 128; ++k) put(b, (k % 3 - 1) * 1e-39 * (k - 95), k, 0);
  for (int64_t k = 0; k < 256; ++k) put(b, k % 5 == 0 ? 1e-44 * (k % 2 ? 1 : -1) : 0.0, k, 1);
}

}  // namespace

// Every path that quantizes b (the repacked Q8_0 and Q4_K products' own
// formats, the file-layout Q8_0 product's) gives each value exactly the
// rule's code and scale, on every ISA path ctest runs this binary with.
TEST(CpuRepack, ActivationsQuantizeByTheDocumentedRule) {
  std::mt19937 rng{77};
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  struct path {
    qt type;
    bool repacked;
    int64_t span;
  };
  for (const path &c : {path{kTypes[0], true, 32}, path{kTypes[0], false, 32}, path{kTypes[3], true, 256}}) {
    SCOPED_TRACE(std::string(bp_type_name(c.type.type)) + (c.repacked ? " repacked" : " file layout"));
    tensor_pool pool;
    const int64_t K = 512, N = 5;
    bp_tensor *a = make_q(pool, c.type, {K, K});
    fill_one_hot(a, c.type);
    bp_tensor *b = pool.make(BP_TYPE_F32, {K, N});
    fill_rule_cases(b, rng);
    product got;
    if (c.repacked) {
      weight_copy w(p, pool, a);
      ASSERT_TRUE(w.ok());
      got = compute_mul_mat(p, w.t, b, pool);
    } else {
      got = compute_mul_mat(p, a, b, pool);
    }
    ASSERT_TRUE(got.ok);
    for (int64_t n = 0; n < N; ++n) {
      const std::vector<float> want = quantized_b(b, n, c.span);
      for (int64_t m = 0; m < K; ++m) {
        const float y = got.out[static_cast<size_t>(n * K + m)];
        ASSERT_EQ(y, want[static_cast<size_t>(m)])
            << std::hexfloat << "column " << n << " value " << m << " (b " << get(b, m, n) << ")";
      }
    }
  }
}
