// file_checks.cpp: looks at a candidate file before dlopen runs any of it.
//
// Two checks, both on the resolved path and both before any plugin code runs:
//  - Permissions (docs/failures.md #20, PLG-20): a file every user may write is
//    refused, since anyone could have swapped its code; so is a file in a
//    folder every user may write, unless the folder is sticky (1777) and
//    the file is ours or root's (then a warning).
//  - Architecture (docs/failures.md #3): dlopen describes a foreign file badly.
//    For another machine glibc says "cannot open shared object file: No such
//    file or directory" (it skips the file as if it were absent), and for
//    another ELF class it names only the class. The file's ELF class, byte
//    order and e_machine are read here and compared with libbackplane.so's
//    own header, so the message names both sides.
// Anything that is not ELF at all is left to dlopen, whose text ("invalid ELF
// header", "file too short") is what users search for.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

struct elf_ident {
  bool known = false;
  unsigned char cls = 0;   // ELFCLASS32 / ELFCLASS64
  unsigned char data = 0;  // ELFDATA2LSB / ELFDATA2MSB
  uint16_t machine = 0;    // EM_*
};

// e_ident plus e_machine of an ELF header in |b| (at least 20 bytes).
elf_ident ident_of(const unsigned char *b) {
  elf_ident id;
  if (std::memcmp(b, ELFMAG, SELFMAG) != 0) return id;
  id.cls = b[EI_CLASS];
  id.data = b[EI_DATA];
  if ((id.cls != ELFCLASS32 && id.cls != ELFCLASS64) || (id.data != ELFDATA2LSB && id.data != ELFDATA2MSB))
    return id;
  // e_machine sits at byte 18 in both classes, in the file's byte order.
  id.machine = id.data == ELFDATA2MSB ? static_cast<uint16_t>(b[18] << 8 | b[19])
                                      : static_cast<uint16_t>(b[19] << 8 | b[18]);
  id.known = true;
  return id;
}

// libbackplane.so's own identification, read from its mapped ELF header (the
// first loadable segment starts with it). Not known if that fails; then no
// file is pre-filtered and dlopen alone decides.
elf_ident host_ident() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void *>(&bp_registry_load), &info) || !info.dli_fbase) return {};
  return ident_of(static_cast<const unsigned char *>(info.dli_fbase));
}

const char *machine_name(uint16_t m) {
  switch (m) {
    case EM_386: return "i386";
    case EM_X86_64: return "x86-64";
    case EM_ARM: return "arm";
    case EM_AARCH64: return "aarch64";
    case EM_PPC: return "ppc";
    case EM_PPC64: return "ppc64";
    case EM_S390: return "s390";
    case EM_RISCV: return "riscv";
    case EM_MIPS: return "mips";
    case EM_SPARCV9: return "sparc64";
#ifdef EM_LOONGARCH
    case EM_LOONGARCH: return "loongarch";
#endif
    default: return "an unknown machine";
  }
}

// "64-bit little-endian x86-64 (e_machine 62)"
std::string describe(const elf_ident &id) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s-bit %s-endian %s (e_machine %u)", id.cls == ELFCLASS64 ? "64" : "32",
                id.data == ELFDATA2MSB ? "big" : "little", machine_name(id.machine), id.machine);
  return buf;
}

}  // namespace

bp_status check_plugin_file(const std::string &real, const struct stat &st, std::string &message) {
  if (st.st_mode & S_IWOTH) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    message = "refused " + real + ": the file is writable by every user (mode " + mode +
              "), so anyone could have replaced its code; run 'chmod o-w' on it (PLG-20)";
    return BP_ERR_FAILED_PRECONDITION;
  }

  // The folder matters as much as the file (PLG-20): in a folder every user
  // may write, anyone can replace the file by another (rename over it), so
  // nothing in it is trusted. A sticky folder (1777, like /tmp) only lets
  // owners remove or rename their files: a file of ours or root's there is
  // safe from others and loads with a warning; anyone else's is refused.
  const std::string folder = real.substr(0, real.rfind('/'));
  struct stat dir {};
  if (!folder.empty() && stat(folder.c_str(), &dir) == 0 && (dir.st_mode & S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(dir.st_mode & 07777));
    if (!(dir.st_mode & S_ISVTX)) {
      message = "refused " + real + ": its folder " + folder + " is writable by every user (mode " + mode +
                "), so anyone could have replaced the file; run 'chmod o-w' on the folder or move the plugin (PLG-20)";
      return BP_ERR_FAILED_PRECONDITION;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
      message = "refused " + real + ": its folder " + folder + " is writable by every user (mode " + mode +
                ") and the file belongs to another user (uid " + std::to_string(st.st_uid) +
                "), who may have put it there; move the plugin to a folder only its owner can write (PLG-20)";
      return BP_ERR_FAILED_PRECONDITION;
    }
    bp::core::logf(BP_LOG_WARN, "registry",
                   "%s is in %s, a folder every user may write (mode %s, sticky): others cannot replace this file, "
                   "but may add plugins there; prefer a folder only its owner can write (PLG-20)",
                   real.c_str(), folder.c_str(), mode);
  }

  unsigned char head[64];
  int fd = open(real.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return BP_OK;  // dlopen will report why it cannot be read
  ssize_t got;
  do {
    got = read(fd, head, sizeof head);
  } while (got < 0 && errno == EINTR);
  close(fd);
  if (got < 20) return BP_OK;  // not even an ELF identification: dlopen's "file too short"
  const elf_ident file = ident_of(head);
  if (!file.known) return BP_OK;  // not ELF: dlopen's "invalid ELF header"
  const elf_ident host = host_ident();
  if (!host.known || (file.cls == host.cls && file.data == host.data && file.machine == host.machine)) return BP_OK;
  message = "cannot load " + real + ": ";
  if (file.cls != host.cls) message += file.cls == ELFCLASS32 ? "wrong ELF class: ELFCLASS32; " : "wrong ELF class: ELFCLASS64; ";
  message += "the file is a " + describe(file) + " object, this process is " + describe(host) +
             "; install the plugin built for this machine (PLG-1)";
  return BP_ERR_INCOMPATIBLE;
}

}  // namespace bp::registry
