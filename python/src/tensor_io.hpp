// tensor_io.hpp: NumPy data in and out of tensors, shared by tensor.cpp,
// ops.cpp, quant.cpp and gguf.cpp.
#pragma once

#include "common.hpp"

namespace bppy {

// The bytes a tensor of |type| holds for |data|, as a C-contiguous array:
// f32/f16/i32 values converted to the type (a copy unless |copy| is false,
// which then needs the exact dtype and layout); for a quantized type,
// float data quantized with bp_quantize_rows (rows along the last axis) or uint8
// raw blocks taken as they are. |type| BP_TYPE_COUNT: from the dtype.
// |shape| (NumPy order, may be NULL) reshapes; *out_shape gets the element
// shape in NumPy order. |transient|: the caller copies the bytes out before
// it returns, so with |copy| data already of the type's dtype and C layout is
// returned as it is (no host copy before a device copy).
py::array host_bytes(const py::handle &data, bp_type &type, const std::vector<int64_t> *shape,
                     std::vector<int64_t> *out_shape, bool copy, bool transient = false);
// Quantizes float32 rows (C-contiguous, last axis) into raw blocks.
py::array quantize_rows(const py::array &f32, bp_type type);
// A new leaf of |type| and NumPy shape in |c|.
Tensor new_leaf(const CtxP &c, bp_type type, const std::vector<int64_t> &np_shape);
py::class_<Tensor> &tensor_class();

}  // namespace bppy
