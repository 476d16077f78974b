// deprecated.cpp: the model names renamed before 0.3, each forwarding to its
// new name (model.h's deprecated section); removed in 0.3.
#define BP_DEPRECATED(use)
#include "backplane/model.h"

extern "C" {

bp_status bp_model_get_info(const bp_model *model, bp_model_info *out) { return bp_model_describe(model, out); }
bp_status bp_model_get_backend_info(const bp_model *model, size_t i, bp_model_backend_info *out) {
  return bp_model_backend_describe(model, i, out);
}

}  // extern "C"
