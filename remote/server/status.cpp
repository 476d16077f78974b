// status.cpp: bp_status -> grpc::Status (status.hpp).
#include "status.hpp"

namespace bp::remote::server {

grpc::Status from_bp(bp_status s, const std::string &message) {
  using grpc::StatusCode;
  StatusCode code = StatusCode::INTERNAL;
  switch (s) {
    case BP_OK:
      return grpc::Status::OK;
    case BP_ERR_INVALID_ARGUMENT:
      code = StatusCode::INVALID_ARGUMENT;
      break;
    case BP_ERR_NOT_FOUND:
      code = StatusCode::NOT_FOUND;
      break;
    case BP_ERR_UNAVAILABLE:
    case BP_ERR_DEVICE_LOST:
      code = StatusCode::UNAVAILABLE;
      break;
    case BP_ERR_INCOMPATIBLE:
    case BP_ERR_FAILED_PRECONDITION:
      code = StatusCode::FAILED_PRECONDITION;
      break;
    case BP_ERR_UNIMPLEMENTED:
      code = StatusCode::UNIMPLEMENTED;
      break;
    case BP_ERR_OUT_OF_HOST_MEMORY:
    case BP_ERR_OUT_OF_DEVICE_MEMORY:
    case BP_ERR_RESOURCE_EXHAUSTED:
      code = StatusCode::RESOURCE_EXHAUSTED;
      break;
    case BP_ERR_ALREADY_EXISTS:
      code = StatusCode::ALREADY_EXISTS;
      break;
    default:
      code = StatusCode::INTERNAL;
      break;
  }
  return {code, std::string(bp_status_name(s)) + ": " + message};
}

grpc::Status from_last_error(const std::string &context) {
  bp_status s = bp_last_status();
  if (s == BP_OK) s = BP_ERR_INTERNAL;  // a failure without a recorded cause is a bug of ours
  return from_bp(s, context + bp_last_error());
}

}  // namespace bp::remote::server
