// image.cpp: where a loaded plugin's own file is mapped.
//
// The descriptor is read before any plugin function runs (PLG-2), so its
// pointers are the first plugin-controlled data the host dereferences. A
// descriptor whose name points at 0x10 (or into another object) must be
// refused, not followed: every pointer is checked against the readable
// PT_LOAD segments of the object behind the dlopen handle, and strings are
// read no further than the end of their segment. The entry symbol must lie
// in an executable segment: calling one that names data would crash.
#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

struct search {
  const link_map *lm;
  image_ranges *out;
};

int on_object(dl_phdr_info *info, size_t, void *data) {
  auto *s = static_cast<search *>(data);
  // The same object as the handle's link map: same load bias and name.
  if (info->dlpi_addr != s->lm->l_addr) return 0;
  const char *a = info->dlpi_name ? info->dlpi_name : "", *b = s->lm->l_name ? s->lm->l_name : "";
  if (std::strcmp(a, b) != 0) return 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_R)) continue;
    uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    s->out->ranges.push_back({begin, begin + ph.p_memsz, (ph.p_flags & PF_X) != 0});
  }
  return 1;
}

}  // namespace

size_t image_ranges::room(const void *p) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const range &r : ranges)
    if (a >= r.begin && a < r.end) return r.end - a;
  return 0;
}

bool image_ranges::executable(const void *p) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const range &r : ranges)
    if (a >= r.begin && a < r.end && r.executable) return true;
  return false;
}

image_ranges image_of(void *h) {
  image_ranges r;
  link_map *lm = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return r;
  search s{lm, &r};
  dl_iterate_phdr(on_object, &s);
  return r;
}

}  // namespace bp::registry
