// pretokenize.cpp: the split patterns run on PCRE2 in UTF + UCP mode. Each
// pattern after the first re-splits the pieces of the one before, and text
// between matches stays a piece of its own (llama.cpp's regex split).
//
// \s is spelt out as llama.cpp's whitespace set: PCRE2's \s leaves out U+0085,
// which llama.cpp counts as whitespace. The final "|\s+" of the GPT-2 pattern
// is llama.cpp's: its hand-written GPT-2 splitter keeps a lone space that the
// pattern alone would leave unmatched.
#include "pretokenize.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "report.hpp"
#include "utf8.hpp"

namespace bp::model::tok {
namespace {

#define BP_WS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define BP_S "[" BP_WS "]"
#define BP_NOT_S "[^" BP_WS "]"
#define BP_CONTRACTIONS_CI "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

constexpr const char *kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" BP_WS "\\p{L}\\p{N}]+|" BP_S "+(?!" BP_NOT_S ")|" BP_S "+";
constexpr const char *kLlama3 =
    BP_CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" BP_WS "\\p{L}\\p{N}]+[\\r\\n]*|" BP_S
                       "*[\\r\\n]+|" BP_S "+(?!" BP_NOT_S ")|" BP_S "+";
constexpr const char *kQwen2 =
    BP_CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" BP_WS "\\p{L}\\p{N}]+[\\r\\n]*|" BP_S
                       "*[\\r\\n]+|" BP_S "+(?!" BP_NOT_S ")|" BP_S "+";

std::vector<const char *> patterns(pre_kind kind) {
  switch (kind) {
    case pre_kind::gpt2:
      return {kGpt2};
    case pre_kind::llama3:
      return {kLlama3};
    case pre_kind::qwen2:
      return {kQwen2};
    case pre_kind::dflt:
      return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
    case pre_kind::none:
      break;
  }
  return {};
}

// A code point PCRE2 can hold: surrogates and values past U+10FFFF (which
// llama.cpp's lenient decoder lets through) match as U+FFFD would, which is
// neither letter, number nor space, as they are to llama.cpp.
uint32_t matchable(uint32_t cp) { return (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF ? utf8::kReplacement : cp; }

}  // namespace

bp_status pretokenizer::create(pre_kind kind, std::unique_ptr<pretokenizer> *out) {
  std::unique_ptr<pretokenizer> p(new pretokenizer);
  for (const char *pat : patterns(kind)) {
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                     &err, &at, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return failf(BP_ERR_INTERNAL, "pre-tokenizer pattern at %zu: %s", static_cast<size_t>(at),
                   reinterpret_cast<const char *>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
    p->codes_.push_back(code);
  }
  *out = std::move(p);
  return BP_OK;
}

pretokenizer::~pretokenizer() {
  for (void *code : codes_) pcre2_code_free(static_cast<pcre2_code *>(code));
}

std::vector<std::string> pretokenizer::split(std::string_view text) const {
  const std::vector<uint32_t> cps = utf8::decode_all(text);
  // Matching runs on a valid UTF-8 copy; byte offsets map back to code points.
  std::string subject;
  std::vector<size_t> start(cps.size() + 1);
  for (size_t i = 0; i < cps.size(); ++i) {
    start[i] = subject.size();
    utf8::append(&subject, matchable(cps[i]));
  }
  start[cps.size()] = subject.size();
  std::vector<size_t> cp_at(subject.size() + 1, 0);
  for (size_t i = 0; i <= cps.size(); ++i) cp_at[start[i]] = i;

  std::vector<std::pair<size_t, size_t>> pieces;  // code point ranges
  if (!cps.empty()) pieces.push_back({0, cps.size()});
  pcre2_match_data *md = nullptr;
  std::vector<std::pair<size_t, size_t>> next;
  for (void *c : codes_) {
    auto *code = static_cast<pcre2_code *>(c);
    if (!md) md = pcre2_match_data_create(1, nullptr);
    next.clear();
    for (auto [a, b] : pieces) {
      // Each piece is matched on its own: lookaheads must not see past it.
      const auto *base = reinterpret_cast<PCRE2_SPTR>(subject.data() + start[a]);
      const size_t len = start[b] - start[a];
      size_t pos = 0, last = 0;
      while (pos < len) {
        const int rc = pcre2_match(code, base, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {  // none of the patterns matches empty; be safe anyway
          pos = start[cp_at[start[a] + m0] + 1] - start[a];
          continue;
        }
        if (m0 > last) next.push_back({cp_at[start[a] + last], cp_at[start[a] + m0]});
        next.push_back({cp_at[start[a] + m0], cp_at[start[a] + m1]});
        last = pos = m1;
      }
      if (last < len) next.push_back({cp_at[start[a] + last], b});
    }
    pieces.swap(next);
  }
  if (md) pcre2_match_data_free(md);

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (auto [a, b] : pieces) {
    std::string w;
    for (size_t i = a; i < b; ++i) utf8::append(&w, cps[i]);
    words.push_back(std::move(w));
  }
  return words;
}

}  // namespace bp::model::tok
