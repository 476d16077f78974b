// generator_test.cpp: bp_generator (model.h) on scripted tiny models
// (tiny_config::script), whose greedy tokens the test chooses: the bytes each
// step returns (UTF-8 held back, invalid lead bytes not), stop strings over
// two tokens, each stop reason, and bad arguments as a status and a message.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "backplane/model.h"
#include "tiny_model.hpp"

namespace {

using bp::test::tiny_config;

constexpr bp_token kEos = 2;
bp_token byte_token(int b) { return 3 + b; }         // <0xNN>
bp_token piece_token(int i) { return 3 + 256 + i; }  // "▁a", "▁b", ...: text " a", " b"

struct scripted {
  bp_model *model = nullptr;
  bp_model_context *ctx = nullptr;
  bp_generator *gen = nullptr;
  ~scripted() {
    bp_generator_free(gen);
    bp_model_context_free(ctx);
    bp_model_free(model);
  }
};

// Loads a model whose greedy chain is |chain| (chain[i] -> chain[i + 1]) plus
// |more| pairs, with a context of |n_ctx| positions.
void load(scripted *s, const std::vector<bp_token> &chain, uint32_t n_ctx = 64,
          const std::vector<std::pair<int, int>> &more = {}) {
  tiny_config cfg;
  for (size_t i = 0; i + 1 < chain.size(); ++i) cfg.script.emplace_back(chain[i], chain[i + 1]);
  cfg.script.insert(cfg.script.end(), more.begin(), more.end());
  bp::test::tiny_weights w;
  const std::string path = bp::test::temp_dir() + "/scripted.gguf";
  ASSERT_EQ(bp::test::write_tiny_model(cfg, path, &w), "");
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &s->model), BP_OK) << bp_last_error();
  bp_model_context_options co{};
  co.struct_size = sizeof co;
  co.n_ctx = n_ctx;
  co.kv_f32 = true;
  ASSERT_EQ(bp_model_context_new(s->model, &co, &s->ctx), BP_OK) << bp_last_error();
}

struct step {
  bp_token token;
  std::string text;
  bp_stop_reason stop;
};

step next(bp_generator *g) {
  bp_generator_step st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(bp_generator_next(g, &st), BP_OK) << bp_last_error();
  EXPECT_EQ(st.text[st.text_len], '\0');
  return {st.token, std::string(st.text, st.text_len), st.stop};
}

// Every step until the stop (at most 64).
std::vector<step> run(bp_generator *g) {
  std::vector<step> out;
  for (int i = 0; i < 64; ++i) {
    out.push_back(next(g));
    if (out.back().stop != BP_STOP_NONE) break;
  }
  return out;
}

bp_generator_options with_prompt(const std::vector<bp_token> &prompt) {
  bp_generator_options o = bp_generator_default_options();
  o.prompt = prompt.data();
  o.n_prompt = prompt.size();
  return o;
}

TEST(Generator, Utf8IsHeldUntilWholeAndInvalidLeadBytesAreNot) {
  // After the prompt " a": h, € as three byte tokens, the invalid lead bytes
  // 0xC0, 0xC1, 0xF5 .. 0xFF one by one, é as two byte tokens, then EOS.
  std::vector<bp_token> chain = {piece_token(0),   byte_token('h'),  byte_token(0xE2), byte_token(0x82),
                                 byte_token(0xAC), byte_token(0xC0), byte_token(0xC1)};
  for (int b = 0xF5; b <= 0xFF; ++b) chain.push_back(byte_token(b));
  chain.insert(chain.end(), {byte_token(0xC3), byte_token(0xA9), kEos});
  scripted s;
  ASSERT_NO_FATAL_FAILURE(load(&s, chain));
  const std::vector<bp_token> prompt = {1, piece_token(0)};
  const bp_generator_options o = with_prompt(prompt);
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();

  std::vector<std::string> want = {"h", "", "", "\xE2\x82\xAC", "\xC0", "\xC1"};
  for (int b = 0xF5; b <= 0xFF; ++b) want.emplace_back(1, static_cast<char>(b));
  want.insert(want.end(), {"", "\xC3\xA9", ""});
  const std::vector<step> got = run(s.gen);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, chain[i + 1]) << "step " << i;
    EXPECT_EQ(got[i].text, want[i]) << "step " << i;
    EXPECT_EQ(got[i].stop, i + 1 == got.size() ? BP_STOP_END : BP_STOP_NONE) << "step " << i;
  }
  // Stopped: later steps draw nothing and keep the reason.
  const step after = next(s.gen);
  EXPECT_EQ(after.token, -1);
  EXPECT_EQ(after.text, "");
  EXPECT_EQ(after.stop, BP_STOP_END);
  // The end token is not evaluated: the prompt and every other drawn token are.
  EXPECT_EQ(bp_model_context_position(s.ctx), prompt.size() + got.size() - 1);
}

TEST(Generator, AnEndTokenPrintsWhatIsHeld) {
  scripted s;
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), byte_token(0xF0), byte_token(0x9F), kEos}));
  const std::vector<bp_token> prompt = {piece_token(0)};
  const bp_generator_options o = with_prompt(prompt);
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  const std::vector<step> got = run(s.gen);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].text + got[1].text, "");
  EXPECT_EQ(got[2].token, kEos);
  EXPECT_EQ(got[2].text, "\xF0\x9F");
  EXPECT_EQ(got[2].stop, BP_STOP_END);
}

// " b" then " c": the stop string "b c" begins in one token and ends in the
// next; " " is printed, then nothing.
TEST(Generator, AStopStringOverTwoTokensIsCutAndNotPrinted) {
  scripted s;
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), piece_token(1), piece_token(2), piece_token(3), kEos}));
  const std::vector<bp_token> prompt = {piece_token(0)};
  bp_generator_options o = with_prompt(prompt);
  const char *stops[] = {"zz", "b c"};
  o.stops = stops;
  o.n_stops = 2;
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  std::vector<step> got = run(s.gen);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text, " ");  // "b" may start "b c"
  EXPECT_EQ(got[0].stop, BP_STOP_NONE);
  EXPECT_EQ(got[1].token, piece_token(2));
  EXPECT_EQ(got[1].text, "");
  EXPECT_EQ(got[1].stop, BP_STOP_STRING);
  bp_generator_free(s.gen);
  s.gen = nullptr;

  // A start that does not go on is printed once it cannot: "b d" never comes.
  ASSERT_EQ(bp_model_context_rewind(s.ctx, 0), BP_OK);
  const char *other[] = {"b d"};
  o.stops = other;
  o.n_stops = 1;
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  got = run(s.gen);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].text + "|" + got[1].text + "|" + got[2].text, " |b c| d");
  EXPECT_EQ(got[3].stop, BP_STOP_END);
}

TEST(Generator, StopStringsAreBytesWithLengths) {
  scripted s;
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), byte_token(0), byte_token('x'), kEos}));
  const std::vector<bp_token> prompt = {piece_token(0)};
  bp_generator_options o = with_prompt(prompt);
  const char nul_x[] = {'\0', 'x'};
  const char *stops[] = {nul_x};
  const size_t lengths[] = {2};
  o.stops = stops;
  o.stop_lengths = lengths;
  o.n_stops = 1;
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  const std::vector<step> got = run(s.gen);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].stop, BP_STOP_STRING);
  EXPECT_EQ(got[0].text + got[1].text, "");
}

TEST(Generator, MaxTokensStopsAtOnceAndTheLastTokenIsNotEvaluated) {
  scripted s;  // " b" and " c" forever
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), piece_token(1), piece_token(2), piece_token(1)}));
  const std::vector<bp_token> prompt = {1, piece_token(0)};
  bp_generator_options o = with_prompt(prompt);
  o.max_tokens = 5;
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  const std::vector<step> got = run(s.gen);
  ASSERT_EQ(got.size(), 5u);
  std::string text;
  for (const step &x : got) text += x.text;
  EXPECT_EQ(text, " b c b c b");
  EXPECT_EQ(got[4].stop, BP_STOP_LENGTH);
  EXPECT_EQ(bp_model_context_position(s.ctx), prompt.size() + 4);
  bp_generator_free(s.gen);
  s.gen = nullptr;

  // max_tokens 0: nothing is drawn or evaluated.
  ASSERT_EQ(bp_model_context_rewind(s.ctx, 0), BP_OK);
  o.max_tokens = 0;
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  const step none = next(s.gen);
  EXPECT_EQ(none.token, -1);
  EXPECT_EQ(none.stop, BP_STOP_LENGTH);
  EXPECT_EQ(bp_model_context_position(s.ctx), 0u);
}

TEST(Generator, AFullContextStopsWithTheTextHeld) {
  scripted s;  // 8 positions: the prompt takes 2, so 7 tokens are drawn and 6 fed back
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), piece_token(1), piece_token(2), piece_token(1)}, 8));
  const std::vector<bp_token> prompt = {1, piece_token(0)};
  const char *stops[] = {"b!"};
  bp_generator_options o = with_prompt(prompt);
  o.stops = stops;
  o.n_stops = 1;
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  const std::vector<step> got = run(s.gen);
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[6].stop, BP_STOP_CONTEXT);
  EXPECT_EQ(got[6].token, piece_token(1));
  EXPECT_EQ(got[6].text, " b");  // "b" was held as the start of "b!"; the stop prints it
  EXPECT_EQ(bp_model_context_position(s.ctx), 8u);
}

TEST(Generator, AnEvaluatedPromptOnlyJoinsTheHistory) {
  scripted s;
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), piece_token(1), kEos}));
  const std::vector<bp_token> prompt = {1, piece_token(0)};
  bp_generator_options o = with_prompt(prompt);
  o.prompt_evaluated = true;
  // No logits yet: nothing to draw from.
  EXPECT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_ERR_FAILED_PRECONDITION);
  EXPECT_NE(std::string(bp_last_error()).find("no logits"), std::string::npos) << bp_last_error();
  EXPECT_EQ(s.gen, nullptr);
  ASSERT_EQ(bp_model_context_eval(s.ctx, prompt.data(), prompt.size(), false), BP_OK);
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  const std::vector<step> got = run(s.gen);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text, " b");
  EXPECT_EQ(bp_model_context_position(s.ctx), prompt.size() + 1);
}

TEST(Generator, StopReasonsHaveStableNames) {
  EXPECT_STREQ(bp_stop_reason_name(BP_STOP_NONE), "none");
  EXPECT_STREQ(bp_stop_reason_name(BP_STOP_END), "end");
  EXPECT_STREQ(bp_stop_reason_name(BP_STOP_STRING), "stop");
  EXPECT_STREQ(bp_stop_reason_name(BP_STOP_LENGTH), "length");
  EXPECT_STREQ(bp_stop_reason_name(BP_STOP_CONTEXT), "context");
  EXPECT_STREQ(bp_stop_reason_name(static_cast<bp_stop_reason>(42)), "unknown");
}

// Each call fails with |want| and a message containing |words|; no abort.
void expect_error(bp_status got, bp_status want, const std::string &words) {
  EXPECT_EQ(got, want) << bp_last_error();
  EXPECT_EQ(bp_last_status(), want);
  EXPECT_NE(std::string(bp_last_error()).find(words), std::string::npos) << bp_last_error();
}

TEST(Generator, BadArgumentsAreAStatusAndAMessage) {
  scripted s;
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), piece_token(1), kEos}));
  const std::vector<bp_token> prompt = {piece_token(0)};
  bp_generator_options o = with_prompt(prompt);
  bp_generator *g = nullptr;

  expect_error(bp_generator_new(nullptr, &o, &g), BP_ERR_INVALID_ARGUMENT, "context is NULL");
  expect_error(bp_generator_new(s.ctx, &o, nullptr), BP_ERR_INVALID_ARGUMENT, "out_generator is NULL");
  for (uint32_t size : {0u, 3u, static_cast<uint32_t>(sizeof o + 8)}) {
    o.struct_size = size;
    expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "struct_size");
    EXPECT_EQ(g, nullptr);
  }
  o.struct_size = sizeof o;
  o.n_prompt = 3;
  o.prompt = nullptr;
  expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "prompt is NULL");
  const bp_token outside[] = {piece_token(0), 100000};
  o.prompt = outside;
  o.n_prompt = 2;
  expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "prompt[1] = 100000");
  o = with_prompt(prompt);
  o.n_stops = 1;
  expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "stops is NULL");
  const char *empty[] = {"x", ""};
  o.stops = empty;
  o.n_stops = 2;
  expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "stops[1] is empty");
  const char *null_one[] = {nullptr};
  o.stops = null_one;
  o.n_stops = 1;
  expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "stops[0] is NULL");
  o = with_prompt(prompt);
  bp_sampler_options so = bp_sampler_default_options();
  so.top_p = -1.0f;
  o.sampler = &so;
  expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "top_p");
  so.top_p = 0.9f;
  so.struct_size = 0;
  expect_error(bp_generator_new(s.ctx, &o, &g), BP_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_EQ(g, nullptr);

  // next: NULL and a wrong size, then a live generator still works.
  o = with_prompt(prompt);
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &g), BP_OK) << bp_last_error();
  s.gen = g;
  bp_generator_step st{};
  st.struct_size = sizeof st;
  expect_error(bp_generator_next(nullptr, &st), BP_ERR_INVALID_ARGUMENT, "generator is NULL");
  expect_error(bp_generator_next(g, nullptr), BP_ERR_INVALID_ARGUMENT, "out_step is NULL");
  st.struct_size = sizeof st - 1;
  expect_error(bp_generator_next(g, &st), BP_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_EQ(next(g).text, " b");
  bp_generator_free(nullptr);  // a no-op
}

TEST(Generator, AFailedStepEndsTheGenerator) {
  scripted s;  // a prompt longer than the context: its eval fails
  ASSERT_NO_FATAL_FAILURE(load(&s, {piece_token(0), piece_token(1), kEos}, 4));
  const std::vector<bp_token> prompt = {1, 1, 1, 1, piece_token(0)};
  const bp_generator_options o = with_prompt(prompt);
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  bp_generator_step st{};
  st.struct_size = sizeof st;
  expect_error(bp_generator_next(s.gen, &st), BP_ERR_RESOURCE_EXHAUSTED, "evaluating the prompt");
  EXPECT_EQ(st.token, -1);
  EXPECT_EQ(st.stop, BP_STOP_NONE);
  expect_error(bp_generator_next(s.gen, &st), BP_ERR_FAILED_PRECONDITION, "an earlier step failed");
}

}  // namespace

// bp_generator_draw: the caller evaluates (here, sequence 1 of two, by
// eval_batch) and hands the generator its row; the steps are next()'s.
TEST(Generator, DrawFromABatchRowMatchesNext) {
  const std::vector<bp_token> chain = {piece_token(0),   piece_token(1), byte_token(0xC3),
                                       byte_token(0xA9), piece_token(2), kEos};
  scripted s;
  ASSERT_NO_FATAL_FAILURE(load(&s, chain));
  const std::vector<bp_token> prompt = {1, piece_token(0)};
  const bp_generator_options o = with_prompt(prompt);
  ASSERT_EQ(bp_generator_new(s.ctx, &o, &s.gen), BP_OK) << bp_last_error();
  const std::vector<step> want = run(s.gen);

  scripted b;
  tiny_config cfg;
  for (size_t i = 0; i + 1 < chain.size(); ++i) cfg.script.emplace_back(chain[i], chain[i + 1]);
  const std::string path = bp::test::temp_dir() + "/scripted_draw.gguf";
  bp::test::tiny_weights w;
  ASSERT_EQ(bp::test::write_tiny_model(cfg, path, &w), "");
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &b.model), BP_OK) << bp_last_error();
  bp_model_context_options co{};
  co.struct_size = sizeof co;
  co.n_ctx = 64;
  co.kv_f32 = true;
  co.n_seq = 2;
  ASSERT_EQ(bp_model_context_new(b.model, &co, &b.ctx), BP_OK) << bp_last_error();
  const uint32_t seqs[] = {1, 1};
  bp_model_batch batch{};
  batch.struct_size = sizeof batch;
  batch.tokens = prompt.data();
  batch.n_tokens = prompt.size();
  batch.seq_ids = seqs;
  ASSERT_EQ(bp_model_context_eval_batch(b.ctx, &batch), BP_OK) << bp_last_error();
  bp_generator_options d = with_prompt(prompt);
  d.prompt_evaluated = true;
  ASSERT_EQ(bp_generator_new(b.ctx, &d, &b.gen), BP_OK) << bp_last_error();
  const float *row = bp_model_context_batch_logits(b.ctx, prompt.size() - 1);
  std::vector<step> got;
  for (int i = 0; i < 16 && row; ++i) {
    bp_generator_step st{};
    st.struct_size = sizeof st;
    ASSERT_EQ(bp_generator_draw(b.gen, row, &st), BP_OK) << bp_last_error();
    got.push_back({st.token, std::string(st.text, st.text_len), st.stop});
    if (st.stop != BP_STOP_NONE) break;
    // The generator evaluated nothing: the caller feeds the token back.
    uint32_t len = 0;
    ASSERT_EQ(bp_model_context_seq_length(b.ctx, 1, &len), BP_OK);
    EXPECT_EQ(len, prompt.size() + got.size() - 1);
    batch.tokens = &st.token;
    batch.n_tokens = 1;
    ASSERT_EQ(bp_model_context_eval_batch(b.ctx, &batch), BP_OK) << bp_last_error();
    row = bp_model_context_batch_logits(b.ctx, 0);
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << "step " << i;
    EXPECT_EQ(got[i].text, want[i].text) << "step " << i;
    EXPECT_EQ(got[i].stop, want[i].stop) << "step " << i;
  }
  uint32_t len0 = 0;
  ASSERT_EQ(bp_model_context_seq_length(b.ctx, 0, &len0), BP_OK);
  EXPECT_EQ(len0, 0u);  // sequence 0 untouched

  // A pending prompt, NULL logits: a status and a message.
  bp_generator *pending = nullptr;
  ASSERT_EQ(bp_generator_new(b.ctx, &o, &pending), BP_OK) << bp_last_error();
  bp_generator_step st{};
  st.struct_size = sizeof st;
  expect_error(bp_generator_draw(pending, row, &st), BP_ERR_FAILED_PRECONDITION, "prompt_evaluated");
  expect_error(bp_generator_draw(b.gen, nullptr, &st), BP_ERR_INVALID_ARGUMENT, "logits is NULL");
  bp_generator_free(pending);
}
