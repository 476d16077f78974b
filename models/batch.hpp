// batch.hpp: a batch of tokens from one or more sequences (bp_model_batch),
// checked and planned before anything runs: each token's sequence and
// position, whether its logits are kept, the graphs it is split into and the
// cache cell each token is written to. A batch that cannot run is refused
// whole, so a refused eval leaves the context as it was.
#pragma once

#include <cstdint>
#include <vector>

#include "context.hpp"

namespace bp::model {

// Which tokens' logits rows an eval keeps when the batch lists none.
enum class keep_logits {
  listed,        // bp_model_batch.logits (NULL: as last_of_each)
  last_of_each,  // the last token of each sequence in the batch
  all,           // every token (bp_model_context_eval's all_logits)
};

struct batch_plan {
  const int32_t *tokens = nullptr;
  size_t n = 0;
  std::vector<uint32_t> seq;
  std::vector<int32_t> pos;
  std::vector<uint8_t> keep;    // 1: its logits row is kept
  std::vector<uint32_t> sizes;  // tokens per graph, in batch order (each <= n_batch)
  std::vector<uint32_t> cell;   // where each token's keys and values go
};

// Fills |out| from |b| (struct_size already checked), or reports, naming
// |fn|: INVALID_ARGUMENT for no tokens, a token outside the vocabulary, a
// sequence id >= n_seq, a position that does not continue its sequence (a
// gap or an overlap) or past INT32_MAX; RESOURCE_EXHAUSTED when the free
// cells cannot take the batch.
bp_status plan_batch(const bp_model_context *c, const char *fn, const bp_model_batch &b, keep_logits keep,
                     batch_plan *out);

}  // namespace bp::model
