// model_handles.hpp: the Python objects of a model and its contexts
// (model.cpp), shared with the files that bind more of a context's calls
// (sequences.cpp).
//
// A Model holds its bp_model in one holder; every ModelContext holds that
// holder too, so the model is freed after the last of them whatever order
// Python drops them in (bp_model_free refuses while a context lives). A
// context is used by one thread at a time: its mutex is taken with the GIL
// released, so a thread waiting for it never holds the GIL another thread
// needs.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "backplane/model.h"
#include "common.hpp"

namespace bppy {

struct ModelH {
  bp_model *m = nullptr;
  ~ModelH() { bp_model_free(m); }
};
using ModelP = std::shared_ptr<ModelH>;

struct Model {
  ModelP h;
  bp_model *get() const {
    if (!h) fail(BP_ERR_FAILED_PRECONDITION, "this Model was closed");
    return h->m;
  }
};

struct MCtxH {
  ModelP model;  // freed after this context
  bp_model_context *c = nullptr;
  std::mutex mu;
  ~MCtxH() { bp_model_context_free(c); }
};
using MCtxP = std::shared_ptr<MCtxH>;

struct ModelContext {
  MCtxP h;
  const MCtxP &get() const {
    if (!h) fail(BP_ERR_FAILED_PRECONDITION, "this ModelContext was closed");
    return h;
  }
};

// Takes |mu| with the GIL released (then takes the GIL back).
inline std::unique_lock<std::mutex> lock_nogil(std::mutex &mu) {
  std::unique_lock<std::mutex> lk(mu, std::defer_lock);
  py::gil_scoped_release release;
  lk.lock();
  return lk;
}

inline bp_model_info raw_info(bp_model *m) {
  bp_model_info in{};
  in.struct_size = sizeof in;
  check(bp_model_describe(m, &in));
  return in;
}

// Token ids from an int, a sequence of ints or a 1-D integer NumPy array.
std::vector<bp_token> token_ids(const py::handle &h);

// The batch eval and the sequence calls of ModelContext (sequences.cpp).
void def_sequences(py::class_<ModelContext> &cls);

}  // namespace bppy
