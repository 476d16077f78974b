// model.hpp: what a loaded model holds (the bp_model handle of model.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backplane/model.h"
#include "hparams.hpp"
#include "tokenizer/tokenizer.hpp"
#include "weights.hpp"

struct bp_model {
  uint32_t magic = 0;  // k_model_magic while alive
  std::string path;
  bp::model::hparams hp;
  std::unique_ptr<bp::model::tokenizer> tok;
  std::string devices;                 // the device list as given ("vulkan;cpu")
  std::vector<bp_backend *> backends;  // owned, in priority order: loading and names only
  std::vector<std::string> backend_names;
  std::vector<bp::model::backend_share> shares;  // one per backend
  bp::model::model_weights w;
  uint64_t n_params = 0;
  std::atomic<int> n_contexts{0};
};

namespace bp::model {

constexpr uint32_t k_model_magic = 0x4d4f444cu;    // "MODL"
constexpr uint32_t k_context_magic = 0x4354584du;  // "CTXM"

// INVALID_ARGUMENT (recorded) for NULL or a handle that is not a live model.
bp_status check_model(const bp_model *m, const char *fn);

}  // namespace bp::model
