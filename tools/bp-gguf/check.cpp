// check.cpp: bp-gguf check: loads every tensor of the file onto a device,
// reads each back and compares it with the file's bytes, and times the
// load against reading the same file with plain read() in the same run:
// warm (the file in the page cache), and cold too when this process may
// write /proc/sys/vm/drop_caches.
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/text_table.hpp"
#include "gguf_tool.hpp"

namespace bp::gguf_tool {

namespace {

constexpr size_t kChunk = size_t{16} << 20;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct row {
  std::string what;
  double seconds = 0;
  uint64_t bytes = 0;
  bool moved = true;  // false for a mapped load: no byte is read until first use
};

// Seconds to read the whole file with read() through a 16 MiB buffer; <0 on error.
double time_read(const std::string &path, uint64_t *bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::vector<char> buf(kChunk);
  const double t0 = now_s();
  uint64_t total = 0;
  for (;;) {
    const ssize_t r = read(fd, buf.data(), buf.size());
    if (r <= 0) break;
    total += static_cast<uint64_t>(r);
  }
  const double t = now_s() - t0;
  close(fd);
  *bytes = total;
  return t;
}

bool drop_caches() {
  sync();
  std::FILE *f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("3\n", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// Loads with |mode|, then reads every tensor back and compares it with the
// file. Appends a load row and a verify row; false with a message on error.
bool load_and_verify(bp_gguf *f, bp_device *dev, bp_gguf_load_mode mode, const std::string &label,
                     std::vector<row> &rows, std::string &error) {
  bp_context *ctx = bp_context_new(0);
  bp_gguf_load_options opt{};
  opt.struct_size = sizeof opt;
  opt.mode = mode;
  bp_gguf_weights *w = nullptr;
  const double t0 = now_s();
  if (bp_gguf_load(f, ctx, dev, &opt, &w) != BP_OK) {
    error = std::string("loading: ") + bp_last_error();
    bp_context_free(ctx);
    return false;
  }
  const double t1 = now_s();
  const uint64_t bytes = bp_gguf_weights_bytes(w);
  std::vector<uint8_t> back(kChunk);
  bool ok = true;
  for (size_t i = 0; ok && i < bp_gguf_tensor_count(f); ++i) {
    bp_gguf_tensor_info ti{};
    ti.struct_size = sizeof ti;
    bp_gguf_tensor_describe(f, i, &ti);
    const void *data = nullptr;
    uint64_t size = 0;
    bp_gguf_tensor_data(f, i, &data, &size);
    bp_tensor *t = nullptr;
    bp_context_find_tensor(ctx, ti.name, &t);
    for (uint64_t done = 0; ok && done < size;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, size - done));
      if (bp_tensor_get(t, back.data(), static_cast<size_t>(done), n) != BP_OK) {
        error = std::string("reading back '") + ti.name + "': " + bp_last_error();
        ok = false;
      } else if (std::memcmp(back.data(), static_cast<const uint8_t *>(data) + done, n) != 0) {
        error = std::string("tensor '") + ti.name + "' on the device differs from the file";
        ok = false;
      }
      done += n;
    }
  }
  const double t2 = now_s();
  const bool mapped = bp_gguf_weights_mapped(w);
  bp_gguf_weights_free(w);
  bp_context_free(ctx);
  if (!ok) return false;
  rows.push_back({label + (mapped ? " load (mapped)" : " load (copied)"), t1 - t0, bytes, !mapped});
  rows.push_back({label + " read back and compare", t2 - t1, bytes});
  return true;
}

std::string rate(uint64_t bytes, double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0);
  return buf;
}

}  // namespace

int check(const std::string &path, const std::string &device, bool json, bool want_cold) {
  bp_gguf *f = open_or_report(path);
  if (f == nullptr) return 1;
  bp_backend *be = nullptr;
  if (bp_backend_new(device.c_str(), &be) != BP_OK) {
    bp_gguf_close(f);
    return fail("device " + device);
  }
  bp_device *dev = bp_backend_device(be);
  bp_device_info di{};
  di.struct_size = sizeof di;
  bp_device_describe(dev, &di);
  const bool can_map = (di.caps & BP_DEVICE_CAP_HOST_MEMORY) && (di.caps & BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR);

  std::vector<row> rows;
  std::string error;
  uint64_t bytes = 0;
  time_read(path, &bytes);  // warms the page cache
  bool ok = true;
  if (can_map) ok = load_and_verify(f, dev, BP_GGUF_LOAD_MAP, "warm", rows, error);
  ok = ok && load_and_verify(f, dev, BP_GGUF_LOAD_COPY, "warm", rows, error);
  if (ok) rows.push_back({"warm read() of the file", time_read(path, &bytes), bytes});
  bool cold = false;
  if (ok && want_cold && drop_caches()) {
    cold = true;
    if (can_map) ok = load_and_verify(f, dev, BP_GGUF_LOAD_MAP, "cold", rows, error);
    ok = ok && drop_caches() && load_and_verify(f, dev, BP_GGUF_LOAD_COPY, "cold", rows, error);
    if (ok && drop_caches()) rows.push_back({"cold read() of the file", time_read(path, &bytes), bytes});
  }
  bp_backend_free(be);
  const size_t n_tensors = bp_gguf_tensor_count(f);
  bp_gguf_close(f);
  if (!ok) {
    std::fprintf(stderr, "bp-gguf: check %s on %s: %s\n", path.c_str(), device.c_str(), error.c_str());
    return 1;
  }
  if (json) {
    nlohmann::json j;
    j["file"] = path;
    j["device"] = di.spec;
    j["tensors"] = n_tensors;
    j["cold_measured"] = cold;
    for (const row &r : rows)
      j["timings"].push_back(
          {{"what", r.what},
           {"seconds", r.seconds},
           {"bytes", r.bytes},
           {"gb_per_s", r.moved && r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e9 : 0.0},
           {"bytes_moved", r.moved}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("file     %s\ndevice   %s (%s)\ntensors  %zu, every byte read back and equal to the file\n", path.c_str(),
              di.spec, di.description, n_tensors);
  std::vector<std::vector<std::string>> table = {{"step", "seconds", "bytes", "GB/s"}};
  for (const row &r : rows) {
    char s[32];
    std::snprintf(s, sizeof s, "%.4f", r.seconds);
    table.push_back({r.what, s, std::to_string(r.bytes), r.moved ? rate(r.bytes, r.seconds) : "-"});
  }
  std::printf("%s", tools::text_table(table, "  ").c_str());
  if (!cold && want_cold) std::printf("cold runs skipped: /proc/sys/vm/drop_caches is not writable here\n");
  return 0;
}

}  // namespace bp::gguf_tool
