// tokenizer.cpp: choosing the tokenizer a GGUF file describes.
#include "tokenizer/tokenizer.hpp"

#include "bpe.hpp"
#include "report.hpp"
#include "spm.hpp"

namespace bp::model {

bp_status tokenizer::from_gguf(const bp_gguf *file, std::unique_ptr<tokenizer> *out) {
  out->reset();
  if (!file) return fail(BP_ERR_INVALID_ARGUMENT, "tokenizer: no GGUF file");
  tok::vocab v;
  if (bp_status st = tok::read_vocab(file, &v)) return st;
  if (v.model == tok::model_kind::spm) {
    *out = std::make_unique<tok::spm_tokenizer>(std::move(v));
  } else {
    std::unique_ptr<tok::pretokenizer> pre;
    if (bp_status st = tok::pretokenizer::create(v.pre, &pre)) return st;
    *out = std::make_unique<tok::bpe_tokenizer>(std::move(v), std::move(pre));
  }
  begin_call();  // key lookups that found nothing must not linger as the outcome
  return BP_OK;
}

}  // namespace bp::model
