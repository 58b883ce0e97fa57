/* runtime/ — owns the KV cache and steers the two static programs with
 * data: input ids, position ids, cache positions, the attention mask.
 *
 * KV layout: one allocation; for layer L, K is rows [C][kv_dim(L)] at
 * kv + kv_off[L] and V right after it, a row being kv_dim(L) elements of
 * the KV type (layers differ in gemma4; its KV-shared layers and qwen35's
 * recurrent layers have none) (f32, f16 or q8_0 blocks: the
 * compile option kv_type; every size here is in row_bytes) (token-major, so
 * a view of the first N rows of any capacity is the same memory: a smaller
 * generate variant reads a prefix, with zero bytes moved).
 * Both programs' past_key_values.L.* are bound to these buffers once;
 * present.L.* are views at the write index, rebound per call (the mutable
 * pointers). Prefill writes its rows where generate reads them: the
 * article's copy_kvcache does not exist here. The only KV copies are the
 * prefix cache's (into and out of its entries): they go through
 * slm_rt_kv_copy, which counts them in kv_bytes_copied.
 *
 * Sequences: the KV holds n_seqs regions of `cap` rows each; layer L's K is
 * [n_seqs * cap][kv_dim(L)] at kv + kv_off[L] (V follows), and
 * sequence s owns rows [s * cap, (s + 1) * cap) of it, with the same rows of
 * the mask and token arrays. The single-sequence programs (prefill,
 * generate, verify) are bound to the selected sequence's region
 * (slm_rt_select); a batch program (batch.B, when compiled) sees the whole
 * KV: row r of it is stored at and attends up to cache_position[r] within
 * the region that row lies in, so B sequences decode in one walk of the
 * weights.
 */
#ifndef SLM_RUNTIME_H
#define SLM_RUNTIME_H

#include "compiler/compiler.h"
#include "device/device.h"

/* The per-sequence part of the runtime state (saved while another sequence
 * is selected). */
typedef struct slm_seq_state {
    int num_stored;
    slm_program *gen;
    int variant_switches, chunks, head_runs;
    int switch_at, switch_from, switch_to;
} slm_seq_state;

typedef struct slm_runtime {
    slm_compiled *comp;     /* not owned */
    int cap;                /* KV rows per layer */
    uint8_t *kv;            /* [n_layers][2][cap] rows of each layer's kv_dim elements of kv_type */
    int kv_type;            /* SLM_F32, SLM_F16 or SLM_Q8_0 (the programs' compile option) */
    size_t *kv_rb;          /* [n_layers] bytes of one K or V row of layer l: slm_row_bytes(kv_type,
                               slm_layer_kv_dim(l)); 0 for a gemma4 KV-shared layer and a qwen35
                               recurrent layer (no rows) */
    uint64_t *kv_off;       /* [n_layers] byte offset of layer l's K (all sequences; V follows) */
    uint64_t kv_bytes;
    void *arena;            /* activations, shared by both programs */
    uint64_t arena_bytes;
    int32_t *input_ids;     /* [max_prompt_len] */
    int32_t *position_ids;  /* [max_prompt_len] */
    int32_t *cache_position;/* [max_prompt_len] */
    int32_t *mask;          /* [cap] the selected sequence's rows of mask_all */
    int32_t *tokens;        /* [cap] the id stored in each of its KV rows (prefix cache, overflow) */
    int32_t *mask_all;      /* [n_seqs * cap] */
    int32_t *tokens_all;    /* [n_seqs * cap] */
    slm_seq_state *seqs;    /* [n_seqs] */
    int batch_max;          /* rows of the largest batch program (0: none) */
    float *logits;          /* [vocab] */
    int num_stored;         /* valid KV rows (num_stored_tokens) */
    uint64_t kv_bytes_copied; /* KV bytes copied into or out of the KV buffer (slm_rt_kv_copy) */
    int *present_io;        /* [n_progs][n_layers][2] I/O index of present.L.* */
    slm_exec *exec;         /* [n_progs] each program bound to these buffers */
    slm_program *gen;       /* the generate variant in use */
    int variant_switches;   /* generate variant changes since reset */
    int switch_at, switch_from, switch_to; /* the last: stored rows, capacities */
    int chunking;           /* 1: prompts longer than the largest prefill run in chunks */
    int chunks;             /* prefill program calls since reset */
    slm_pool *pool;         /* worker threads */
    slm_pool *head_pool;    /* threads of the lm_head program (NULL: pool) */
    float *hidden;          /* [verify rows or 1][dim] final-norm rows (LM head separate) */
    int32_t *head_cpos;     /* [1] = {0}: the lm_head.1 program's only row is valid */
    int head_runs;          /* lm_head program calls since reset */
    int n_seqs;             /* KV regions (sequences) */
    int cur_seq;            /* the one the calls above work on */
    /* Hybrid recurrent models (qwen35): the DeltaNet layers' state beside
     * the KV cache, f32, sized at load: for each such layer in order, its
     * conv windows [n_seqs][(K - 1) * conv_dim] then its delta states
     * [n_seqs][H_v * S * S]. Zeroed by reset; it cannot be rewound, so
     * slm_rt_trim rebuilds it by prefilling the kept tokens again, from the
     * sequence's checkpoint when that is at or before the cut. */
    float *rstate;          /* NULL for other models */
    uint64_t rstate_bytes;
    float *rsnap;           /* the checkpoints: n_snaps buffers of rstate's layout (every sequence's slot k in buffer k) */
    int *snap_at;           /* [n_seqs][n_snaps] rows each checkpoint holds (-1: none); rows before it unchanged since */
    int n_snaps;            /* checkpoints per sequence (slm_rt_snaps) */
    int trim_rebuilt;       /* rows the last slm_rt_trim prefilled again (from a checkpoint or row 0) */
    int64_t *rstate_off;    /* [n_layers] float offset of the layer's conv windows; -1: not recurrent */
} slm_runtime;

/* Floats of the recurrent state of one sequence (0 for models without recurrent layers). */
uint64_t slm_rt_recur_floats(const slm_model_config *cfg);

/* The memory budget (runtime/budget.c): the bytes the runtime and engine
 * will allocate for c with n_seqs KV regions (KV cache, arena, logits, per-vocabulary buffers,
 * RoPE tables) plus extra_bytes, into *need (may be NULL); refused with
 * SLM_ERR_CAPACITY and the numbers, naming `name`, when over the limit:
 * max_memory_mb MiB, 0 = slm_rt_default_memory_limit(), < 0 = none.
 * Call before slm_rt_init / slm_rt_init_seqs allocate. */
slm_status slm_rt_budget(const slm_compiled *c, const char *name, long long max_memory_mb, int n_seqs, int n_snaps,
                         uint64_t extra_bytes, uint64_t *need, slm_err *err);
/* Recurrent checkpoints per sequence for a requested count: <= 0 the
 * default SLM_RT_SNAPS_DEFAULT, else at most SLM_RT_SNAPS_MAX. */
#define SLM_RT_SNAPS_DEFAULT 3
#define SLM_RT_SNAPS_MAX 16
int slm_rt_snaps(int n);
/* 75% of the machine's RAM (sysinfo), in bytes; 0 when unknown. */
uint64_t slm_rt_default_memory_limit(void);
/* n_threads: workers including the caller (<= 0: one per CPU). One sequence. */
slm_status slm_rt_init(slm_runtime *rt, slm_compiled *c, const void *weights, int n_threads, slm_err *err);
/* n_seqs KV regions (c->n_seqs when it has batch programs); n_snaps: the
 * recurrent layers' checkpoints per sequence (slm_rt_snaps). */
slm_status slm_rt_init_seqs(slm_runtime *rt, slm_compiled *c, const void *weights, int n_threads, int n_seqs,
                            int n_snaps, slm_err *err);
/* Row 0 of the selected sequence's K (is_v = 0) or V rows of a layer
 * (rows of row_bytes bytes). */
void *slm_rt_kv_rows(slm_runtime *rt, int layer, int is_v);
/* Bytes of one K or V row of layer l (0: the layer keeps no rows). */
size_t slm_rt_kv_row_bytes(const slm_runtime *rt, int layer);
/* Every copy into or out of the KV buffer goes through here (counted). */
void slm_rt_kv_copy(slm_runtime *rt, void *dst, const void *src, size_t bytes);
/* One decode step for n sequences at once (1 <= n <= batch_max) through
 * the smallest batch program with room: ids[i] is appended to sequence
 * seqs[i] (distinct). Logits of sequence seqs[i] are at *logits + i * vocab.
 * Each sequence's state advances as slm_rt_decode would. */
slm_status slm_rt_decode_batch(slm_runtime *rt, const int *seqs, const int32_t *ids, int n, const float **logits,
                               slm_err *err);
void slm_rt_free(slm_runtime *rt);
void slm_rt_reset(slm_runtime *rt);
/* Make sequence `seq` (0 <= seq < n_seqs) the one prefill, decode, verify,
 * trim and reset work on. */
void slm_rt_select(slm_runtime *rt, int seq);
/* Append n ids through the prefill programs: the smallest variant that
 * holds them, or (chunking on) successive chunks of the largest. */
slm_status slm_rt_prefill(slm_runtime *rt, const int32_t *ids, int n, slm_err *err);
/* Embeddings: run n ids (appended after the stored rows) through the
 * embedding programs, in chunks of at most the largest one's rows; after
 * each chunk fn gets its final-norm hidden rows ([n_rows][dim], valid
 * during the call) and the index of its first id. SLM_ERR_CAPACITY when
 * the ids do not fit the KV region. */
typedef void (*slm_rt_rows_fn)(void *ud, const float *rows, int first, int n_rows, int dim);
slm_status slm_rt_embed(slm_runtime *rt, const int32_t *ids, int n, slm_rt_rows_fn fn, void *ud, slm_err *err);
/* Batch embeddings (an encoder's embed.BxS programs): k texts, text t the
 * n[t] ids at ids[t] (1 <= n[t] <= slm_rt_embed_region_max), packed in the
 * given order into as few calls as the programs allow: a call takes the
 * next texts while the program of the smallest region that holds their
 * longest has a region for each (sorted longest first, the calls waste the
 * fewest rows). After each call fn gets each of its texts' final-norm rows
 * ([n_rows][dim], valid during the call). The selected sequence must hold
 * no rows; its mask is left clear, its K/V rows are overwritten. */
typedef void (*slm_rt_text_fn)(void *ud, int text, const float *rows, int n_rows, int dim);
slm_status slm_rt_embed_batch(slm_runtime *rt, int k, const int32_t *const *ids, const int *n, slm_rt_text_fn fn,
                              void *ud, slm_err *err);
/* The largest region of the batch embedding programs (0: none). */
int slm_rt_embed_region_max(const slm_runtime *rt);
/* Append n ids (1 <= n <= verify rows) through the verify program, which
 * returns logits for every row: *logits points at n rows of vocab floats. */
slm_status slm_rt_verify(slm_runtime *rt, const int32_t *ids, int n, const float **logits, slm_err *err);
/* Keep the first n_keep rows: num_stored is set back and the mask of the
 * dropped rows cleared; nothing else is touched (speculative rejection).
 * A model with recurrent layers cannot take tokens back from their state:
 * its state is zeroed and the kept tokens prefilled again (their KV rows
 * rewritten alike); SLM_ERR_* when that prefill fails (the sequence is then
 * empty), else SLM_OK. */
slm_status slm_rt_trim(slm_runtime *rt, int n_keep);
/* Recurrent layers: save the selected sequence's state as a checkpoint at
 * num_stored rows, in one of its n_snaps slots (this row count's own when
 * held already; else a free one; else the one of fewest rows is replaced).
 * reset drops them, a trim those past the cut. A memcpy of the state;
 * nothing for other models. */
void slm_rt_checkpoint(slm_runtime *rt);
/* The row counts of the selected sequence's checkpoints into rows[cap], any
 * order; returns how many it holds. */
int slm_rt_checkpoints(const slm_runtime *rt, int *rows, int cap);
/* The selected sequence's recurrent state after `rows` rows (its current
 * state when rows is num_stored, else a checkpoint's) packed into
 * dst[slm_rt_recur_floats]: per recurrent layer its conv window, then its
 * delta state. 0 when it holds no such state. */
int slm_rt_state_get(slm_runtime *rt, int rows, float *dst);
/* The selected sequence's state from a packed one (slm_rt_state_get's
 * layout) after the caller put num_stored rows in place; checkpointed. */
void slm_rt_state_set(slm_runtime *rt, const float *src);
/* 1 when slm_rt_trim(rt, n_keep) costs no more than prefilling the rows
 * after a checkpoint: no recurrent layers, nothing dropped, or a
 * checkpoint at or before n_keep (trim resumes from the latest such);
 * 0 when it would prefill from row 0. */
int slm_rt_can_trim(const slm_runtime *rt, int n_keep);
/* Run the lm_head program on its own n threads (LM head separation). */
slm_status slm_rt_set_head_threads(slm_runtime *rt, int n_threads, slm_err *err);
/* Append one id through the generate program: the smallest variant with
 * room for min(num_stored + min_response_len, capacity) rows is picked at
 * the first step; when it fills, the next larger one takes over, reading
 * the same KV memory (no bytes move). */
slm_status slm_rt_decode(slm_runtime *rt, int32_t id, slm_err *err);
/* The message for a full KV cache (rows stored, capacity) and what can
 * still help: a larger --min-response-len while the capacity is below the
 * model's context length, else nothing but --on-overflow truncate or fewer
 * tokens. */
void slm_rt_full_message(const slm_runtime *rt, char *buf, size_t cap);

#endif
