// blas.hpp: shared declarations of the OpenBLAS plugin (libbp-blas.so).
//
// What it is: one device "BLAS" (id "blas-0") that runs MUL_MAT through
// cblas_sgemm on host memory, a host buffer type, and the backend tables.
// What it is not: a general CPU backend; every other op stays UNIMPLEMENTED
// so the scheduler sends it to the next backend (docs/plugins/blas.md).
// Built from plugin.h / backplane.h / plugin_guard.hpp only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cblas.h>

#include "backplane/plugin.h"
#include "backplane/plugin_guard.hpp"
#include "host_buffer.hpp"
#include "plugin_common.hpp"
#include "threadpool.hpp"

namespace bp::blas {

// Defaults of the two backend parameters (see kParams in plugin.cpp).
inline constexpr int64_t kDefaultMinMnk = 32 * 32 * 32;

// Plugin-wide state, created by init, freed by shutdown.
//
// Threads: OpenBLAS's own pool is process-global and its idle workers spin
// for ~0.1 s after every call, which starves the cpu backend that runs the
// nodes in between ("blas;cpu" ran 10x slower than cpu alone on 2 cores).
// So init sets OpenBLAS to one thread, and each backend splits a product over
// a pool of its own that sleeps when idle (docs/plugins/blas.md, "Design").
//
// OpenBLAS is dlopen'ed by enumerate, not linked: its library constructor
// costs 10-40 ms (thread and buffer setup), which every process that loads
// plugins would pay even when it only wants "cpu" (PLG-21). The handle is
// never closed (RTLD_NODELETE): OpenBLAS keeps threads of its own.
// (decltype of cblas.h's declarations: nothing of OpenBLAS is linked.)
struct openblas_api {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_corename) get_corename = nullptr;
  decltype(&openblas_get_config) get_config = nullptr;
};

struct plugin_state {
  const bp_host_api *host = nullptr;  // from init_with_host, valid until shutdown
  std::string description;            // device description (owns the text)
  int default_threads = 1;            // threads=0: one per core this process may use
  openblas_api blas;                  // filled by enumerate
  plugins::discovery found;           // runs load_openblas once (plugin.cpp)
};

// The one plugin instance of this process (set by init). Plugins may keep a
// pointer to their own state; it is not thread-local.
plugin_state *state();
// The plugin table (plugin.cpp).
const bp_plugin_i *plugin_table();

// Backend instance.
struct backend_ctx {
  backend_ctx(int threads, int64_t min_mnk_) : min_mnk(min_mnk_), pool(threads) {}
  int64_t min_mnk;
  plugins::thread_pool pool;   // sized by the threads parameter
  std::vector<float> scratch;  // f16 a widened to f32; one backend = one caller thread
  const bp_host_api *host = nullptr;  // the plugin's, for trace spans
  // While a trace records, the node whose parts report worker spans; else NULL.
  const bp_tensor *traced = nullptr;
};

// The buffer type: host memory (plugins/common/host_buffer.hpp). One name
// object: it is the ref's ctx, which the host compares (see cpu.hpp).
inline bp_buffer_type_ref host_buffer_type() {
  static const char name[] = "BLAS_Host";
  return plugins::host_buffer_type(name);
}

// Backend table (backend.cpp).
extern const bp_backend_i kBackendIface;

// Matrix product (matmul.cpp).
// True when |node| is a MUL_MAT this plugin can compute as laid out
// (types, dense rows, leading dimensions that BLAS accepts).
bool mul_mat_layout_ok(const bp_tensor *node);
// True when the per-batch product M*N*K reaches |min_mnk|.
bool mul_mat_big_enough(const bp_tensor *node, int64_t min_mnk);
// Computes |node| (layout already checked). Throws bp::plugin_error on failure.
void mul_mat_compute(const bp_tensor *node, backend_ctx &ctx);

}  // namespace bp::blas
