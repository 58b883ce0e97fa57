/*
 * staticlm — run large language models as statically compiled programs.
 *
 * A model (llama2.c checkpoint, GGUF file or Hugging Face folder) is compiled
 * into static programs: prefill (max_prompt_len rows, and smaller row counts
 * on request) and generate (1 row, at the full KV capacity and smaller ones on
 * request), plus verify and lm_head programs when asked for; all share one KV
 * cache of fixed capacity. The runtime steers them with data only (attention
 * mask, position ids, write index); shapes never change after compilation.
 * The compiled programs can be stored as a blob (an ELF file) and mapped back.
 *
 * Conventions: every function that can fail returns slm_status; the message
 * is kept on the handle and read with slm_last_error(). Handles are opaque.
 */
#ifndef STATICLM_H
#define STATICLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SLM_API __attribute__((visibility("default")))
#else
#define SLM_API
#endif

#define SLM_VERSION "0.1.0"

typedef enum slm_status {
    SLM_OK = 0,
    SLM_ERR_IO,          /* a file could not be opened, read, mapped or written */
    SLM_ERR_FORMAT,      /* a file is malformed: the message names file and field */
    SLM_ERR_UNSUPPORTED, /* well-formed but not supported (architecture, type) */
    SLM_ERR_NOMEM,       /* an allocation failed */
    SLM_ERR_ARG,         /* a caller passed an invalid argument */
    SLM_ERR_CAPACITY,    /* prompt or generation does not fit the static capacity */
    SLM_ERR_INTERNAL     /* a bug in staticlm */
} slm_status;

/* A short constant name for a status code ("ok", "format error", ...). */
SLM_API const char *slm_status_str(slm_status s);

/* ---- memory hook ------------------------------------------------------ */

/* All heap memory the library uses goes through this allocator. Tests use it
 * to count allocations (the decode loop must make none) and to fail the Nth. */
typedef struct slm_allocator {
    void *(*alloc)(void *ud, size_t size);               /* like malloc */
    void *(*realloc)(void *ud, void *ptr, size_t size);  /* like realloc */
    void (*free)(void *ud, void *ptr);                   /* like free */
    void *ud;
} slm_allocator;

/* Install an allocator (NULL restores the C library's). Not thread-safe:
 * call it before creating any handle. */
SLM_API void slm_set_allocator(const slm_allocator *a);

/* ---- engine ----------------------------------------------------------- */

/* How the executor's threads meet between stages (slm_options.schedule,
 * --schedule; docs/architecture.md). */
typedef enum slm_schedule_kind {
    SLM_SCHEDULE_DEFAULT = 0,    /* the default: rendezvous (docs/benchmarks.md) */
    SLM_SCHEDULE_RENDEZVOUS = 1, /* every thread waits for every other at each barrier */
    SLM_SCHEDULE_COUNTED = 2     /* a stage waits for its producers only; idle threads prefetch */
} slm_schedule_kind;

typedef struct slm_options {
    const char *tokenizer_path; /* llama2.c tokenizer.bin; NULL = the model's own
                                   (GGUF) or tokenizer.bin beside the model */
    int max_prompt_len;         /* prefill rows (0 = 1024) */
    int min_response_len;       /* extra KV rows for generation (-1 = 128) */
    int n_threads;              /* worker threads (0 = all cores) */
    int verbose;                /* 1: progress and notes on stderr */
    const char *cache_dir;      /* non-NULL: compile a source model once into a blob in
                                   this folder (created if missing) and map it on later
                                   loads; a stale or damaged blob is recompiled */
    /* ---- the runtime's answers to static shapes (docs/config.md) ---- */
    int prefill_variants[8];    /* extra prefill programs of these row counts (0 = none) */
    int generate_variants[8];   /* extra generate programs of these KV capacities (0 = none) */
    int no_chunking;            /* 1: refuse prompts longer than max_prompt_len instead of
                                   prefilling them in chunks */
    int prefix_cache_mb;        /* > 0: keep KV rows of earlier prompts' prefixes (MiB) */
    const char *draft_path;     /* speculative decoding: the draft model (same vocabulary) */
    const char *draft_tokenizer_path; /* its llama2.c tokenizer.bin, if it needs one */
    int draft_n;                /* tokens the draft proposes per step (default 4) */
    int lm_head_separate;       /* 1: the vocabulary projection is its own program */
    int lm_head_threads;        /* its thread count when separate (0 = the body's) */
    int on_overflow;            /* an slm_overflow: what decoding does when the KV is full */
    int tile_kb;                /* weight panel of one matrix task, KiB (0 = L2 / 8) */
    int n_seqs;                 /* sessions at once: KV regions of kv_capacity rows each (0 = 1);
                                   from a source model, batch programs decode up to 4 of them
                                   in one walk of the weights; from a blob compiled with
                                   --parallel N: 1 to N (N regions allocated all the same) */
    size_t max_prompt_bytes;    /* longest prompt text the tokenizer accepts, bytes (0 = 8 MiB);
                                   a longer one is refused with SLM_ERR_CAPACITY before any work */
    long long max_memory_mb;    /* memory budget, MiB, for what a model's shapes make the engine
                                   allocate (KV cache, arena, logits, prefix cache): checked
                                   before allocating, refused with SLM_ERR_CAPACITY when over;
                                   0 = 75% of RAM, < 0 = no limit */
    int verify_cache;           /* cache mode: hash the model and tokenizer files whole even
                                   when their quick identity (size, times, inode, sampled
                                   pages) matches a remembered hash (docs/blob.md) */
    int schedule;               /* an slm_schedule_kind: how threads meet between stages */
    int kv_type;                /* an slm_kv_type: the KV cache's element type (a compile
                                   option: a blob holds one and refuses another) */
    int prefetch;               /* an slm_prefetch: weight prefetch in decode programs (a
                                   compile option: a blob holds one and refuses another) */
    int recur_checkpoints;      /* models with recurrent layers (qwen35, qwen35moe): saved
                                   states per session that a shorter next prompt resumes
                                   from (0 = 3; at most 16), each the size of the state */
    int embeddings;             /* 1: also compile embedding programs (the final norm of every
                                   row; slm_session_embed); from a source model only */
    int weight_type;            /* an slm_weight_type: quantize a source model's F32 / F16 /
                                   BF16 matrices at load (a compile option: a blob's weights
                                   are what it was compiled with) */
} slm_options;

/* Weight quantization at load (slm_options.weight_type, --weight-type), the
 * types per tensor as llama-quantize's file types of those names (without
 * an importance matrix). */
typedef enum slm_weight_type {
    SLM_WEIGHTS_AS_IS = 0,  /* the file's own types */
    SLM_WEIGHTS_Q8_0 = 1,
    SLM_WEIGHTS_Q4_0 = 2,   /* the output matrix Q6_K */
    SLM_WEIGHTS_Q4_K_M = 3, /* Q4_K; Q6_K for the output and some layers' attn_v / ffn_down */
    SLM_WEIGHTS_Q5_K_M = 4, /* Q5_K; Q6_K for the output and some layers' attn_v / ffn_down */
    SLM_WEIGHTS_Q6_K = 5,   /* Q6_K */
    SLM_WEIGHTS_Q4_K_S = 6, /* Q4_K; Q6_K for the output, Q5_K for the first four attn_v and
                               the first eighth of the layers' ffn_down */
    SLM_WEIGHTS_Q5_K_S = 7, /* Q5_K; Q6_K for the output */
    SLM_WEIGHTS_Q5_0 = 8,   /* Q5_0; the output matrix Q6_K */
    SLM_WEIGHTS_IQ4_NL = 9, /* IQ4_NL; Q6_K for the output, Q5_K for attn_v with 4 or more query heads a
                               KV head and for the first eighth of the layers' ffn_down */
    SLM_WEIGHTS_IQ4_XS = 10,/* IQ4_XS; the same as IQ4_NL */
    SLM_WEIGHTS_COUNT       /* one past the last */
} slm_weight_type;

/* "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q4_k_s", "q5_k_s", "q5_0",
 * "iq4_nl", "iq4_xs" (either case) -> an slm_weight_type; -1 for anything else. */
SLM_API int slm_weight_type_parse(const char *name);

/* Weight prefetch of the decode programs (slm_options.prefetch): PREFETCH
 * tasks that idle threads run under the counted schedule, and every decode
 * matmul streaming its weights a few KiB ahead of its reads. */
typedef enum slm_prefetch {
    SLM_PREFETCH_DEFAULT = 0, /* on from a source model; a blob's own choice */
    SLM_PREFETCH_ON = 1,
    SLM_PREFETCH_OFF = 2
} slm_prefetch;

/* The KV cache's element type (slm_options.kv_type). */
typedef enum slm_kv_type {
    SLM_KV_DEFAULT = 0, /* SLM_KV_F16 from a source model; a blob's own type */
    SLM_KV_F32 = 1,
    SLM_KV_F16 = 2,     /* IEEE half */
    SLM_KV_Q8_0 = 3     /* GGML's Q8_0 blocks: 32 int8 and an f16 scale (head_dim % 32 == 0) */
} slm_kv_type;

/* "f32", "f16", "q8_0" -> an slm_kv_type; -1 for anything else. */
SLM_API int slm_kv_type_parse(const char *name);

/* What generation does when the KV cache is full (the one overflow policy
 * of run, chat and serve). A conversation (chat, serve) applies it to whole
 * messages before a turn: truncate drops the oldest turns (keeping the
 * system prompt), error refuses the turn. */
typedef enum slm_overflow {
    SLM_OVERFLOW_ERROR = 0,   /* stop with SLM_ERR_CAPACITY and a message */
    SLM_OVERFLOW_TRUNCATE = 1 /* keep BOS + the newest half, re-prefill, go on (said in a note) */
} slm_overflow;

SLM_API slm_options slm_default_options(void);

typedef struct slm_engine slm_engine;

/* Load a model (llama2.c .bin, .gguf, a Hugging Face folder, or a blob
 * written by slm_save_blob), compile its static programs (not for a blob)
 * and allocate every buffer. *out is set even on failure (unless out of memory),
 * so slm_last_error(*out) can explain; free it with slm_free. */
SLM_API slm_status slm_load(slm_engine **out, const char *model_path, const slm_options *opt);
SLM_API void slm_free(slm_engine *e);

/* ---- blobs (the compiled model as an ELF file; docs/blob.md) ----------- */

/* slm_load detects a blob by its ELF magic: it is mapped, validated and run
 * without compiling (its tokenizer and compile options are inside it). An
 * option the blob fixed (tokenizer_path, max_prompt_len, min_response_len,
 * the variants, draft_n, lm_head_separate, tile_kb) set to anything but what
 * the blob holds is refused (SLM_ERR_ARG) with a message naming the option
 * and the blob's value; left at its default it takes the blob's.
 * Write the programs of an engine loaded from a source model into a blob
 * (atomically: temporary file + rename). */
SLM_API slm_status slm_save_blob(slm_engine *e, const char *path);
/* Print a blob's programs, I/O, task counts, memory needs and identity to
 * a FILE *; verify_weights also hashes the weights section. On failure the
 * message goes to errbuf. */
SLM_API slm_status slm_inspect_blob(const char *path, void *file, int verify_weights, char *errbuf, size_t cap);
/* What cache mode did at load ("loaded cached blob ...", "... recompiling"); "" otherwise. */
SLM_API const char *slm_cache_note(const slm_engine *e);
SLM_API const char *slm_last_error(const slm_engine *e);

typedef struct slm_info {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim;
    int vocab_size, context_len;
    int max_prompt_len, min_response_len, kv_capacity;
    int bos_id, eos_id;
    size_t weight_bytes, kv_bytes, arena_bytes;
    int prefill_tasks, generate_tasks;
    int n_seqs;     /* slots: sessions at once (slm_options.n_seqs) */
    int batch_max;  /* sequences one batch program decodes together (0: none) */
    const char *kv_type; /* the KV cache's element type: "f32", "f16" or "q8_0" */
    int kv_regions; /* KV regions allocated (kv_bytes): n_seqs, or more where a blob's batch
                       programs address more (compile --parallel N, loaded with N > n_seqs) */
    size_t state_bytes; /* recurrent layers' state for all KV regions, with its checkpoints (qwen35; 0 for others) */
} slm_info;
SLM_API void slm_get_info(const slm_engine *e, slm_info *info);

/* A metadata value of the model file (GGUF key, e.g.
 * "tokenizer.chat_template"), copied NUL-terminated into buf: a string as
 * it is, a number or bool as text (as llama_model_meta_val_str gives it:
 * "0.6", "20", "true"). Returns the value's length (which may be >= cap:
 * then truncated), or -1 when the key is absent or an array (llama2.c files
 * have no metadata). A blob keeps the strings, general.file_type and the
 * general.sampling.* numbers. */
SLM_API long slm_model_meta(const slm_engine *e, const char *key, char *buf, size_t cap);

/* ---- tokenizer -------------------------------------------------------- */

/* Encode text into ids[0..cap). Returns the number of ids (which may exceed
 * cap: then only cap were written), or below zero on error: -1 out of
 * memory, -2 the text is longer than max_prompt_bytes, -3 the tokenizer's
 * pre-tokenizer regexes exceeded their work limits on this text. */
SLM_API int slm_tokenize(slm_engine *e, const char *text, int add_bos, int32_t *ids, int cap);
/* As slm_tokenize, but special-token text on bytes with plain[i] != 0
 * (plain: strlen(text) bytes, NULL = none) is tokenized as plain text: a
 * rendered chat prompt whose message bytes are marked (chat.c). */
SLM_API int slm_tokenize_masked(slm_engine *e, const char *text, const unsigned char *plain, int add_bos, int32_t *ids,
                                int cap);
/* The text of token `id` following token `prev`, as run.c prints it: byte
 * tokens become raw bytes, the space after BOS is dropped. Valid until the
 * engine is freed. Returns "" for an invalid id. */
SLM_API const char *slm_token_piece(const slm_engine *e, int prev, int id);
/* 1 when the piece is worth printing by run.c's rule: not a lone byte
 * other than printable ASCII and white space. */
SLM_API int slm_piece_printable(const char *piece);
/* 1 when a reply shows the piece (run, chat, serve, grammars): with a
 * llama2.c tokenizer.bin, run.c's rule (slm_piece_printable: its outputs
 * match run.c byte for byte); with the other vocabularies every piece but
 * a lone ASCII control byte, so that characters made of byte tokens
 * (SentencePiece's <0xXX> fallback, byte-level BPE's single bytes) keep
 * their bytes. */
SLM_API int slm_piece_shown(const slm_engine *e, const char *piece);

/* ---- runtime: the KV cache and the two programs ------------------------ */

/* The raw calls below work on KV region 0 (the whole KV of a one-sequence
 * engine); do not mix them with a session that holds region 0.
 * Start a new conversation: zero the KV cache and num_stored_tokens. */
SLM_API void slm_reset(slm_engine *e);
/* Prefill n ids, appended after the tokens already stored: through the
 * smallest prefill program that holds them, or, when n > max_prompt_len, in
 * successive chunks (SLM_ERR_CAPACITY instead with no_chunking, or when the
 * KV cache cannot hold them). *logits ([vocab] floats, valid until the next
 * call; NULL on failure) are those of the last id. */
SLM_API slm_status slm_prefill(slm_engine *e, const int32_t *ids, int n, const float **logits);
/* Run a generate program on one id (appended); *logits as for slm_prefill. */
SLM_API slm_status slm_decode(slm_engine *e, int32_t id, const float **logits);
SLM_API int slm_num_stored(const slm_engine *e);
SLM_API int slm_capacity(const slm_engine *e);
/* Keep the first n_keep stored tokens (0 <= n_keep <= stored); the later
 * rows are forgotten as if never appended (bench repetitions at a depth
 * restore the filled cache this way, as llama-bench restores its state).
 * A model with recurrent layers (qwen35) prefills the kept tokens again to
 * rebuild its state; an error of that prefill is returned (message on e). */
SLM_API slm_status slm_trim(slm_engine *e, int n_keep);

/* ---- sampling --------------------------------------------------------- */

/* One token's logit bias (OpenAI's logit_bias, llama.cpp's --logit-bias). */
typedef struct slm_logit_bias {
    int32_t token;
    float bias; /* added to the logit (-100 all but bans the token) */
} slm_logit_bias;

#define SLM_MAX_LOGIT_BIAS 300

typedef struct slm_sampling {
    float temperature; /* 0 = greedy */
    int top_k;         /* 0 = off */
    float top_p;       /* 0 or >= 1 = off */
    uint64_t seed;
    float min_p;       /* 0 = off: drop tokens whose probability (before the
                          temperature) is below min_p times the top one's */
    /* Penalties over the last repeat_last_n tokens the session holds (the
     * prompt's included, as llama.cpp's CLI; -1 = all of them, 0 = none):
     * each distinct token's logit is divided (positive) or multiplied
     * (negative) by repeat_penalty, then lowered by presence_penalty once and
     * frequency_penalty per occurrence. Off: 1 (or 0), 0, 0. Greedy too. */
    float repeat_penalty;
    int repeat_last_n;
    float presence_penalty;
    float frequency_penalty;
    int n_logit_bias;  /* entries of logit_bias in use (<= SLM_MAX_LOGIT_BIAS) */
    slm_logit_bias logit_bias[SLM_MAX_LOGIT_BIAS];
    /* A GBNF grammar (llama.cpp's format; NULL = none) the reply must match:
     * a session compiles it when configured (an invalid one fails there with
     * the line and column) and keeps no pointer to it; each reply starts at
     * its `root`. Only tokens whose text continues it are sampled, a stop
     * token only where it may end; speculative decoding is off under it. */
    const char *grammar;
    /* Control tokens the grammar may produce, by their texts separated by
     * spaces (NULL = none; at most SLM_MAX_GRAMMAR_TOKENS ids): each counts
     * as its text, as the reply shows it. Other control tokens never fit a
     * grammar. Tool calls under tool_choice required use it for markers that
     * are control tokens ([TOOL_CALLS], harmony's <|channel|>). */
    const char *grammar_tokens;
} slm_sampling;
#define SLM_MAX_GRAMMAR_TOKENS 16

/* Pick a token from logits (modified in place). rng_state is the caller's
 * generator state, seeded with slm_sampling.seed (0 maps to a fixed value). */
SLM_API int slm_sample(float *logits, int n, const slm_sampling *s, uint64_t *rng_state,
                       void *scratch);
/* Bytes of scratch slm_sample needs for a vocabulary of n. */
SLM_API size_t slm_sample_scratch_size(int n);
/* The biases and penalties of s on logits (in place), for a session whose
 * tokens so far are hist[0..n_hist) then more[0..n_more): call before
 * slm_sample (which applies min_p, the temperature, top-k and top-p). Does
 * nothing when s sets none. scratch: slm_sample_scratch_size(n) bytes. */
SLM_API void slm_sample_adjust(float *logits, int n, const slm_sampling *s, const int32_t *hist, int n_hist,
                               const int32_t *more, int n_more, void *scratch);
/* Whether s sets a bias or a penalty (slm_sample_adjust would change logits). */
SLM_API int slm_sample_adjusts(const slm_sampling *s);

/* ---- sessions: the generation loop ------------------------------------ */

/* A session owns one conversation's KV rows (a slot of the engine's KV
 * cache) and its generation state. Feed it tokens (a prompt, or text that
 * continues what its rows hold), then call slm_session_next for each token.
 * run, chat and serve are thin callers of it. An engine has as many slots as
 * it was loaded with (slm_options.n_seqs); sessions on different slots may
 * be fed and stepped one after another (not from two threads at once), and
 * slm_session_step_batch decodes several in one program call. */
typedef struct slm_session slm_session;

typedef struct slm_session_cfg {
    slm_sampling samp;
    int n_predict;            /* most tokens per reply, counted from the last feed (0 = until a stop) */
    int ignore_eos;           /* 1: no stop tokens (benchmarks, goldens); stop strings still apply */
    const char *const *stop;  /* stop strings (copied): the reply ends where one starts */
    int n_stop;               /* at most 8 */
    void (*on_note)(void *ud, const char *note); /* the overflow policy's notes (NULL: none) */
    void *note_ud;
    int logprobs;             /* 1: keep each returned token's log-probability (slm_session_logprobs);
                                 speculative decoding is off for the session */
    int top_logprobs;         /* with logprobs: the n most likely tokens too, 0..SLM_MAX_TOP_LOGPROBS */
} slm_session_cfg;

#define SLM_MAX_TOP_LOGPROBS 20

typedef struct slm_logprob {
    int32_t id;
    float logprob;            /* natural log */
} slm_logprob;

/* A returned token's log-probability under the model: the log-softmax of
 * the raw logits it was sampled from, before the biases, the penalties, the
 * temperature, the truncations and the grammar (as llama.cpp's server and
 * OpenAI report them). */
typedef struct slm_token_logprobs {
    slm_logprob token;        /* the token returned */
    int n_top;                /* top[0..n_top): the most likely tokens, most likely first (ties: lower id) */
    slm_logprob top[SLM_MAX_TOP_LOGPROBS];
    int32_t prev;             /* the token before it: slm_token_piece(e, prev, id) is an id's text there */
    size_t text_offset;       /* where its piece starts in slm_session_text (a stop string may cut it) */
} slm_token_logprobs;

/* Why the reply ended: slm_session_stop_reason. */
enum {
    SLM_STOP_NONE = 0,     /* not stopped */
    SLM_STOP_TOKEN = 1,    /* a token of the stop set (EOS, EOT, the model's end ids) */
    SLM_STOP_STRING = 2,   /* a stop string */
    SLM_STOP_LENGTH = 3,   /* n_predict tokens */
    SLM_STOP_CAPACITY = 4  /* the KV is full (overflow policy error) */
};

/* Feed flags. */
#define SLM_FEED_BOS 1     /* a whole prompt: BOS first */
#define SLM_FEED_SPECIAL 2 /* BOS/EOS text in it becomes those ids (rendered chat templates) */

typedef struct slm_session_stats {
    int n_prefilled;       /* tokens run through prefill programs */
    int n_reused;          /* tokens whose KV rows were reused: kept from earlier feeds, or
                              restored from the prefix cache */
    int n_cached;          /* of those, restored from the prefix cache */
    int n_generated;
    int n_drafted, n_accepted; /* speculative decoding */
    int n_truncations;     /* times the overflow policy truncated the context */
    int n_batched;         /* tokens decoded in a batch program with other sessions */
    int n_masked;          /* tokens for which a grammar masked the whole vocabulary (the
                              sampled token was refused; the others cost one check) */
    double prefill_ms, decode_ms;
    double ttft_ms;        /* the last feed to its first token */
} slm_session_stats;

/* A session on a free slot (SLM_ERR_CAPACITY with slm_last_error(e) when
 * all are taken). cfg may be NULL (greedy, no limit). */
SLM_API slm_status slm_session_new(slm_engine *e, const slm_session_cfg *cfg, slm_session **out);
SLM_API void slm_session_free(slm_session *s);
/* New sampling, limits, stop strings (the KV rows stay). */
SLM_API slm_status slm_session_configure(slm_session *s, const slm_session_cfg *cfg);
/* Forget the rows and the reply. */
SLM_API void slm_session_reset(slm_session *s);
/* Append ids (n >= 0) after what the session holds (a token sampled but not
 * yet decoded goes in first) and run them through the prefill programs (in
 * chunks when longer than max_prompt_len); the reply text and counters
 * restart. */
SLM_API slm_status slm_session_feed(slm_session *s, const int32_t *ids, int n);
/* The same for text: flags SLM_FEED_*. Text without SLM_FEED_BOS continues
 * the rows: no SentencePiece dummy-prefix space. */
SLM_API slm_status slm_session_feed_text(slm_session *s, const char *text, int flags);
/* A new prompt for the session (a new request on a server slot, a
 * conversation re-rendered whole): its rows come to stand for ids[0..n).
 * Rows it already holds for a common prefix are kept (at most n - 1: the
 * last id runs to give logits), the rest dropped; an empty session takes
 * the longest prefix the engine's prefix cache holds; then the remaining
 * ids are prefilled, and the prompt offered to the prefix cache. Statistics:
 * n_reused counts the kept and restored rows. */
SLM_API slm_status slm_session_set_prompt(slm_session *s, const int32_t *ids, int n);
/* slm_session_set_prompt in steps, for a server whose other sessions keep
 * decoding while a long prompt goes in: the same rows kept or restored from
 * the prefix cache, then at most `budget` (>= 1) of the remaining ids
 * prefilled now; each slm_session_prompt_step prefills the next `budget`.
 * *left (may be NULL): the ids still to prefill; at 0 the session stands
 * as after set_prompt (the same logits and statistics; the prompt offered
 * to the prefix cache), and may be sampled. Before that slm_session_next
 * refuses; a feed or a reset drops what is left. A prompt whose remainder
 * fits the budget takes set_prompt's path. */
SLM_API slm_status slm_session_begin_prompt(slm_session *s, const int32_t *ids, int n, int budget, int *left);
SLM_API slm_status slm_session_prompt_step(slm_session *s, int budget, int *left);
/* Whether n more tokens fit (SLM_ERR_CAPACITY with a message if not). */
SLM_API slm_status slm_session_check_fit(slm_session *s, int n);
/* The next token: *id >= 0 and its piece (valid until the next call), or
 * *id = -1 once the reply has ended (slm_session_stop_reason). A stop token
 * is not returned. */
SLM_API slm_status slm_session_next(slm_session *s, int32_t *id, const char **piece);
SLM_API int slm_session_stop_reason(const slm_session *s);
/* When a stop string ended the reply: its index in the cfg.stop the
 * session was configured with (the earliest to start; the first listed on
 * a tie); -1 otherwise. */
SLM_API int slm_session_stop_index(const slm_session *s);
/* The log-probabilities of the token the last slm_session_next returned
 * (slm_session_cfg.logprobs); SLM_ERR_ARG when none were kept for it (off,
 * or no token returned). */
SLM_API slm_status slm_session_logprobs(const slm_session *s, slm_token_logprobs *out);
/* The reply since the last feed: printable pieces, cut where a stop string
 * starts. *safe: the length that can no longer change (a tail that may begin
 * a stop string or a split UTF-8 character is held back until the end). */
SLM_API const char *slm_session_text(const slm_session *s, size_t *len, size_t *safe);
/* KV rows held; the tokens they stand for plus a pending one (returns the count). */
SLM_API int slm_session_n_past(const slm_session *s);
SLM_API int slm_session_capacity(const slm_session *s);
SLM_API int slm_session_tokens(const slm_session *s, int32_t *ids, int cap);
/* Cumulative since the session was made. */
SLM_API void slm_session_get_stats(const slm_session *s, slm_session_stats *st);
SLM_API const char *slm_session_error(const slm_session *s);
/* 1 when id ends generation (the stop set). */
SLM_API int slm_is_stop_token(const slm_engine *e, int id);
/* The stop set's ids (returns the count; at most cap written). */
SLM_API int slm_stop_tokens(const slm_engine *e, int32_t *ids, int cap);

/* One decode step for n sessions of the same engine: the tokens they have
 * pending are decoded together through the batch programs (when the engine
 * has them; one program call for up to batch_max sessions, the weights read
 * once), then each session's next token is produced as slm_session_next
 * would (ids[i], pieces[i]; -1 once a session's reply has ended). A
 * session's tokens do not depend on which others share its steps. On an
 * error, statuses[i] (if non-NULL) says which sessions failed. */
SLM_API slm_status slm_session_next_batch(slm_session *const *ss, int n, int32_t *ids, const char **pieces,
                                          slm_status *statuses);

/* ---- embeddings (slm_options.embeddings) -------------------------------- */

/* How a text's rows become one vector: GGUF's {arch}.pooling_type values. */
typedef enum slm_pooling {
    SLM_POOLING_DEFAULT = -1, /* the model file's pooling_type (none when it names none) */
    SLM_POOLING_NONE = 0,     /* every token's vector */
    SLM_POOLING_MEAN = 1,     /* their mean */
    SLM_POOLING_CLS = 2,      /* the first token's */
    SLM_POOLING_LAST = 3,     /* the last token's (causal embedding models: Qwen3-Embedding) */
    SLM_POOLING_RANK = 4      /* a reranker's scores: its classifier head (cls.output.weight) on
                                 the last row (qwen3; softmax over the labels, as llama.cpp) or
                                 the first; Qwen3-Reranker's first score is P("yes") */
} slm_pooling;

/* The model file's pooling_type (SLM_POOLING_NONE when it has none, or a
 * type other than the above). */
SLM_API int slm_model_pooling(const slm_engine *e);
/* 1 when the model is an encoder (bert, nomic-bert: it makes embeddings,
 * never text; loaded only with embeddings on), else 0. */
SLM_API int slm_model_is_encoder(const slm_engine *e);
/* How many scores pooling rank gives (the classifier's labels); 0 when the
 * model has no classifier head (or embeddings are off). */
SLM_API int slm_model_rank_outputs(const slm_engine *e);
/* "none", "mean", "cls", "last", "rank" -> an slm_pooling; -2 for anything else. */
SLM_API int slm_pooling_parse(const char *name);
SLM_API const char *slm_pooling_name(int pooling);
/* The embedding of ids[0..n) on the session's slot: its rows are dropped,
 * the ids run through the embedding programs (in chunks; they must fit the
 * slot's KV capacity), and the final norm's hidden states pooled into out:
 * dim floats, n * dim for SLM_POOLING_NONE, slm_model_rank_outputs for
 * SLM_POOLING_RANK (cap: floats out holds;
 * SLM_ERR_ARG when short). Not normalized (slm_embed_normalize). The rows
 * are dropped again after. SLM_ERR_ARG when the engine was loaded without
 * embeddings. */
SLM_API slm_status slm_session_embed(slm_session *s, const int32_t *ids, int n, int pooling, float *out, size_t cap);
/* The same for text, tokenized as llama.cpp's embedding does: BOS, and EOS
 * where the vocabulary asks for it (tokenizer.ggml.add_eos_token); the
 * token count in *n_tokens (may be NULL). */
SLM_API slm_status slm_session_embed_text(slm_session *s, const char *text, int pooling, float *out, size_t cap,
                                          int *n_tokens);
/* Several embeddings at once: text t is the n[t] ids at ids[t], its result
 * into out[t] (cap[t] floats, sized as slm_session_embed's). An encoder
 * (bert, nomic-bert, gemma-embedding) packs the texts that fit its batch
 * programs' largest region (128 tokens with max_prompt_len >= 256) into as
 * few program calls as it can, one text a region; longer texts, and every
 * text of a decoder, run alone as slm_session_embed. Each result is what
 * slm_session_embed gives for that text alone (up to the rounding of other
 * row counts). The rows are dropped. An error names its text ("text 3:
 * ..."); then out[] is undefined. */
SLM_API slm_status slm_session_embed_batch(slm_session *s, int k, const int32_t *const *ids, const int *n, int pooling,
                                           float *const *out, const size_t *cap);
/* text's ids as slm_session_embed_text tokenizes it (BOS, and EOS where
 * the vocabulary asks) into ids[0..cap): their count (which may exceed cap:
 * then only cap were written), or below zero as slm_tokenize. */
SLM_API int slm_embed_tokenize(slm_engine *e, const char *text, int32_t *ids, int cap);
/* A reranker's scores (pooling rank) of a document for a query: the
 * model's rerank template (tokenizer.chat_template.rerank) with {query} and
 * {document} replaced, tokenized with its special tokens (no BOS added), as
 * llama-server does; slm_model_rank_outputs floats into out (Qwen3-Reranker:
 * out[0] is P("yes"), the relevance); a cross-encoder without a template
 * (BERT, XLM-R, ModernBERT: a classifier head) takes llama-server's pair
 * [BOS] query [EOS] [SEP] document [EOS] by its vocabulary's flags.
 * SLM_ERR_UNSUPPORTED without a template or a head; the token count in
 * *n_tokens (may be NULL). */
SLM_API slm_status slm_session_rerank(slm_session *s, const char *query, const char *document, float *out,
                                      size_t cap, int *n_tokens);
/* k pairs at once (query[t], document[t]), scores into out[t] (cap[t]
 * floats), token counts into n_tokens[t] (may be NULL): as
 * slm_session_rerank each, through slm_session_embed_batch (a
 * cross-encoder packs the pairs into its batch programs). An error names
 * its pair ("text 3: ..."). */
SLM_API slm_status slm_session_rerank_batch(slm_session *s, int k, const char *const *query,
                                            const char *const *document, float *const *out, const size_t *cap,
                                            int *n_tokens);
/* Normalize v[0..n) as llama.cpp's --embd-normalize: -1 none, 0 max
 * absolute value to 32760 (int16 range), 1 taxicab, 2 Euclidean (its
 * default), p > 2 the p-norm. A zero vector stays zero. */
SLM_API void slm_embed_normalize(float *v, int n, int norm);

/* ---- fill in the middle (code models) ----------------------------------- */

/* A code model's FIM tokens (-1: the vocabulary has none): prefix, suffix,
 * middle, pad, repository name, file separator. */
typedef struct slm_fim_tokens {
    int32_t pre, suf, mid, pad, rep, sep;
} slm_fim_tokens;
/* Fill *out; 1 when the model has pre, suf and mid (it can fill in). */
SLM_API int slm_fim_get(const slm_engine *e, slm_fim_tokens *out);

/* ---- one-shot generation (over a session) ------------------------------ */

typedef struct slm_gen_stats {
    int n_prompt, n_generated;
    double prefill_ms, decode_ms;
    int n_cached;          /* prompt tokens restored from the prefix cache */
    int n_drafted, n_accepted; /* speculative decoding: proposed / accepted tokens */
    int n_truncations;     /* times the overflow policy truncated the context */
} slm_gen_stats;

/* Called for each piece: first the prompt's tokens but BOS (is_prompt =
 * 1), then each generated token (0). is_prompt = 2 carries a note from the
 * runtime instead (id -1), e.g. that the overflow policy truncated the
 * context. Return non-zero to stop. */
typedef int (*slm_piece_cb)(void *ud, int id, const char *piece, int is_prompt);

/* A session for one prompt: encode it (with BOS), feed it, then up to
 * n_generate tokens, calling cb for each. Stops at the stop set unless
 * ignore_eos. Running out of KV capacity (overflow policy error) ends
 * generation with SLM_ERR_CAPACITY (the tokens produced so far were
 * delivered). Needs a free slot. */
SLM_API slm_status slm_generate(slm_engine *e, const char *prompt, int n_generate,
                                const slm_sampling *s, int ignore_eos,
                                slm_piece_cb cb, void *ud, slm_gen_stats *stats);

/* Which generate variant decoding runs on (--generate-variants): the KV
 * capacity of the one in use (0 before the first decode step), and the
 * last move to a larger one since the last reset: at `at` stored tokens,
 * from capacity `from` to `to`; `switches` counts the moves. The runtime
 * records them and prints nothing; a caller may poll between pieces. */
typedef struct slm_variant_state {
    int current, switches, at, from, to;
} slm_variant_state;
SLM_API void slm_variant_get(const slm_engine *e, slm_variant_state *out);

/* ---- compiler introspection ------------------------------------------- */

/* Write a readable dump of a compilation stage to a stream (FILE *):
 * what = "ir" (the stateful graph), "ir-lowered" (after the passes, per
 * program), "tasks" (the task lists), "io" (each program's inputs and
 * outputs). A blob keeps no graphs: "ir" and "ir-lowered" are refused. */
SLM_API slm_status slm_dump(slm_engine *e, const char *what, void *file);

#ifdef __cplusplus
}
#endif
#endif
