// abi/call.cpp: bounded copies of what plugin code reports (see call.hpp).
#include "abi/call.hpp"

namespace bp::abi {

std::string error_text(const bp_error &err) {
  // The plugin may have left the buffer unterminated: never read past it.
  return std::string(err.message, strnlen(err.message, sizeof err.message));
}

std::string exception_text(const char *what) {
  return what ? std::string(what, strnlen(what, BP_ERROR_MESSAGE_MAX)) : std::string();
}

}  // namespace bp::abi
