// bp-gguf: looks into GGUF weight files and loads them onto a device.
//
//   bp-gguf show FILE [--json]            version, metadata, tensors, totals per type
//   bp-gguf get FILE TENSOR --out OUT.f32 one tensor as little-endian f32
//   bp-gguf check FILE [--device SPEC] [--no-cold]  load every tensor, verify, time it against read()
//   bp-gguf synth OUT --arch A --type T [...]  a seeded random-weight llama-family file
//   bp-gguf quantize IN OUT TYPE [--threads N] [--dry-run] [--pure]  llama.cpp's mixes
//
// Exit status: 0 done, 1 a bad file or a failed step (the message names the
// field and byte offset for a bad file), 2 bad usage.
#include <CLI/CLI.hpp>

#include "common/cli.hpp"
#include "gguf_tool.hpp"
#include "quantize.hpp"
#include "synth.hpp"

int main(int argc, char **argv) {
  CLI::App app{"bp-gguf: show, extract, load, synthesize and quantize GGUF weight files"};
  bp::tools::add_version_flag(app, "bp-gguf");
  app.require_subcommand(1);
  std::string path, tensor, out, device = "cpu";
  bool json = false;
  CLI::App *show = app.add_subcommand("show", "print the version, metadata and tensors of FILE");
  show->add_option("FILE", path, "a GGUF file")->required();
  show->add_flag("--json", json, "print JSON (arrays in full)");
  CLI::App *get = app.add_subcommand("get", "write one tensor as little-endian f32");
  get->add_option("FILE", path, "a GGUF file")->required();
  get->add_option("TENSOR", tensor, "the tensor's name")->required();
  get->add_option("--out", out, "the output file")->required();
  CLI::App *check = app.add_subcommand("check", "load every tensor onto a device, verify it and time it");
  check->add_option("FILE", path, "a GGUF file")->required();
  check->add_option("--device", device, "device spec (default cpu)");
  check->add_flag("--json", json, "print JSON");
  bool no_cold = false;
  check->add_flag("--no-cold", no_cold, "skip the cold runs (they drop the whole machine's page cache)");
  bp::gguf_tool::synth_options synth_opts;
  CLI::App *synth = bp::gguf_tool::add_synth_command(app, synth_opts);
  bp::gguf_tool::quantize_options quantize_opts;
  CLI::App *quantize = bp::gguf_tool::add_quantize_command(app, quantize_opts);
  if (auto rc = bp::tools::parse_command_line(app, argc, argv)) return *rc;
  if (synth->parsed()) return bp::gguf_tool::synth(synth_opts);
  if (quantize->parsed()) return bp::gguf_tool::quantize(quantize_opts);
  if (show->parsed()) return bp::gguf_tool::show(path, json);
  if (get->parsed()) return bp::gguf_tool::get(path, tensor, out);
  return bp::gguf_tool::check(path, device, json, !no_cold);
}
