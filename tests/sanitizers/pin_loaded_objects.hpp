// pin_loaded_objects.hpp: keeps every shared object loaded so far mapped to
// the end of the process. The Vulkan loader and the OpenCL ICD loader unload
// their driver when a plugin destroys its instance or context; the driver's
// process-lifetime caches would then be reported by LeakSanitizer as leaks
// from an unknown module, which no suppression can name. Pinned, LSan names
// the driver and tests/sanitizers/lsan.supp applies. Call it once the drivers
// are loaded (after a plugin enumerated its devices).
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <string>
#include <vector>

namespace bp_test {

inline void pin_loaded_objects() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *out) {
        if (info->dlpi_name && info->dlpi_name[0])
          static_cast<std::vector<std::string> *>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
  for (const std::string &name : names) dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace bp_test
