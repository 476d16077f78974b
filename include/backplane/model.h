/* model.h: run llama-family GGUF models (libbackplane-model.so).
 *
 * What it is: a loader for the `llama`, `qwen2` and `qwen3` architectures as
 * llama.cpp writes them to GGUF (hyper-parameters from the file's metadata,
 * weights by llama.cpp's tensor names), the file's own tokenizer
 * (SentencePiece-style `llama` or byte-level BPE `gpt2`), contexts that own a
 * KV cache on the devices of a list such as "vulkan;cpu", and samplers.
 * It is built on the public API alone (backplane.h, gguf.h), like any
 * application; docs/models.md says which files run and how fast.
 *
 * Errors follow backplane.h: every call returns a bp_status (or a value whose
 * failure bp_last_status() tells), and bp_last_error() names the cause and
 * the fix.
 *
 * Threads: a bp_model is read-only once loaded and may be shared by threads,
 * each using its own bp_model_context; a context and a sampler are used by
 * one thread at a time.
 *
 * Usage:
 *   bp_model *m = NULL;
 *   if (bp_model_load("tiny.gguf", NULL, &m)) fprintf(stderr, "%s\n", bp_last_error());
 *   bp_model_context *c = NULL;
 *   bp_model_context_new(m, NULL, &c);
 *   bp_token ids[64]; size_t n = 0;
 *   bp_model_tokenize(m, "Hello", 5, true, false, ids, 64, &n);
 *   bp_model_context_eval(c, ids, n, false);           // the prompt
 *   bp_token next = bp_model_context_argmax(c);          // greedy
 *   ...
 *   bp_model_context_free(c); bp_model_free(m);
 */
#ifndef BACKPLANE_MODEL_H_
#define BACKPLANE_MODEL_H_

#include "backplane/backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t bp_token;
typedef struct bp_model bp_model;
typedef struct bp_model_context bp_model_context;
typedef struct bp_sampler bp_sampler;

/* ------------------------------------------------------------------------ */
/* Loading.                                                                  */

typedef struct bp_model_options {
  uint32_t struct_size; /* caller sets sizeof(bp_model_options) */
  /* Backends, as bp_backend_new_list takes them ("vulkan;cpu", "cpu:threads=2").
   * NULL or "" = "cpu". The scheduler splits each graph over the list; its
   * last entry must be a CPU-type device, the home of every op the others
   * decline, so a list that ends on another device ("vulkan" on a GPU) gets
   * "cpu" appended (the token table then lives there, as it would in
   * "vulkan;cpu"). */
  const char *devices;
  /* Layers whose weights go to the first backend of the list; the others go
   * to the last. -1 (the default) = every layer, when the list has one
   * entry or the first device can hold them all, else as many as fit. */
  int32_t offload_layers;
  /* false (the default): on a device with a weight buffer type
   * (bp_device_weight_buffer_type; the cpu plugin's), the layers' quantized
   * matrices and a quantized output matrix are copied into it at load, in
   * the layout its kernels read fastest. true: every tensor stays as the
   * file has it (mapped where the device can compute on host memory). */
  bool plain_weights;
} bp_model_options;

/* Opens the GGUF file at |path|, checks that it is a model this library runs
 * (architecture, every hyper-parameter, every tensor's name, type and shape)
 * before any device memory is allocated, and loads its weights (mapped on
 * host-memory devices, copied elsewhere). |options| may be NULL.
 * NOT_FOUND: no such file. INVALID_ARGUMENT: a key or tensor is missing or
 * misshapen (the message names it and what was expected). UNIMPLEMENTED:
 * another architecture, or a weight type Backplane does not hold (named).
 * Caller owns *out_model; release with bp_model_free after its contexts. */
BP_API bp_status bp_model_load(const char *path, const bp_model_options *options, bp_model **out_model);
/* Frees the weights and backends. FAILED_PRECONDITION (and nothing freed)
 * while a context of it lives. NULL is a no-op. */
BP_API bp_status bp_model_free(bp_model *model);

typedef struct bp_model_info {
  uint32_t struct_size;  /* caller sets sizeof(bp_model_info) */
  const char *arch;      /* "llama", "qwen2", "qwen3"; borrowed from the model */
  const char *name;      /* general.name, or "" */
  const char *tokenizer; /* "llama" (SentencePiece) or "gpt2" (byte-level BPE) */
  int32_t n_vocab;
  int32_t n_ctx_train;
  int32_t n_embd;
  int32_t n_layer;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t n_ff;
  int32_t head_dim;
  uint64_t n_params;     /* weights, counted in values */
  uint64_t weight_bytes; /* as held on the devices */
  bp_token bos;          /* -1 when the file has none */
  bp_token eos;          /* -1 when the file has none */
  bool add_bos;          /* tokenizer.ggml.add_bos_token (or its default) */
} bp_model_info;
BP_API bp_status bp_model_describe(const bp_model *model, bp_model_info *out);

/* Where the weights went: one entry per backend of the list. */
BP_API size_t bp_model_backend_count(const bp_model *model);
typedef struct bp_model_backend_info {
  uint32_t struct_size; /* caller sets sizeof(bp_model_backend_info) */
  const char *backend;  /* bp_backend_name; borrowed from the model */
  int32_t layers;       /* repeating layers whose weights live here */
  uint64_t weight_bytes;
  bool mapped; /* the weights are the file's own pages (no copy) */
} bp_model_backend_info;
BP_API bp_status bp_model_backend_describe(const bp_model *model, size_t i, bp_model_backend_info *out);

/* ------------------------------------------------------------------------ */
/* Tokenizer.                                                                */

/* Splits |len| bytes of UTF-8 at |text| into tokens, with BOS first when
 * |add_bos| and the vocabulary has one. Special tokens (<s>, <|im_start|>)
 * are recognised in the text only when |parse_special|; otherwise their text
 * is split like any other. Writes at most |capacity| ids and sets *out_count
 * to the number the text needs: RESOURCE_EXHAUSTED when that is more than
 * |capacity| (call again with a larger array). */
BP_API bp_status bp_model_tokenize(const bp_model *model, const char *text, size_t len, bool add_bos,
                                   bool parse_special, bp_token *out, size_t capacity, size_t *out_count);
/* The bytes token |token| stands for (a byte token gives its one byte, a
 * SentencePiece word boundary gives a space; control tokens give ""), as a
 * pointer and length. Borrowed; valid until bp_model_free. */
BP_API bp_status bp_model_token_text(const bp_model *model, bp_token token, const char **out_data, size_t *out_len);
/* The vocabulary entry itself, as in the file ("▁the", "<0x0A>"). */
BP_API bp_status bp_model_token_piece(const bp_model *model, bp_token token, const char **out_data, size_t *out_len);
/* The text of |n| tokens: the bytes of each in order (byte tokens join into
 * UTF-8), dropping the space SentencePiece adds at the start of a text when
 * the first token carries it and |strip_leading_space|. Same buffer rule as
 * bp_model_tokenize (RESOURCE_EXHAUSTED, *out_len = the bytes needed). */
BP_API bp_status bp_model_detokenize(const bp_model *model, const bp_token *tokens, size_t n, bool strip_leading_space,
                                     char *out, size_t capacity, size_t *out_len);
/* True for a token that ends a generation (EOS, EOT, <|im_end|> ...). */
BP_API bool bp_model_token_is_end(const bp_model *model, bp_token token);

/* ------------------------------------------------------------------------ */
/* Contexts: a KV cache and the graphs that use it.                          */

typedef struct bp_model_context_options {
  uint32_t struct_size; /* caller sets sizeof(bp_model_context_options) */
  /* Cells (one position of one sequence each) the KV cache holds, shared
   * by all its sequences; 0 = min(n_ctx_train, 4096). */
  uint32_t n_ctx;
  uint32_t n_batch; /* tokens per graph; 0 = 512 */
  bool kv_f32;      /* KV cache in f32 instead of f16 */
  /* Attention as separate products and SOFT_MAX instead of the fused
   * ATTENTION op. By default the fused op is used when every backend that
   * holds a layer supports it (docs/models.md, "Attention"). */
  bool unfused_attention;
  /* Sequences the context holds at once (ids 0 .. n_seq-1), at most 256;
   * 0 = 1. See "Sequences" below. */
  uint32_t n_seq;
} bp_model_context_options;

/* New context on |model| with an empty KV cache allocated on the devices
 * that hold each layer. |options| may be NULL. Caller owns *out_context. */
BP_API bp_status bp_model_context_new(bp_model *model, const bp_model_context_options *options,
                                      bp_model_context **out_context);
BP_API void bp_model_context_free(bp_model_context *context); /* NULL ok */

/* Runs |n| tokens of sequence 0 at its next positions (in graphs of at most
 * n_batch), so their keys and values join the cache: bp_model_context_eval_batch
 * with one sequence. Afterwards bp_model_context_logits holds one row of
 * n_vocab logits per token when |all_logits|, else the last token's row only.
 * Errors: RESOURCE_EXHAUSTED when the tokens would pass n_ctx (nothing is
 * run; the message says how many positions are left); INVALID_ARGUMENT for
 * an id outside the vocabulary. */
BP_API bp_status bp_model_context_eval(bp_model_context *context, const bp_token *tokens, size_t n, bool all_logits);
/* The logits of the last eval: *out_rows rows of n_vocab floats, row-major,
 * one per token whose logits were kept, in batch order. Borrowed; valid
 * until the next eval, bp_model_context_rewind or free. NULL before an eval. */
BP_API const float *bp_model_context_logits(const bp_model_context *context, size_t *out_rows);
/* The id of the largest logit of the last row (greedy decoding); -1 before an eval. */
BP_API bp_token bp_model_context_argmax(const bp_model_context *context);
/* How many forward graphs this context has built and how many times the
 * scheduler planned one (allocation included), since it was made: with the
 * fused attention cache, decode steps reuse one graph and plan until the
 * attended length grows past the next multiple of 128 (docs/models.md).
 * Either pointer may be NULL. */
BP_API bp_status bp_model_context_graph_stats(const bp_model_context *context, uint64_t *out_builds,
                                              uint64_t *out_plans);
/* Positions used so far by sequence 0 (bp_model_context_seq_length). */
BP_API uint32_t bp_model_context_position(const bp_model_context *context);
BP_API uint32_t bp_model_context_size(const bp_model_context *context); /* n_ctx */
/* Forgets every position of sequence 0 from |position| on (0 = empty), so
 * the next eval starts there, and the last eval's logits.
 * INVALID_ARGUMENT past the current position. */
BP_API bp_status bp_model_context_rewind(bp_model_context *context, uint32_t position);
/* Device memory the context holds (KV cache and compute buffers), in bytes. */
BP_API uint64_t bp_model_context_memory(const bp_model_context *context);

/* ------------------------------------------------------------------------ */
/* Sequences: several token streams in one context.                         */

/* A context holds n_seq sequences (bp_model_context_options) in one KV
 * cache of n_ctx cells: each cell holds one position's keys and values and
 * the set of sequences that see it. One eval takes tokens of several
 * sequences, so a decode step for 16 users is one graph whose products have
 * 16 columns; the attention mask lets a token see only the cells of its own
 * sequence at positions up to its own. The single-sequence calls above act
 * on sequence 0. docs/models.md, "Sequences".
 *
 * A batch: token i goes to sequence seq_ids[i] at position positions[i]. */
typedef struct bp_model_batch {
  uint32_t struct_size; /* caller sets sizeof(bp_model_batch) */
  size_t n_tokens;
  const bp_token *tokens;
  /* Each token's sequence, < n_seq. NULL = every token in sequence 0. */
  const uint32_t *seq_ids;
  /* Each token's position. A sequence's tokens continue it in batch order
   * without a gap: the first at bp_model_context_seq_length, the next one
   * after, and so on (positions may interleave across sequences).
   * NULL = counted so. */
  const uint32_t *positions;
  /* Whether each token's logits row is kept. NULL = the last token of each
   * sequence in the batch. */
  const bool *logits;
} bp_model_batch;

/* Runs the batch (in graphs of at most n_batch tokens, in batch order), so
 * its keys and values join the cache. Afterwards bp_model_context_logits
 * holds the kept rows in batch order and bp_model_context_batch_logits finds
 * a token's. Nothing runs when the batch is refused: INVALID_ARGUMENT for
 * NULL, struct_size not set, no tokens, an id outside the vocabulary, a
 * sequence id >= n_seq, a position that does not continue its sequence;
 * RESOURCE_EXHAUSTED when the free cells cannot hold the batch (the message
 * says how many are free; free some with the calls below). */
BP_API bp_status bp_model_context_eval_batch(bp_model_context *context, const bp_model_batch *batch);
/* The logits row (n_vocab floats) of token |i| of the last eval's batch;
 * NULL when its row was not kept or |i| is past the batch. Borrowed, as
 * bp_model_context_logits. */
BP_API const float *bp_model_context_batch_logits(const bp_model_context *context, size_t i);

BP_API uint32_t bp_model_context_seq_count(const bp_model_context *context);  /* n_seq */
BP_API uint32_t bp_model_context_cells_used(const bp_model_context *context); /* cells some sequence holds */
/* The position the next token of |seq| takes: one past its highest (0 when
 * empty). INVALID_ARGUMENT for a sequence id >= n_seq (in every call below). */
BP_API bp_status bp_model_context_seq_length(const bp_model_context *context, uint32_t seq, uint32_t *out_length);
/* |seq| lets go of its positions in [p0, p1) (p1 past its length: to the
 * end); a cell no sequence holds any more is free. INVALID_ARGUMENT for
 * p0 > p1. A gap left in the middle stays one: the sequence goes on after
 * its highest position. */
BP_API bp_status bp_model_context_seq_remove(bp_model_context *context, uint32_t seq, uint32_t p0, uint32_t p1);
/* Empties |seq| (bp_model_context_seq_remove from 0 to the end). */
BP_API bp_status bp_model_context_seq_clear(bp_model_context *context, uint32_t seq);
/* |seq| forgets its positions from |position| on, so its next token goes
 * there. INVALID_ARGUMENT past its length. Unlike bp_model_context_rewind,
 * the last eval's logits stay (other sequences' rows are still wanted). */
BP_API bp_status bp_model_context_seq_rewind(bp_model_context *context, uint32_t seq, uint32_t position);
/* |dst| becomes the first |end| positions of |src| (a shared prompt): it
 * lets go of what it held, then shares |src|'s cells at positions < end,
 * which are not copied or evaluated again; later tokens of either go to
 * cells of their own. INVALID_ARGUMENT for src == dst or |end| past the
 * length of |src|. */
BP_API bp_status bp_model_context_seq_copy(bp_model_context *context, uint32_t src, uint32_t dst, uint32_t end);

/* ------------------------------------------------------------------------ */
/* Sampling.                                                                 */

typedef struct bp_sampler_options {
  uint32_t struct_size;  /* caller sets sizeof(bp_sampler_options) */
  float temperature;     /* <= 0: greedy (argmax), and the filters below are unused */
  int32_t top_k;         /* keep the k most likely; <= 0 = all */
  float top_p;           /* keep the smallest set with this much probability; >= 1 = all */
  float min_p;           /* drop tokens below min_p x the top probability; 0 = none */
  float repeat_penalty;  /* > 1 makes the last repeat_last_n tokens less likely; 1 = none */
  int32_t repeat_last_n; /* how many accepted tokens the penalty looks at; 0 = 64 */
  uint64_t seed;         /* the same seed, logits and options give the same tokens */
} bp_sampler_options;
/* The defaults: greedy, top_k 40, top_p 0.95, min_p 0.05, no penalty, seed 0. */
BP_API bp_sampler_options bp_sampler_default_options(void);
BP_API bp_status bp_sampler_new(const bp_sampler_options *options, bp_sampler **out_sampler);
BP_API void bp_sampler_free(bp_sampler *sampler); /* NULL ok */
/* Picks a token from |n_vocab| logits (penalty, top-k, top-p, min-p,
 * temperature, then a draw; in that order) and remembers it for the penalty. */
BP_API bp_status bp_sampler_sample(bp_sampler *sampler, const float *logits, int32_t n_vocab, bp_token *out_token);
/* Remembers |token| for the repetition penalty without sampling (prompt tokens). */
BP_API void bp_sampler_accept(bp_sampler *sampler, bp_token token);
/* Forgets the history and restarts the random sequence from the seed. */
BP_API void bp_sampler_reset(bp_sampler *sampler);

/* ------------------------------------------------------------------------ */
/* Generation: evaluate, sample, stop; and the text ready to print.          */

/* One generation in a context: it evaluates the prompt, then draws a token
 * per step with a sampler of its own, feeds it back, and returns the bytes
 * that may be printed, holding back the start of a UTF-8 character split
 * over tokens and a tail that could become a stop string. bp-generate and
 * the Python module's Model.generate are loops over it, and bp-server draws
 * each slot's tokens with bp_generator_draw (docs/models.md, "Generation"). */
typedef struct bp_generator bp_generator;

/* Why a generation stopped. The values and the names bp_stop_reason_name
 * gives are stable: tools print the names and scripts compare them. */
typedef enum bp_stop_reason {
  BP_STOP_NONE = 0,   /* "none": still running */
  BP_STOP_END = 1,    /* "end": an end token was drawn (bp_model_token_is_end) */
  BP_STOP_STRING = 2, /* "stop": a stop string appeared in the text */
  BP_STOP_LENGTH = 3, /* "length": max_tokens tokens were drawn */
  BP_STOP_CONTEXT = 4 /* "context": the KV cache is full, so the last token drawn cannot be fed back */
} bp_stop_reason;
/* The name above; "unknown" for another value. Static storage; never fails. */
BP_API const char *bp_stop_reason_name(bp_stop_reason reason);

typedef struct bp_generator_options {
  uint32_t struct_size; /* caller sets sizeof(bp_generator_options) */
  /* Tokens evaluated by the first bp_generator_next, after what the context
   * already holds; they also join the sampler's history (the repetition
   * penalty). Copied by bp_generator_new. */
  const bp_token *prompt;
  size_t n_prompt;
  /* true: the prompt is in the context already (the caller evaluated it, to
   * time it or to read every row's logits): it only joins the history, and
   * the first token is drawn from the context's last logits row. With no
   * prompt (n_prompt 0) that is what happens either way. */
  bool prompt_evaluated;
  /* Tokens drawn at most, an end token included; negative = no limit (an
   * end token, a stop string or a full context ends it). */
  int64_t max_tokens;
  /* How tokens are drawn; NULL = bp_sampler_default_options() (greedy).
   * Copied. */
  const bp_sampler_options *sampler;
  /* Stop strings: generation ends where the first of them appears in the
   * text, which is returned up to it; neither it nor anything after it is.
   * stops[i] has stop_lengths[i] bytes (any bytes, NUL included), or is
   * NUL-terminated when stop_lengths is NULL. An empty one is
   * INVALID_ARGUMENT (it would match before any text). Copied. */
  const char *const *stops;
  const size_t *stop_lengths;
  size_t n_stops;
} bp_generator_options;
/* The defaults: no prompt, no limit (max_tokens -1), greedy, no stop strings. */
BP_API bp_generator_options bp_generator_default_options(void);

/* New generator on |context|, which it borrows: the context must outlive
 * it, and the two are used by one thread at a time. Nothing runs until the
 * first bp_generator_next. |options| may be NULL (the defaults).
 * INVALID_ARGUMENT: a NULL or freed context, options->struct_size not set
 * (under 4, or over sizeof(bp_generator_options); a smaller one, from an
 * older header, leaves the later fields at their defaults), a NULL array
 * with a count, an empty stop string, a prompt token outside the
 * vocabulary, sampler options bp_sampler_new refuses. FAILED_PRECONDITION: nothing is to be evaluated (no prompt, or
 * prompt_evaluated) and the context has no logits to draw the first token
 * from. Caller owns *out_generator; release with bp_generator_free. */
BP_API bp_status bp_generator_new(bp_model_context *context, const bp_generator_options *options,
                                  bp_generator **out_generator);
BP_API void bp_generator_free(bp_generator *generator); /* NULL ok; the context lives on */

typedef struct bp_generator_step {
  uint32_t struct_size; /* caller sets sizeof(bp_generator_step) */
  /* The token drawn in this step, an end token too (with stop END); -1 when
   * none was (the generation had stopped already, or max_tokens is 0). */
  bp_token token;
  /* Bytes that may be printed now (often none while a character or a stop
   * string is incomplete; at the stop, everything still held). Joined over
   * all steps they are the generated tokens' bytes up to the stop string.
   * Borrowed from the generator, valid until its next call or free;
   * NUL-terminated after text_len bytes. */
  const char *text;
  size_t text_len;
  /* BP_STOP_NONE while running; set on the step that stops and on every
   * step after it (which draws nothing and returns no text). */
  bp_stop_reason stop;
} bp_generator_step;

/* One step: evaluates what is pending (the prompt, or the token drawn by
 * the step before), draws a token from the last logits row, and fills
 * |out_step|. The token that stops a generation is never evaluated:
 * afterwards the context holds the prompt and every drawn token but the
 * last. Failures: INVALID_ARGUMENT (NULL arguments, out_step->struct_size
 * less than sizeof(bp_generator_step)); an eval's status (RESOURCE_EXHAUSTED
 * for a prompt longer than the context has room for, ...);
 * FAILED_PRECONDITION when the context has no logits (rewound by the
 * caller). A failed eval or draw ends the generator: later calls return
 * FAILED_PRECONDITION naming the first failure. */
BP_API bp_status bp_generator_next(bp_generator *generator, bp_generator_step *out_step);

/* One step of a generation whose evaluation the caller runs, for a server
 * that decodes many sequences in one bp_model_context_eval_batch: draws a
 * token from |logits| (one row of n_vocab floats, e.g.
 * bp_model_context_batch_logits of the caller's sequence) and fills
 * |out_step| as bp_generator_next does, but evaluates nothing: the drawn
 * token (when out_step->stop is BP_STOP_NONE) is the caller's to evaluate in
 * its sequence before the next draw. Make the generator with
 * prompt_evaluated (or no prompt) after evaluating the prompt, and drive it
 * with this call only: bp_generator_next would draw from the context's last
 * row, not the sequence's. The context is read only for the vocabulary and
 * the free cells (BP_STOP_CONTEXT when none is left). |logits| is borrowed
 * for the call. INVALID_ARGUMENT: NULL arguments, out_step->struct_size less
 * than sizeof(bp_generator_step). FAILED_PRECONDITION: a prompt is still
 * pending (made without prompt_evaluated), or an earlier step failed. */
BP_API bp_status bp_generator_draw(bp_generator *generator, const float *logits, bp_generator_step *out_step);

/* Names before 0.3, kept as deprecated aliases until 0.3 (docs/api-guide.md,
 * "Renamed before 0.3"). Define BP_NO_DEPRECATED to hide them. */
#ifndef BP_NO_DEPRECATED /* BP_DEPRECATED comes from deprecated.h, through backplane.h */
BP_DEPRECATED("bp_model_describe") BP_API bp_status bp_model_get_info(const bp_model *model, bp_model_info *out);
BP_DEPRECATED("bp_model_backend_describe")
BP_API bp_status bp_model_get_backend_info(const bp_model *model, size_t i, bp_model_backend_info *out);
#endif /* BP_NO_DEPRECATED */

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_MODEL_H_ */
