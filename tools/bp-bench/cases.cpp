// cases.cpp: the benchmark bodies of bp-bench.
//
// A backend benchmark builds its graph once, allocates it once
// (bp_context_alloc_tensors), fills the inputs with random data, runs the graph
// once untimed and checks a few sampled outputs against double-precision
// sums, then times only bp_backend_graph_compute + bp_backend_synchronize.
// Google Benchmark calls a body several times per benchmark (growing the
// iteration count), so that setup is kept until the next benchmark starts.
#include <cblas.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <thread>

#include "bench.hpp"
#include "common/splitmix64.hpp"

namespace bp::bench {
namespace {

constexpr float kRmsEps = 1e-6f;
constexpr float kSoftMaxScale = 0.125f;
constexpr float kScale = 0.75f;

// ---------------------------------------------------------------------------
// Setup kept between calls of one benchmark's body.

struct setup {
  virtual ~setup() = default;
};

std::string g_cached_name;
std::unique_ptr<setup> g_cached;

// The setup of benchmark |name|: the cached one, else |make|'s (the previous
// benchmark's setup is freed first, so only one is alive at a time). NULL
// with |err| set when |make| fails.
template <class T>
T *cached_setup(const std::string &name, const std::function<std::unique_ptr<T>(std::string &)> &make,
                std::string &err) {
  if (g_cached && g_cached_name == name) return static_cast<T *>(g_cached.get());
  g_cached.reset();
  g_cached_name.clear();
  std::unique_ptr<T> s;
  try {
    s = make(err);
  } catch (const std::exception &e) {  // bad_alloc from the host arrays
    err = std::string("setting up: ") + e.what();
  }
  if (!s) return nullptr;
  T *raw = s.get();
  g_cached = std::move(s);
  g_cached_name = name;
  return raw;
}

using rng = bp::tools::splitmix64;

// Host memory aligned like the plugins' buffers (64 bytes).
struct aligned_floats {
  float *p = nullptr;
  explicit aligned_floats(size_t n) {
    size_t bytes = (std::max<size_t>(n, 1) * sizeof(float) + 63) / 64 * 64;
    p = static_cast<float *>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
  }
  ~aligned_floats() { std::free(p); }
  aligned_floats(const aligned_floats &) = delete;
  aligned_floats &operator=(const aligned_floats &) = delete;
};

void fill_random(float *p, size_t n, uint64_t seed) {
  rng r{seed};
  for (size_t i = 0; i < n; ++i) p[i] = r.uniform();
}

std::string api_error(const char *what) { return std::string(what) + ": " + bp_last_error(); }

// ---------------------------------------------------------------------------
// Graphs.

// The case's node; its leaf inputs in |inputs|. NULL (bp_last_error) on failure.
bp_tensor *build_node(bp_context *ctx, const op_case &c, std::vector<bp_tensor *> &inputs) {
  switch (c.op) {
    case op_kind::mul_mat: {
      bp_tensor *a = bp_tensor_new_2d(ctx, c.a_type, c.k, c.m);
      bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.k, c.n);
      inputs = {a, b};
      return bp_mul_mat(ctx, a, b);
    }
    case op_kind::rms_norm:
    case op_kind::norm: {
      bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.ne0, c.ne1);
      inputs = {x};
      return c.op == op_kind::norm ? bp_norm(ctx, x, kRmsEps) : bp_rms_norm(ctx, x, kRmsEps);
    }
    case op_kind::scale: {
      bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.ne0, c.ne1);
      inputs = {x};
      return bp_scale(ctx, x, kScale);
    }
    case op_kind::silu:
    case op_kind::gelu: {
      bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.ne0, c.ne1);
      inputs = {x};
      return c.op == op_kind::silu ? bp_silu(ctx, x) : bp_gelu(ctx, x);
    }
    case op_kind::soft_max: {
      bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.ne0, c.ne1);
      inputs = {x};
      return bp_soft_max(ctx, x, nullptr, kSoftMaxScale);
    }
    case op_kind::add:
    case op_kind::mul: {
      bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.ne0, c.ne1);
      bp_tensor *y = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.ne0, c.ne1);
      inputs = {x, y};
      return c.op == op_kind::add ? bp_add(ctx, x, y) : bp_mul(ctx, x, y);
    }
  }
  return nullptr;
}

struct graph_setup : setup {
  bp_context *ctx = nullptr;
  bp_graph *graph = nullptr;
  bp_buffer *buf = nullptr;
  bp_tensor *out = nullptr;
  std::vector<bp_tensor *> inputs;
  ~graph_setup() override {
    bp_buffer_free(buf);
    bp_graph_free(graph);
    bp_context_free(ctx);
  }
};

// Builds the case's graph (metadata only); NULL with |err| set on failure.
std::unique_ptr<graph_setup> build_graph(const op_case &c, std::string &err) {
  auto s = std::make_unique<graph_setup>();
  s->ctx = bp_context_new(0);
  if (!s->ctx) return err = api_error("bp_context_new"), nullptr;
  s->out = build_node(s->ctx, c, s->inputs);
  if (!s->out) return err = api_error("building the graph"), nullptr;
  s->graph = bp_graph_new(s->ctx, 0);
  if (!s->graph || bp_graph_build(s->graph, s->out) != BP_OK) return err = api_error("bp_graph_build"), nullptr;
  return s;
}

// Random values in [-1, 1) into |t| (f32 or f16, contiguous), in chunks;
// quantized weights are random values through bp_quantize, row by row.
bp_status fill_tensor(bp_tensor *t, uint64_t seed) {
  rng r{seed};
  if (bp_type_is_quantized(t->type)) {
    const size_t row = bp_row_size(t->type, t->ne[0]);
    std::vector<float> f(static_cast<size_t>(t->ne[0]));
    std::vector<unsigned char> q(row);
    for (int64_t i = 0; i < bp_tensor_nrows(t); ++i) {
      for (float &v : f) v = r.uniform();
      bp_quantize(t->type, f.data(), q.data(), 1, t->ne[0]);
      if (bp_status st = bp_tensor_set(t, q.data(), static_cast<size_t>(i) * t->nb[1], row); st != BP_OK) return st;
    }
    return BP_OK;
  }
  const size_t n = static_cast<size_t>(bp_tensor_nelements(t)), chunk = size_t{1} << 16;
  std::vector<float> f(chunk);
  std::vector<uint16_t> h(t->type == BP_TYPE_F16 ? chunk : 0);
  for (size_t at = 0; at < n; at += chunk) {
    size_t len = std::min(chunk, n - at);
    for (size_t i = 0; i < len; ++i) f[i] = r.uniform();
    bp_status st;
    if (t->type == BP_TYPE_F16) {
      for (size_t i = 0; i < len; ++i) h[i] = bp_fp32_to_fp16(f[i]);
      st = bp_tensor_set(t, h.data(), at * 2, len * 2);
    } else {
      st = bp_tensor_set(t, f.data(), at * 4, len * 4);
    }
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

// Row |row| (dim 1) of the contiguous 2-D tensor |t|, as doubles.
std::vector<double> read_row(const bp_tensor *t, int64_t row) {
  if (bp_type_is_quantized(t->type)) {  // the core's reference decoder
    std::vector<unsigned char> raw(bp_row_size(t->type, t->ne[0]));
    std::vector<float> f(static_cast<size_t>(t->ne[0]));
    if (bp_tensor_get(t, raw.data(), static_cast<size_t>(row) * t->nb[1], raw.size()) != BP_OK ||
        bp_dequantize(t->type, raw.data(), f.data(), t->ne[0]) != BP_OK)
      return {};
    return std::vector<double>(f.begin(), f.end());
  }
  const size_t n = static_cast<size_t>(t->ne[0]), es = bp_type_size(t->type);
  std::vector<unsigned char> raw(n * es);
  if (bp_tensor_get(t, raw.data(), static_cast<size_t>(row) * t->nb[1], raw.size()) != BP_OK) return {};
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (t->type == BP_TYPE_F16) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      v[i] = bp_fp16_to_fp32(h);
    } else {
      float f;
      std::memcpy(&f, raw.data() + 4 * i, 4);
      v[i] = f;
    }
  }
  return v;
}

std::string mismatch(const char *what, int64_t i, int64_t j, double got, double want) {
  char msg[200];
  std::snprintf(msg, sizeof msg, "wrong result: %s [%lld,%lld] = %.7g, expected %.7g", what, static_cast<long long>(i),
                static_cast<long long>(j), got, want);
  return msg;
}

// Checks a few outputs of the computed graph against double-precision sums
// of its inputs. Loose tolerances: this catches a broken kernel or a wrong
// layout, not rounding (bp-test-ops judges accuracy). "" when they match.
std::string verify(const op_case &c, const graph_setup &s) {
  const bp_tensor *out = s.out;
  if (c.op == op_kind::mul_mat) {
    const int64_t M = c.m, N = c.n;
    const int64_t samples[][2] = {{0, 0}, {M - 1, N - 1}, {M / 2, N / 2}, {M / 3, N - 1}, {M - 1, 0}};
    for (const auto &ij : samples) {
      std::vector<double> a = read_row(s.inputs[0], ij[0]), b = read_row(s.inputs[1], ij[1]), d = read_row(out, ij[1]);
      if (a.empty() || b.empty() || d.empty()) return api_error("reading the result");
      double want = 0, mag = 0;
      for (int64_t k = 0; k < c.k; ++k) want += a[k] * b[k], mag += std::fabs(a[k] * b[k]);
      // An f16 weight lets a backend round b to f16 too (2^-11 relative);
      // quantized weights, to 8 bits (half a step of 1/127 of a block's largest).
      const double tol = bp_type_is_quantized(c.a_type) ? 1e-2 : 2e-3;
      if (!(std::fabs(d[ij[0]] - want) <= tol * mag + 1e-6)) return mismatch("MUL_MAT", ij[0], ij[1], d[ij[0]], want);
    }
    return "";
  }
  for (int64_t row : {int64_t{0}, c.ne1 / 2, c.ne1 - 1}) {
    std::vector<double> x = read_row(s.inputs[0], row), y = read_row(out, row);
    const bool binary = c.op == op_kind::add || c.op == op_kind::mul;
    std::vector<double> x2 = binary ? read_row(s.inputs[1], row) : std::vector<double>{};
    if (x.empty() || y.empty() || (binary && x2.empty())) return api_error("reading the result");
    std::vector<double> want(x.size());
    if (c.op == op_kind::rms_norm) {
      double ss = 0;
      for (double v : x) ss += v * v;
      double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + kRmsEps);
      for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] * inv;
    } else if (c.op == op_kind::soft_max) {
      double mx = -INFINITY, sum = 0;
      for (double v : x) mx = std::max(mx, v * kSoftMaxScale);
      for (size_t i = 0; i < x.size(); ++i) sum += (want[i] = std::exp(x[i] * kSoftMaxScale - mx));
      for (double &w : want) w /= sum;
    } else if (c.op == op_kind::norm) {
      double mean = 0, var = 0;
      for (double v : x) mean += v;
      mean /= static_cast<double>(x.size());
      for (double v : x) var += (v - mean) * (v - mean);
      double inv = 1.0 / std::sqrt(var / static_cast<double>(x.size()) + kRmsEps);
      for (size_t i = 0; i < x.size(); ++i) want[i] = (x[i] - mean) * inv;
    } else if (c.op == op_kind::scale) {
      for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] * kScale;
    } else if (c.op == op_kind::silu) {
      for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] / (1.0 + std::exp(-x[i]));
    } else if (c.op == op_kind::gelu) {  // the tanh form (docs/ops.md)
      for (size_t i = 0; i < x.size(); ++i)
        want[i] = 0.5 * x[i] * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
    } else if (c.op == op_kind::mul) {
      for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] * x2[i];
    } else {
      for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] + x2[i];
    }
    for (size_t i = 0; i < x.size(); ++i)
      if (!(std::fabs(y[i] - want[i]) <= 1e-3 * std::fabs(want[i]) + 1e-6))
        return mismatch(c.group().c_str(), static_cast<int64_t>(i), row, y[i], want[i]);
  }
  return "";
}

std::unique_ptr<graph_setup> make_graph_setup(const op_case &c, bp_backend *be, std::string &err) {
  std::unique_ptr<graph_setup> s = build_graph(c, err);
  if (!s) return nullptr;
  if (bp_context_alloc_tensors(s->ctx, be, &s->buf) != BP_OK)
    return err = api_error("bp_context_alloc_tensors"), nullptr;
  uint64_t seed = 1;
  for (bp_tensor *t : s->inputs)
    if (fill_tensor(t, seed++) != BP_OK) return err = api_error("bp_tensor_set"), nullptr;
  // One untimed run: warms caches and thread pools, and gives a result to check.
  if (bp_backend_graph_compute(be, s->graph) != BP_OK || bp_backend_synchronize(be) != BP_OK)
    return err = api_error("bp_backend_graph_compute"), nullptr;
  err = verify(c, *s);
  if (!err.empty()) return nullptr;
  return s;
}

void set_rate_counter(benchmark::State &state, const op_case &c, double work) {
  state.counters[c.counts_flops() ? "flops" : "bytes"] =
      benchmark::Counter(work, benchmark::Counter::kIsIterationInvariantRate);
}

void run_backend(benchmark::State &state, const op_case &c, double work, bp_backend *be, const std::string &name) {
  std::string err;
  graph_setup *s = cached_setup<graph_setup>(
      name, [&](std::string &e) { return make_graph_setup(c, be, e); }, err);
  if (!s) {
    state.SkipWithError(err.c_str());
    return;
  }
  for (auto _ : state) {
    bp_status st = bp_backend_graph_compute(be, s->graph);
    if (st == BP_OK) st = bp_backend_synchronize(be);
    if (st != BP_OK) {
      state.SkipWithError(api_error("bp_backend_graph_compute").c_str());
      break;
    }
  }
  set_rate_counter(state, c, work);
}

// ---------------------------------------------------------------------------
// References.

// sgemm exactly as the blas plugin calls it: D (N x M) = B (N x K) * A^T, A
// being M x K row-major, all f32 (an f16 case's reference is the f32 product
// of the same shape).
struct sgemm_setup : setup {
  aligned_floats a, b, d;
  explicit sgemm_setup(const op_case &c)
      : a(static_cast<size_t>(c.m * c.k)), b(static_cast<size_t>(c.n * c.k)), d(static_cast<size_t>(c.m * c.n)) {}
};

// Threads as OpenBLAS knows them: sets |threads| and restores the previous
// count on scope exit, so the blas plugin's cached count stays true.
struct openblas_threads {
  int prev;
  explicit openblas_threads(int threads) : prev(openblas_get_num_threads()) { openblas_set_num_threads(threads); }
  ~openblas_threads() { openblas_set_num_threads(prev); }
};

void sgemm(const op_case &c, sgemm_setup &s) {
  const int M = static_cast<int>(c.m), N = static_cast<int>(c.n), K = static_cast<int>(c.k);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, K, 1.0f, s.b.p, K, s.a.p, K, 0.0f, s.d.p, M);
}

void run_sgemm(benchmark::State &state, const op_case &c, double work, int threads, const std::string &name) {
  std::string err;
  openblas_threads guard(threads);
  sgemm_setup *s = cached_setup<sgemm_setup>(
      name,
      [&](std::string &) {
        auto n = std::make_unique<sgemm_setup>(c);
        fill_random(n->a.p, static_cast<size_t>(c.m * c.k), 1);
        fill_random(n->b.p, static_cast<size_t>(c.n * c.k), 2);
        sgemm(c, *n);  // untimed warm-up, as for the backends
        return n;
      },
      err);
  if (!s) {
    state.SkipWithError(err.c_str());
    return;
  }
  for (auto _ : state) {
    sgemm(c, *s);
    benchmark::ClobberMemory();
  }
  set_rate_counter(state, c, work);
}

// memcpy of half the op's bytes, so the bytes read + written equal the op's.
struct memcpy_setup : setup {
  size_t bytes;
  aligned_floats src, dst;
  explicit memcpy_setup(size_t n) : bytes(n), src(n / 4 + 1), dst(n / 4 + 1) {}
};

// Runs part(i) for every i in [0, threads) at once, part 0 on the calling
// thread, and returns when all have.
template <class F>
void on_threads(int threads, F part) {
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(part, i);
  part(0);
  for (auto &t : pool) t.join();
}

// Slice |i| of [0, total) cut into |threads| slices whose length is a
// multiple of |align|: [*begin, *end).
void slice_of(size_t total, int threads, int i, size_t align, size_t *begin, size_t *end) {
  const size_t slice = (total / static_cast<size_t>(threads) + align - 1) / align * align;
  *begin = std::min(total, slice * static_cast<size_t>(i));
  *end = std::min(total, *begin + slice);
}

// Copies |s| split into |threads| slices, one per thread (the caller's included).
void parallel_memcpy(memcpy_setup &s, int threads) {
  auto *dst = reinterpret_cast<unsigned char *>(s.dst.p);
  const auto *src = reinterpret_cast<const unsigned char *>(s.src.p);
  on_threads(threads, [&](int i) {
    size_t at, end;
    slice_of(s.bytes, threads, i, 64, &at, &end);
    std::memcpy(dst + at, src + at, end - at);
  });
}

void run_memcpy(benchmark::State &state, const op_case &c, double work, int threads, const std::string &name) {
  std::string err;
  memcpy_setup *s = cached_setup<memcpy_setup>(
      name,
      [&](std::string &) {
        auto n = std::make_unique<memcpy_setup>(static_cast<size_t>(work / 2));
        fill_random(n->src.p, n->bytes / 4, 1);
        parallel_memcpy(*n, threads);  // untimed: faults the destination in
        return n;
      },
      err);
  if (!s) {
    state.SkipWithError(err.c_str());
    return;
  }
  for (auto _ : state) {
    parallel_memcpy(*s, threads);
    benchmark::ClobberMemory();
  }
  set_rate_counter(state, c, work);
}

// ---------------------------------------------------------------------------
// Machine references.

// Rounds of the peak loop per thread per iteration: ~2^26 FMA instructions,
// ~10 ms on a 3.5 GHz core with two FMA pipes, so starting the threads each
// iteration costs well under 1%.
constexpr int64_t kPeakRounds = int64_t{1} << 22;
constexpr int kPeakAccumulators = 16;  // 4 cycles of latency x 2 pipes x 2 for slack

// acc = acc * x + y on kPeakAccumulators independent registers: nothing but
// FMAs and a loop branch, no memory. Returns a sum so the work is kept.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) float peak_loop_avx512(int64_t rounds) {
  __m512 acc[kPeakAccumulators];
  for (int i = 0; i < kPeakAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.5f), y = _mm512_set1_ps(0.5f);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kPeakAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kPeakAccumulators; ++i) s = _mm512_add_ps(s, acc[i]);
  float f[16];  // (not _mm512_reduce_add_ps: GCC 12 warns inside it)
  _mm512_storeu_ps(f, s);
  float sum = 0;
  for (float v : f) sum += v;
  return sum;
}

__attribute__((target("avx2,fma"))) float peak_loop_avx2(int64_t rounds) {
  // 12 of the 16 ymm registers: enough for 2 pipes x 4 cycles, no spills.
  constexpr int n = 12;
  __m256 acc[n];
  for (int i = 0; i < n; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.5f), y = _mm256_set1_ps(0.5f);
  for (int64_t r = 0; r < rounds * kPeakAccumulators / n; ++r) {
#pragma GCC unroll 12
    for (int i = 0; i < n; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  __m256 s = acc[0];
  for (int i = 1; i < n; ++i) s = _mm256_add_ps(s, acc[i]);
  float f[8];
  _mm256_storeu_ps(f, s);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#endif

// Baseline x86-64 has no FMA: a multiply and an add (two FLOPs) per lane.
float peak_loop_sse(int64_t rounds) {
  typedef float v4f __attribute__((vector_size(16)));
  constexpr int n = 12;
  v4f acc[n];
  for (int i = 0; i < n; ++i) acc[i] = v4f{} + static_cast<float>(i);
  const v4f x = v4f{} + 0.5f, y = v4f{} + 0.5f;
  for (int64_t r = 0; r < rounds * kPeakAccumulators / n; ++r) {
#pragma GCC unroll 12
    for (int i = 0; i < n; ++i) acc[i] = acc[i] * x + y;
  }
  v4f s = acc[0];
  for (int i = 1; i < n; ++i) s += acc[i];
  return s[0] + s[1] + s[2] + s[3];
}

struct peak_isa {
  const char *name;
  float (*loop)(int64_t);
  int lanes;  // floats per vector
};

// The widest vector ISA this CPU runs, whatever BP_CPU_ISA says: the peak is
// the machine's, not the kernels'.
peak_isa widest_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return {"avx512", peak_loop_avx512, 16};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2", peak_loop_avx2, 8};
#endif
  return {"sse2", peak_loop_sse, 4};
}

// FLOPs of one iteration of the peak benchmark on |threads| threads.
double peak_work(int threads, const peak_isa &isa) {
  return 2.0 * isa.lanes * kPeakAccumulators * static_cast<double>(kPeakRounds) * threads;
}

// Best of |tries| timings of |body| in seconds: other processes on a shared
// machine only ever slow a run down, so the fastest is the machine's.
template <class F>
double best_seconds(int tries, F &&body) {
  double best = 1e30;
  for (int t = 0; t < tries; ++t) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

machine_rate measure_peak(int threads) {
  const peak_isa isa = widest_isa();
  std::vector<float> sink(static_cast<size_t>(threads));
  const double s = best_seconds(5, [&] {
    on_threads(threads, [&](int i) { sink[static_cast<size_t>(i)] = isa.loop(kPeakRounds); });
    benchmark::DoNotOptimize(sink.data());
  });
  return {peak_work(threads, isa) / s, std::string("fma ") + isa.name};
}

machine_rate measure_dram(int threads) {
  memcpy_setup m(static_cast<size_t>(kDramBytes));
  fill_random(m.src.p, m.bytes / 4, 1);
  parallel_memcpy(m, threads);  // faults the destination in
  const double s = best_seconds(5, [&] {
    parallel_memcpy(m, threads);
    benchmark::ClobberMemory();
  });
  return {2 * kDramBytes / s, "memcpy 256 MiB"};
}

machine_rate measure_dram_read(int threads) {
  const size_t words = static_cast<size_t>(kDramBytes) / sizeof(uint64_t);
  aligned_floats buf(words * 2);
  fill_random(buf.p, words * 2, 2);
  const auto *p = reinterpret_cast<const uint64_t *>(buf.p);
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  // Eight independent sums per thread: enough loads in flight for DRAM on
  // any ISA; the sums are kept so the reads are not optimised away.
  auto read = [&](int i) {
    size_t at, end;
    slice_of(words, threads, i, 8, &at, &end);
    uint64_t s[8] = {};
    for (size_t w = at; w + 8 <= end; w += 8)
      for (int j = 0; j < 8; ++j) s[j] += p[w + j];
    sums[static_cast<size_t>(i)] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
  };
  const double s = best_seconds(5, [&] {
    on_threads(threads, read);
    benchmark::DoNotOptimize(sums.data());
  });
  return {kDramBytes / s, "read 256 MiB"};
}

std::string openblas_corename() {
  const char *name = openblas_get_corename();
  return name ? name : "unknown";
}

// ---------------------------------------------------------------------------

std::string op_case::group() const {
  // Tensors past every cache get their own group name ("ADD_dram"), so a
  // filter such as '^ADD/' keeps selecting the in-cache case alone.
  const std::string dram = ne0 * ne1 * 4 >= kDramCaseBytes ? "_dram" : "";
  switch (op) {
    case op_kind::mul_mat:
      if (bp_type_is_quantized(a_type))
        return std::string("Quant/MUL_MAT_") + bp_type_name(a_type) + (weight_bytes() >= kDramCaseBytes ? "_dram" : "");
      return a_type == BP_TYPE_F16 ? "MUL_MAT_f16xf32" : "MUL_MAT_f32";
    case op_kind::rms_norm:
      return "RMS_NORM" + dram;
    case op_kind::norm:
      return "NORM" + dram;
    case op_kind::soft_max:
      return "SOFT_MAX" + dram;
    case op_kind::add:
      return "ADD" + dram;
    case op_kind::mul:
      return "MUL" + dram;
    case op_kind::scale:
      return "SCALE" + dram;
    case op_kind::silu:
      return "SILU" + dram;
    case op_kind::gelu:
      return "GELU" + dram;
  }
  return "?";
}

std::string op_case::shape() const {
  if (op == op_kind::mul_mat) return "M=" + std::to_string(m) + ",N=" + std::to_string(n) + ",K=" + std::to_string(k);
  return std::to_string(ne0) + "x" + std::to_string(ne1);
}

std::vector<op_case> default_cases() {
  std::vector<op_case> cases;
  auto mul_mat = [&](bp_type t, int64_t m, int64_t n, int64_t k) {
    op_case c;
    c.op = op_kind::mul_mat, c.a_type = t, c.m = m, c.n = n, c.k = k;
    cases.push_back(c);
  };
  for (int64_t s : {128, 256, 512, 1024, 2048}) mul_mat(BP_TYPE_F32, s, s, s);
  // A decoder's shapes: a 4096 x 4096 weight times 1..32 tokens. N <= 4 is
  // bound by streaming the 64 MiB (f32) or 32 MiB (f16) of weights.
  for (int64_t n : {1, 2, 4, 8, 16, 32}) mul_mat(BP_TYPE_F32, 4096, n, 4096);
  // bp-run's demo layer (dim 256, ff 512, 32 tokens): products this small
  // are where a device's fixed cost per dispatch shows.
  mul_mat(BP_TYPE_F32, 256, 32, 256);
  mul_mat(BP_TYPE_F32, 512, 32, 256);
  for (int64_t s : {512, 1024}) mul_mat(BP_TYPE_F16, s, s, s);
  for (int64_t n : {1, 2, 4, 8, 16, 32}) mul_mat(BP_TYPE_F16, 4096, n, 4096);
  // Row ops (SILU and GELU: a feed-forward layer's activations) at 8 MiB
  // (inside this machine's L3), then at 64 MiB per tensor
  // (DRAM: what a model's activations at long context cost).
  for (int64_t rows : {512, 4096})
    for (op_kind k : {op_kind::rms_norm, op_kind::norm, op_kind::soft_max, op_kind::add, op_kind::mul, op_kind::scale,
                      op_kind::silu, op_kind::gelu}) {
      if (rows == 512 && (k == op_kind::norm || k == op_kind::mul || k == op_kind::scale)) continue;
      op_case c;
      c.op = k, c.ne0 = 4096, c.ne1 = rows;
      cases.push_back(c);
    }
  return cases;
}

double case_work(const op_case &c, std::string &why) {
  std::unique_ptr<graph_setup> s = build_graph(c, why);
  if (!s) return 0;
  double w = static_cast<double>(c.counts_flops() ? bp_op_flops(s->out) : bp_op_bytes(s->out));
  if (w <= 0) why = "the core estimates no work for " + c.group() + " " + c.shape();
  return w;
}

bool backend_supports(bp_backend *be, const op_case &c, std::string &why) {
  std::unique_ptr<graph_setup> s = build_graph(c, why);
  if (!s) return false;
  if (bp_backend_supports_op(be, s->out)) return true;
  why = "does not support " + c.group() + " " + c.shape();
  return false;
}

entry register_backend_bench(const op_case &c, double work, bp_backend *be, const std::string &spec,
                             const std::string &ref_name) {
  entry e{c.group() + "/" + c.shape() + "/" + spec, c.group(), c.shape(), spec, ref_name, c.counts_flops(), work};
  if (c.op == op_kind::mul_mat) e.weight_bytes = c.weight_bytes();
  benchmark::RegisterBenchmark(
      e.name.c_str(), [c, work, be, name = e.name](benchmark::State &st) { run_backend(st, c, work, be, name); })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  return e;
}

entry register_reference_bench(const op_case &c, double work, int threads, const std::string &prefix) {
  std::string who = std::string(c.counts_flops() ? "ref:sgemm" : "ref:memcpy") + ":threads=" + std::to_string(threads);
  entry e{
      prefix + c.group() + "/" + c.shape() + "/" + who, prefix + c.group(), c.shape(), who, "", c.counts_flops(), work};
  auto *b = c.counts_flops()
                ? benchmark::RegisterBenchmark(e.name.c_str(),
                                               [c, work, threads, name = e.name](benchmark::State &st) {
                                                 run_sgemm(st, c, work, threads, name);
                                               })
                : benchmark::RegisterBenchmark(e.name.c_str(), [c, work, threads, name = e.name](benchmark::State &st) {
                    run_memcpy(st, c, work, threads, name);
                  });
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
  return e;
}

void release_cached_setup() {
  g_cached.reset();
  g_cached_name.clear();
}

}  // namespace bp::bench
