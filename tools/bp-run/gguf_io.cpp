// gguf_io.cpp: bp-run --save and --load through backplane/gguf.h.
#include "gguf_io.hpp"

#include <cinttypes>
#include <cstdio>
#include <memory>

#include "backplane/gguf.h"

namespace bp::run {

namespace {

struct file_closer {
  void operator()(bp_gguf *f) const { bp_gguf_close(f); }
};
using file_ptr = std::unique_ptr<bp_gguf, file_closer>;

struct size_key {
  const char *key;
  int model_config::*field;
};
const size_key kSizes[] = {
    {"bp-run.n_layer", &model_config::layers}, {"bp-run.n_embd", &model_config::dim},
    {"bp-run.n_head", &model_config::heads},   {"bp-run.n_ff", &model_config::ff},
    {"bp-run.n_vocab", &model_config::vocab},
};

}  // namespace

std::string read_gguf_config(const std::string &path, model_config &cfg) {
  bp_gguf *raw = nullptr;
  if (bp_gguf_open(path.c_str(), &raw) != BP_OK) return std::string("--load: ") + bp_last_error();
  file_ptr f(raw);
  for (const size_key &s : kSizes) {
    size_t i = 0;
    int64_t v = 0;
    if (bp_gguf_find_key(f.get(), s.key, &i) != BP_OK || bp_gguf_kv_read_int(f.get(), i, 0, &v) != BP_OK) {
      return "--load " + path + ": " + bp_last_error() + " (a file bp-run --save wrote has it)";
    }
    if (v < 1 || v > (1 << 20)) return "--load " + path + ": " + s.key + " is " + std::to_string(v) + ", out of range";
    cfg.*s.field = static_cast<int>(v);
  }
  size_t i = 0;
  uint64_t seed = 0;
  if (bp_gguf_find_key(f.get(), "bp-run.seed", &i) != BP_OK || bp_gguf_kv_read_uint(f.get(), i, 0, &seed) != BP_OK) {
    return "--load " + path + ": " + bp_last_error();
  }
  cfg.seed = seed;
  // The 2-D weights share one type (--weights when the file was saved): the
  // first 2-D tensor's.
  for (size_t t = 0; t < bp_gguf_tensor_count(f.get()); ++t) {
    bp_gguf_tensor_info ti{};
    ti.struct_size = sizeof ti;
    if (bp_gguf_tensor_describe(f.get(), t, &ti) == BP_OK && ti.supported && ti.n_dims == 2) {
      cfg.weights = ti.type;
      break;
    }
  }
  cfg.weights_file = path;
  return "";
}

std::string save_gguf(const model &m, const std::string &path) {
  bp_gguf_writer *w = nullptr;
  if (bp_gguf_writer_new(&w) != BP_OK) return std::string("--save: ") + bp_last_error();
  std::unique_ptr<bp_gguf_writer, void (*)(bp_gguf_writer *)> owner(w, bp_gguf_writer_free);
  const char *arch = "bp-run";
  bp_status st = bp_gguf_writer_add_string(w, "general.architecture", arch, 6);
  for (const size_key &s : kSizes) {
    const uint32_t v = static_cast<uint32_t>(m.cfg.*s.field);
    if (st == BP_OK) st = bp_gguf_writer_add_value(w, s.key, BP_GGUF_U32, &v);
  }
  if (st == BP_OK) st = bp_gguf_writer_add_value(w, "bp-run.seed", BP_GGUF_U64, &m.cfg.seed);
  for (const bp_tensor *t : m.weights) {
    if (st == BP_OK) st = bp_gguf_writer_add_tensor(w, t);
  }
  if (st == BP_OK) st = bp_gguf_writer_write(w, path.c_str());
  return st == BP_OK ? "" : "--save " + path + ": " + bp_last_error();
}

bp_status load_gguf_weights(const model &m) {
  bp_gguf *raw = nullptr;
  if (bp_status st = bp_gguf_open(m.cfg.weights_file.c_str(), &raw); st != BP_OK) return st;
  file_ptr f(raw);
  for (bp_tensor *t : m.weights) {
    size_t i = 0;
    if (bp_status st = bp_gguf_find_tensor(f.get(), t->name, &i); st != BP_OK) return st;
    bp_gguf_tensor_info ti{};
    ti.struct_size = sizeof ti;
    bp_gguf_tensor_describe(f.get(), i, &ti);
    bool same = ti.supported && ti.type == t->type;
    for (int d = 0; d < BP_MAX_DIMS; ++d) same = same && ti.ne[d] == t->ne[d];
    if (!same) {
      std::fprintf(stderr,
                   "bp-run: --load %s: tensor '%s' is %s [%" PRId64 ", %" PRId64 "] in the file, %s [%" PRId64
                   ", %" PRId64 "] in the model\n",
                   m.cfg.weights_file.c_str(), t->name, ti.type_name, ti.ne[0], ti.ne[1], bp_type_name(t->type),
                   t->ne[0], t->ne[1]);
      return BP_ERR_INVALID_ARGUMENT;
    }
    const void *data = nullptr;
    uint64_t size = 0;
    bp_gguf_tensor_data(f.get(), i, &data, &size);
    if (bp_status st = bp_tensor_set(t, data, 0, static_cast<size_t>(size)); st != BP_OK) return st;
  }
  return BP_OK;
}

}  // namespace bp::run

namespace bp::run {

bool write_outputs(const model_config &cfg, const std::string &save_path, const std::string &logits_path,
                   const std::vector<float> &logits) {
  if (!save_path.empty()) {
    bp_backend *cpu = nullptr;
    bp_buffer *buf = nullptr;
    std::string why;
    model m;
    if (bp_backend_new("cpu", &cpu) != BP_OK || build_model(cfg, m) != BP_OK ||
        bp_context_alloc_tensors(m.weights_ctx, cpu, &buf) != BP_OK || load_weights(m) != BP_OK) {
      why = std::string("--save: making the weights on cpu: ") + bp_last_error();
    } else {
      why = save_gguf(m, save_path);
    }
    bp_buffer_free(buf);
    bp_backend_free(cpu);
    if (!why.empty()) {
      std::fprintf(stderr, "bp-run: %s\n", why.c_str());
      return false;
    }
  }
  if (!logits_path.empty()) {
    std::FILE *f = std::fopen(logits_path.c_str(), "wb");
    bool ok = f && std::fwrite(logits.data(), sizeof(float), logits.size(), f) == logits.size();
    if (f && std::fclose(f) != 0) ok = false;
    if (!ok) {
      std::fprintf(stderr, "bp-run: --logits-out %s: cannot write the file\n", logits_path.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace bp::run
