// scheduler.cpp: the step loop (scheduler.hpp).
#include "scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace bp::server {

scheduler::scheduler(bp_model *model, bp_model_context *context, scheduler_config config)
    : model_(model), context_(context), config_(config), slots_(config.parallel) {
  bp_model_info info{};
  info.struct_size = sizeof info;
  bp_model_describe(model_, &info);
  n_vocab_ = info.n_vocab;
  thread_ = std::thread([this] { loop(); });
}

scheduler::~scheduler() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].j) {
      slots_[s].j->finish("", "the server is shutting down");
      release(s);
    }
  for (auto &j : queue_) j->finish("", "the server is shutting down");
}

bool scheduler::submit(std::shared_ptr<job> j) {
  {
    std::lock_guard<std::mutex> lock(m_);
    // A free slot takes the job at the next step, so only what is past the
    // free slots waits in the queue and counts against its bound.
    size_t free_slots = 0;
    for (const slot &s : slots_) free_slots += s.j ? 0 : 1;  // read under m_ (admit writes under it)
    if (queue_.size() >= free_slots + config_.queue) return false;
    queue_.push_back(std::move(j));
  }
  cv_.notify_all();
  return true;
}

size_t scheduler::queue_length() const {
  std::lock_guard<std::mutex> lock(m_);
  return queue_.size();
}

void scheduler::loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (stopping_) return;
    }
    admit();
    if (step()) continue;
    std::unique_lock<std::mutex> lock(m_);
    // The timeout lets a cancelled job in a slot be noticed while idle.
    cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_ || !queue_.empty(); });
  }
}

void scheduler::admit() {
  std::lock_guard<std::mutex> lock(m_);
  for (uint32_t s = 0; s < slots_.size() && !queue_.empty(); ++s) {
    if (slots_[s].j) continue;
    std::shared_ptr<job> j = std::move(queue_.front());
    queue_.pop_front();
    if (j->cancelled()) {  // its client left while it waited
      stats_.cancelled.fetch_add(1);
      j->finish("", "cancelled");
      --s;  // the slot is still free
      continue;
    }
    slots_[s] = slot{};
    slots_[s].j = std::move(j);
  }
  uint32_t busy = 0;
  for (const slot &sl : slots_) busy += sl.j ? 1 : 0;
  stats_.slots_busy.store(busy);
}

void scheduler::release(uint32_t seq) {
  slot &s = slots_[seq];
  bp_generator_free(s.gen);
  // Frees the slot's cells for the next request (and for the others: the
  // cache's cells are shared by all slots).
  bp_model_context_seq_clear(context_, seq);
  stats_.cells_used.store(bp_model_context_cells_used(context_));
  std::lock_guard<std::mutex> lock(m_);
  s = slot{};
  uint32_t busy = 0;
  for (const slot &sl : slots_) busy += sl.j ? 1 : 0;
  stats_.slots_busy.store(busy);
}

namespace {

// |token|'s log-probability in |row| and the |n| most likely tokens'.
token_prob probabilities(const float *row, int32_t n_vocab, bp_token token, int32_t n) {
  const float mx = *std::max_element(row, row + n_vocab);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  token_prob p;
  p.token = token;
  p.logprob = row[token] - lse;
  std::vector<bp_token> ids(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
  const size_t k = std::min<size_t>(static_cast<size_t>(n), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](bp_token a, bp_token b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  for (size_t i = 0; i < k; ++i) p.top.emplace_back(ids[i], row[ids[i]] - lse);
  return p;
}

}  // namespace

// Draws slot |seq|'s next token from |row| and hands its text to the job.
void scheduler::deliver(uint32_t seq, const float *row) {
  slot &s = slots_[seq];
  bp_generator_step st{};
  st.struct_size = sizeof st;
  if (bp_generator_draw(s.gen, row, &st) != BP_OK) {
    s.j->finish("", std::string("sampling failed: ") + bp_last_error());
    release(seq);
    return;
  }
  const int64_t drawn = st.token >= 0 ? 1 : 0;
  stats_.tokens_generated.fetch_add(static_cast<uint64_t>(drawn));
  // An end token is not part of the answer, so it gets no logprob entry.
  if (s.j->params.n_probs >= 0 && st.token >= 0 && st.stop != BP_STOP_END) {
    const token_prob p = probabilities(row, n_vocab_, st.token, s.j->params.n_probs);
    s.j->append(std::string(st.text, st.text_len), drawn, &p);
  } else {
    s.j->append(std::string(st.text, st.text_len), drawn);
  }
  if (st.stop == BP_STOP_NONE) {
    s.next = st.token;
    return;
  }
  // OpenAI's reasons: "stop" for an end token or a stop string, "length"
  // for the token limit (the slot's room included).
  s.j->finish(st.stop == BP_STOP_END || st.stop == BP_STOP_STRING ? "stop" : "length");
  release(seq);
}

bool scheduler::step() {
  // A client that left: its sequence ends now and its cells are freed.
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].j && slots_[s].j->cancelled()) {
      stats_.cancelled.fetch_add(1);
      slots_[s].j->finish("", "cancelled");
      release(s);
    }
  std::vector<bp_token> tokens;
  std::vector<uint32_t> seqs;
  std::vector<char> keep;                         // vector<bool> has no data()
  std::vector<std::pair<uint32_t, size_t>> rows;  // (slot, batch index) to draw from
  // Every decoding slot's token first: decode latency does not wait on prompts.
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].j && slots_[s].gen && slots_[s].next >= 0) {
      rows.emplace_back(s, tokens.size());
      tokens.push_back(slots_[s].next);
      seqs.push_back(s);
      keep.push_back(1);
      slots_[s].next = -1;
    }
  // Then prompt chunks in slot order, as far as the step's budget goes.
  size_t budget = config_.batch > tokens.size() ? config_.batch - tokens.size() : 0;
  std::vector<std::pair<uint32_t, size_t>> prompt_ends;
  for (uint32_t s = 0; s < slots_.size() && budget > 0; ++s) {
    slot &sl = slots_[s];
    if (!sl.j || sl.gen) continue;
    const std::vector<bp_token> &p = sl.j->params.prompt;
    const size_t n = std::min(budget, p.size() - sl.prompt_done);
    for (size_t i = 0; i < n; ++i) {
      tokens.push_back(p[sl.prompt_done + i]);
      seqs.push_back(s);
      keep.push_back(0);
    }
    sl.prompt_done += n;
    budget -= n;
    stats_.prompt_tokens.fetch_add(n);
    if (sl.prompt_done == p.size()) {
      keep.back() = 1;  // the last prompt token's row draws the first token
      prompt_ends.emplace_back(s, tokens.size() - 1);
    }
  }
  if (tokens.empty()) return false;

  const auto t0 = std::chrono::steady_clock::now();
  bp_model_batch batch{};
  batch.struct_size = sizeof batch;
  batch.n_tokens = tokens.size();
  batch.tokens = tokens.data();
  batch.seq_ids = seqs.data();
  static_assert(sizeof(char) == sizeof(bool), "keep is passed as bool");
  batch.logits = reinterpret_cast<const bool *>(keep.data());
  if (bp_model_context_eval_batch(context_, &batch) != BP_OK) {
    // Nothing ran (a refused batch leaves the context as it was), but the
    // cause is not one a retry fixes: every job in the batch ends with it.
    const std::string why = std::string("evaluation failed: ") + bp_last_error();
    std::vector<bool> hit(slots_.size(), false);
    for (uint32_t s : seqs) hit[s] = true;
    for (uint32_t s = 0; s < slots_.size(); ++s)
      if (hit[s] && slots_[s].j) {
        slots_[s].j->finish("", why);
        release(s);
      }
    return true;
  }
  for (const auto &[s, i] : rows) deliver(s, bp_model_context_batch_logits(context_, i));
  for (const auto &[s, i] : prompt_ends) {
    slot &sl = slots_[s];
    bp_generator_options o = bp_generator_default_options();
    const gen_params &gp = sl.j->params;
    o.prompt = gp.prompt.data();
    o.n_prompt = gp.prompt.size();
    o.prompt_evaluated = true;  // by the steps above; it joins the penalty's history
    o.max_tokens = gp.max_tokens;
    o.sampler = &gp.sampler;
    std::vector<const char *> stops;
    std::vector<size_t> lengths;
    for (const std::string &x : gp.stops) {
      stops.push_back(x.data());
      lengths.push_back(x.size());
    }
    o.stops = stops.data();
    o.stop_lengths = lengths.data();
    o.n_stops = stops.size();
    if (bp_generator_new(context_, &o, &sl.gen) != BP_OK) {
      sl.j->finish("", std::string("starting the generation failed: ") + bp_last_error());
      release(s);
      continue;
    }
    deliver(s, bp_model_context_batch_logits(context_, i));
  }
  stats_.steps.fetch_add(1);
  stats_.busy_ns.fetch_add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
  stats_.cells_used.store(bp_model_context_cells_used(context_));
  return true;
}

}  // namespace bp::server
