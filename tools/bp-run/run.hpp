// run.hpp: what bp-run does (run the model through the scheduler on a device
// list, and again on cpu alone through the graph allocator) and what it
// reports (plan, memory, timings, the numeric check).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model.hpp"

namespace bp::run {

struct options {
  model_config cfg;
  std::string device = "auto";
  std::vector<std::string> plugin_paths;  // extra folders to search for plugins
  std::vector<std::string> plugin_files;  // plugin files to load explicitly
  int runs = 10;                          // a few ms each; the median of 10 steadies a noisy machine
  std::string dot_path;                   // "" = no Graphviz file
  bool json = false;
  bool plans = true;  // scheduler runs splits through graph plans where backends have them
};

struct split_row {
  std::string backend;
  size_t first_node = 0, n_nodes = 0, n_inputs = 0;
  uint64_t bytes_copied = 0;
  size_t n_plans = 0;  // graph plans the scheduler replays for this split
};

struct backend_row {
  std::string name;                // "blas:0"
  int n_nodes = 0;                 // computing nodes (views excluded)
  std::map<std::string, int> ops;  // op name -> count
};

struct buffer_row {
  std::string role, backend, type;  // role: "weights" or "compute"
  uint64_t bytes = 0;
};

struct run_report {
  options opt;
  std::vector<std::string> notes;     // fallbacks taken ("auto failed: ...")
  std::vector<std::string> backends;  // names, priority order
  // Plan of the device-list run.
  std::vector<split_row> splits;
  size_t n_copies = 0;
  uint64_t bytes_copied = 0;
  std::vector<backend_row> per_backend;
  // Memory.
  std::vector<buffer_row> buffers;
  uint64_t gallocr_peak = 0, largest_live_set = 0;  // cpu-only graph, in-place reuse allowed
  uint64_t largest_live_set_no_inplace = 0;
  // Timings in milliseconds, one per run.
  std::vector<double> run_ms, reference_ms;
  // Check against cpu alone.
  double nmse = 0;
  bool pass = false;
  // The weights: their bytes, and with quantized --weights the f32 model's
  // bytes and the NMSE of cpu's logits against the f32 model's (what the
  // quantization costs; informative, not part of the check).
  uint64_t weight_bytes = 0, weight_bytes_f32 = 0;
  double nmse_vs_f32 = 0;
  std::string error;  // set when a step failed (then the rest may be empty)
  std::vector<float> logits;  // of the device-list run
};

inline constexpr double kNmseTolerance = 1e-6;

// Runs everything; fills |out|. Returns false when a step failed (out.error).
bool run_all(const options &opt, run_report &out);

// Bytes of the largest set of tensors that must be live at once while
// |graph| runs (each tensor aligned for |buft|). With |inplace|, a node whose
// src0 dies at it and that the op table lets run in place shares src0's
// memory (the bound for an allocator that reuses in place); without, every
// node needs memory of its own. Call before allocating.
uint64_t largest_live_set(const bp_graph *graph, bp_buffer_type *buft, bool inplace);

// Writes |graph| as Graphviz, nodes filled by the backend the scheduler gave
// them, leaves by the backend whose buffer holds them, and edges that cross
// into memory the consumer cannot use drawn as red "copy" edges.
bool write_dot(const std::string &path, const bp_graph *graph, const bp_sched *sched,
               const std::vector<bp_backend *> &backends, std::string &error);

nlohmann::json to_json(const run_report &r);
std::string to_text(const run_report &r);

}  // namespace bp::run
