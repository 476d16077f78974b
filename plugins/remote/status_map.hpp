// status_map.hpp: what a gRPC status from bp-serve means in Backplane terms,
// and the message that names the cause and the fix. Header-only and free of
// any network call, so the tests check the table without a server
// (tests/plugins/remote/status_map_test.cpp).
#ifndef BP_PLUGIN_REMOTE_STATUS_MAP_HPP_
#define BP_PLUGIN_REMOTE_STATUS_MAP_HPP_

#include <grpcpp/support/status.h>

#include <string>

#include "backplane/plugin.h"

namespace bp::remote_plugin {

struct mapped_status {
  bp_status code;
  std::string message;
  bool session_lost;  // the server is gone or unreachable: the session is over
};

// |what| names the call ("set_tensor of 'x'"), |server| the address.
inline mapped_status map_status(grpc::StatusCode code, const std::string &server_message, const std::string &what,
                                const std::string &server) {
  const std::string said = server_message.empty() ? std::string() : ": " + server_message;
  switch (code) {
    case grpc::StatusCode::OK:
      return {BP_OK, "", false};
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return {BP_ERR_FAILED_PRECONDITION,
              "server " + server + " refused " + what +
                  ": token rejected: check BP_REMOTE_TOKEN_FILE (the file must "
                  "hold the token bp-serve was started with)" +
                  said,
              false};
    case grpc::StatusCode::UNAVAILABLE:
      return {BP_ERR_DEVICE_LOST,
              "server " + server + " is unreachable during " + what + said +
                  "; the session is lost: free its buffers and backends and create new ones once bp-serve runs again",
              true};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {BP_ERR_DEVICE_LOST,
              "server " + server + " did not answer " + what + " within the deadline (timeout_ms)" + said +
                  "; the session is lost: free its buffers and backends and create new ones",
              true};
    case grpc::StatusCode::CANCELLED:
      return {BP_ERR_DEVICE_LOST, "the session with " + server + " was lost during " + what + said, true};
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return {BP_ERR_INVALID_ARGUMENT, "server " + server + " refused " + what + said, false};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return {BP_ERR_OUT_OF_DEVICE_MEMORY,
              "server " + server + " is out of memory or over this session's quota for " + what + said, false};
    case grpc::StatusCode::FAILED_PRECONDITION:
      return {BP_ERR_INCOMPATIBLE, "server " + server + " refused " + what + said, false};
    case grpc::StatusCode::NOT_FOUND:
      return {BP_ERR_NOT_FOUND,
              "server " + server + " does not know the handle of " + what + said +
                  " (freed, or from a session that ended); create the object again",
              false};
    case grpc::StatusCode::UNIMPLEMENTED:
      return {BP_ERR_UNIMPLEMENTED, "server " + server + " does not implement " + what + said, false};
    default:
      return {BP_ERR_INTERNAL, "server " + server + " failed " + what + said, false};
  }
}

}  // namespace bp::remote_plugin

#endif  // BP_PLUGIN_REMOTE_STATUS_MAP_HPP_
