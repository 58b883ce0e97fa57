/* program/task.h — the task record: the unit the executor walks.
 *
 * A program is a flat array of fixed-size task records. Tasks between two
 * BARRIER records are independent (they may run on different threads, in
 * any order); a BARRIER closes the `count` tasks before it (since the
 * previous barrier). Nothing loops over layers at run time.
 *
 * Each task names its lane (slm_lane): the unit that would run it on an
 * NPU — transfer (DMA: copies, weight prefetch), matrix (matmul,
 * attention), vector (the rest). A stage holds its work tasks first, then
 * its PREFETCH tasks (transfer lane): hints that touch the weight panels of
 * a later stage's matrix tasks, run only by a thread that has no work left
 * while the stage's producers finish (the counted schedule). A barrier
 * carries its counts: `count` (every task of the stage), `a` = producers
 * (its work tasks, the ones the next stage waits for) and `b` = consumers
 * (the next stage's work tasks, 0 after the last stage).
 *
 * Operands are references (space, offset) resolved to addresses twice:
 * static spaces (weights, constants, arena) once at load, I/O tensors at
 * bind time through the program's relocation table.
 *
 * Rows: a task runs over the program's valid input rows [row_begin,
 * row_end), which the executor derives from cache_position (data, not
 * shape: padding rows are skipped), unless SLM_TF_ONE_ROW says it works on a
 * single fixed row 0 (after last_row).
 */
#ifndef SLM_TASK_H
#define SLM_TASK_H

#include <stdint.h>

/* Task kinds. Each is documented once, here. */
typedef enum slm_task_op {
    SLM_T_NOP = 0,
    SLM_T_BARRIER,   /* end of a stage of `count` tasks: a = producers (its work tasks),
                        b = consumers (the next stage's work tasks) */
    SLM_T_COPY_ROW,  /* copy (DMA): dst row 0 = src0 row (m - 1); n floats */
    SLM_T_EMBED,     /* dst[r, 0:n] = dequant(src1[src0[r]]) (* f0 when f0 != 0): src0 = ids
                        (i32), src1 = table [k = vocab, n] of type wtype */
    SLM_T_RMSNORM,   /* dst[r] = src0[r] * rsqrt(mean(src0[r]^2) + f0) * src1; n = width;
                        c > 0: each run of c columns normalized alone, src1 of c floats
                        (per-head Q/K norm) */
    SLM_T_MATMUL,    /* dst[r, n0:n1] = src0[r, 0:k] . src1[n0:n1, 0:k]^T, src1 of type wtype;
                        a > 0: the kernel touches its weight stream a bytes ahead of its reads
                        (stream prefetch distance, a multiple of 64 up to
                        SLM_STREAM_PREFETCH_MAX). With EXPERT: src4, when set, a bias of n
                        floats added to the product; with PRE_SWIGLU, f1 > 0: the clamped
                        SwiGLU min(g, f1) * sigmoid(f0 * min(g, f1)) * (clamp(u, -f1, f1) + 1)
                        (gpt-oss) */
    SLM_T_ROPE,      /* in place on dst rows: rotate pairs (2i, 2i+1) of heads [n0,n1)
                        by position src1[r] with the cos/sin table src2; c = head_dim;
                        b > 0: only the first b dimensions of each head rotate (partial
                        rotary, neox pairs (i, i + b/2)); the table holds b/2 pairs */
    SLM_T_ATTENTION, /* dst[r, heads n0:n1] = softmax(q k^T * s) v, s = f0, or 1 / sqrt(c) when
                        f0 = 0; f1 > 0: scores capped, f1 * tanh(score / f1); q = src0, K = src1,
                        V = src2 ([k rows, b*c]), over KV rows j <= src4[r] (cache
                        position) with src3[j] = 1 (mask); a = heads, b = kv_heads,
                        c = head_dim, k = KV rows of one sequence's region: row r
                        attends within the region holding src4[r], i.e. rows
                        [src4[r] - src4[r] % k, src4[r]] (k = the KV capacity when
                        the program holds one sequence); window < 0 (an encoder): the
                        whole region, both ways (embed.BxS: a text's region of k rows),
                        program.c's slm_attn_range; K and V hold wtype (f32, f16,
                        q8_0; their ld counts elements); online softmax, no scratch.
                        KEY_PARTS (decode programs): tiles = {part, parts, 0}; the task
                        takes part `part` of each row's KV rows cut in `parts` runs of
                        equal length, and dst is the partials buffer: per row, per part,
                        per head h (all a of them), head_dim outputs then the softmax max and
                        sum (c + 2 floats; ld = parts * a * (c + 2)), which an
                        ATTN_MERGE task of the next stage combines */
    SLM_T_ADD,       /* dst[r] += src0[r]; n = width */
    SLM_T_SWIGLU,    /* dst[r] = silu(src0[r]) * src1[r]; n = width; a = 1: sigmoid(src0[r]) * src1[r]
                        (qwen35's gated attention output) */
    SLM_T_BIAS,      /* dst[r] += src1 (a bias vector of n floats), in place */
    SLM_T_PREFETCH,  /* transfer: touch rows [n0, n1) of the matrix src1 (type wtype,
                        k columns, n rows) toward the cache; the matrix task c (a
                        task index) reads them, a = its distance in stages (>= 1);
                        writes nothing; skipped by the rendezvous schedule */
    SLM_T_KV_STORE,  /* dst[r, 0:n] = src0[r, 0:n] converted to the KV type wtype (f16, q8_0):
                        the K/V rows of this call into present.* (DST_COMPACT, or DST_CPOS in
                        batch programs); dst's ld counts elements of wtype */
    SLM_T_ATTN_MERGE, /* dst[r, heads n0:n1] = the KEY_PARTS partials of row r in src0 (ld =
                        parts * a * (c + 2), tiles[1] = parts) merged: each part's outputs
                        weighted by its sum times exp(its max - the largest), divided by
                        the weighted sums; a = heads, c = head_dim */
    SLM_T_MOE_ROUTE, /* dst = the routing table of the valid rows, from the router logits src0
                        [m, n] (n = experts E, ld n): each row's scores (b = 0: softmax; b =
                        1: sigmoid of each logit), its c = K experts of the largest scores
                        plus src1 (the selection bias [n] f32, when src1 is set; ties: the
                        lower index), their unbiased scores as weights, divided by their
                        sum when a = 1, then times f2 (0: 1), then (gemma4) times src2[e]
                        (the per-expert scales [n] f32, when src2 is set). Table (i32 units, T = m):
                        [0, TK) rowlist: the (row, slot) pairs sorted by expert, then slot,
                        each as its row; [TK, 2TK) pos[row * K + slot]: that pair's place in
                        rowlist; [2TK, 3TK) the weights (f32) by row * K + slot; at 3TK + 2e
                        expert e's first place and count. One task. */
    SLM_T_MOE_COMBINE, /* dst[r, n0:n1] += f2 (0: 1) * (sum over slots s < c of weight(r, s) *
                        src0[pos(r, s), n0:n1] (the experts' down rows, ld n), the table src3,
                        + the shared expert: a = 1: src1[r, n0:n1] (its rows [m, n]); a = 2:
                        sigmoid(src2[r]) * src1[r, n0:n1] (src2: its gate's logits [m, 1]));
                        a = 0: no shared expert; b = 1 (gemma4): dst[r, n0:n1] = the sum
                        alone (a = 0, f2 = 0), dst's previous values unread */
    /* Gated DeltaNet layers (qwen35). The state operands are the program's
     * conv_state / recurrent_state inputs: `window` rows (sequences) of
     * their per-sequence size; row r's sequence is cache_position[r] / k (k = the KV rows of one sequence's region, so a
     * one-sequence program always takes row 0). The valid rows run in order
     * (the recurrence is sequential over them); tasks split the channels or
     * heads. */
    SLM_T_SLICE,     /* dst[r, g*b + i] = src0[r, g*c + a + i] for i < b over the n / b runs g;
                        k = src0's width (n / b runs of c columns) */
    SLM_T_SSM_CONV,  /* in place on dst [m, n] (n = conv channels) over channels [n0, n1): for
                        each valid row in order, y = sum_j src2[ch * c + j] * (the state's rows
                        j < c - 1, then the row's value at j = c - 1); the state src1 (c - 1
                        rows of n floats per sequence) shifts in the row's values; dst = silu(y) */
    SLM_T_DELTA_GATE,/* in place on dst [m, n]: softplus(dst + src1) * src2 (src1, src2: n floats;
                        softplus(x) = x above 20, else log(1 + exp(x))) */
    SLM_T_DELTA_NET, /* value heads [n0, n1) of b, a key heads, head size c: per valid row in
                        order, q, k (key head h % a of src0, L2-normed with eps f0; q times
                        1/sqrt(c)) and v (value head h), decay exp(src1[r, h]), beta =
                        sigmoid(src2[r, h]); the state M (src3, per head c x c, M[j][i] the
                        value dim j's row) decays, then per j: d = (v[j] - M[j] . k) * beta,
                        M[j] += d k, dst[r, h * c + j] = M[j] . q; n = b * c. src0 holds Q
                        (a heads), K (a heads), V (b heads) of c columns each */
    SLM_T_OP_COUNT
} slm_task_op;

/* The routing table (SLM_T_MOE_ROUTE) of a program of T rows and K experts per row. */
#define SLM_MOE_ROWLIST(T, K) 0
#define SLM_MOE_POS(T, K) ((size_t)(T) * (size_t)(K))
#define SLM_MOE_WEIGHT(T, K) (2 * (size_t)(T) * (size_t)(K))
#define SLM_MOE_EXPERT(T, K, e) (3 * (size_t)(T) * (size_t)(K) + 2 * (size_t)(e)) /* first place, count */

#define SLM_STREAM_PREFETCH_MAX 65536

/* Lanes (slm_task.lane): what kind of unit runs a task. */
typedef enum slm_lane {
    SLM_LANE_VECTOR = 0, /* element-wise and row work: norms, rope, add, embed */
    SLM_LANE_MATRIX,     /* matmul and attention tiles */
    SLM_LANE_TRANSFER,   /* data movement: copies and weight prefetch */
    SLM_LANE_COUNT
} slm_lane;

/* Operand address spaces. */
typedef enum slm_space {
    SLM_SPACE_NONE = 0,
    SLM_SPACE_WEIGHTS, /* model weights (mapped file / blob section) */
    SLM_SPACE_CONST,   /* compiler constants (RoPE tables) */
    SLM_SPACE_ARENA,   /* activation arena */
    SLM_SPACE_IO       /* an I/O tensor of the program: `io` says which */
} slm_space;

/* Task flags. */
#define SLM_TF_ONE_ROW 0x1     /* operate on row 0 only (after last_row) */
#define SLM_TF_DST_COMPACT 0x2 /* dst row index = r - row_begin (present.* views) */
#define SLM_TF_SRC_COMPACT 0x4 /* src0 row index = r - row_begin */
#define SLM_TF_NEOX 0x8        /* ROPE: rotate (i, i + c/2) instead of (2i, 2i+1) */
#define SLM_TF_PRE_NORM 0x10   /* MATMUL: the input is rmsnorm(src0) * src2 (weights, k floats), eps f0 */
#define SLM_TF_PRE_SWIGLU 0x20 /* MATMUL: the input is silu(src0) * src2 (same rows and ld as src0) */
#define SLM_TF_POST_ROPE 0x40  /* MATMUL: RoPE on the tile's output columns (head_dim c, NEOX as for
                                  ROPE; positions src3, table src4) */
#define SLM_TF_POST_ADD 0x80   /* MATMUL: dst[r, n0:n1] += the product (the residual stream); the
                                  tile starts on a multiple of 16 columns */
#define SLM_TF_GELU 0x100      /* SWIGLU, or MATMUL with PRE_SWIGLU: gelu_tanh(gate) * up (GeGLU);
                                  an EXPERT MATMUL with PRE_SWIGLU and no src2 (space NONE):
                                  gelu_tanh(src0) alone (ungated experts: nomic-bert-moe) */
#define SLM_TF_POST_SOFTCAP 0x200 /* MATMUL: dst[r, n0:n1] = f1 * tanh(product / f1) (final logits) */
#define SLM_TF_KEY_PARTS 0x800 /* ATTENTION: a part of the KV rows into partials (see ATTENTION) */
#define SLM_TF_POST_SCALE 0x1000 /* MATMUL: the product times f2, before the other epilogues (granite) */
#define SLM_TF_EXPERT 0x2000   /* MATMUL: expert b's rows only: the c * m rows of src0 and dst (ld: their
                                  width) hold the (row, slot) pairs sorted by expert; the table src3
                                  (SLM_T_MOE_ROUTE) gives the first place and count of expert b's */
#define SLM_TF_EXPERT_GATHER 0x4000 /* MATMUL with EXPERT: input row i of the expert is src0 row
                                  rowlist[first + i] (src0: m rows) */
#define SLM_TF_SINKS 0x8000   /* ATTENTION (not KEY_PARTS): each head's softmax has one more logit in its
                                  denominator, sinks[head] (gpt-oss): src4 is the sinks [a] f32 (the
                                  rows' cache positions are the program's cache_position input);
                                  ATTN_MERGE: the same, sinks in src1 */
#define SLM_TF_DST_CPOS 0x400  /* MATMUL, ROPE, BIAS: dst row index = cache_position[r] (batch
                                  programs store each row's K/V in its own sequence's region;
                                  a matmul tile starts on a multiple of 16 columns) */

typedef struct slm_ref {
    uint8_t space;    /* slm_space */
    uint8_t pad;
    uint16_t io;      /* I/O index when space == SLM_SPACE_IO */
    uint32_t ld;      /* row stride in elements (0 for vectors) */
    uint64_t off;     /* byte offset within the space / I/O tensor */
} slm_ref;

#define SLM_TASK_NREF 6 /* src0..src4, dst */
enum { SLM_REF_SRC0 = 0, SLM_REF_SRC1, SLM_REF_SRC2, SLM_REF_SRC3, SLM_REF_SRC4, SLM_REF_DST };

typedef struct slm_task {
    uint8_t op;          /* slm_task_op */
    uint8_t wtype;       /* weight slm_dtype (EMBED, MATMUL); KV element type (ATTENTION,
                            KV_STORE; 0 = f32) */
    uint16_t flags;      /* SLM_TF_* */
    uint32_t count;      /* BARRIER: tasks in the stage before it */
    int32_t m;           /* program input rows T */
    int32_t n, k;        /* output width / inner dimension (see each op) */
    int32_t n0, n1;      /* tile: output columns or heads [n0, n1) */
    int32_t a, b, c;     /* op-specific integers (see each op) */
    float f0;            /* RMSNORM eps */
    int32_t layer;       /* for dumps and per-layer timing; -1 if none */
    int32_t window;      /* ATTENTION: attend to at most this many rows up to the
                            query's own (sliding window); 0 = all. MATMUL with
                            EXPERT: the layer's number of experts E (b < E) */
    float f1;            /* ATTENTION: score soft-cap; MATMUL with POST_SOFTCAP: output cap */
    uint8_t lane;        /* slm_lane: set by the compiler, slm_task_lane(op) */
    uint8_t tiles[3];    /* MATMUL of a prefill on the matrix engine's types: the compiler's
                            tile step {row tiles, 16-column tiles, K per tile product}
                            (compiler/amx_plan.h); ATTENTION of a program of several
                            rows: {part, parts, 0}, the task takes part `part` of `parts`
                            (2..255) of the valid rows, cut at equal shares of the KV rows
                            they attend to (slm_attn_part_rows); with KEY_PARTS (a decode
                            program): {part, parts, 0} of each row's KV rows
                            (slm_attn_part_keys); ATTN_MERGE: {0, parts, 0}; zero otherwise */
    float f2;            /* MATMUL with POST_SCALE: the product is multiplied by it (granite's
                            residual and logit scales); ATTENTION: ALiBi's largest bias, each
                            head's scores minus its slope times |i - j| (jina-bert-v2; per-row
                            entries only); 0 otherwise */
    slm_ref ref[SLM_TASK_NREF];   /* operands */
    void *p[SLM_TASK_NREF];       /* resolved addresses: set only in the device's copy
                                     (slm_exec); NULL in a program */
} slm_task;

/* Row r's KV rows [first, last] cut in `parts` runs of equal length (the
 * first ones one longer): run `part`'s [*b, *e), empty when there are fewer
 * rows than parts. The KEY_PARTS attention tasks' split (runtime data: the
 * row's position steers it; every part's task exists whatever the length). */
static inline void slm_attn_part_keys(int first, int last, int part, int parts, int *b, int *e) {
    const int n = last >= first ? last - first + 1 : 0, q = n / parts, rem = n % parts;
    *b = first + part * q + (part < rem ? part : rem);
    *e = *b + q + (part < rem ? 1 : 0);
}

/* The lane of a task kind. */
static inline uint8_t slm_task_lane(int op) {
    switch (op) {
    case SLM_T_MATMUL: case SLM_T_ATTENTION: return SLM_LANE_MATRIX;
    /* ATTN_MERGE: a few multiply-adds per output, the vector lane */
    case SLM_T_COPY_ROW: case SLM_T_PREFETCH: return SLM_LANE_TRANSFER;
    default: return SLM_LANE_VECTOR;
    }
}

#endif
