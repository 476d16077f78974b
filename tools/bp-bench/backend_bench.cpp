// backend_bench.cpp: the benchmark bodies of bp-bench that run a case on a
// backend.
//
// A backend benchmark builds its graph once, allocates it once
// (bp_context_alloc_tensors), fills the inputs with random data, runs the graph
// once untimed and checks a few sampled outputs against double-precision
// sums, then times only bp_backend_graph_compute + bp_backend_synchronize.
// Google Benchmark calls a body several times per benchmark (growing the
// iteration count), so that setup is kept until the next benchmark starts
// (harness.hpp).
//
// A product whose weights stream from DRAM (op_case::weights_from_dram) gets
// as many copies of its weights as it takes to cover
// bp::tools::past_cache_bytes() (twice the last-level cache), each with its
// own output and graph, and the timed loop runs them in turn: with one copy,
// a CPU whose last-level cache holds the weights (260 MiB of L3 holds every
// _dram case's 72-256 MiB) would time the cache, not DRAM.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/machine_rates.hpp"
#include "harness.hpp"

namespace bp::bench {
namespace {

constexpr float kRmsEps = 1e-6f;
constexpr float kSoftMaxScale = 0.125f;
constexpr float kScale = 0.75f;

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

// The same product over another copy of the weights (a _dram case's turns).
struct weight_copy {
  bp_tensor *a = nullptr, *out = nullptr;
  bp_graph *graph = nullptr;
  bp_buffer *weights = nullptr;
};

struct graph_setup : setup {
  bp_context *ctx = nullptr;
  bp_graph *graph = nullptr;
  bp_buffer *buf = nullptr;
  bp_buffer *weights = nullptr;  // a, when the device has a weight buffer type
  bp_tensor *out = nullptr;
  std::vector<bp_tensor *> inputs;
  std::vector<weight_copy> copies;  // the turns after the first (|graph|)
  ~graph_setup() override {
    for (weight_copy &w : copies) bp_buffer_free(w.weights), bp_graph_free(w.graph);
    bp_buffer_free(weights);
    bp_buffer_free(buf);
    bp_graph_free(graph);
    bp_context_free(ctx);
  }
  // The graph of the |turn|th timed call.
  bp_graph *graph_of_turn(size_t turn) const {
    const size_t t = turn % (copies.size() + 1);
    return t == 0 ? graph : copies[t - 1].graph;
  }
};

// How many copies of the weights a case takes turns over: 1, or for a
// product from DRAM enough to cover twice the last-level cache.
size_t weight_turns(const op_case &c) {
  if (!c.weights_from_dram()) return 1;
  const double need = static_cast<double>(bp::tools::past_cache_bytes());
  return std::max<size_t>(1, static_cast<size_t>(std::ceil(need / c.weight_bytes())));
}

// Builds the case's graph (metadata only), with |turns| - 1 more copies of a
// MUL_MAT's weights; NULL with |err| set on failure.
std::unique_ptr<graph_setup> build_graph(const op_case &c, std::string &err, size_t turns = 1) {
  auto s = std::make_unique<graph_setup>();
  s->ctx = bp_context_new(0);
  if (!s->ctx) return err = api_error("bp_context_new"), nullptr;
  s->out = build_node(s->ctx, c, s->inputs);
  if (!s->out) return err = api_error("building the graph"), nullptr;
  s->graph = bp_graph_new(s->ctx, 0);
  if (!s->graph || bp_graph_build(s->graph, s->out) != BP_OK) return err = api_error("bp_graph_build"), nullptr;
  for (size_t t = 1; t < turns && c.op == op_kind::mul_mat; ++t) {
    weight_copy w;
    w.a = bp_tensor_new_2d(s->ctx, c.a_type, c.k, c.m);
    w.out = w.a ? bp_mul_mat(s->ctx, w.a, s->inputs[1]) : nullptr;
    if (!w.out) return err = api_error("building a copy of the weights"), nullptr;
    w.graph = bp_graph_new(s->ctx, 0);
    s->copies.push_back(w);
    if (!w.graph || bp_graph_build(w.graph, w.out) != BP_OK) return err = api_error("bp_graph_build"), nullptr;
  }
  return s;
}

// Random values in [-1, 1) into |t| (f32 or f16, contiguous), in chunks;
// quantized weights are random values through bp_quantize_rows, row by row.
bp_status fill_tensor(bp_tensor *t, uint64_t seed) {
  rng r{seed};
  if (bp_type_is_quantized(t->type)) {
    const size_t row = bp_type_row_size(t->type, t->ne[0]);
    std::vector<float> f(static_cast<size_t>(t->ne[0]));
    std::vector<unsigned char> q(row);
    for (int64_t i = 0; i < bp_tensor_nrows(t); ++i) {
      for (float &v : f) v = r.uniform();
      if (bp_status st = bp_quantize_rows(t->type, f.data(), q.data(), 1, t->ne[0], nullptr); st != BP_OK) return st;
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
    std::vector<unsigned char> raw(bp_type_row_size(t->type, t->ne[0]));
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

// Copies a's bytes (the file's layout) into every other copy of the weights.
bp_status copy_weights(graph_setup &s) {
  if (s.copies.empty()) return BP_OK;
  const bp_tensor *a = s.inputs[0];
  std::vector<unsigned char> bytes(bp_tensor_nbytes(a));
  if (bp_status st = bp_tensor_get(a, bytes.data(), 0, bytes.size()); st != BP_OK) return st;
  for (weight_copy &w : s.copies)
    if (bp_status st = bp_tensor_set(w.a, bytes.data(), 0, bytes.size()); st != BP_OK) return st;
  return BP_OK;
}

// Runs every other copy's graph once; "" when each gives the first copy's
// output bit for bit (the same bytes through the same kernels).
std::string check_copies(const graph_setup &s, bp_backend *be) {
  if (s.copies.empty()) return "";
  std::vector<unsigned char> want(bp_tensor_nbytes(s.out)), got(want.size());
  if (bp_tensor_get(s.out, want.data(), 0, want.size()) != BP_OK) return api_error("reading the result");
  for (size_t i = 0; i < s.copies.size(); ++i) {
    const weight_copy &w = s.copies[i];
    if (bp_backend_graph_compute(be, w.graph) != BP_OK || bp_backend_synchronize(be) != BP_OK)
      return api_error("bp_backend_graph_compute");
    if (bp_tensor_get(w.out, got.data(), 0, got.size()) != BP_OK) return api_error("reading the result");
    if (got != want) return "wrong result: copy " + std::to_string(i + 1) + " of the weights gives another product";
  }
  return "";
}

std::unique_ptr<graph_setup> make_graph_setup(const op_case &c, bp_backend *be, std::string &err) {
  std::unique_ptr<graph_setup> s = build_graph(c, err, weight_turns(c));
  if (!s) return nullptr;
  if (c.op == op_kind::mul_mat && bp_type_is_quantized(c.a_type) && !c.plain) {
    // The weights where a model would load them; the rest in the default type.
    if (bp_buffer_type *wbt = bp_device_weight_buffer_type(bp_backend_device(be))) {
      auto place = [&](bp_tensor *a, bp_buffer **buf) {
        return bp_buffer_type_alloc(wbt, bp_buffer_type_alloc_size(wbt, a), buf) == BP_OK &&
               bp_buffer_place_tensor(*buf, a, 0) == BP_OK;
      };
      bool placed = place(s->inputs[0], &s->weights);
      for (weight_copy &w : s->copies) placed = placed && place(w.a, &w.weights);
      if (!placed) return err = api_error("allocating the weights in the weight buffer type"), nullptr;
    } else {
      bp_clear_error();
    }
  }
  if (bp_context_alloc_tensors(s->ctx, be, &s->buf) != BP_OK)
    return err = api_error("bp_context_alloc_tensors"), nullptr;
  uint64_t seed = 1;
  for (bp_tensor *t : s->inputs)
    if (fill_tensor(t, seed++) != BP_OK) return err = api_error("bp_tensor_set"), nullptr;
  if (copy_weights(*s) != BP_OK) return err = api_error("bp_tensor_set"), nullptr;
  // One untimed run: warms caches and thread pools, and gives a result to check.
  if (bp_backend_graph_compute(be, s->graph) != BP_OK || bp_backend_synchronize(be) != BP_OK)
    return err = api_error("bp_backend_graph_compute"), nullptr;
  err = verify(c, *s);
  if (err.empty()) err = check_copies(*s, be);
  if (!err.empty()) return nullptr;
  return s;
}

void run_backend(benchmark::State &state, const op_case &c, double work, bp_backend *be, const std::string &name) {
  std::string err;
  graph_setup *s = cached_setup<graph_setup>(
      name, [&](std::string &e) { return make_graph_setup(c, be, e); }, err);
  if (!s) {
    state.SkipWithError(err.c_str());
    return;
  }
  size_t turn = 0;
  for (auto _ : state) {
    bp_status st = bp_backend_graph_compute(be, s->graph_of_turn(turn++));
    if (st == BP_OK) st = bp_backend_synchronize(be);
    if (st != BP_OK) {
      state.SkipWithError(api_error("bp_backend_graph_compute").c_str());
      break;
    }
  }
  set_rate_counter(state, c, work);
}

}  // namespace

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

}  // namespace bp::bench
