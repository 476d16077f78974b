// matmul_paths_test.cpp: MUL_MAT at the edges of every kernel the cpu plugin
// picks between (packed GEMM with 6x16 or 12x32 micro-kernels, the AVX-512
// and AVX2 dot-product tiles for thin products, the 4x2 dot-product kernel),
// whichever ISA path this process runs: ctest runs this binary once
// per BP_CPU_ISA level, so every path meets the same shapes. The shapes
// straddle the micro-kernel widths (6, 12, 16, 32), the thin/packed switch
// (48 rows of b), the K block (192), the rows of b per unit of work (768),
// the 12x32 kernel's last panel of 4, 5, 8 and 9 rows of b (N = 100, 53, 56,
// 57: the edges of its 4-, 8- and 12-row tiles), and the 16-wide K tail; for
// the AVX-512 broadcast kernel (24..47 rows of b, F32 a): its 12- and 8-row
// tiles and the units of 48 rows of a (M tails), its 256-float copy blocks,
// rows 4 KiB long (K = 1024), and a K long enough for two 512 KiB panels of
// b; its one-vector tile for 9..16 rows of b, which ctest runs
// on any AVX-512 machine by setting BP_CPU_AVX512_HALVES both ways; and,
// under BP_CPU_ISA=avx2, the AVX2 tiles for up to 47 rows of b (groups of
// 4, a last group of 1..3, and K tails of 1..7).
#include <cstdlib>
#include <string>

#include "cpu_harness.hpp"

using namespace cpu_test;

// The binary runs once per BP_CPU_ISA level (the CpuPlugin.<isa>.* ctest
// entries): the device's description names the kernels that run, so a level
// asked for must be the level taken, or every test here proves nothing of it.
TEST(CpuMatMulPaths, TheRequestedIsaIsTheOneThatRuns) {
  const char *isa = std::getenv("BP_CPU_ISA");
  if (!isa || !*isa) GTEST_SKIP() << "BP_CPU_ISA is not set: the CPU's own choice runs";
  loaded_plugin p{1};
  ASSERT_TRUE(p.ok());
  bp_device_props props{};
  props.struct_size = sizeof props;
  bp_error err{};
  ASSERT_EQ(p.dev.iface->get_props(p.dev.ctx, &props, &err), BP_OK) << err.message;
  EXPECT_NE(std::string(props.description).find(std::string("kernels ") + isa), std::string::npos)
      << "BP_CPU_ISA=" << isa << " but the device says: " << props.description;
}

TEST(CpuMatMulPaths, EdgesOfEveryKernel) {
  loaded_plugin p{3};
  ASSERT_TRUE(p.ok());
  tensor_pool pool;
  std::mt19937 rng{77};
  struct mm_case {
    int64_t K, M, N;
  };
  const mm_case cases[] = {
      {17, 31, 1},    {300, 33, 2},   {15, 97, 5},    {16, 32, 6},   {513, 50, 8},  {33, 47, 9},     {257, 65, 12},
      {31, 96, 13},   {100, 33, 47},  {40, 64, 48},   {300, 97, 49}, {1, 40, 60},   {260, 130, 100}, {193, 64, 50},
      {385, 40, 770}, {1024, 61, 24}, {600, 100, 32}, {257, 53, 33}, {100, 9, 40},  {4100, 20, 47},  {1024, 61, 16},
      {8200, 13, 11}, {3, 50, 10},    {255, 49, 15},  {200, 70, 53}, {131, 45, 57}, {64, 40, 56}};
  for (const auto &c : cases)
    for (bp_type ta : {BP_TYPE_F32, BP_TYPE_F16}) {
      bp_tensor *a = pool.make(ta, {c.K, c.M});
      bp_tensor *b = pool.make(BP_TYPE_F32, {c.K, c.N});
      fill(a, rng);
      fill(b, rng);
      bp_tensor *out = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {c.M, c.N}, {a, b});
      ASSERT_TRUE(p.supports(out));
      bp_error err{};
      ASSERT_EQ(p.compute({out}, &err), BP_OK) << err.message;
      expect_close(
          out,
          [&](int64_t m, int64_t n, int64_t, int64_t) {
            double s = 0;
            for (int64_t k = 0; k < c.K; ++k) s += get(a, k, m, 0, 0) * get(b, k, n, 0, 0);
            return s;
          },
          1e-5 * std::sqrt(static_cast<double>(c.K)),
          "K=" + std::to_string(c.K) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
              (ta == BP_TYPE_F16 ? " f16" : " f32"));
    }
}

// The broadcast kernel over batches, with a shared by pairs of b's batches
// (a's ne[2] = 2, b's = 4) and b read through a transposed view (rows of b
// not dense): the panel is packed per batch, from any strides. N = 30 takes
// the 512-bit tiles, N = 14 the 256-bit one where it is chosen.
TEST(CpuMatMulPaths, ThinProductsOverBatchesAndViews) {
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  tensor_pool pool;
  std::mt19937 rng{78};
  for (const int64_t N : {30, 14}) {
    const int64_t K = 70, M = 50;
    bp_tensor *a = pool.make(BP_TYPE_F32, {K, M, 2});
    bp_tensor *bt = pool.make(BP_TYPE_F32, {N, K, 4});  // b's transpose, made dense
    fill(a, rng);
    fill(bt, rng);
    bp_tensor *b = pool.swap_dims(bt, 0, 1);
    bp_tensor *out = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {M, N, 4}, {a, b});
    ASSERT_TRUE(p.supports(out));
    bp_error err{};
    ASSERT_EQ(p.compute({out}, &err), BP_OK) << err.message;
    expect_close(
        out,
        [&](int64_t m, int64_t n, int64_t i2, int64_t) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += get(a, k, m, i2 / 2, 0) * get(bt, n, k, i2, 0);
          return s;
        },
        1e-5 * std::sqrt(static_cast<double>(K)), "batched thin product over a view, N=" + std::to_string(N));
  }
}
