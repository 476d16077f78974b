// quantize_run.cpp: the data section of bp-gguf quantize. Every tensor is
// cut into chunks of whole rows; the threads take chunks in file order, read
// the input's rows (f16 and bf16 widened to f32), quantize them with
// bp_quantize_rows_for_file and write them at their place in the output, so nothing
// waits on a whole tensor. The bytes do not depend on the thread count: each
// row is quantized alone. On a terminal a bar shows the bytes read and the
// time left.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "quantize.hpp"

namespace bp::gguf_tool {

namespace {

struct chunk {
  const planned_tensor *p;
  int64_t row0, rows;
};

constexpr int64_t kChunkValues = int64_t{1} << 17;  // values converted per chunk
constexpr uint64_t kCopyBytes = uint64_t{4} << 20;  // bytes per chunk of a tensor copied as it is

std::vector<chunk> make_chunks(const quantize_plan &plan) {
  std::vector<chunk> out;
  for (const planned_tensor &p : plan.tensors) {
    const int64_t rows = p.t.ne[1] * p.t.ne[2] * p.t.ne[3];
    const uint64_t row_bytes = rows ? p.src_bytes / rows : 0;
    const int64_t step = p.choice.type == p.t.type ? std::max<int64_t>(1, kCopyBytes / std::max<uint64_t>(1, row_bytes))
                                                   : std::max<int64_t>(1, kChunkValues / p.t.ne[0]);
    for (int64_t r = 0; r < rows; r += step) out.push_back({&p, r, std::min(step, rows - r)});
  }
  return out;
}

bool write_all(int fd, const uint8_t *data, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, data, n, static_cast<off_t>(offset));
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

class progress_bar {
 public:
  progress_bar(uint64_t total, bool on) : total_(total), on_(on), start_(clock::now()) {}
  void show(uint64_t done, bool last) const {
    if (!on_) return;
    const double s = std::chrono::duration<double>(clock::now() - start_).count();
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    const int width = 30, fill = static_cast<int>(frac * width);
    char bar[width + 1];
    for (int i = 0; i < width; ++i) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    const double left = frac > 0 ? s * (1 - frac) / frac : 0;
    // MiB below a GiB, so a small file's bar moves too
    const bool gib = total_ >= (uint64_t{1} << 30);
    const double unit = gib ? 1073741824.0 : 1048576.0;
    const int secs = static_cast<int>(last ? s : left);
    std::fprintf(stderr, "\r[%s] %3.0f%%  %.2f / %.2f %s  %s %d:%02d ", bar, frac * 100, done / unit, total_ / unit,
                 gib ? "GiB" : "MiB", last ? "took" : "left", secs / 60, secs % 60);
    if (last) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  using clock = std::chrono::steady_clock;
  uint64_t total_;
  bool on_;
  clock::time_point start_;
};

}  // namespace

bool quantize_run(const quantize_plan &plan, int fd, uint64_t data_offset, int threads, bool progress,
                  std::string &error) {
  const std::vector<chunk> chunks = make_chunks(plan);
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  auto fail = [&](const std::string &what) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!failed.exchange(true)) error = what;
  };
  auto work = [&] {
    std::vector<float> f32;
    std::vector<uint8_t> out;
    for (size_t i = next++; i < chunks.size() && !failed; i = next++) {
      const chunk &c = chunks[i];
      const planned_tensor &p = *c.p;
      const int64_t rows = p.t.ne[1] * p.t.ne[2] * p.t.ne[3];
      const uint64_t src_row = p.src_bytes / rows, dst_row = p.out_bytes / rows;
      const uint8_t *src = p.src + c.row0 * src_row;
      const uint64_t at = data_offset + p.out_offset + c.row0 * dst_row;
      const uint8_t *bytes = src;
      if (p.choice.type != p.t.type) {
        const int64_t n = c.rows * p.t.ne[0];
        const float *values = reinterpret_cast<const float *>(src);
        if (p.t.type != BP_TYPE_F32) {
          f32.resize(n);
          if (bp_dequantize(p.t.type, src, f32.data(), n) != BP_OK) return fail(p.t.name + ": " + bp_last_error());
          values = f32.data();
        }
        out.resize(c.rows * dst_row);
        if (bp_quantize_rows_for_file(p.choice.type, values, out.data(), c.rows, p.t.ne[0], nullptr) != BP_OK) {
          return fail(p.t.name + ": " + bp_last_error());
        }
        bytes = out.data();
      }
      if (!write_all(fd, bytes, c.rows * dst_row, at)) return fail(std::string("writing: ") + std::strerror(errno));
      done += c.rows * src_row;
    }
  };
  const progress_bar bar(plan.in_bytes, progress);
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(work);
  while (progress && done < plan.in_bytes && !failed) {
    bar.show(done, false);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  for (std::thread &t : pool) t.join();
  if (!failed) bar.show(done, true);
  return !failed;
}

}  // namespace bp::gguf_tool
