// graph_cases.cpp: bp-bench's graph registration cases (core only, no
// backend): building a graph of n nodes by n calls of bp_graph_build, one per
// node in topological order, as a client that lists every node does.
//
//   graph/build_per_node/N   N = 1024 .. 65536 (x2): a DAG where node i is
//                            ADD(node i-1, node i/2), so every node has two
//                            sources and most reach far back; one call per
//                            node. Google Benchmark fits the times to O(N)
//                            (graph/build_per_node_BigO and _RMS).
//
// The tensors are made once per size, outside the timed loop; each iteration
// times a fresh bp_graph_new, the N calls and bp_graph_free.
#include <cstdint>
#include <string>
#include <vector>

#include "bench.hpp"

namespace bp::bench {
namespace {

constexpr int64_t kMinNodes = 1024;
constexpr int64_t kMaxNodes = 65536;

void build_per_node(benchmark::State &st) {
  const int64_t n = st.range(0);
  bp_context *ctx = bp_context_new(0);
  if (!ctx) {
    st.SkipWithError((std::string("bp_context_new: ") + bp_last_error()).c_str());
    return;
  }
  std::vector<bp_tensor *> nodes;
  nodes.reserve(static_cast<size_t>(n));
  bp_tensor *leaf = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1);
  for (int64_t i = 0; i < n; ++i) {
    bp_tensor *prev = i ? nodes.back() : leaf;
    bp_tensor *far = i ? nodes[static_cast<size_t>(i / 2)] : leaf;
    nodes.push_back(bp_add(ctx, prev, far));
  }
  if (!nodes.back()) {
    st.SkipWithError((std::string("making the tensors: ") + bp_last_error()).c_str());
    bp_context_free(ctx);
    return;
  }
  for (auto _ : st) {
    bp_graph *g = bp_graph_new(ctx, static_cast<size_t>(n));
    bp_status s = g ? BP_OK : BP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; s == BP_OK && i < nodes.size(); ++i) s = bp_graph_build(g, nodes[i]);
    const bool right = s == BP_OK && bp_graph_node_count(g) == nodes.size() && bp_graph_leaf_count(g) == 1;
    bp_graph_free(g);
    if (!right) {
      st.SkipWithError(s != BP_OK ? bp_last_error() : "the graph has the wrong number of nodes or leafs");
      break;
    }
  }
  st.SetComplexityN(n);
  st.counters["nodes"] = static_cast<double>(n);
  bp_context_free(ctx);
}

}  // namespace

void register_graph_benches() {
  benchmark::RegisterBenchmark("graph/build_per_node", build_per_node)
      ->RangeMultiplier(2)
      ->Range(kMinNodes, kMaxNodes)
      ->Complexity(benchmark::oN)
      ->Unit(benchmark::kMillisecond);
}

}  // namespace bp::bench
