// model.cpp: backplane.Model (bp_model_*: llama-family GGUF models), its
// contexts (bp_model_context: a KV cache of one or more sequences) and
// generation with a bp_sampler.
//
// Generation is a loop over bp_generator, the library's; what the module adds
// is the iterator and the GIL.
// A Generation holds its Model's holder as a context does
// (model_handles.hpp says why).
#include "backplane/model.h"

#include <algorithm>
#include <cstring>

#include "common.hpp"
#include "model_handles.hpp"

namespace bppy {

// Token ids from an int, a sequence of ints or a 1-D integer NumPy array.
std::vector<bp_token> token_ids(const py::handle &h) {
  if (py::isinstance<py::str>(h) || py::isinstance<py::bytes>(h))
    fail(BP_ERR_INVALID_ARGUMENT, "token ids expected, not text: tokenize() the text first");
  if (py::isinstance<py::bool_>(h)) fail(BP_ERR_INVALID_ARGUMENT, "token ids must be integers, not bool");
  if (py::isinstance<py::int_>(h)) {
    long long v = h.cast<long long>();
    if (v < INT32_MIN || v > INT32_MAX)
      fail(BP_ERR_INVALID_ARGUMENT, "token id " + std::to_string(v) + " is not an int32");
    return {static_cast<bp_token>(v)};
  }
  if (!py::isinstance<py::array>(h) && py::hasattr(h, "__len__") && py::len(h) == 0) return {};
  py::array a = np().attr("asarray")(h);
  char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    fail(BP_ERR_INVALID_ARGUMENT, "token ids must be integers, not " + py::str(a.dtype()).cast<std::string>());
  if (a.ndim() > 1)
    fail(BP_ERR_INVALID_ARGUMENT, "token ids must be one-dimensional, not " + std::to_string(a.ndim()) + "-D");
  auto v = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!v) throw py::error_already_set();
  std::vector<bp_token> out(static_cast<size_t>(v.size()));
  const int64_t *p = v.data();
  for (size_t i = 0; i < out.size(); ++i) {
    if (p[i] < INT32_MIN || p[i] > INT32_MAX || (kind == 'u' && a.itemsize() == 8 && p[i] < 0))
      fail(BP_ERR_INVALID_ARGUMENT, "token id " + std::to_string(p[i]) + " is not an int32");
    out[i] = static_cast<bp_token>(p[i]);
  }
  return out;
}

namespace {

struct Info {
  std::string arch, name, tokenizer;
  int32_t n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, head_dim = 0;
  uint64_t n_params = 0, weight_bytes = 0;
  bp_token bos = -1, eos = -1;
  bool add_bos = false;
};

Info info_of(bp_model *m) {
  bp_model_info in = raw_info(m);
  Info o;
  o.arch = in.arch ? in.arch : "";
  o.name = in.name ? in.name : "";
  o.tokenizer = in.tokenizer ? in.tokenizer : "";
  o.n_vocab = in.n_vocab;
  o.n_ctx_train = in.n_ctx_train;
  o.n_embd = in.n_embd;
  o.n_layer = in.n_layer;
  o.n_head = in.n_head;
  o.n_head_kv = in.n_head_kv;
  o.n_ff = in.n_ff;
  o.head_dim = in.head_dim;
  o.n_params = in.n_params;
  o.weight_bytes = in.weight_bytes;
  o.bos = in.bos;
  o.eos = in.eos;
  o.add_bos = in.add_bos;
  return o;
}

std::string text_bytes(const py::handle &h) {
  if (py::isinstance<py::bytes>(h)) return h.cast<std::string>();
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  fail(BP_ERR_INVALID_ARGUMENT, "text must be a str or bytes, not " + py::str(py::type::of(h)).cast<std::string>());
}

py::str decode(const std::string &s) {
  PyObject *o = PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

std::vector<bp_token> tokenize(const ModelP &h, const std::string &text, bool add_bos, bool special) {
  std::vector<bp_token> ids(text.size() + 8);
  bp_status st;
  std::string msg;
  {
    py::gil_scoped_release release;
    size_t n = 0;
    st = bp_model_tokenize(h->m, text.data(), text.size(), add_bos, special, ids.data(), ids.size(), &n);
    if (st == BP_ERR_RESOURCE_EXHAUSTED && n > ids.size()) {
      ids.resize(n);
      st = bp_model_tokenize(h->m, text.data(), text.size(), add_bos, special, ids.data(), ids.size(), &n);
    }
    if (st == BP_OK)
      ids.resize(n);
    else
      msg = bp_last_error();
  }
  if (st != BP_OK) throw Error{st, msg};
  return ids;
}

std::string detokenize(bp_model *m, const std::vector<bp_token> &ids, bool strip) {
  std::string out(ids.size() * 8 + 16, '\0');
  size_t n = 0;
  bp_status st = bp_model_detokenize(m, ids.data(), ids.size(), strip, out.data(), out.size(), &n);
  if (st == BP_ERR_RESOURCE_EXHAUSTED && n > out.size()) {
    out.resize(n);
    st = bp_model_detokenize(m, ids.data(), ids.size(), strip, out.data(), out.size(), &n);
  }
  check(st);
  out.resize(n);
  return out;
}

std::string token_bytes(bp_model *m, bp_token id) {
  const char *d = nullptr;
  size_t n = 0;
  check(bp_model_token_text(m, id, &d, &n));
  return std::string(d ? d : "", n);
}

MCtxP new_context(const ModelP &h, uint32_t n_ctx, uint32_t n_batch, bool kv_f32, bool unfused_attention = false,
                  uint32_t n_seq = 1) {
  bp_model_context_options o{};
  o.struct_size = sizeof o;
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;
  o.kv_f32 = kv_f32;
  o.unfused_attention = unfused_attention;
  o.n_seq = n_seq;
  auto c = std::make_shared<MCtxH>();
  c->model = h;
  call_nogil([&] { return bp_model_context_new(h->m, &o, &c->c); });
  return c;
}

// Runs |ids| in |c| (its mutex held by the caller) with the GIL released.
void eval_locked(const MCtxP &c, const std::vector<bp_token> &ids, bool all_logits) {
  call_nogil([&] { return bp_model_context_eval(c->c, ids.data(), ids.size(), all_logits); });
}

py::array_t<float> logits_of(const MCtxP &c) {
  auto lk = lock_nogil(c->mu);
  size_t rows = 0;
  const float *p = bp_model_context_logits(c->c, &rows);
  const size_t n_vocab = static_cast<size_t>(raw_info(c->model->m).n_vocab);
  if (!p) rows = 0;
  py::array_t<float> out({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(n_vocab)});
  if (rows) std::memcpy(out.mutable_data(), p, rows * n_vocab * sizeof(float));
  return out;
}

// backplane.Generation: the iterator Model.generate returns, a loop over
// bp_generator (model.h), which holds the sampling, the UTF-8 hold-back and
// the stop strings; this adds only the Python iterator and the GIL.
struct Generation {
  ModelP model;
  MCtxP ctx;  // declared before |gen|, so freed after it: the generator borrows the context
  std::unique_ptr<bp_generator, void (*)(bp_generator *)> gen{nullptr, bp_generator_free};
  std::vector<bp_token> tokens;  // drawn so far (not an end token)
  bp_stop_reason reason = BP_STOP_NONE;

  // Steps until one returns text or the generation stops: a piece is never "".
  py::object next() {
    while (reason == BP_STOP_NONE) {
      bp_generator_step st{};
      st.struct_size = sizeof st;
      std::string text;
      {
        auto lk = lock_nogil(ctx->mu);
        call_nogil([&] {
          const bp_status s = bp_generator_next(gen.get(), &st);
          if (s == BP_OK) text.assign(st.text, st.text_len);  // borrowed until the next call
          return s;
        });
      }
      if (st.token >= 0 && st.stop != BP_STOP_END) tokens.push_back(st.token);
      reason = st.stop;
      if (!text.empty()) return decode(text);
    }
    throw py::stop_iteration();
  }
};

Model load(const std::string &path, const py::object &device, int32_t offload, bool plain_weights) {
  std::string devices = device.is_none() ? "" : device.cast<std::string>();
  bp_model_options o{};
  o.struct_size = sizeof o;
  o.devices = devices.c_str();
  o.offload_layers = offload;
  o.plain_weights = plain_weights;
  auto h = std::make_shared<ModelH>();
  call_nogil([&] { return bp_model_load(path.c_str(), &o, &h->m); });
  return Model{h};
}

std::shared_ptr<Generation> generate(const Model &self, const py::object &prompt, int64_t n, float temperature,
                                     int32_t top_k, float top_p, float min_p, float repeat_penalty, uint64_t seed,
                                     const py::object &stop, const py::object &context) {
  self.get();
  auto g = std::make_shared<Generation>();
  g->model = self.h;
  // The C API reads a negative max_tokens as "no limit"; Python's n is a count.
  if (n < 0) fail(BP_ERR_INVALID_ARGUMENT, "generate: n is " + std::to_string(n) + "; it must be >= 0");
  if (context.is_none()) {
    g->ctx = new_context(self.h, 0, 0, false);
  } else {
    g->ctx = context.cast<const ModelContext &>().get();
    if (g->ctx->model != self.h) fail(BP_ERR_INVALID_ARGUMENT, "generate: the context belongs to another Model");
  }
  std::vector<bp_token> ids;
  if (py::isinstance<py::str>(prompt) || py::isinstance<py::bytes>(prompt)) {
    const bool empty = [&] {
      auto lk = lock_nogil(g->ctx->mu);
      return bp_model_context_position(g->ctx->c) == 0;
    }();
    ids = tokenize(self.h, text_bytes(prompt), empty && raw_info(self.h->m).add_bos, false);
  } else {
    ids = token_ids(prompt);
  }
  std::vector<std::string> stops;
  if (!stop.is_none()) {
    if (py::isinstance<py::str>(stop) || py::isinstance<py::bytes>(stop))
      stops.push_back(text_bytes(stop));
    else
      for (auto s : stop) stops.push_back(text_bytes(s));
  }
  std::vector<const char *> stop_data;
  std::vector<size_t> stop_lengths;  // a stop string may hold NUL bytes
  for (const std::string &s : stops) {
    stop_data.push_back(s.data());
    stop_lengths.push_back(s.size());
  }
  bp_sampler_options so = bp_sampler_default_options();
  so.temperature = temperature;
  so.top_k = top_k;
  so.top_p = top_p;
  so.min_p = min_p;
  so.repeat_penalty = repeat_penalty;
  so.seed = seed;
  bp_generator_options o = bp_generator_default_options();
  o.prompt = ids.data();
  o.n_prompt = ids.size();
  o.max_tokens = n;
  o.sampler = &so;
  o.stops = stop_data.data();
  o.stop_lengths = stop_lengths.data();
  o.n_stops = stops.size();
  bp_generator *gen = nullptr;
  {
    auto lk = lock_nogil(g->ctx->mu);  // the generator reads the context's logits
    call_nogil([&] { return bp_generator_new(g->ctx->c, &o, &gen); });
  }
  g->gen.reset(gen);
  return g;
}

}  // namespace

void init_model(py::module_ &m) {
  py::class_<Info>(m, "ModelInfo", "A model's hyper-parameters and tokenizer facts (bp_model_info).")
      .def_readonly("arch", &Info::arch)
      .def_readonly("name", &Info::name)
      .def_readonly("tokenizer", &Info::tokenizer)
      .def_readonly("n_vocab", &Info::n_vocab)
      .def_readonly("n_ctx_train", &Info::n_ctx_train)
      .def_readonly("n_embd", &Info::n_embd)
      .def_readonly("n_layer", &Info::n_layer)
      .def_readonly("n_head", &Info::n_head)
      .def_readonly("n_head_kv", &Info::n_head_kv)
      .def_readonly("n_ff", &Info::n_ff)
      .def_readonly("head_dim", &Info::head_dim)
      .def_readonly("n_params", &Info::n_params)
      .def_readonly("weight_bytes", &Info::weight_bytes)
      .def_readonly("bos", &Info::bos)
      .def_readonly("eos", &Info::eos)
      .def_readonly("add_bos", &Info::add_bos)
      .def("_asdict",
           [](const Info &i) {
             py::dict d;
             d["arch"] = i.arch;
             d["name"] = i.name;
             d["tokenizer"] = i.tokenizer;
             d["n_vocab"] = i.n_vocab;
             d["n_ctx_train"] = i.n_ctx_train;
             d["n_embd"] = i.n_embd;
             d["n_layer"] = i.n_layer;
             d["n_head"] = i.n_head;
             d["n_head_kv"] = i.n_head_kv;
             d["n_ff"] = i.n_ff;
             d["head_dim"] = i.head_dim;
             d["n_params"] = i.n_params;
             d["weight_bytes"] = i.weight_bytes;
             d["bos"] = i.bos;
             d["eos"] = i.eos;
             d["add_bos"] = i.add_bos;
             return d;
           })
      .def("__repr__", [](const Info &i) {
        return "ModelInfo(arch='" + i.arch + "', name='" + i.name + "', n_vocab=" + std::to_string(i.n_vocab) +
               ", n_layer=" + std::to_string(i.n_layer) + ", n_embd=" + std::to_string(i.n_embd) + ")";
      });

  py::class_<ModelContext> context_class(
      m, "ModelContext",
      "A KV cache on a Model (bp_model_context); made by Model.context(). `with` or close() "
      "frees it; it keeps its Model alive.");
  context_class
      .def(
          "eval",
          [](const ModelContext &self, const py::object &ids, bool all_logits) {
            std::vector<bp_token> v = token_ids(ids);
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            eval_locked(c, v, all_logits);
          },
          py::arg("ids"), py::arg("all_logits") = false,
          "Runs the token ids at the next positions (bp_model_context_eval; the GIL is released).")
      .def_property_readonly(
          "logits", [](const ModelContext &self) { return logits_of(self.get()); },
          "A float32 copy of the last eval's logits, [rows, n_vocab] (rows 0 before an eval).")
      .def(
          "argmax",
          [](const ModelContext &self) {
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            return bp_model_context_argmax(c->c);
          },
          "The id of the largest logit of the last row; -1 before an eval.")
      .def_property_readonly("position",
                             [](const ModelContext &self) {
                               const MCtxP &c = self.get();
                               auto lk = lock_nogil(c->mu);
                               return bp_model_context_position(c->c);
                             })
      .def_property_readonly("size",
                             [](const ModelContext &self) {
                               const MCtxP &c = self.get();
                               auto lk = lock_nogil(c->mu);
                               return bp_model_context_size(c->c);
                             })
      .def_property_readonly("memory",
                             [](const ModelContext &self) {
                               const MCtxP &c = self.get();
                               auto lk = lock_nogil(c->mu);
                               return bp_model_context_memory(c->c);
                             })
      .def_property_readonly("model", [](const ModelContext &self) { return Model{self.get()->model}; })
      .def(
          "rewind",
          [](const ModelContext &self, uint32_t position) {
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            call_nogil([&] { return bp_model_context_rewind(c->c, position); });
          },
          py::arg("position"), "Forgets every position from |position| on (0 = empty).")
      .def("close", [](ModelContext &self) { self.h.reset(); })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](ModelContext &self, py::args) { self.h.reset(); });
  def_sequences(context_class);

  py::class_<Generation, std::shared_ptr<Generation>>(
      m, "Generation", "The iterator of text pieces Model.generate returns; also its tokens and stop_reason.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &Generation::next)
      .def_property_readonly(
          "tokens", [](const Generation &g) { return g.tokens; }, "The ids generated so far (not an end token).")
      .def_property_readonly(
          "stop_reason",
          [](const Generation &g) -> py::object {
            if (g.reason == BP_STOP_NONE) return py::none();
            return py::str(bp_stop_reason_name(g.reason));
          },
          "None while running, else 'end', 'stop', 'length' or 'context'.")
      .def_property_readonly("context", [](const Generation &g) { return ModelContext{g.ctx}; });

  py::class_<Model>(m, "Model",
                    "A llama-family GGUF model (bp_model_load): Model(path, device='cpu', offload=-1, "
                    "plain_weights=False). `with` or close() drops it; contexts keep it alive.")
      .def(py::init(&load), py::arg("path"), py::arg("device") = "cpu", py::arg("offload") = -1,
           py::arg("plain_weights") = false)
      .def_property_readonly("info", [](const Model &self) { return info_of(self.get()); })
      .def_property_readonly("backends",
                             [](const Model &self) {
                               bp_model *mm = self.get();
                               py::list out;
                               for (size_t i = 0; i < bp_model_backend_count(mm); ++i) {
                                 bp_model_backend_info bi{};
                                 bi.struct_size = sizeof bi;
                                 check(bp_model_backend_describe(mm, i, &bi));
                                 py::dict d;
                                 d["backend"] = std::string(bi.backend ? bi.backend : "");
                                 d["layers"] = bi.layers;
                                 d["weight_bytes"] = bi.weight_bytes;
                                 d["mapped"] = bi.mapped;
                                 out.append(d);
                               }
                               return out;
                             })
      .def(
          "tokenize",
          [](const Model &self, const py::object &text, const py::object &add_bos, bool special) {
            self.get();
            bool ab = add_bos.is_none() ? raw_info(self.h->m).add_bos : add_bos.cast<bool>();
            return tokenize(self.h, text_bytes(text), ab, special);
          },
          py::arg("text"), py::arg("add_bos") = py::none(), py::arg("special") = false,
          "Token ids of a str (or UTF-8 bytes); add_bos None = the model's add_bos.")
      .def(
          "detokenize",
          [](const Model &self, const py::object &ids, bool strip) {
            return decode(detokenize(self.get(), token_ids(ids), strip));
          },
          py::arg("ids"), py::arg("strip_leading_space") = false,
          "The text of token ids (UTF-8, invalid bytes replaced by U+FFFD).")
      .def(
          "token_bytes", [](const Model &self, bp_token id) { return py::bytes(token_bytes(self.get(), id)); },
          py::arg("id"), "The bytes one token stands for (bp_model_token_text).")
      .def(
          "token_piece",
          [](const Model &self, bp_token id) {
            const char *d = nullptr;
            size_t n = 0;
            check(bp_model_token_piece(self.get(), id, &d, &n));
            return decode(std::string(d ? d : "", n));
          },
          py::arg("id"), "The vocabulary entry as in the file ('\u2581the', '<0x0A>').")
      .def(
          "is_end", [](const Model &self, bp_token id) { return bp_model_token_is_end(self.get(), id); }, py::arg("id"),
          "True for a token that ends a generation (EOS, EOT ...).")
      .def(
          "context",
          [](const Model &self, uint32_t n_ctx, uint32_t n_batch, bool kv_f32, bool unfused_attention, uint32_t n_seq) {
            self.get();
            return ModelContext{new_context(self.h, n_ctx, n_batch, kv_f32, unfused_attention, n_seq)};
          },
          py::arg("n_ctx") = 0, py::arg("n_batch") = 0, py::arg("kv_f32") = false, py::kw_only(),
          py::arg("unfused_attention") = false, py::arg("n_seq") = 1,
          "A new context with an empty KV cache (n_ctx 0 = min(n_ctx_train, 4096), n_batch 0 = 512); "
          "unfused_attention: two products around SOFT_MAX instead of the fused ATTENTION op; "
          "n_seq: sequences it holds at once (eval_batch).")
      .def("generate", &generate, py::arg("prompt"), py::arg("n") = 32, py::kw_only(), py::arg("temperature") = 0.0f,
           py::arg("top_k") = 40, py::arg("top_p") = 0.95f, py::arg("min_p") = 0.05f, py::arg("repeat_penalty") = 1.0f,
           py::arg("seed") = 0, py::arg("stop") = py::none(), py::arg("context") = py::none(),
           "An iterator of text pieces continuing |prompt| (str or ids), at most n tokens, ending at an end token "
           "or a stop string.")
      .def("close", [](Model &self) { self.h.reset(); })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Model &self, py::args) { self.h.reset(); })
      .def("__repr__", [](const Model &self) -> std::string {
        if (!self.h) return "Model(closed)";
        Info i = info_of(self.h->m);
        return "Model('" + i.name + "', arch='" + i.arch + "', n_vocab=" + std::to_string(i.n_vocab) + ")";
      });
}

}  // namespace bppy
