// objects.hpp: helpers shared by the files that wrap plugin objects
// (buffer_type.cpp, buffer.cpp, tensor_data.cpp, backend.cpp, event.cpp,
// tallocr.cpp), and the two the registry calls to wrap a device's objects
// (buffer_type_wrap, backend_create). Not installed.
//
// What it is: handle checks, the sticky device-lost rule, error annotation
// for plugin calls, and view initialisation. What it is not: the public API (backplane.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backplane/plugin.h"
#include "core/errors.hpp"
#include "core/handles.hpp"
#include "core/tensor_util.hpp"  // describe() for messages

namespace bp::core {

// Wraps a plugin buffer type for |dev| (reads name, alignment, max size,
// is_host once). Returns nullptr with the error set if the table is bad.
// [core/buffer_type.cpp]
std::unique_ptr<bp_buffer_type> buffer_type_wrap(bp_device *dev, bp_buffer_type_ref ref);

// Creates a backend on |dev| with validated, default-filled |params|.
// |name| is what bp_backend_name returns ("cpu:0"). [core/backend.cpp]
bp_status backend_create(bp_device *dev, const bp_param_value *params, uint32_t n_params, const std::string &name,
                         bp_backend **out);

// Plugin name of |dev| for messages ("cpu"), "?" when unknown.
std::string plugin_name(const bp_device *dev);
// Name used in messages for |dev|: its spec ("cpu:0"), else plugin:index.
std::string device_label(const bp_device *dev);

// DEVICE_LOST (without calling the plugin) once |dev| was lost; BP_OK otherwise.
bp_status check_not_lost(const bp_device *dev, const char *fn);

// Maps a failed plugin call: records "<plugin>: <what>: <plugin message>",
// marks |dev| lost on DEVICE_LOST, and returns the code.
bp_status plugin_failed(bp_device *dev, bp_status code, const bp_error &err, const std::string &what);

// Checks a buffer handle and returns its device (nullptr with the error set).
bp_device *buffer_device(const bp_buffer *buf, const char *fn);

// The device's wrapped buffer type for plugin |ref| (its default, its host
// type, or one met before), wrapping and keeping a new one otherwise.
// nullptr with the error set when the plugin's table is bad.
bp_buffer_type *device_buft_for(bp_device *dev, bp_buffer_type_ref ref);

// Gives the view |t| its memory from t->view_src (data, buffer, buffer_ctx)
// and runs the buffer's init_tensor. FAILED_PRECONDITION when the source has
// no memory yet.
bp_status view_init(bp_tensor *t, const char *fn);

// Points |t| at |data| inside |buf| and runs the plugin's init_tensor, if
// any; on failure |t| is left without memory. |what| names |t| in errors.
bp_status bind_tensor(bp_buffer *buf, bp_tensor *t, void *data, const std::string &what);

// INVALID_ARGUMENT unless [offset, offset + size) lies inside |t|'s span
// (bp_tensor_nbytes), overflow included.
bp_status check_range(const bp_tensor *t, size_t offset, size_t size, const char *fn);

// Checks that |t| (named |what| in messages) has memory in a live buffer.
// Returns the buffer or nullptr with the error set.
bp_buffer *tensor_buffer(const bp_tensor *t, const char *fn, const char *what);

inline size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace bp::core
