// The gRPC status -> bp_status table of the remote plugin, checked without a
// server: every code a server sends maps to the status docs/plugins/remote.md
// promises, with a message naming the cause and the fix.
#include <gtest/gtest.h>

#include "status_map.hpp"

namespace {

using bp::remote_plugin::map_status;
using grpc::StatusCode;

TEST(RemoteStatusMap, TokenRefusalNamesTheTokenFile) {
  for (StatusCode c : {StatusCode::UNAUTHENTICATED, StatusCode::PERMISSION_DENIED}) {
    auto m = map_status(c, "bad token", "Hello", "host:1");
    EXPECT_EQ(m.code, BP_ERR_FAILED_PRECONDITION);
    EXPECT_NE(m.message.find("token rejected: check BP_REMOTE_TOKEN_FILE"), std::string::npos) << m.message;
    EXPECT_NE(m.message.find("host:1"), std::string::npos) << m.message;
    EXPECT_FALSE(m.session_lost);
  }
}

TEST(RemoteStatusMap, AnUnreachableOrSilentServerIsDeviceLost) {
  for (StatusCode c : {StatusCode::UNAVAILABLE, StatusCode::DEADLINE_EXCEEDED, StatusCode::CANCELLED}) {
    auto m = map_status(c, "", "GraphCompute", "h:2");
    EXPECT_EQ(m.code, BP_ERR_DEVICE_LOST);
    EXPECT_TRUE(m.session_lost);
    EXPECT_NE(m.message.find("GraphCompute"), std::string::npos) << m.message;
  }
}

TEST(RemoteStatusMap, ServerRefusalsKeepTheServersMessage) {
  auto m = map_status(StatusCode::INVALID_ARGUMENT, "node 3 (ADD): shapes differ", "GraphRegister", "h:3");
  EXPECT_EQ(m.code, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(m.message.find("node 3 (ADD): shapes differ"), std::string::npos) << m.message;
  EXPECT_FALSE(m.session_lost);
  m = map_status(StatusCode::RESOURCE_EXHAUSTED, "quota 1 GiB", "BufferAlloc", "h:3");
  EXPECT_EQ(m.code, BP_ERR_OUT_OF_DEVICE_MEMORY);
  EXPECT_NE(m.message.find("quota 1 GiB"), std::string::npos);
  m = map_status(StatusCode::FAILED_PRECONDITION, "client protocol 2, server 1", "Hello", "h:3");
  EXPECT_EQ(m.code, BP_ERR_INCOMPATIBLE);
  EXPECT_NE(m.message.find("client protocol 2, server 1"), std::string::npos);
}

TEST(RemoteStatusMap, AStaleHandleIsAnErrorNotALoss) {
  auto m = map_status(StatusCode::NOT_FOUND, "no buffer 7 in session 2", "SetTensor", "h:4");
  EXPECT_EQ(m.code, BP_ERR_NOT_FOUND);
  EXPECT_FALSE(m.session_lost);
  EXPECT_NE(m.message.find("create the object again"), std::string::npos) << m.message;
}

TEST(RemoteStatusMap, KernelFailuresAreInternal) {
  EXPECT_EQ(map_status(StatusCode::INTERNAL, "kernel failed", "GraphCompute", "h").code, BP_ERR_INTERNAL);
  EXPECT_EQ(map_status(StatusCode::UNKNOWN, "", "GraphCompute", "h").code, BP_ERR_INTERNAL);
  EXPECT_EQ(map_status(StatusCode::UNIMPLEMENTED, "", "X", "h").code, BP_ERR_UNIMPLEMENTED);
  EXPECT_EQ(map_status(StatusCode::OK, "", "X", "h").code, BP_OK);
}

}  // namespace
