// status_test.cpp: the opencl plugin's mapping of OpenCL error codes to
// Backplane statuses (plugins/opencl/cl_status.hpp), checked without a
// device. OpenCL has no device-lost code: the errors that mean the device or
// its context is gone where the host waits for queued work are DEVICE_LOST
// (docs/errors.md); the same codes where nothing was waited for are not.
#define CL_TARGET_OPENCL_VERSION 120
#include "plugins/opencl/cl_status.hpp"

#include <gtest/gtest.h>

using bp::opencl::cl_site;
using bp::opencl::status_of;

namespace {

TEST(OpenclStatus, WaitingOnAGoneDeviceIsDeviceLost) {
  for (cl_int rc : {CL_OUT_OF_RESOURCES, CL_DEVICE_NOT_AVAILABLE, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
                    CL_INVALID_COMMAND_QUEUE, CL_INVALID_CONTEXT}) {
    SCOPED_TRACE(bp::opencl::cl_error_name(rc));
    EXPECT_EQ(status_of(rc, cl_site::wait), BP_ERR_DEVICE_LOST);
  }
}

TEST(OpenclStatus, SetupFailuresLeaveTheDeviceUsable) {
  EXPECT_EQ(status_of(CL_OUT_OF_RESOURCES, cl_site::setup), BP_ERR_OUT_OF_DEVICE_MEMORY);
  EXPECT_EQ(status_of(CL_INVALID_COMMAND_QUEUE, cl_site::setup), BP_ERR_INTERNAL);
  EXPECT_EQ(status_of(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST), BP_ERR_INTERNAL);
  // A device that went away after it was listed is lost wherever it shows.
  EXPECT_EQ(status_of(CL_DEVICE_NOT_AVAILABLE, cl_site::setup), BP_ERR_DEVICE_LOST);
}

TEST(OpenclStatus, MemoryAndOtherErrors) {
  for (cl_site site : {cl_site::setup, cl_site::wait}) {
    EXPECT_EQ(status_of(CL_SUCCESS, site), BP_OK);
    EXPECT_EQ(status_of(CL_MEM_OBJECT_ALLOCATION_FAILURE, site), BP_ERR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(status_of(CL_INVALID_BUFFER_SIZE, site), BP_ERR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(status_of(CL_OUT_OF_HOST_MEMORY, site), BP_ERR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(status_of(CL_INVALID_KERNEL_ARGS, site), BP_ERR_INTERNAL);
    EXPECT_EQ(status_of(CL_BUILD_PROGRAM_FAILURE, site), BP_ERR_INTERNAL);
  }
}

TEST(OpenclStatus, NamesCarryTheCode) {
  EXPECT_EQ(bp::opencl::cl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES (-5)");
  EXPECT_EQ(bp::opencl::cl_error_name(-9999), "CL error (-9999)");
}

}  // namespace
