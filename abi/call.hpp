// abi/call.hpp: calling plugin code safely and reading what it reports.
//
// call_slot runs one slot call and keeps a C++ exception from crossing back
// into the host (PLG-10); error_text copies the message of a bp_error the
// plugin filled, never reading past its fixed-size buffer.
//
// Leaf module: includes backplane/plugin.h and the standard library only.
#pragma once

#include <cstring>
#include <exception>
#include <string>

#include "backplane/plugin.h"

namespace bp::abi {

// The message of |err| as the plugin left it: at most BP_ERROR_MESSAGE_MAX
// bytes, whether or not the plugin terminated it.
std::string error_text(const bp_error &err);

// The text of an exception's what() for a message: at most
// BP_ERROR_MESSAGE_MAX bytes, "" for NULL.
std::string exception_text(const char *what);

// Runs plugin code |f| (one slot call). PLG-10 forbids exceptions across the
// ABI, but one plugin breaking it must not take the host down: the exception
// is caught here, at the slot call, its text copied, and the exception object
// is destroyed before this returns. Only then may the caller dlclose the
// plugin (what() and the object's destructor may be code of that plugin).
// Returns false then, with |message| = "<who>: <slot> threw ... (PLG-10)".
template <typename F>
bool call_slot(const std::string &who, const char *slot, std::string &message, F &&f) {
  std::string text;
  try {
    f();
    return true;
  } catch (const std::exception &e) {
    text = "an exception escaped " + std::string(slot) + ": " + exception_text(e.what());
  } catch (...) {
    text = "an exception of unknown type escaped " + std::string(slot);
  }
  message = who + ": " + text + " (PLG-10)";
  return false;
}

}  // namespace bp::abi
