/* compiler/ — passes over the IR and lowering to flat task lists.
 *
 * Pipeline (each stage printable):
 *   stateful graph (ReadValue/Assign)
 *     -> state_to_io      ReadValue -> input past_key_values.L.*, Assign -> output
 *                         present.L.*, Concat -> kv_view (present stored in place)
 *     -> specialize(T,C)  prefill: T = max_prompt_len; generate: T = 1; C = capacity
 *     -> last_row         (prefill) logits only for the last input row
 *     -> plan memory      every intermediate gets a fixed offset in one arena
 *     -> lower            one flat array of fixed-size task records with counted
 *                         barriers between dependent stages
 * The result (slm_program, program/program.h) holds no pointers into the
 * graph's buffers: it is what a blob stores; the device resolves addresses
 * in its own copy of the task list (device/device.h).
 */
#ifndef SLM_COMPILER_H
#define SLM_COMPILER_H

#include <stdio.h>

#include "program/program.h"

#define SLM_MAX_VARIANTS 8

typedef struct slm_compile_options {
    int32_t max_prompt_len;   /* rows of the largest prefill program */
    int32_t min_response_len; /* KV capacity = max_prompt_len + min_response_len */
    int32_t matmul_tile_cols; /* output columns per matrix task (0 = auto) */
    /* Variants (beyond the two programs NPUW starts from). Lists of rows
     * (prefill) and KV capacities (generate); empty = one program each.
     * The compiler sorts them, clamps them, and always adds the largest. */
    int32_t n_prefill_variants;
    int32_t prefill_variants[SLM_MAX_VARIANTS];
    int32_t n_generate_variants;
    int32_t generate_variants[SLM_MAX_VARIANTS];
    int32_t draft_n;          /* > 0: also a verify program of draft_n + 1 rows */
    int32_t lm_head_separate; /* 1: the vocabulary projection is its own program */
    int32_t tile_kb;          /* weight panel budget of a matrix task, KiB (the CPU's
                                 "scratchpad"); 0 = an eighth of the L2 cache (the
                                 compiler stores the value it used) */
    int32_t kv_type;          /* element type of the KV cache: SLM_F32 (0), SLM_F16 or
                                 SLM_Q8_0 (common/dtype.h ids); the past/present I/O
                                 tensors hold it, KV_STORE tasks write it and the
                                 attention tasks read it */
    int32_t prefetch_off;     /* 1: decode programs without weight prefetch (no PREFETCH
                                 tasks, no stream prefetch in their matrix tasks) */
} slm_compile_options;

/* 1 when t is a KV element type the programs take (f32, f16, q8_0). */
static inline int slm_kv_type_ok(int32_t t) { return t == SLM_F32 || t == SLM_F16 || t == SLM_Q8_0; }




/* Compile-time constants shared by the programs (RoPE tables). */
typedef struct slm_constants {
    float *rope;           /* [n_tables][n_pos][rope_pairs][2] (cos, sin): table 1, when
                              present, is the sliding-window layers' (own base) */
    int32_t rope_pos;      /* n_pos = KV capacity */
    int32_t rope_pairs;    /* rotated dimensions / 2 (head_dim / 2 but for partial rotary) */
    int32_t rope_pairs_swa;/* table 1's pairs when its layers rotate another width (gemma4's
                              window layers: their own head size); 0 = rope_pairs. Table 1
                              starts after table 0 (rope_pos * rope_pairs pairs) */
    uint64_t bytes;
} slm_constants;

typedef struct slm_compiled {
    slm_compile_options opt;
    slm_model_config cfg;
    int32_t kv_capacity;   /* rows per layer of the KV buffers */
    slm_graph stateful;    /* the model's graph before the passes */
    slm_program *progs;    /* [n_progs]: prefill variants by rows ascending, then
                              generate variants by capacity ascending, then verify */
    int32_t n_progs;
    slm_constants consts;
    int32_t n_seqs;        /* KV regions the batch programs address (1: none) */
} slm_compiled;

/* The smallest prefill program with at least n rows (NULL if none), the
 * largest prefill program, the smallest generate program with capacity of
 * at least need rows (NULL if none), and the largest one. */
slm_program *slm_pick_prefill(slm_compiled *c, int n);
slm_program *slm_largest(slm_compiled *c, slm_prog_kind kind);
slm_program *slm_pick_generate(slm_compiled *c, int need);
/* The lm_head program for `rows` rows (1, or the verify rows); NULL if none. */
slm_program *slm_pick_lm_head(slm_compiled *c, int rows);
/* The smallest embedding program with at least n rows (NULL if none). */
slm_program *slm_pick_embed(slm_compiled *c, int n);

/* The repacked type for a matrix of n rows of k elements of type t, or 0
 * when it stays as it is (types other than Q4_0/Q6_K/Q8_0/F16, n % 16 != 0). */
uint32_t slm_repack_type(uint32_t t, int64_t k, int64_t n);
/* Repack n rows of k elements of type t in place (data holds n * row bytes;
 * tmp holds 16 * row bytes). Requires slm_repack_type(t, k, n) != 0. */
void slm_repack_r16(uint32_t t, void *data, int64_t k, int64_t n, void *tmp);
/* The compiler's weight layout: every matrix a matmul reads (the 2-D
 * tensors but an untied token embedding) of type Q4_0, Q6_K or Q8_0 with a
 * multiple of 16 rows is repacked in place into SLM_*_R16 (same size and
 * offset; the mapping's pages become private copies; the file is
 * untouched) and its type updated. Idempotent. */
slm_status slm_model_repack(slm_model_file *m, slm_err *err);

/* Compile a validated model. On failure everything is freed. */
slm_status slm_compile(slm_compiled *out, const slm_model_file *m, const slm_compile_options *opt,
                       slm_err *err);
void slm_compiled_free(slm_compiled *c);
/* Concurrent sequences: append batch programs (kind SLM_PROG_BATCH, named
 * batch.B) for each B of batches (> 1, <= n_seqs) to a compiled model: one
 * decode step of B sequences over a KV of n_seqs regions of kv_capacity
 * rows. The matrix tasks see B rows (one walk of the weights), attention
 * keeps each row in its own region, K/V rows are stored at their cache
 * position. Not with a separate LM head (refused). */
slm_status slm_compile_batch(slm_compiled *c, const slm_model_file *m, int n_seqs, const int *batches, int n_batches,
                             slm_err *err);

/* Embeddings: append an embedding program (kind SLM_PROG_EMBED, named
 * embed.T) for each prefill variant: the prefill's graph without the
 * last-row selection and the LM head, its output the final norm of every
 * row (hidden [T, dim]). Its K/V rows are written as a prefill's. */
slm_status slm_compile_embed(slm_compiled *c, const slm_model_file *m, slm_err *err);
/* With an encoder (bert, nomic-bert, gemma-embedding), and a decoder
 * without recurrent layers (slm_embed_batchable: Qwen3-Embedding),
 * slm_compile_embed also appends batch embedding programs (kind
 * SLM_PROG_EMBED_BATCH, named embed.BxS): B regions of S rows, one text a
 * region, positions from 0 in each, attention inside the region (an
 * encoder's both ways, a decoder's causal, a window intersected) and never
 * on its padding rows (the mask); a decoder's K/V rows land in the
 * region's cache rows, which the next call overwrites. S takes each of SLM_EMBED_REGIONS
 * and B = min(max_prompt_len, SLM_EMBED_BATCH_ROWS) / S, where B >= 2: with
 * max_prompt_len 512, embed.64x8, embed.42x12, embed.32x16 .. embed.4x128.
 * A text takes the smallest region that holds it, so the steps (1.14x to
 * 1.5x) bound the padding rows, which are computed: 11-14% of the rows for
 * texts of random lengths (8 sizes from 8 to 128 padded 15-20%; the 13
 * programs cost ~30 ms and 2 MB more at load for bge-small). Regions a call leaves empty cost
 * nothing (they come first: rows before the first valid one are skipped),
 * so one B per S is enough; 512 rows a call is where the matmuls stop
 * gaining from more rows (prefill's speed at pp512), and texts above the
 * largest region go alone through embed.T. */
#define SLM_EMBED_REGIONS 8, 12, 16, 20, 24, 28, 32, 40, 48, 64, 80, 96, 128
#define SLM_EMBED_BATCH_ROWS 512
/* The i-th batch embedding shape for max_prompt_len: 1 with *regions (B)
 * and *rows (S), 0 past the last. */
int slm_embed_batch_shape(int max_prompt_len, int i, int *regions, int *rows);
/* 1 when slm_compile_embed makes batch embedding programs for this model. */
int slm_embed_batchable(const slm_model_config *cfg);
/* The batch embedding program of the smallest region of at least `region`
 * rows (NULL if none). */
slm_program *slm_pick_embed_batch(slm_compiled *c, int region);

/* Passes (exposed for tests and dumps). */
slm_status slm_pass_state_to_io(slm_graph *g, slm_err *err);
slm_status slm_pass_specialize(slm_graph *g, int rows_t, int rows_c, slm_err *err);
slm_status slm_pass_last_row(slm_graph *g, slm_err *err);
/* Vertical fusion: an RMSNorm or SwiGLU whose every consumer is a matmul
 * (reading it as in[0]) becomes those matmuls' input prologue and leaves
 * the graph: one stage and one barrier fewer, and its output never goes
 * through memory. */
slm_status slm_pass_fuse_prologues(slm_graph *g, slm_err *err);
/* Vertical fusion: a RoPE applied to a matmul's output (its only use)
 * becomes the matmul's epilogue, rotating each tile's columns as they are
 * computed (matmul -> RoPE -> attention without a stage between the first
 * two). */
slm_status slm_pass_fuse_rope(slm_graph *g, slm_err *err);
/* Vertical fusion: a residual ADD of a matmul's output (its only use)
 * becomes the matmul's epilogue, accumulating each tile into the residual
 * stream (one stage and barrier fewer). */
slm_status slm_pass_fuse_residual(slm_graph *g, slm_err *err);
/* Cut the LM head off: the logits output becomes a `hidden` output of the
 * final norm's rows. */
slm_status slm_pass_split_lm_head(slm_graph *g, slm_err *err);
/* The task list's schedule, after lowering: gives every task its lane,
 * adds PREFETCH (transfer) tasks to the stages of decode programs (rows
 * <= SLM_PREFETCH_MAX_ROWS) and sets each barrier's producer / consumer
 * counts (a, b). A stage's prefetch tasks touch the first panels of the
 * next stage that has matrix tasks (its distance, in stages, in `a`), up
 * to a quarter of the L2 (tile_kb x 2 KiB) per stage in chunks of tile_kb / 4
 * KiB; a stage whose next matrix stage is further continues where the one
 * before it left off. In the same programs each stage runs its biggest
 * weight panels first (the small tail tiles of its matmuls last), and
 * every matmul task streams its weights with a software prefetch
 * SLM_STREAM_PREFETCH bytes ahead of its reads (task `a`). prefetch_off
 * drops both kinds of prefetch. */
#define SLM_PREFETCH_MAX_ROWS 4
/* Stream prefetch distance of decode matmuls, bytes (toward L1; 4x as far
 * toward L2, device/kernels_x86.h): a core's own demand reads plus its
 * hardware prefetchers kept ~8.5 GB/s in flight on the 2-core test VM;
 * touching the stream ahead took TinyLlama Q4_0 decode from 27-28 to 37-39
 * tokens/s, Q4_K_M from 21-23 to 32-35 and Q8_0 from 18-20 to 21-23 (the
 * machine's read bandwidth; 2 threads). 1-2 KiB measured alike, 512 B less. */
#define SLM_STREAM_PREFETCH 1024
slm_status slm_pass_schedule(slm_program *p, const slm_compile_options *opt, slm_err *err);
/* c->consts: the RoPE tables for c->kv_capacity positions (compiler/constants.c). */
slm_status slm_build_constants(slm_compiled *c, const slm_model_file *mf, slm_err *err);
/* Lower a specialized graph; weights are referenced by their offset from
 * weights_base (the mapped file or blob section). */
slm_status slm_lower(slm_program *p, const slm_graph *g, const slm_compile_options *opt,
                     const void *weights_base, uint64_t weights_size, slm_err *err);
/* The same for a batch program: present rows are stored at their cache
 * position (SLM_TF_DST_CPOS) and attention stays within regions of
 * seq_rows rows. */
slm_status slm_lower_batch(slm_program *p, const slm_graph *g, const slm_compile_options *opt, int seq_rows,
                           const void *weights_base, uint64_t weights_size, slm_err *err);

#endif
