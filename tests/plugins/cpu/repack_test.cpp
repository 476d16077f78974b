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

// Every quantized format of the harness: Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, Q5_K.
const qt (&kRepacked)[6] = kTypes;

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
        for (int64_t N : {1, 2, 3, 4, 5, 9}) {
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
    for (int64_t N : {1, 6, 11}) {
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
