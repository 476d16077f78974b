// vulkan.hpp: the objects of the vulkan plugin and what its files share.
//
// plugin_state (plugin.cpp) owns the VkInstance (made by enumerate, never by
// init) and one device_state per physical device with a compute queue.
// device_state (device.cpp) opens its VkDevice at first use and owns the
// queue, a timeline semaphore that numbers every submission, two memory
// allocators and the pipelines. Buffers (buffer.cpp) are VkBuffers placed in
// sub-allocated VkDeviceMemory blocks, with whole-buffer texel views made
// once. A backend (backend.cpp) records into command buffers that it submits
// on flush; graph.cpp turns a node list into dispatches with barriers only on
// hazards; the planners (plan.hpp: ops_support.cpp, plan.cpp and the files it
// names) know each op's shader, push constants and bindings.
#ifndef BP_PLUGIN_VULKAN_VULKAN_HPP_
#define BP_PLUGIN_VULKAN_VULKAN_HPP_

#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backplane/plugin.h"
#include "memory_window.hpp"
#include "plugin_common.hpp"

namespace bp::vk {

struct device_state;
struct vk_buffer;

// A Vulkan info struct, zeroed, with its sType set.
template <typename T>
T vk_struct(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

// ---- plugin.cpp -------------------------------------------------------------

struct plugin_state {
  const bp_host_api *host = nullptr;
  VkInstance instance = VK_NULL_HANDLE;
  plugins::discovery found;  // runs enumerate_devices once (plugin.cpp)
  std::vector<std::unique_ptr<device_state>> devices;
  ~plugin_state();
};

// The plugin table (plugin.cpp).
const bp_plugin_i *plugin_table();
// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char *vk_result_name(VkResult r);
// The Backplane status for a failed Vulkan call.
bp_status status_of(VkResult r);

// ---- buffer.cpp: memory -----------------------------------------------------

struct memory_block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  char *mapped = nullptr;                     // persistent mapping, or NULL
  std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, coalesced
  bool dedicated = false;                     // one buffer owns it all
};

struct allocation {
  memory_block *block = nullptr;
  VkDeviceSize offset = 0, size = 0;
};

// Sub-allocates VkDeviceMemory of one memory type in blocks (vkAllocateMemory
// is slow and drivers cap the count); requests bigger than half a block get
// a dedicated allocation. Thread-safe.
struct memory_allocator {
  device_state *dev = nullptr;
  uint32_t type_index = 0;
  bool mappable = false;
  VkDeviceSize block_size = 0;
  std::mutex mu;
  std::vector<std::unique_ptr<memory_block>> blocks;
  bp_status alloc(const VkMemoryRequirements &req, allocation *out, bp_error *err);
  void release(const allocation &a);
  void destroy_all();
};

// A buffer type: ctx of bp_buffer_type_ref. |host| is the staging type
// (host-visible, the device's host_buffer_type).
struct buffer_type_ctx {
  device_state *dev = nullptr;
  bool host = false;
  std::string name;
};

extern const bp_buffer_type_i &buffer_type_iface;

struct vk_buffer {
  device_state *dev = nullptr;
  buffer_type_ctx *type = nullptr;
  VkBuffer buffer = VK_NULL_HANDLE;
  allocation mem;
  memory_allocator *allocator = nullptr;   // where |mem| came from
  size_t size = 0;                         // as asked
  size_t vk_size = 0;                      // VkBuffer size (rounded up to 16)
  char *mapped = nullptr;                  // host pointer of byte 0, when mappable
  void *base = nullptr;                    // what tensors' data is relative to
  bool reserved_base = false;              // base is an mmap'd PROT_NONE range
  VkBufferView view_f32 = VK_NULL_HANDLE;  // RGBA32F, uniform + storage texel
  VkBufferView view_f16 = VK_NULL_HANDLE;  // RGBA16F, uniform texel
  VkBufferView view_u32 = VK_NULL_HANDLE;  // R32UI, uniform texel: quantized blocks as raw words
};

// A device buffer for the plugin's own use (staging, status).
bp_status buffer_create(device_state *dev, size_t size, bool host, vk_buffer **out, bp_error *err);
void buffer_destroy(vk_buffer *b);
// Byte offset of |t| in its buffer; |t| must live in a vk_buffer.
inline size_t tensor_offset(const bp_tensor *t) {
  const auto *b = static_cast<const vk_buffer *>(t->buffer_ctx);
  return static_cast<size_t>(static_cast<const char *>(t->data) - static_cast<const char *>(b->base));
}
bool is_our_buffer(const bp_tensor *t);

// ---- pipelines.cpp ----------------------------------------------------------

enum class layout_kind { ssbo = 0, texel = 1 };
// Bindings 0 = src0, 1 = src1, 2 = dst, 3 and 4 = whatever else a shader
// reads or writes (ROPE's factors, GET_ROWS's and SET_ROWS's status, a fused
// MUL's product; ATTENTION's v and mask).
constexpr int kBindings = 5;

// One layout for every shader (common.glsl).
struct push_consts {
  uint32_t d_ne[4], d_nb[4], a_ne[4], a_nb[4], b_ne[4], b_nb[4];
  uint32_t d_off, a_off, b_off, n;
  uint32_t p[4];
};
static_assert(sizeof(push_consts) == 128, "push constants must match common.glsl");

struct pipeline_cache {
  VkDescriptorSetLayout set_layout[2] = {};
  VkPipelineLayout layout[2] = {};
  VkPipelineCache cache = VK_NULL_HANDLE;
  std::mutex mu;
  std::unordered_map<std::string, VkPipeline> pipelines;
  std::unordered_map<std::string, VkShaderModule> modules;
};

bp_status pipelines_init(device_state *dev, bp_error *err);
void pipelines_destroy(device_state *dev);
// The pipeline of |variant| with specialization constants 0..n-1 = |spec|,
// created at first use. Thread-safe.
bp_status pipeline_get(device_state *dev, const char *variant, layout_kind layout, const uint32_t *spec,
                       uint32_t n_spec, VkPipeline *out, bp_error *err);

// ---- device.cpp ------------------------------------------------------------

struct device_state {
  plugin_state *plugin = nullptr;
  uint32_t index = 0;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  uint32_t queue_family = 0;
  std::string name, description, id;
  bp_device_type type = BP_DEVICE_TYPE_GPU;
  bool has_budget = false;
  bool has_16bit_storage = false;
  bool subgroup_arith = false;
  uint32_t subgroup_size = 1;
  bool f16_view = false;  // RGBA16F usable as a uniform and storage texel format
  uint64_t memory_total = 0;
  uint32_t tile_cols = 32;  // mul_mat_nt's widest tile, chosen at enumerate
  // mul_mat_shared.comp's workgroups (256 invocations, 8 KiB of shared
  // memory) fit the device's limits, and mul_mv_wg's reductions
  // (subgroup_arith) work: the GPU-shaped MUL_MAT shaders can run. Set at
  // enumerate.
  bool gpu_mul_mat = false;
  // VK_NV_cooperative_matrix with 16 x 16 x 16 f16 x f16 -> f32 subgroup
  // tiles, shaderFloat16, subgroups of 32 and the GPU-shaped products:
  // mul_mat_coopmat.comp can run (device_describe, coopmat_support).
  bool coopmat = false;

  // Opened at first use (open()).
  std::mutex open_mu;
  bool opened = false;
  VkDevice dev = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  std::mutex queue_mu;
  VkSemaphore timeline = VK_NULL_HANDLE;
  std::atomic<uint64_t> submitted{0};
  std::atomic<bool> lost{false};
  memory_allocator device_mem, host_mem;
  bool device_mem_mappable = false;
  pipeline_cache pipes;
  PFN_vkCmdPushDescriptorSetKHR push_descriptor = nullptr;
  buffer_type_ctx buft_device, buft_host;

  ~device_state();
};

extern const bp_device_i device_iface;

// Fills a device_state from |phys|; false (with a log line) when it cannot
// serve Backplane (no compute queue, Vulkan < 1.2, no push descriptors).
bool device_describe(plugin_state *plugin, VkPhysicalDevice phys, uint32_t index, device_state *out);
// Creates the VkDevice and friends once. Thread-safe.
bp_status device_open(device_state *dev, bp_error *err);
// DEVICE_LOST with a message when the device was lost.
bp_status device_check(device_state *dev, bp_error *err);
// Records a failed Vulkan call (marks the device lost on DEVICE_LOST).
bp_status device_fail(device_state *dev, VkResult r, const char *what, bp_error *err);
// Submits |cb|, signalling the next timeline value (returned in |value|).
bp_status device_submit(device_state *dev, VkCommandBuffer cb, uint64_t *value, bp_error *err);
// Waits until the timeline reaches |value|.
bp_status device_wait(device_state *dev, uint64_t value, bp_error *err);
// Waits for everything submitted so far.
bp_status device_wait_all(device_state *dev, bp_error *err);
// Runs |record| in a one-off command buffer and waits (non-mappable memory).
template <typename F>
bp_status device_run_once(device_state *dev, F &&record, bp_error *err);

// ---- backend.cpp -----------------------------------------------------------

// Which MUL_MAT shaders run (plan_matmul.cpp, plan_mul_mat): those shaped
// for a CPU driver (one invocation per output or per register tile: mul_mv,
// mul_mat_nt) or for a GPU (a workgroup per row: mul_mv_wg; shared-memory
// blocks: mul_mat_shared).
enum class mul_mat_mode {
  automatic,  // GPU-shaped on GPUs (blocks only where M and N reach 64), else CPU-shaped
  cpu,        // CPU-shaped only
  gpu,        // GPU-shaped wherever the operands fit (tests, tuning)
};

// How the GPU-shaped matrix x vector shaders (mul_mv_wg, mul_mv_q with
// several subgroups) split a product: a subgroup per row, several rows per
// workgroup, summed by subgroup operations alone; or a workgroup per row,
// its subgroups' sums combined through shared memory.
enum class mul_mv_mode {
  automatic,  // subgroup
  subgroup,
  workgroup,
};

// Which ATTENTION shaders run (plan_attention.cpp): a workgroup per query
// row (attention.comp); a tile of query rows per workgroup with the keys
// staged in shared memory (attention_tile.comp); or several workgroups per
// row, each over a run of the keys, merged by a second dispatch
// (attention.comp's SPLITS, attention_merge.comp).
enum class attention_mode {
  automatic,  // on GPUs: tile for prompts, split for one query row over a long cache; else row
  row,
  tile,   // wherever the head sizes fit (tests, tuning)
  split,  // wherever there are two key blocks or more and the partials fit (tests, tuning)
};

// The parameter values of each mode, in the enum's order.
inline constexpr const char *kMulMatNames[] = {"auto", "cpu", "gpu"};
inline constexpr const char *kMulMvNames[] = {"auto", "subgroup", "workgroup"};
inline constexpr const char *kAttentionNames[] = {"auto", "row", "tile", "split"};

struct backend_options {
  bool f16 = true;         // use 16-bit storage when the device has it
  bool fast_paths = true;  // texel-buffer MUL_MAT and elementwise shaders
  uint32_t tile_cols = 0;  // 0: the device's choice
  mul_mat_mode mul_mat = mul_mat_mode::automatic;
  mul_mv_mode mul_mv = mul_mv_mode::automatic;
  attention_mode attention = attention_mode::automatic;
  bool coopmat = false;  // mul_mat_shared's products on cooperative matrices (refused where the device lacks them)
  bool profile = false;  // time each dispatch (graph_compute only), log a table
  bool fuse = true;      // two nodes per dispatch where it pays (fusion.cpp, plan_fused)
};

// Per-dispatch GPU time by op and shader variant, summed over the backend's
// life when profile=true; logged at info level when the backend is freed.
struct profile_entry {
  double ms = 0;
  uint64_t count = 0;
};

// A traced graph waiting for its timestamps (trace.cpp): one before the
// first dispatch and one after each, read at synchronize.
struct traced_graph {
  VkQueryPool pool = VK_NULL_HANDLE;
  std::vector<const bp_tensor *> node, fused;  // per dispatch: its node and the node fused into it (or NULL)
  uint64_t submitted_ns = 0;                   // the host's trace clock just before the submission
};

struct cmd_slot {
  VkCommandBuffer cb = VK_NULL_HANDLE;
  uint64_t value = 0;  // timeline value of its last submission (0: never)
};

struct pending_read {
  vk_buffer *staging;
  void *dst;
  size_t size;
};

// The names a SET_ROWS report gives (set_rows.comp's label: an index into
// backend_ctx::set_rows_labels, made by plan_set_rows).
struct set_rows_label {
  std::string node, ids, dst;
};
constexpr uint32_t kMaxSetRowsLabels = 1024;  // then a report names no tensors

struct backend_ctx {
  device_state *dev = nullptr;
  backend_options opt;
  VkCommandPool pool = VK_NULL_HANDLE;
  std::vector<cmd_slot> slots;
  int recording = -1;            // slot being recorded, -1 if none
  uint64_t last = 0;             // last submitted value
  vk_buffer *status = nullptr;   // GET_ROWS and SET_ROWS bad-id reports; also the dummy binding
  vk_buffer *scratch = nullptr;  // split ATTENTION's partials (plan_attention.cpp), made at first use
  std::vector<set_rows_label> set_rows_labels;
  std::vector<vk_buffer *> staging;  // async transfers until synchronize
  std::vector<pending_read> reads;
  std::map<std::string, profile_entry> profile;  // "OP variant" -> time
  std::vector<traced_graph> traced;              // until synchronize reads their times
  uint64_t last_traced_end = 0;                  // keeps the nodes track in order across graphs
  bool closing = false;                          // set by the destructor: nodes may be gone
  ~backend_ctx();
};

bp_status backend_create(device_state *dev, const backend_options &opt, bp_backend_ref *out, bp_error *err);
// The command buffer being recorded, begun (with a leading barrier) if none.
bp_status backend_begin(backend_ctx *be, VkCommandBuffer *out, bp_error *err);
// Ends and submits the command buffer being recorded, if any.
bp_status backend_flush(backend_ctx *be, bp_error *err);
bp_status backend_sync(backend_ctx *be, bp_error *err);
// Full barrier at the start and a host-read barrier at the end of every
// command buffer: submissions of one queue are ordered, but their memory
// accesses need these to be visible to each other and to the host.
void cmd_begin_barrier(VkCommandBuffer cb);
void cmd_end_barrier(VkCommandBuffer cb);
bp_status event_create(device_state *dev, bp_event_ref *out, bp_error *err);
struct vk_event {
  device_state *dev;
  uint64_t value = 0;
};

// ---- ops_support.cpp, plan.cpp (plan.hpp) ----------------------------------

struct binding {
  vk_buffer *buf = nullptr;  // NULL: the dummy
  VkDeviceSize offset = 0, range = 0;
  VkBufferView view = VK_NULL_HANDLE;  // texel bindings
};

struct byte_range {
  VkBuffer buffer;
  VkDeviceSize begin, end;
};

// Specialization constants a dispatch may set (ids 0..kMaxSpec-1).
constexpr uint32_t kMaxSpec = 5;

struct dispatch {
  const char *variant = nullptr;
  const char *op = nullptr;                           // the node's op, for profiles
  const bp_tensor *node = nullptr, *fused = nullptr;  // for traces: the node, and the next one fused into it
  layout_kind layout = layout_kind::ssbo;
  uint32_t spec[kMaxSpec] = {};
  uint32_t n_spec = 0;
  binding bind[kBindings];
  push_consts pc{};
  uint32_t groups[3] = {1, 1, 1};
  std::vector<byte_range> reads, writes;
  VkPipeline pipeline = VK_NULL_HANDLE;  // resolved by graph.cpp
};

bool op_supported(const device_state *dev, const backend_options &opt, const bp_tensor *node);
// Appends |node|'s dispatches. |next| is the graph's following node or NULL: where the two fuse into one
// dispatch (fusion.cpp, plan_fused), *consumed is 2, else 1.
bp_status op_plan(backend_ctx *be, const bp_tensor *node, const bp_tensor *next, std::vector<dispatch> &out,
                  uint32_t *consumed, bp_error *err);

// ---- graph.cpp -------------------------------------------------------------

struct graph_plan {
  backend_ctx *be = nullptr;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  uint64_t value = 0;  // last submission
  uint32_t n_dispatches = 0, n_barriers = 0;
  // The graph's nodes, alive while the plan is (the replay reads them): a
  // replay while a trace records records them afresh, with timestamps.
  std::vector<bp_tensor *> nodes;
};

// trace.cpp: node times from timestamp queries, for the host's trace.
// After the queue reached the backend's last submission (at |finished_ns|
// on the trace clock): reports the traced graphs' nodes (not while closing)
// and frees their query pools.
void trace_harvest(backend_ctx *be, uint64_t finished_ns);

bp_status graph_compute(backend_ctx *be, const bp_graph_desc *graph, bp_error *err);
bp_status graph_plan_create(backend_ctx *be, const bp_graph_desc *graph, graph_plan **out, bp_error *err);
void graph_plan_destroy(graph_plan *plan);
bp_status graph_plan_run(graph_plan *plan, bp_error *err);

// ---- template body ----------------------------------------------------------

template <typename F>
bp_status device_run_once(device_state *dev, F &&record, bp_error *err) {
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, nullptr, VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                              dev->queue_family};
  VkResult r = vkCreateCommandPool(dev->dev, &pci, nullptr, &pool);
  if (r != VK_SUCCESS) return device_fail(dev, r, "vkCreateCommandPool", err);
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, nullptr, pool,
                                 VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
  r = vkAllocateCommandBuffers(dev->dev, &ai, &cb);
  bp_status st = BP_OK;
  if (r != VK_SUCCESS) {
    st = device_fail(dev, r, "vkAllocateCommandBuffers", err);
  } else {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, nullptr,
                                VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, nullptr};
    vkBeginCommandBuffer(cb, &bi);
    cmd_begin_barrier(cb);
    record(cb);
    cmd_end_barrier(cb);
    r = vkEndCommandBuffer(cb);
    uint64_t value = 0;
    if (r != VK_SUCCESS) st = device_fail(dev, r, "vkEndCommandBuffer", err);
    if (st == BP_OK) st = device_submit(dev, cb, &value, err);
    if (st == BP_OK) st = device_wait(dev, value, err);
  }
  vkDestroyCommandPool(dev->dev, pool, nullptr);
  return st;
}

}  // namespace bp::vk

#endif  // BP_PLUGIN_VULKAN_VULKAN_HPP_
