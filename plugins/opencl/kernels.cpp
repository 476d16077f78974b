// kernels.cpp: kernel objects per backend (created once, reused for every
// node) and the argument/launch helper.
#include <CL/cl.h>

#include <cstring>

#include "backend.hpp"

namespace bp::opencl {

bp_status get_kernel(backend_ctx *be, const char *family, const std::string &options, const char *name, cl_kernel *out,
                     bp_error *err) {
  std::string key = std::string(family) + "|" + options + "|" + name;
  if (auto it = be->kernels.find(key); it != be->kernels.end()) {
    *out = it->second;
    return BP_OK;
  }
  cl_program prog = nullptr;
  bp_status s = get_program(be->dev, be->cache, family, options, &prog, err);
  if (s != BP_OK) return s;
  cl_int rc = CL_SUCCESS;
  cl_kernel k = clCreateKernel(prog, name, &rc);
  if (!k || rc != CL_SUCCESS)
    return bp_error_setf(err, BP_ERR_INTERNAL, "no kernel '%s' in %s.cl (%s): %s", name, family, options.c_str(),
                         cl_error_name(rc).c_str());
  be->kernels.emplace(std::move(key), k);
  *out = k;
  return BP_OK;
}

launch &launch::tensor(const bp_tensor *t) {
  const cl_buffer *b = buffer_of(t);
  if (!b) {
    if (rc_ == CL_SUCCESS) rc_ = CL_INVALID_MEM_OBJECT;
    return *this;
  }
  cl_ulong off = offset_of(t, b);
  cl_long4 ne, nb;
  for (int i = 0; i < 4; ++i) {
    ne.s[i] = t->ne[i];
    nb.s[i] = static_cast<cl_long>(t->nb[i]);
  }
  return mem(b->mem).arg(off).arg(ne).arg(nb);
}

launch &launch::epilogue(const bp_tensor *product, const bp_tensor *after) {
  if (!after) return *this;
  const bp_tensor *operand = epilogue_operand(product, after);
  const cl_buffer *bo = buffer_of(operand), *br = buffer_of(after);
  if (!bo || !br) {
    if (rc_ == CL_SUCCESS) rc_ = CL_INVALID_MEM_OBJECT;
    return *this;
  }
  return mem(bo->mem).arg(cl_ulong(offset_of(operand, bo))).mem(br->mem).arg(cl_ulong(offset_of(after, br)));
}

bp_status launch::run(cl_uint dims, const size_t *global, const size_t *local, const char *what, bp_error *err) {
  if (rc_ != CL_SUCCESS)
    return bp_error_setf(err, BP_ERR_INTERNAL, "setting argument %u of %s failed: %s", n_ - 1, what,
                         cl_error_name(rc_).c_str());
  size_t g[3], l[3];
  for (cl_uint i = 0; i < dims; ++i) {
    l[i] = local ? local[i] : 1;
    g[i] = (global[i] + l[i] - 1) / l[i] * l[i];
    if (g[i] == 0) return BP_OK;  // nothing to do
  }
  cl_event ev = nullptr;
  const uint64_t before = trace_before_enqueue(be_);
  cl_int rc =
      clEnqueueNDRangeKernel(be_->queue, k_, dims, nullptr, g, local ? l : nullptr, 0, nullptr, trace_event(be_, &ev));
  if (rc != CL_SUCCESS) return device_fail(be_->dev, rc, cl_site::setup, std::string("launching ") + what, err);
  trace_enqueued(be_, ev, before);
  return BP_OK;
}

}  // namespace bp::opencl
