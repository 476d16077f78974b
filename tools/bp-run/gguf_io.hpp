// gguf_io.hpp: bp-run's decoder weights in a GGUF file (--save, --load).
//
// The file holds every weight under its bp-run name and the sizes as
// metadata (bp-run.n_layer, bp-run.n_embd, bp-run.n_head, bp-run.n_ff,
// bp-run.n_vocab, bp-run.seed; the seed also picks the token ids), so a run
// from the file builds the same model and computes the same logits.
#pragma once

#include <string>
#include <vector>

#include "model.hpp"

namespace bp::run {

// Reads the sizes and seed of |path| into |cfg| (tokens stay as given) and
// sets cfg.weights_file. "" or a message naming the file and the key.
std::string read_gguf_config(const std::string &path, model_config &cfg);

// Writes the weights of |m| (which hold their values) and its sizes to |path|.
std::string save_gguf(const model &m, const std::string &path);

// Copies every weight of |m| from m.cfg.weights_file, checking each one's
// type and shape. A status, with bp_last_error() or a message on stderr.
bp_status load_gguf_weights(const model &m);

}  // namespace bp::run

namespace bp::run {

// After a run: --save (the weights of |cfg|, made again on cpu) and
// --logits-out. Empty paths are skipped. False after printing why.
bool write_outputs(const model_config &cfg, const std::string &save_path, const std::string &logits_path,
                   const std::vector<float> &logits);

}  // namespace bp::run
