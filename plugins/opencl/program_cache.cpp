// program_cache.cpp: programs are built at first use per device, kept in
// memory for the life of the plugin, and their binaries kept on disk so the
// next process does not compile.
//
// Disk cache: <dir>/opencl/<fnv64 of the key>.bin where the key names the
// device, vendor, driver and OpenCL versions, the family, the build options
// and a hash of the source text. A file is our header (magic, format version,
// key length, binary length, FNV-1a checksum of key + binary), the key text
// and the driver's binary. Anything that does not match exactly (truncated,
// corrupt, another key, a binary the driver refuses) is rebuilt from source
// and rewritten; files are written to a temporary name and renamed, so a
// reader never sees half a file. A folder we cannot write is a warning.
#include <CL/cl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "opencl.hpp"
#include "sources.hpp"

namespace bp::opencl {

const char *find_source(const char *name) {
  for (size_t i = 0; i < embedded_source_count; ++i)
    if (std::strcmp(embedded_sources[i].name, name) == 0) return embedded_sources[i].text;
  return nullptr;
}

namespace {

constexpr char kMagic[8] = {'B', 'P', 'C', 'L', 'P', 'R', 'G', '1'};
constexpr uint32_t kFormatVersion = 1;

struct file_header {
  char magic[8];
  uint32_t version;
  uint32_t key_size;
  uint64_t binary_size;
  uint64_t checksum;  // FNV-1a 64 of key text then binary
};

uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016" PRIx64, v);
  return s;
}

bool make_dirs(const std::string &path) {
  if (path.empty()) return false;
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) {
        struct stat st;
        if (stat(cur.c_str(), &st) != 0 && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
      }
    }
    if (i < path.size()) cur += path[i];
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool read_file(const std::string &path, std::vector<unsigned char> &out) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  std::fseek(f, 0, SEEK_END);
  long n = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  bool ok = n >= 0;
  if (ok) {
    out.resize(static_cast<size_t>(n));
    ok = n == 0 || std::fread(out.data(), 1, out.size(), f) == out.size();
  }
  std::fclose(f);
  return ok;
}

// The cached binary for |key| at |path|, empty when missing or not valid.
std::vector<unsigned char> load_entry(const std::string &path, const std::string &key, const bp_host_api *host) {
  std::vector<unsigned char> file;
  if (!read_file(path, file)) return {};
  file_header h;
  const char *why = nullptr;
  if (file.size() < sizeof h) {
    why = "truncated header";
  } else {
    std::memcpy(&h, file.data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kFormatVersion)
      why = "not a cache file of this version";
    else if (h.key_size != key.size() || h.binary_size == 0 ||
             file.size() != sizeof h + static_cast<uint64_t>(h.key_size) + h.binary_size)
      why = "wrong size";
    else if (std::memcmp(file.data() + sizeof h, key.data(), key.size()) != 0)
      why = "another key";
    else if (fnv1a(file.data() + sizeof h, file.size() - sizeof h) != h.checksum)
      why = "checksum mismatch";
  }
  if (why) {
    bp_host_logf(host, BP_LOG_WARN, "ignoring program cache entry %s (%s); rebuilding it", path.c_str(), why);
    return {};
  }
  return std::vector<unsigned char>(file.begin() + static_cast<long>(sizeof h + h.key_size), file.end());
}

bool store_entry(const std::string &dir, const std::string &path, const std::string &key,
                 const std::vector<unsigned char> &binary) {
  if (!make_dirs(dir)) return false;
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  file_header h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kFormatVersion;
  h.key_size = static_cast<uint32_t>(key.size());
  h.binary_size = binary.size();
  h.checksum = fnv1a(binary.data(), binary.size(), fnv1a(key.data(), key.size()));
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(&h, sizeof h, 1, f) == 1 && std::fwrite(key.data(), 1, key.size(), f) == key.size() &&
            std::fwrite(binary.data(), 1, binary.size(), f) == binary.size();
  ok = (std::fclose(f) == 0) && ok;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) std::remove(tmp.c_str());
  return ok;
}

std::string build_log(cl_program prog, cl_device_id dev) {
  size_t n = 0;
  clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string s(n, '\0');
  if (n) clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, s.data(), nullptr);
  s.resize(std::strlen(s.c_str()));
  return s;
}

std::vector<unsigned char> program_binary(cl_program prog) {
  size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS || size == 0)
    return {};
  std::vector<unsigned char> bin(size);
  unsigned char *ptr = bin.data();
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return {};
  return bin;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

cache_settings resolve_cache(bool enabled, const std::string &dir_param) {
  cache_settings c;
  c.enabled = enabled;
  if (!enabled) return c;
  if (!dir_param.empty()) {
    c.dir = dir_param;
  } else if (const char *e = std::getenv("BP_CACHE_DIR"); e && *e) {
    c.dir = e;
  } else if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    c.dir = std::string(x) + "/backplane";
  } else if (const char *home = std::getenv("HOME"); home && *home) {
    c.dir = std::string(home) + "/.cache/backplane";
  }
  if (c.dir.empty()) c.enabled = false;
  return c;
}

bp_status get_program(device_state *dev, const cache_settings &cache, const std::string &family,
                      const std::string &options, cl_program *out, bp_error *err) {
  std::lock_guard<std::mutex> lock(dev->mu);
  const std::string mem_key = family + "|" + options;
  if (auto it = dev->programs.find(mem_key); it != dev->programs.end()) {
    *out = it->second;
    return BP_OK;
  }
  const char *common = find_source("common");
  const char *body = find_source(family.c_str());
  if (!common || !body) return bp_error_setf(err, BP_ERR_INTERNAL, "no embedded source '%s.cl'", family.c_str());
  const std::string source = std::string(common) + "\n" + body;
  const std::string full_options = "-cl-std=CL1.2 " + options;
  const std::string key = "backplane-opencl-cache-v1\ndevice=" + dev->name + "\nvendor=" + dev->vendor +
                          "\nplatform=" + dev->platform_name + "\nversion=" + dev->version +
                          "\ndriver=" + dev->driver_version + "\nfamily=" + family + "\noptions=" + full_options +
                          "\nsource=" + hex64(fnv1a(source.data(), source.size())) + "\n";
  const std::string dir = cache.enabled ? cache.dir + "/opencl" : std::string();
  const std::string path = cache.enabled ? dir + "/" + hex64(fnv1a(key.data(), key.size())) + ".bin" : std::string();
  const bp_host_api *host = dev->plugin->host;
  const auto t0 = std::chrono::steady_clock::now();

  // 1. The disk cache.
  if (cache.enabled) {
    std::vector<unsigned char> bin = load_entry(path, key, host);
    if (!bin.empty()) {
      const unsigned char *ptr = bin.data();
      size_t size = bin.size();
      cl_int status = CL_SUCCESS, rc = CL_SUCCESS;
      cl_program prog = clCreateProgramWithBinary(dev->context, 1, &dev->device, &size, &ptr, &status, &rc);
      if (prog && rc == CL_SUCCESS && status == CL_SUCCESS)
        rc = clBuildProgram(prog, 1, &dev->device, full_options.c_str(), nullptr, nullptr);
      if (prog && rc == CL_SUCCESS && status == CL_SUCCESS) {
        bp_host_logf(host, BP_LOG_DEBUG, "program %s [%s] loaded from the cache in %.1f ms", family.c_str(),
                     options.c_str(), ms_since(t0));
        dev->programs.emplace(mem_key, prog);
        *out = prog;
        return BP_OK;
      }
      if (prog) clReleaseProgram(prog);
      bp_host_logf(host, BP_LOG_WARN, "the driver refused cached program %s (%s); rebuilding it", path.c_str(),
                   cl_error_name(rc != CL_SUCCESS ? rc : status).c_str());
    }
  }

  // 2. Source.
  const char *text = source.c_str();
  cl_int rc = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(dev->context, 1, &text, nullptr, &rc);
  if (!prog || rc != CL_SUCCESS)
    return bp_error_setf(err, status_of(rc), "cannot create program %s: %s", family.c_str(), cl_error_name(rc).c_str());
  rc = clBuildProgram(prog, 1, &dev->device, full_options.c_str(), nullptr, nullptr);
  if (rc != CL_SUCCESS) {
    const std::string blog = build_log(prog, dev->device);
    clReleaseProgram(prog);
    bp_host_logf(host, BP_LOG_ERROR, "building %s.cl [%s] failed:\n%s", family.c_str(), full_options.c_str(),
                 blog.c_str());
    return bp_error_setf(err, BP_ERR_INTERNAL, "building %s.cl [%s] for '%s' failed (%s): %s", family.c_str(),
                         full_options.c_str(), dev->name.c_str(), cl_error_name(rc).c_str(), blog.c_str());
  }
  bp_host_logf(host, BP_LOG_DEBUG, "program %s [%s] compiled from source in %.1f ms", family.c_str(), options.c_str(),
               ms_since(t0));
  if (cache.enabled) {
    std::vector<unsigned char> bin = program_binary(prog);
    if (!bin.empty() && !store_entry(dir, path, key, bin) && !dev->cache_warned) {
      dev->cache_warned = true;  // once per device: every program would say the same
      bp_host_logf(host, BP_LOG_WARN,
                   "cannot write the program cache in %s (%s); programs will be compiled again by the next process "
                   "(set BP_CACHE_DIR or cache_dir= to a writable folder, or cache=false)",
                   dir.c_str(), std::strerror(errno));
    }
  }
  dev->programs.emplace(mem_key, prog);
  *out = prog;
  return BP_OK;
}

}  // namespace bp::opencl
