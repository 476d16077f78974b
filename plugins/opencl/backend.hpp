// backend.hpp: a backend (one in-order queue on one device), its kernel
// objects, and the helper that sets kernel arguments.
#ifndef BP_PLUGIN_OPENCL_BACKEND_HPP_
#define BP_PLUGIN_OPENCL_BACKEND_HPP_

#include <CL/cl.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "opencl.hpp"

namespace bp::opencl {

// Which MUL_MAT kernels run (ops_matmul.cpp): mul_mat_dot / mul_mv_q, shaped
// for CPU drivers and matrix x vector products, or mul_mat_tiled, staged
// through local memory, for GPU-sized products.
enum class matmul_mode {
  automatic,  // tiled on GPUs where N >= 32 and K % 4 == 0, else dot
  dot,        // never tiled
  tiled,      // tiled wherever K % 4 == 0 (tests, tuning)
};

// Which ATTENTION kernel runs (ops_attention.cpp): a work-group per query
// row (attention), a tile of query rows per work-group with the keys staged
// in local memory (attention_tile), or several work-groups per row over
// runs of the keys, merged by a second launch (attention_split,
// attention_merge).
enum class attention_mode {
  automatic,  // on GPU devices tile for more than one query row, split for
              // one row over 512 keys or more; else row
  row,
  tile,   // wherever the head sizes fit (tests, tuning)
  split,  // wherever the partials fit the scratch buffer (tests, tuning)
};

// The parameter values of each mode, in the enum's order.
inline constexpr const char *kMatmulNames[] = {"auto", "dot", "tiled"};
inline constexpr const char *kAttentionNames[] = {"auto", "row", "tile", "split"};

struct backend_options {
  bool cache = true;
  std::string cache_dir;  // "" = the default folder
  int matmul_cols = 0;    // 0 = chosen for the device
  int matmul_width = 0;   // 0 = chosen for the device
  bool fuse = true;       // run node pairs in one launch (ops_fusion.cpp)
  matmul_mode matmul = matmul_mode::automatic;
  attention_mode attention = attention_mode::automatic;
};

struct backend_ctx {
  device_state *dev = nullptr;
  cl_command_queue queue = nullptr;
  cache_settings cache;
  // MUL_MAT: float lanes per vector along k (4, 8 or 16) and columns of b
  // per work-item (1, 2 or 4), both chosen per device (backend_create).
  int matmul_vector_width = 16;
  int matmul_cols = 4;
  matmul_mode matmul = matmul_mode::automatic;
  attention_mode attention = attention_mode::automatic;
  bool fuse = true;  // backend_options::fuse
  // The first fused pair of each kind (ops_fusion.cpp: norm+MUL, SILU+MUL,
  // MUL_MAT+ADD, +MUL, +SILU) is logged (debug).
  bool fusion_logged[5] = {};
  // Split ATTENTION's partials (ops_attention.cpp): made at the first split,
  // reused by every later one (the queue runs launches in order).
  cl_mem scratch = nullptr;
  bool split_logged = false;  // the first split ATTENTION is logged (debug)
  // Kernel objects, created once per (program, name) and reused for every
  // node: only their arguments change. Key: family|options|name.
  std::map<std::string, cl_kernel> kernels;
  // Tracing (trace.cpp): |queue| is |plain_queue|, or while a trace records
  // |profiled_queue| (CL_QUEUE_PROFILING_ENABLE, made at the first traced
  // graph), so an untraced run pays nothing for profiling.
  cl_command_queue plain_queue = nullptr, profiled_queue = nullptr;
  const bp_tensor *traced_node = nullptr;  // the node whose commands get events; NULL when untraced
  struct traced_command {
    const bp_tensor *node;
    cl_event ev;
    uint64_t enqueued_ns;  // the host's trace clock when it was enqueued
  };
  std::vector<traced_command> traced;  // reported and released at synchronize
  uint64_t last_traced_end = 0;        // keeps the nodes track in order across graphs
  ~backend_ctx();
};

// trace.cpp: device times of nodes, mapped onto the host's trace clock.
// Selects the queue for a graph (profiled while |tracing|), finishing the
// other one's work first so the backend's commands stay in order.
bp_status trace_select_queue(backend_ctx *be, bool tracing, bp_error *err);
// The event out-argument for a command of the node being traced, or NULL.
inline cl_event *trace_event(backend_ctx *be, cl_event *ev) { return be->traced_node ? ev : nullptr; }
// The trace clock just before a command of the node being traced is
// enqueued (0 when untraced): the command cannot start before it.
uint64_t trace_before_enqueue(const backend_ctx *be);
// Keeps |ev| (from trace_event; NULL is ignored) for the node being traced.
void trace_enqueued(backend_ctx *be, cl_event ev, uint64_t before_ns);
// After the queue finished (clFinish returned at |finished_ns| on the trace
// clock): reports one span per traced node (|report|) and releases the
// events.
void trace_harvest(backend_ctx *be, uint64_t finished_ns, bool report);

bp_status backend_create(device_state *dev, const backend_options &opt, bp_backend_ref *out, bp_error *err);
bp_status event_create(device_state *dev, bp_event_ref *out, bp_error *err);

// kernels.cpp: the kernel |name| of |family| built with |options|.
bp_status get_kernel(backend_ctx *be, const char *family, const std::string &options, const char *name, cl_kernel *out,
                     bp_error *err);

// Sets arguments in order, remembering the first failure, then launches.
class launch {
 public:
  launch(backend_ctx *be, cl_kernel k) : be_(be), k_(k) {}
  template <typename T>
  launch &arg(const T &v) {
    if (rc_ == CL_SUCCESS) rc_ = clSetKernelArg(k_, n_++, sizeof(T), &v);
    return *this;
  }
  launch &mem(cl_mem m) { return arg(m); }
  // The four arguments of TENSOR(n): cl_mem, byte offset, ne, nb.
  launch &tensor(const bp_tensor *t);
  // EPILOGUE_ARGS (epilogue.h) of |after| fused into |product|: the
  // operand's and the result's cl_mem and byte offset; none when |after|
  // is NULL.
  launch &epilogue(const bp_tensor *product, const bp_tensor *after);
  // Enqueues on the backend queue; global sizes are rounded up to |local|.
  bp_status run(cl_uint dims, const size_t *global, const size_t *local, const char *what, bp_error *err);

 private:
  backend_ctx *be_;
  cl_kernel k_;
  cl_uint n_ = 0;
  cl_int rc_ = CL_SUCCESS;
};

// ops.cpp
bool op_supported(const device_state *dev, const bp_tensor *t);
bp_status compute_node(backend_ctx *be, const bp_tensor *node, bp_error *err);
// ops_attention.cpp
bool attention_supported(const bp_tensor *t);
bp_status attention_run(backend_ctx *be, const bp_tensor *t, bp_error *err);
// ops_fusion.cpp: node |i| of |graph| and a later node in one launch.
// |second| is 0 when node |i| fuses with nothing; |between| is the one
// independent node listed between them (0 for none), which runs first.
struct fused_pair {
  uint32_t second = 0, between = 0;
};
fused_pair find_fused_pair(const bp_graph_desc *graph, uint32_t i);
// Runs the pair find_fused_pair chose (both nodes checked by op_supported).
bp_status run_fused(backend_ctx *be, const bp_tensor *first, const bp_tensor *second, bp_error *err);
// ops_matmul.cpp
bool mul_mat_supported(const bp_tensor *t);
// The product |t|, and |after| (NULL, or the next node: ADD or MUL of the
// product with a tensor of its layout, or SILU of it; ops_fusion.cpp checked
// it) in the same launch.
bp_status mul_mat_run(backend_ctx *be, const bp_tensor *t, const bp_tensor *after, bp_error *err);
// What the epilogue of |after| reads beside |product|: ADD's or MUL's other
// operand; SILU reads nothing else and gets |product|.
const bp_tensor *epilogue_operand(const bp_tensor *product, const bp_tensor *after);

// Type code used by the kernels' -D options (common.cl): 0 f32, 1 f16,
// 2 i32, 3 bf16.
inline int type_code(bp_type t) { return t == BP_TYPE_F16 ? 1 : t == BP_TYPE_I32 ? 2 : t == BP_TYPE_BF16 ? 3 : 0; }
// The block types quant.cl decodes (shaders/common/quant.h), Q8_0 to Q5_K.
// BF16 is a storage type of the f32 kernels instead (common.cl's LOAD_AS,
// matmul.cl's LOAD_AV), so its rows may have any length.
inline bool is_quant(bp_type t) { return t >= BP_TYPE_Q8_0 && t <= BP_TYPE_Q5_K; }

}  // namespace bp::opencl

#endif  // BP_PLUGIN_OPENCL_BACKEND_HPP_
