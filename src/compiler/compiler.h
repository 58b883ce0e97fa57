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
 * The result (slm_program) holds no pointers into the graph: it is what a
 * blob stores, plus addresses resolved at load (static) and bind (I/O).
 */
#ifndef SLM_COMPILER_H
#define SLM_COMPILER_H

#include <stdio.h>

#include "device/task.h"
#include "ir/ir.h"
#include "ir/ir.h"

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
} slm_compile_options;

/* PREFILL: logits of the last row; GENERATE: one row; VERIFY: draft_n + 1
 * rows with logits for every row (speculative decoding); LMHEAD: hidden
 * rows -> logits, when the LM head is separate (then the others output
 * `hidden` instead of `logits`). */
typedef enum slm_prog_kind {
    SLM_PROG_PREFILL = 1,
    SLM_PROG_GENERATE = 2,
    SLM_PROG_VERIFY = 3,
    SLM_PROG_LMHEAD = 4
} slm_prog_kind;

/* One program input or output (the article's I/O metadata). */
typedef struct slm_io_desc {
    char name[48];       /* "input_ids", "past_key_values.3.key", "logits" */
    uint8_t role;        /* slm_io_role */
    uint8_t is_output;   /* 1 for present.* and logits */
    uint16_t dtype;      /* SLM_I32 or SLM_F32 */
    int32_t layer;       /* for past/present, else -1 */
    int32_t rows, cols;  /* static shape */
} slm_io_desc;

/* A relocation: task `task`'s operand `field` (0..3 = src0, src1, src2, dst)
 * holds the address of I/O tensor `io` plus the ref's byte offset. */
typedef struct slm_reloc {
    uint32_t task;
    uint16_t field;
    uint16_t io;
} slm_reloc;

typedef struct slm_program {
    char name[24];         /* "prefill.1024", "generate.1152" */
    uint8_t kind;          /* slm_prog_kind */
    int32_t rows;          /* T: input rows */
    int32_t kv_capacity;   /* C: KV rows visible to this program */
    slm_task *tasks;       /* [n_tasks] */
    int32_t n_tasks;
    slm_io_desc *io;       /* [n_io] */
    int32_t n_io;
    slm_reloc *relocs;     /* [n_relocs], sorted by io */
    int32_t n_relocs;
    uint64_t arena_bytes;  /* activation arena this program needs */
    slm_graph graph;       /* the specialized graph (for dumps; not needed to run) */
    /* run-time state, set by slm_program_prepare / slm_program_bind (device/) */
    void **io_ptr;         /* [n_io] bound address of each I/O tensor */
    int32_t *io_reloc;     /* [n_io + 1] first relocation of each I/O tensor */
    int32_t io_cache_pos;  /* I/O index of cache_position */
    int32_t n_stages;      /* stages (runs of tasks closed by a barrier) */
    int32_t *stage_first;  /* [n_stages + 1] first task of each stage; the
                              stage's barrier is task stage_first[s+1] - 1 */
    int *stage_next;       /* [n_stages] next unclaimed task (atomic, run time) */
    uint64_t scratch_bytes;/* per-thread scratch the tasks need (max over tasks) */
} slm_program;

/* Compile-time constants shared by the programs (RoPE tables). */
typedef struct slm_constants {
    float *rope;           /* [n_pos][head_dim/2][2] (cos, sin) */
    int32_t rope_pos;      /* n_pos = KV capacity */
    int32_t rope_pairs;    /* head_dim / 2 */
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
} slm_compiled;

/* The smallest prefill program with at least n rows (NULL if none), the
 * largest prefill program, the smallest generate program with capacity of
 * at least need rows (NULL if none), and the largest one. */
slm_program *slm_pick_prefill(slm_compiled *c, int n);
slm_program *slm_largest(slm_compiled *c, slm_prog_kind kind);
slm_program *slm_pick_generate(slm_compiled *c, int need);
/* The lm_head program for `rows` rows (1, or the verify rows); NULL if none. */
slm_program *slm_pick_lm_head(slm_compiled *c, int rows);

/* Compile a validated model. On failure everything is freed. */
slm_status slm_compile(slm_compiled *out, const slm_model_file *m, const slm_compile_options *opt,
                       slm_err *err);
void slm_compiled_free(slm_compiled *c);

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
/* Lower a specialized graph; weights are referenced by their offset from
 * weights_base (the mapped file or blob section). */
slm_status slm_lower(slm_program *p, const slm_graph *g, const slm_compile_options *opt,
                     const void *weights_base, uint64_t weights_size, slm_err *err);
void slm_program_free(slm_program *p);

/* Printing. */
void slm_program_dump_tasks(const slm_program *p, FILE *f);
void slm_program_dump_io(const slm_program *p, FILE *f);
/* Index of the I/O entry with this role (and layer for past/present), or -1. */
int slm_program_find_io(const slm_program *p, slm_io_role role, int layer);

#endif
