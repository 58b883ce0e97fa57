/* program/ — the compiled program: what the compiler emits, a blob stores
 * and the device runs. Immutable once built: the device resolves addresses
 * in its own copy of the task list (slm_exec, device/device.h), never here.
 *
 * A program is a flat array of task records (program/task.h) closed by
 * counted barriers, its I/O table (the article's I/O metadata) and the
 * relocations that say which task operand refers to which I/O tensor.
 */
#ifndef SLM_PROGRAM_H
#define SLM_PROGRAM_H

#include <stdio.h>

#include "ir/ir.h"
#include "program/task.h"

/* PREFILL: logits of the last row; GENERATE: one row; BATCH: one row of
 * each of B sequences; VERIFY: draft_n + 1
 * rows with logits for every row (speculative decoding); LMHEAD: hidden
 * rows -> logits, when the LM head is separate (then the others output
 * `hidden` instead of `logits`). */
typedef enum slm_prog_kind {
    SLM_PROG_PREFILL = 1,
    SLM_PROG_GENERATE = 2,
    SLM_PROG_VERIFY = 3,
    SLM_PROG_LMHEAD = 4,
    SLM_PROG_BATCH = 5,   /* one decode step of B sequences (rows = B) over the KV of
                             n_seqs regions (kv_capacity = n_seqs x region); logits
                             for every row; not stored in blobs */
    SLM_PROG_EMBED = 6,   /* a prefill whose output is the final norm's hidden state of
                             every row (no LM head): embeddings (slm_options.embeddings);
                             one per prefill variant; stored in blobs with .slm.embed */
    SLM_PROG_EMBED_BATCH = 7 /* an encoder's embedding program of B regions x S rows
                             (rows = B x S, region = S): one text a region, attention
                             inside it; named embed.BxS; stored in blobs with its region */
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
    int32_t region;        /* EMBED_BATCH: rows of one text's region (S); else 0 */
    slm_task *tasks;       /* [n_tasks] */
    int32_t n_tasks;
    slm_io_desc *io;       /* [n_io] */
    int32_t n_io;
    slm_reloc *relocs;     /* [n_relocs], sorted by io */
    int32_t n_relocs;
    uint64_t arena_bytes;  /* activation arena this program needs */
    slm_graph graph;       /* the specialized graph (for dumps; not needed to run) */
} slm_program;

void slm_program_free(slm_program *p);

/* Index of the I/O entry with this role (and layer for past/present), or -1. */
int slm_program_find_io(const slm_program *p, slm_io_role role, int layer);
/* The short name of a task kind ("matmul", "barrier", ...). */
const char *slm_task_op_name(int op);
/* The rows [*b, *e) of [begin, end) an ATTENTION task takes: all of them,
 * or for a row part (tiles[1] >= 2) part tiles[0], cut where the KV rows
 * attended so far reach part / parts of the rows' total (each row's count
 * from its cache position cp[r], its sequence's region of k rows and the
 * window: causal rows late in a prompt attend to more, so the parts hold
 * equal work, not equal rows). cp is runtime data: it steers the cut, the
 * task and its operands stay as compiled. The parts of one task list
 * partition [begin, end). */
void slm_attn_part_rows(const slm_task *t, const int32_t *cp, int begin, int end, int *b, int *e);
/* Row r's KV rows [*first, *last] in an ATTENTION task t (the one rule the
 * kernels and the row parts above share): up to its cache position cp[r]
 * (causal), within the sliding window, within its region of t->k rows
 * (batch programs: one sequence's or one text's); with window < 0 (an
 * encoder: no causal limit) every row of its region up to `upto`, the
 * cache position of the call's last row, and for window -(h + 1), h >= 1,
 * only those within h rows of its own on either side. Rows the mask rules
 * out inside the range are skipped by the kernels. */
void slm_attn_range(const slm_task *t, const int32_t *cp, int r, int upto, int *first, int *last);
/* "vector", "matrix", "transfer". */
const char *slm_lane_name(int lane);

/* The schedule of a task list closed by barriers of the right counts:
 * every task on its kind's lane (barriers on the vector lane), each
 * stage's work tasks before its prefetch tasks, each barrier's producers
 * (a) = its stage's work tasks and consumers (b) = the next stage's (0
 * after the last), each prefetch task's target (c) a matmul over the same
 * matrix whose tile holds its rows, `a` stages on. 0 when it holds; else 1
 * with the reason in why. */
int slm_program_check_schedule(const slm_program *p, char *why, size_t len);

/* Printing (compile --dump-io / --dump-tasks): one line a task, its lane's
 * initial (v, m, t) after the kind; barriers with their producer and
 * consumer counts; prefetch tasks with their rows, target task and
 * distance. */
void slm_program_dump_tasks(const slm_program *p, FILE *f);
void slm_program_dump_io(const slm_program *p, FILE *f);

#endif
