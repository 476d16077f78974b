// conformance.hpp: the op-conformance suite shared by bp-test-ops and the
// per-plugin test binaries.
//
// What it is: a list of op cases (each builds a small graph with the public C
// API from inputs filled with seeded random data), a double-precision
// reference written independently of every plugin, and a runner that
// computes a case on one backend and compares the result by normalized mean
// squared error (NMSE) against the reference.
// What it is not: a benchmark, or a test of the scheduler (one backend only).
//
// Usage:
//   bp_backend *be = nullptr;
//   bp_backend_new("cpu", &be);
//   for (const auto &c : bp::conformance::conformance_cases({"MUL_MAT"})) {
//     bp::conformance::case_result r = bp::conformance::run_case(c, be);
//     if (r.status == bp::conformance::case_status::failed) puts(r.message.c_str());
//   }
#pragma once

#include <backplane/backplane.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bp::conformance {

// ---------------------------------------------------------------------------
// How an input is made: a leaf tensor filled with random values, then turned
// into the operand by a chain of views. The runner applies the chain with the
// C API; the reference applies the same description on the host by itself.

struct view_step {
  enum class kind { permute, transpose, view };
  kind what = kind::view;
  int axes[4] = {0, 1, 2, 3};        // permute: dim i goes to axes[i]
  int64_t ne[4] = {1, 1, 1, 1};      // view: the new shape
  int64_t stride[4] = {1, 0, 0, 0};  // view: element strides of dims 1..3 (dim 0 is dense)
  int64_t offset = 0;                // view: elements from the start of the viewed tensor
};

enum class fill_kind {
  uniform,         // uniform in [lo, hi]
  away_from_zero,  // |x| uniform in [lo, hi], random sign
  integers,        // whole numbers uniform in [lo, hi]
  distinct,        // a shuffled ramp: no two elements equal (ARGMAX without ties)
  causal_mask,     // 0 where i0 <= i1 + (ne0 - ne1), -inf elsewhere (lo/hi unused)
  // The special values (special_values()): +-0, +-inf, NaN, denormals,
  // magnitudes 1e4 to FLT_MAX and the edges of exp's range.
  special,         // element k of the leaf is special k mod S
  special_by_row,  // every element of leaf row r (dim 0) is special r mod S
  special_in_rows  // uniform in [lo, hi] (distinct when no_nan), and special r mod S once in row r
};

struct fill_spec {
  fill_kind kind = fill_kind::uniform;
  double lo = -1.0, hi = 1.0;
  bool no_nan = false;  // special*: leave NaN out (ARGMAX: unspecified with NaN)
  double max_abs = 0;   // special*: > 0 leaves out finite magnitudes above it
};

// The special values the special fills cycle through, in a fixed order.
const std::vector<double> &special_values();

struct input_spec {
  bp_type type = BP_TYPE_F32;
  int64_t ne[4] = {1, 1, 1, 1};  // the leaf's shape
  std::vector<view_step> views;  // applied in order to give the operand
  fill_spec fill;
};

// Op parameters as the case states them (the reference reads these, never
// the tensor's op_params).
struct op_args {
  float f[4] = {0, 0, 0, 0};
  int32_t i[4] = {0, 0, 0, 0};
  bp_type type = BP_TYPE_F32;
  // Set by the runner for the reference only: the plugin under test
  // ("cpu", "vulkan", "opencl", ...), whose API's stated precision the
  // per-element tolerances of the special-value cases follow.
  std::string api;
};

// ---------------------------------------------------------------------------
// Host-side data the reference sees.

// Where the logical elements of an operand sit in its leaf (element units).
struct host_layout {
  int64_t ne[4] = {1, 1, 1, 1};
  int64_t stride[4] = {1, 1, 1, 1};
  int64_t offset = 0;
};

// One operand: its leaf values (already rounded to the leaf type) and layout.
struct host_input {
  bp_type type = BP_TYPE_F32;
  host_layout layout;
  const std::vector<double> *leaf = nullptr;
  int64_t leaf_ne[4] = {1, 1, 1, 1};

  const int64_t *ne() const { return layout.ne; }
  int64_t nelements() const { return layout.ne[0] * layout.ne[1] * layout.ne[2] * layout.ne[3]; }
  double at(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return (*leaf)[layout.offset + i0 * layout.stride[0] + i1 * layout.stride[1] + i2 * layout.stride[2] +
                   i3 * layout.stride[3]];
  }
  // The i-th element in logical (dim 0 fastest) order.
  double flat(int64_t i) const;
};

// A per-element bound: |got - want| <= rel |want| + abs. rel < 0: any
// value passes (the result is unspecified there, docs/ops.md).
struct elem_tol {
  double rel = 0, abs = 0;
};

// The expected result, dense in logical order (dim 0 fastest).
struct expected {
  bp_type type = BP_TYPE_F32;
  int64_t ne[4] = {1, 1, 1, 1};
  std::vector<double> values;
  // Empty: compare by NMSE. Else one bound per value, and NMSE is not used.
  std::vector<elem_tol> tol;
};

// ---------------------------------------------------------------------------
// Cases and results.

using build_fn = std::function<bp_tensor *(bp_context *, const std::vector<bp_tensor *> &, const op_args &)>;
using reference_fn = std::function<expected(const std::vector<host_input> &, const op_args &)>;

struct case_desc {
  std::string op;    // "MUL_MAT" (the name bp_op_name gives)
  std::string name;  // "MUL_MAT f16 x f32 [33,7,1,1] x [33,5,1,1]"
  double max_nmse = 1e-7;
  bool exact = false;  // integer results: every element must match
  std::vector<input_spec> inputs;
  op_args args;
  build_fn build;          // makes the op node from the operands (after views)
  reference_fn reference;  // the expected value of the node
  // >= 0: compare the whole leaf of this input after compute (CPY writes
  // into it) instead of the node; the reference then returns that leaf.
  int readback_input = -1;
  // Special-value cases: a backend may flush denormal inputs and results to
  // zero (Vulkan and OpenCL allow it), so each element may also match the
  // reference computed from the inputs with denormals flushed to +-0.
  bool denormals_may_flush = false;
  // "" for the core cases every backend should run; "quant" for the cases
  // of the quantized types. bp-test-ops --optional-feature lets a backend
  // without them pass --require-support (tests/CMakeLists.txt).
  std::string feature;
  // Input 0 goes to the device's weight buffer type (bp_device_weight_buffer_type:
  // the layout the device's kernels read weights in, e.g. the cpu plugin's
  // repacked Q4_0, Q8_0, Q5_0, Q4_K, Q5_K and Q6_K) when it has one; else to the
  // default type.
  bool weight_buffer = false;
};

enum class case_status { passed, failed, unsupported };
const char *case_status_name(case_status s);

struct case_result {
  std::string op;
  std::string name;
  case_status status = case_status::failed;
  bool compared = false;  // the values were compared: nmse is meaningful
  double nmse = 0;
  double max_nmse = 0;
  std::string message;  // why it failed or is unsupported; empty when passed
};

// The cases whose op name is in |ops| (all when empty). Cheap: no data is
// made until run_case.
std::vector<case_desc> conformance_cases(const std::vector<std::string> &ops = {});

// Every op name the suite covers, in a fixed order.
std::vector<std::string> conformance_ops();

// Builds, allocates, fills, computes and compares |c| on |backend|. Never
// throws or aborts: API failures give a failed result with bp_last_error().
case_result run_case(const case_desc &c, bp_backend *backend);

// ---------------------------------------------------------------------------
// Pieces, exposed for tests of the machinery itself.

struct comparison {
  bool ok = false;
  double nmse = 0;
  std::string message;
};
// Compares |actual| (logical order) with |want| under |max_nmse| (or exactly).
comparison compare_values(const std::vector<double> &actual, const expected &want, double max_nmse, bool exact);
// Compares element by element under want.tol: NaN where NaN, an infinity of
// the same sign where one, else within the bound (below FLT_MIN, any value
// of magnitude < FLT_MIN passes: results in the denormal range may flush).
// |alt| (may be null): a second reference, each element may match either.
comparison compare_elementwise(const std::vector<double> &actual, const expected &want, const expected *alt);

// Values of |spec|'s leaf, seeded by |seed|, rounded to the leaf type.
std::vector<double> make_leaf_values(const input_spec &spec, uint64_t seed);
// The operand layout that |spec|'s views give, computed on the host.
host_layout apply_views_on_host(const input_spec &spec);

// Element conversions at the API boundary (leaf type rounding).
double round_to_type(double v, bp_type type);

}  // namespace bp::conformance
