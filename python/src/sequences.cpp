// sequences.cpp: ModelContext's batch eval and sequence calls
// (bp_model_context_eval_batch, bp_model_context_seq_*; model.h,
// "Sequences"), each with the context's mutex held and the GIL released
// while it computes.
#include <cstring>

#include "model_handles.hpp"

namespace bppy {
namespace {

// |n| unsigned 32-bit values (sequence ids, positions) from a sequence of
// ints or a 1-D integer NumPy array, or a Python int for all |n|.
std::vector<uint32_t> u32_values(const py::handle &h, size_t n, const char *what) {
  std::vector<uint32_t> out;
  if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) {
    const long long v = h.cast<long long>();
    if (v < 0 || v > UINT32_MAX)
      fail(BP_ERR_INVALID_ARGUMENT, std::string(what) + " " + std::to_string(v) + " is not a uint32");
    return std::vector<uint32_t>(n, static_cast<uint32_t>(v));
  }
  for (bp_token v : token_ids(h)) {
    if (v < 0) fail(BP_ERR_INVALID_ARGUMENT, std::string(what) + " " + std::to_string(v) + " is negative");
    out.push_back(static_cast<uint32_t>(v));
  }
  if (out.size() != n)
    fail(BP_ERR_INVALID_ARGUMENT, std::string(what) + " has " + std::to_string(out.size()) + " values for " +
                                      std::to_string(n) + " tokens: give one per token");
  return out;
}

// bp_model_context_eval_batch with |c|'s mutex held by the caller; None
// arguments are the C API's NULLs (sequence 0, counted positions, the last
// token of each sequence keeps its logits).
void eval_batch_locked(const MCtxP &c, const std::vector<bp_token> &ids, const py::object &seq_ids,
                       const py::object &positions, const py::object &logits) {
  std::vector<uint32_t> seq, pos;
  if (!seq_ids.is_none()) seq = u32_values(seq_ids, ids.size(), "seq_ids");
  if (!positions.is_none()) pos = u32_values(positions, ids.size(), "positions");
  std::unique_ptr<bool[]> keep;  // std::vector<bool> has no bool array to point at
  if (!logits.is_none()) {
    keep.reset(new bool[ids.size()]);
    size_t n = 0;
    for (auto v : logits) {
      if (n == ids.size()) break;
      keep[n++] = v.cast<bool>();
    }
    if (n != ids.size() || py::len(logits) != ids.size())
      fail(BP_ERR_INVALID_ARGUMENT, "logits has " + std::to_string(py::len(logits)) + " values for " +
                                        std::to_string(ids.size()) + " tokens: give one per token");
  }
  bp_model_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = ids.size();
  b.tokens = ids.data();
  b.seq_ids = seq_ids.is_none() ? nullptr : seq.data();
  b.positions = positions.is_none() ? nullptr : pos.data();
  b.logits = keep.get();
  call_nogil([&] { return bp_model_context_eval_batch(c->c, &b); });
}

}  // namespace

void def_sequences(py::class_<ModelContext> &cls) {
  cls.def(
         "eval_batch",
         [](const ModelContext &self, const py::object &ids, const py::object &seq_ids, const py::object &positions,
            const py::object &logits) {
           std::vector<bp_token> v = token_ids(ids);
           const MCtxP &c = self.get();
           auto lk = lock_nogil(c->mu);
           eval_batch_locked(c, v, seq_ids, positions, logits);
         },
         py::arg("ids"), py::arg("seq_ids") = py::none(), py::arg("positions") = py::none(),
         py::arg("logits") = py::none(),
         "Runs a batch of tokens of several sequences (bp_model_context_eval_batch; the GIL is released): "
         "seq_ids (one per token, or an int for all; None = 0), positions (None = each sequence's next), "
         "logits (a bool per token; None = the last token of each sequence keeps its row).")
      .def(
          "batch_logits",
          [](const ModelContext &self, size_t i) -> py::object {
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            const float *row = bp_model_context_batch_logits(c->c, i);
            if (!row) return py::none();
            const size_t n_vocab = static_cast<size_t>(raw_info(c->model->m).n_vocab);
            py::array_t<float> out(static_cast<py::ssize_t>(n_vocab));
            std::memcpy(out.mutable_data(), row, n_vocab * sizeof(float));
            return out;
          },
          py::arg("i"), "A float32 copy of token i's logits row in the last batch; None when it kept none.")
      .def_property_readonly("n_seq",
                             [](const ModelContext &self) {
                               const MCtxP &c = self.get();
                               auto lk = lock_nogil(c->mu);
                               return bp_model_context_seq_count(c->c);
                             })
      .def_property_readonly("cells_used",
                             [](const ModelContext &self) {
                               const MCtxP &c = self.get();
                               auto lk = lock_nogil(c->mu);
                               return bp_model_context_cells_used(c->c);
                             })
      .def(
          "seq_length",
          [](const ModelContext &self, uint32_t seq) {
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            uint32_t n = 0;
            check(bp_model_context_seq_length(c->c, seq, &n));
            return n;
          },
          py::arg("seq"), "The position the next token of sequence seq takes (0 when empty).")
      .def(
          "seq_clear",
          [](const ModelContext &self, uint32_t seq) {
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            check(bp_model_context_seq_clear(c->c, seq));
          },
          py::arg("seq"), "Empties sequence seq; cells no other sequence holds are free.")
      .def(
          "seq_rewind",
          [](const ModelContext &self, uint32_t seq, uint32_t position) {
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            check(bp_model_context_seq_rewind(c->c, seq, position));
          },
          py::arg("seq"), py::arg("position"), "Sequence seq forgets its positions from position on.")
      .def(
          "seq_remove",
          [](const ModelContext &self, uint32_t seq, uint32_t p0, const py::object &p1) {
            const MCtxP &c = self.get();
            const uint32_t end = p1.is_none() ? UINT32_MAX : p1.cast<uint32_t>();
            auto lk = lock_nogil(c->mu);
            check(bp_model_context_seq_remove(c->c, seq, p0, end));
          },
          py::arg("seq"), py::arg("p0") = 0, py::arg("p1") = py::none(),
          "Sequence seq lets go of its positions in [p0, p1) (p1 None = to the end).")
      .def(
          "seq_copy",
          [](const ModelContext &self, uint32_t src, uint32_t dst, const py::object &end) {
            const MCtxP &c = self.get();
            auto lk = lock_nogil(c->mu);
            uint32_t n = 0;
            if (end.is_none())
              check(bp_model_context_seq_length(c->c, src, &n));
            else
              n = end.cast<uint32_t>();
            check(bp_model_context_seq_copy(c->c, src, dst, n));
          },
          py::arg("src"), py::arg("dst"), py::arg("end") = py::none(),
          "Sequence dst becomes the first end positions of src (None = all), sharing its cells.");
}

}  // namespace bppy
