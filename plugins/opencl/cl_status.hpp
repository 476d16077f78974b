// cl_status.hpp: what an OpenCL error code means in Backplane terms, and its
// name for messages. Header-only and free of any OpenCL call, so the tests
// check the mapping without a device (tests/plugins/opencl/status_test.cpp).
//
// OpenCL has no "device lost" code. A device that fell off the bus or a
// kernel that faulted shows up where the host waits for queued work:
// clFinish, clWaitForEvents and blocking transfers then return
// CL_OUT_OF_RESOURCES (NVIDIA, after an out-of-bounds access), or
// CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST (a command waited on ended
// abnormally), or CL_INVALID_COMMAND_QUEUE / CL_INVALID_CONTEXT (the driver
// dropped the queue or context the plugin still holds); and
// CL_DEVICE_NOT_AVAILABLE anywhere means the device went away after it was
// listed. Those are DEVICE_LOST (docs/errors.md). Where nothing is waited for
// (creating objects, enqueueing), CL_OUT_OF_RESOURCES only means the driver
// could not find room for the call: OUT_OF_DEVICE_MEMORY, the device stays
// usable.
#ifndef BP_PLUGIN_OPENCL_CL_STATUS_HPP_
#define BP_PLUGIN_OPENCL_CL_STATUS_HPP_

#include <CL/cl.h>

#include <string>

#include "backplane/plugin.h"

namespace bp::opencl {

// Where an OpenCL call failed: |setup| creates or enqueues, |wait| waits for
// work already queued (clFinish, clWaitForEvents, a blocking transfer).
enum class cl_site { setup, wait };

constexpr cl_int kPlatformNotFoundKhr = -1001;  // cl_khr_icd

inline bp_status status_of(cl_int code, cl_site site = cl_site::setup) {
  switch (code) {
    case CL_SUCCESS:
      return BP_OK;
    case CL_DEVICE_NOT_AVAILABLE:
      return BP_ERR_DEVICE_LOST;
    case CL_OUT_OF_RESOURCES:
      return site == cl_site::wait ? BP_ERR_DEVICE_LOST : BP_ERR_OUT_OF_DEVICE_MEMORY;
    case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
    case CL_INVALID_COMMAND_QUEUE:
    case CL_INVALID_CONTEXT:
      return site == cl_site::wait ? BP_ERR_DEVICE_LOST : BP_ERR_INTERNAL;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_INVALID_BUFFER_SIZE:
      return BP_ERR_OUT_OF_DEVICE_MEMORY;
    case CL_OUT_OF_HOST_MEMORY:
      return BP_ERR_OUT_OF_HOST_MEMORY;
    case kPlatformNotFoundKhr:
      return BP_ERR_UNAVAILABLE;
    default:
      return BP_ERR_INTERNAL;
  }
}

// "CL_OUT_OF_RESOURCES (-5)".
inline std::string cl_error_name(cl_int code) {
  const char *name = "CL error";
  switch (code) {
#define BP_CL_NAME(c) \
  case c:             \
    name = #c;        \
    break;
    BP_CL_NAME(CL_SUCCESS)
    BP_CL_NAME(CL_DEVICE_NOT_FOUND)
    BP_CL_NAME(CL_DEVICE_NOT_AVAILABLE)
    BP_CL_NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    BP_CL_NAME(CL_OUT_OF_RESOURCES)
    BP_CL_NAME(CL_OUT_OF_HOST_MEMORY)
    BP_CL_NAME(CL_BUILD_PROGRAM_FAILURE)
    BP_CL_NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    BP_CL_NAME(CL_INVALID_VALUE)
    BP_CL_NAME(CL_INVALID_CONTEXT)
    BP_CL_NAME(CL_INVALID_COMMAND_QUEUE)
    BP_CL_NAME(CL_INVALID_BUFFER_SIZE)
    BP_CL_NAME(CL_INVALID_BINARY)
    BP_CL_NAME(CL_INVALID_KERNEL_ARGS)
    BP_CL_NAME(CL_INVALID_WORK_GROUP_SIZE)
    BP_CL_NAME(CL_INVALID_ARG_SIZE)
    BP_CL_NAME(CL_INVALID_ARG_VALUE)
    BP_CL_NAME(CL_INVALID_KERNEL_NAME)
#undef BP_CL_NAME
    case kPlatformNotFoundKhr:
      name = "CL_PLATFORM_NOT_FOUND_KHR";
      break;
    default:
      break;
  }
  return std::string(name) + " (" + std::to_string(code) + ")";
}

}  // namespace bp::opencl

#endif  // BP_PLUGIN_OPENCL_CL_STATUS_HPP_
