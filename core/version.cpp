// version.cpp: the library's own version, for callers that need the one
// loaded at run time rather than the one in the header they compiled with.
#include "backplane/version.h"  // generated from project() VERSION

#include "core/errors.hpp"

extern "C" {

BP_API uint32_t bp_version(void) { return BP_VERSION; }

BP_API const char *bp_version_string(void) { return BP_VERSION_STRING; }

}  // extern "C"
