// quantize_cli.cpp: the flags of bp-gguf quantize and the command: pick the
// mix, plan every tensor, then either list the plan (--dry-run) or write the
// header and the quantized data to a temporary file renamed at the end.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "gguf_tool.hpp"
#include "quantize.hpp"

namespace bp::gguf_tool {

namespace {

std::string mix_names() {
  std::string s;
  for (const quant_mix &m : quant_mixes()) s += std::string(s.empty() ? "" : " ") + m.name;
  return s + " (and Q3_K, Q4_K, Q5_K for the _M mixes)";
}

double mib(uint64_t n) { return static_cast<double>(n) / 1048576.0; }

std::string shape(const rule_tensor &t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

// One line per tensor that fell back, as llama-quantize warns.
void report_fallbacks(const quantize_plan &plan) {
  for (const planned_tensor &p : plan.tensors) {
    if (!p.choice.fell_back) continue;
    std::fprintf(stderr, "bp-gguf: %s: row length %lld is not a multiple of %lld (%s's block): %s instead\n",
                 p.t.name.c_str(), static_cast<long long>(p.t.ne[0]),
                 static_cast<long long>(bp_type_block_size(p.choice.wanted)), bp_type_name(p.choice.wanted),
                 bp_type_name(p.choice.type));
  }
}

void print_plan(const quantize_plan &plan) {
  size_t i = 0;
  for (const planned_tensor &p : plan.tensors) {
    std::printf("[%4zu/%4zu] %-36s %-16s %-6s -> %-6s %10.3f MiB -> %10.3f MiB%s\n", ++i, plan.tensors.size(),
                p.t.name.c_str(), shape(p.t).c_str(), bp_type_name(p.t.type), bp_type_name(p.choice.type),
                mib(p.src_bytes), mib(p.out_bytes), p.choice.fell_back ? "  (fallback)" : "");
  }
}

void print_totals(const quantize_plan &plan, uint64_t file_bytes) {
  uint64_t values = 0;
  for (const planned_tensor &p : plan.tensors) values += p.t.ne[0] * p.t.ne[1] * p.t.ne[2] * p.t.ne[3];
  const double bpw = values ? 8.0 * static_cast<double>(plan.out_bytes) / static_cast<double>(values) : 0;
  std::printf("tensors %.2f MiB -> %.2f MiB (%.2f bits per weight); output file %llu bytes", mib(plan.in_bytes),
              mib(plan.out_bytes), bpw, static_cast<unsigned long long>(file_bytes));
  if (plan.n_fallback) std::printf("; %d of %zu tensors fell back", plan.n_fallback, plan.tensors.size());
  std::printf("\n");
}

int write_output(const quantize_options &o, const quantize_plan &plan, const std::vector<uint8_t> &header,
                 uint64_t file_bytes) {
  const std::string tmp = o.out + ".tmp" + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "bp-gguf: %s: %s\n", tmp.c_str(), std::strerror(errno));
    return 1;
  }
  std::string error;
  bool ok = ftruncate(fd, static_cast<off_t>(file_bytes)) == 0 &&
            pwrite(fd, header.data(), header.size(), 0) == static_cast<ssize_t>(header.size());
  if (!ok) error = std::strerror(errno);
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool bar = o.progress && isatty(STDERR_FILENO);
  ok = ok && quantize_run(plan, fd, header.size(), threads, bar, error);
  ok = (close(fd) == 0) && ok;
  if (ok && std::rename(tmp.c_str(), o.out.c_str()) != 0) {
    ok = false;
    error = std::strerror(errno);
  }
  if (!ok) {
    std::remove(tmp.c_str());
    std::fprintf(stderr, "bp-gguf: %s: %s\n", o.out.c_str(), error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

CLI::App *add_quantize_command(CLI::App &app, quantize_options &o) {
  CLI::App *c = app.add_subcommand("quantize", "quantize an f32/f16/bf16 GGUF file with llama.cpp's type mixes");
  c->add_option("IN", o.in, "the f32, f16 or bf16 GGUF file")->required();
  c->add_option("OUT", o.out, "the file to write (not written with --dry-run)")->required();
  c->add_option("TYPE", o.type, "the mix: " + mix_names())->required();
  c->add_option("--threads", o.threads, "threads (default: the hardware's)");
  c->add_flag("--dry-run", o.dry_run, "print each tensor's type and the output size; write nothing");
  c->add_flag("--pure", o.pure, "the mix's base type for every quantized tensor (no per-tensor rules)");
  c->add_flag("!--no-progress", o.progress, "no progress bar");
  return c;
}

int quantize(const quantize_options &o) {
  const quant_mix *mix = find_mix(o.type);
  if (!mix) {
    std::fprintf(stderr, "bp-gguf: unknown type \"%s\"; the mixes are: %s\n", o.type.c_str(), mix_names().c_str());
    return 2;
  }
  bp_gguf *file = open_or_report(o.in);
  if (!file) return 1;
  quantize_plan plan;
  std::string error;
  if (!make_plan(file, *mix, o.pure, plan, error)) {
    std::fprintf(stderr, "bp-gguf: %s: %s\n", o.in.c_str(), error.c_str());
    bp_gguf_close(file);
    return 1;
  }
  std::vector<uint8_t> header;
  try {
    header = quantize_header(file, *mix, plan);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bp-gguf: %s: %s\n", o.in.c_str(), e.what());
    bp_gguf_close(file);
    return 1;
  }
  uint64_t data_bytes = 0;
  if (!plan.tensors.empty()) {
    const planned_tensor &last = plan.tensors.back();
    data_bytes = (last.out_offset + last.out_bytes + plan.alignment - 1) / plan.alignment * plan.alignment;
  }
  const uint64_t file_bytes = header.size() + data_bytes;
  report_fallbacks(plan);
  int rc = 0;
  if (o.dry_run) {
    print_plan(plan);
  } else {
    rc = write_output(o, plan, header, file_bytes);
  }
  if (rc == 0) print_totals(plan, file_bytes);
  bp_gguf_close(file);
  return rc;
}

}  // namespace bp::gguf_tool
