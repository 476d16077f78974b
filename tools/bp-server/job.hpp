// job.hpp: one generation request as the scheduler thread and the HTTP
// thread that waits for it share it. The scheduler appends text and ends it;
// the HTTP side takes the text as it comes and may cancel (a client gone).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backplane/model.h"

namespace bp::server {

// What a request asks of the generation, checked and tokenized.
struct gen_params {
  std::vector<bp_token> prompt;
  int64_t max_tokens = -1;  // the slot's room when -1
  bp_sampler_options sampler{};
  std::vector<std::string> stops;
  int32_t n_probs = -1;  // -1: no logprobs; else the chosen token's and the n most likely
};

// One generated token's log-probability under the model (the softmax of
// its logits row, before temperature and filters, as OpenAI reports them),
// and the most likely alternatives.
struct token_prob {
  bp_token token = -1;
  float logprob = 0;
  std::vector<std::pair<bp_token, float>> top;
};

// What the HTTP side takes from a job: the text since the last take, and the
// end once it came.
struct job_output {
  std::string text;
  bool finished = false;
  std::string finish_reason;  // "stop", "length"; "" with an error
  std::string error;          // a failed evaluation (a 500 for the client)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::vector<token_prob> probs;  // with n_probs >= 0: the tokens since the last take
};

class job {
 public:
  explicit job(gen_params p) : params(std::move(p)) {}
  const gen_params params;

  // Scheduler side.
  void append(const std::string &text, int64_t tokens, const token_prob *prob = nullptr) {
    std::lock_guard<std::mutex> lock(m_);
    out_.text += text;
    out_.completion_tokens += tokens;
    if (prob) out_.probs.push_back(*prob);
    cv_.notify_all();
  }
  void finish(const std::string &reason, const std::string &error = {}) {
    std::lock_guard<std::mutex> lock(m_);
    out_.finished = true;
    out_.finish_reason = reason;
    out_.error = error;
    cv_.notify_all();
  }

  // HTTP side: waits up to |wait| for text or the end, then takes what is
  // there (the text is handed over once; the counts are totals).
  job_output take(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, wait, [&] { return !out_.text.empty() || !out_.probs.empty() || out_.finished; });
    job_output got = out_;
    got.prompt_tokens = static_cast<int64_t>(params.prompt.size());
    out_.text.clear();
    out_.probs.clear();
    return got;
  }
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  job_output out_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace bp::server
