/* ir/ — the model as a graph of operations.
 *
 * A graph is a flat array of nodes in topological order (a node's inputs
 * always have smaller ids). Shapes are 2-D: rows x cols of f32 (or i32 for
 * id-like inputs). Rows may be symbolic until specialization:
 *   SLM_DIM_T  the program's input rows (max_prompt_len for prefill, 1 for generate)
 *   SLM_DIM_C  the KV capacity in rows
 * The state of the model (each layer's K and V history) is expressed as in
 * OpenVINO: ReadValue(var) yields the past, Concat appends this call's rows,
 * Assign(var, value) stores it back. The compiler's state pass turns each
 * pair into a program input (past_key_values.L.*) and output (present.L.*).
 */
#ifndef SLM_IR_H
#define SLM_IR_H

#include <stdio.h>

#include "common/common.h"
#include "format/model.h"

#define SLM_DIM_T (-1)
#define SLM_DIM_C (-2)

typedef enum slm_op {
    SLM_OP_INPUT = 1,  /* program input; attr.role says which */
    SLM_OP_OUTPUT,     /* program output of in[0]; attr.role */
    SLM_OP_EMBED,      /* in: ids [T] i32 -> [T, dim]; weight: table [vocab, dim] */
    SLM_OP_RMSNORM,    /* in: x [R, n]; weight: gain [n] (NULL: none, gemma4's V); attr.eps */
    SLM_OP_MATMUL,     /* in: x [R, k]; weight: W [n, k] -> [R, n] */
    SLM_OP_ROPE,       /* in: x [R, heads*head_dim], pos [T] i32; attr.heads, head_dim */
    SLM_OP_READ_VALUE, /* state var attr.var -> [C, kv_dim] (the past) */
    SLM_OP_CONCAT,     /* in: past [C, n], new [T, n] -> [C, n]: new rows after the past */
    SLM_OP_ASSIGN,     /* in: value; stores it into state var attr.var */
    SLM_OP_ATTENTION,  /* in: q [T, H*hd], k [C, KV*hd], v [C, KV*hd], mask [C], cache_pos [T] */
    SLM_OP_ADD,        /* in: a, b -> a + b (same shape) */
    SLM_OP_SWIGLU,     /* in: gate, up -> silu(gate) * up */
    SLM_OP_LAST_ROW,   /* in: x [T, n] -> [1, n]: the last input row */
    SLM_OP_BIAS,       /* in: x [R, n]; weight: bias [n] -> x + bias (in place) */
    SLM_OP_KV_VIEW,    /* (after the state pass) in: past [C, n], present [T, n] -> past, with
                          present's rows stored in place at the write index: no data moves */
    /* Mixture of experts: E experts, K used per row. Shapes stay static: the
     * experts' rows of a call are runtime data in the routing table. */
    SLM_OP_MOE_ROUTE,  /* in: router logits [T, E] -> the routing table [T, 3K + 2E] i32
                          (layout: program/task.h, SLM_T_MOE_ROUTE): each row's top K experts
                          (by score + the selection bias `weight` when set) and weights, the
                          (row, slot) pairs sorted by expert */
    SLM_OP_MOE_MATMUL, /* every expert's matmul over the rows routed to it, as [T*K, n/K]
                          rows sorted by expert (shape [T, n] = the same bytes): gate/up
                          (gather = 1) in: x [T, k], route; down (pre = SWIGLU) in: gate
                          [T, K*k], up, route; down (pre = GELU: ungated experts,
                          nomic-bert-moe) in: up [T, K*k], route, gelu_tanh(up) its input.
                          experts[e]: expert e's matrix */
    SLM_OP_MOE_COMBINE,/* in: x [T, n], y [T, K*n] (the down rows), route, and optionally
                          the shared expert's output s [T, n] and its gate's logit g [T, 1]
                          -> x + scale * (sum over the K slots of weight * y + sigmoid(g) * s)
                          (no g: s alone) (in place on x); moe_set: the sum alone, in x's
                          storage (gemma4) */
    /* Hybrid recurrent layers (qwen35's Gated DeltaNet). The state inputs
     * (conv window, delta state) are program inputs the runtime binds to its
     * state buffer; these nodes update them in place. */
    SLM_OP_SLICE,      /* in: x [R, n] -> [R, cols]: from each run of `group` columns, `head_dim`
                          columns at `offset` (the gated query's query or gate halves) */
    SLM_OP_SSM_CONV,   /* in: x [T, n] (in place), conv state, cache_pos; weight: taps [n, K]
                          (K = head_dim): each channel's causal conv over its last K inputs
                          (the state's K - 1, then the row's), SiLU; the state shifts */
    SLM_OP_DELTA_GATE, /* in: alpha [T, H] (in place); weight: dt bias [H], weight2: a [H]
                          -> softplus(alpha + dt) * a, the log of each head's decay */
    SLM_OP_DELTA_NET,  /* in: qkv [T, conv_dim] (after the conv), g [T, H_v], beta logits
                          [T, H_v], the delta state, cache_pos -> o [T, H_v * S]: the gated
                          delta rule per value head (heads = H_v, kv_heads = H_k, head_dim = S) */
    /* Encoders (bert, nomic-bert, modern-bert) */
    SLM_OP_LAYERNORM,  /* in: x [R, n]; weight: gain [n], weight2: bias [n] or NULL (modern-bert)
                          -> (x - mean) / sqrt(var + eps) * gain + bias (LayerNorm); attr.eps */
    SLM_OP_GELU,       /* in: x [R, n] (in place) -> gelu_tanh(x) (an FFN without a gate) */
    SLM_OP_EMBED_ADD,  /* in: x [R, n] (in place), ids [T] i32 or none -> x + weight[ids]
                          (none: x + weight[0] on every row: BERT's token type 0) */
    SLM_OP_COUNT
} slm_op;

/* Roles of program inputs/outputs, named as in the article's I/O metadata. */
typedef enum slm_io_role {
    SLM_IO_NONE = 0,
    SLM_IO_INPUT_IDS,      /* [T] i32 token ids (right-aligned; padding rows first) */
    SLM_IO_POSITION_IDS,   /* [T] i32 RoPE positions (padding rows: 0) */
    SLM_IO_CACHE_POSITION, /* [T] i32 KV row each input row is stored in; -1 = padding */
    SLM_IO_ATTENTION_MASK, /* [C] i32 1 = KV row valid (including this call's rows) */
    SLM_IO_PAST_KEY,       /* [C, kv_dim] f32 past_key_values.L.key */
    SLM_IO_PAST_VALUE,     /* [C, kv_dim] f32 past_key_values.L.value */
    SLM_IO_PRESENT_KEY,    /* [T, kv_dim] f32 present.L.key: the valid rows only */
    SLM_IO_PRESENT_VALUE,  /* [T, kv_dim] f32 present.L.value */
    SLM_IO_LOGITS,         /* [1, vocab] f32 logits of the last input row */
    SLM_IO_HIDDEN,         /* [R, dim] f32 final-norm rows: output of a body program
                              and input of the lm_head program (LM head separation) */
    SLM_IO_CONV_STATE,     /* [S, (K - 1) * conv_dim] f32 conv_state.L: a DeltaNet layer's conv
                              window, one row per sequence the program sees (S = 1, or the
                              batch programs' sequences); read and updated in place */
    SLM_IO_RECUR_STATE,    /* [S, H_v * S * S] f32 recurrent_state.L: its delta state */
    SLM_IO_ROLE_COUNT
} slm_io_role;

const char *slm_io_role_name(slm_io_role r);

typedef struct slm_node {
    slm_op op;
    int in[5];         /* input node ids; -1 unused */
    int n_in;
    int rows;          /* > 0, or SLM_DIM_T / SLM_DIM_C until specialized */
    int cols;
    uint32_t dtype;    /* SLM_F32 or SLM_I32 */
    const slm_tensor *weight; /* model tensor for EMBED/RMSNORM/MATMUL; ATTENTION: the sinks [heads]
                                 (gpt-oss), else NULL */
    /* attributes */
    slm_io_role role;  /* INPUT/OUTPUT */
    int layer;         /* layer index, or -1 */
    int var;           /* READ_VALUE/ASSIGN: state variable id (2*layer + 0 for K, 1 for V) */
    int heads, kv_heads, head_dim; /* ROPE/ATTENTION */
    int neox;          /* ROPE: rotate (i, i + head_dim/2) instead of (2i, 2i+1) */
    int window;        /* ATTENTION: sliding window in rows (0 = unlimited; -1: no causal
                          limit, every row attends to every valid row of its input: an
                          encoder's; -(h + 1), h >= 1: both ways within h rows on either
                          side: gemma-embedding's window layers) */
    int group;         /* RMSNORM: normalize each run of `group` columns alone (per-head
                          Q/K norm); 0 = the whole row */
    int rot;           /* ROPE: rotated dimensions per head (partial rotary); 0 = head_dim */
    int table;         /* ROPE: which RoPE table (per-layer bases): its offset in the
                          constants is table * graph.rope_table_bytes */
    int gelu;          /* SWIGLU: gelu_tanh(gate) * up (GeGLU) instead of silu */
    int col0;          /* SWIGLU: `up` is columns [col0, col0 + cols) of in[1], which may be wider
                          (gemma4's per-layer inputs: one layer's slice of all of them) */
    int sigmoid;       /* SWIGLU: sigmoid(gate) * up (qwen35's gated attention output); never
                          fused into a matmul */
    int offset;        /* SLICE: the first column taken of each run */
    float scale;       /* EMBED: rows multiplied by it; ATTENTION: query scale; MATMUL: the product
                          multiplied by it (granite); ADD: the sum multiplied by it (gemma4's layer
                          output scale); 0 = none / 1 / sqrt(head_dim) / none / none */
    float softcap;     /* ATTENTION: scores -> cap * tanh(scores / cap); MATMUL: the same on
                          its output (final logits); 0 = none */
    float alibi;       /* ATTENTION: ALiBi's largest bias (jina-bert-v2: 8): each head's scores
                          minus its slope (slm_alibi_slope) times |i - j|; 0 = none */
    float eps;         /* RMSNORM, and MATMUL with pre == SLM_OP_RMSNORM */
    int dead;          /* removed by a pass */
    /* MATMUL input prologue (pass fuse_prologues): 0, or SLM_OP_RMSNORM (the
     * matmul multiplies rmsnorm(in[0]) * weight2 with eps) or SLM_OP_SWIGLU
     * (silu(in[0]) * in[1]), computed in the matmul's input pass */
    slm_op pre;
    const slm_tensor *weight2;
    /* MATMUL output epilogue: 0, SLM_OP_ROPE (pass fuse_rope: heads,
     * head_dim, neox as a ROPE node; positions are in[post_in]) applied to
     * the tile's columns right after they are computed, or SLM_OP_ADD (pass
     * fuse_residual: the product is added into in[post_in], whose storage
     * the matmul then owns, as the in-place ADD did) */
    slm_op post;
    int post_in;
    /* MOE_*: experts E, used per row K, top-K weights renormalized (MOE_ROUTE);
     * MOE_MATMUL: the E expert matrices (the model's table) and gather = 1
     * when its input rows are read through the routing table (gate, up) */
    int n_experts, n_used, expert_norm, gather;
    /* MOE_ROUTE: sigmoid scores instead of softmax (expert_sigmoid), the
     * selection bias [E] added to choose (weight, or NULL), the chosen
     * weights times scale (0 = 1) */
    int expert_sigmoid;
    const slm_tensor *const *experts;
    const slm_tensor *const *expert_bias; /* MOE_MATMUL: the E experts' output biases, or NULL */
    float oai_alpha, oai_limit; /* MOE_MATMUL down (pre = SWIGLU): the clamped SwiGLU when limit > 0 */
    /* gemma4's experts: MOE_MATMUL down: gelu = 1 its GeGLU prologue; MOE_ROUTE: weight2 the
     * per-expert scales [E] (each chosen weight times its expert's), or NULL; MOE_COMBINE: moe_set
     * = 1 the weighted sum replaces x (x lends its storage: the experts' normed input, read by
     * then), no residual and no shared expert */
    int moe_set;
} slm_node;

typedef struct slm_graph {
    slm_node *nodes;
    int n_nodes, cap_nodes;
    int rows_t;        /* value of SLM_DIM_T after specialization (0 before) */
    int rows_c;        /* value of SLM_DIM_C after specialization */
    char name[16];     /* "stateful", "prefill", "generate" */
    uint64_t rope_table_bytes; /* bytes of one RoPE table (set before lowering) */
} slm_graph;

void slm_graph_init(slm_graph *g, const char *name);
void slm_graph_free(slm_graph *g);
slm_status slm_graph_clone(slm_graph *dst, const slm_graph *src, const char *name);
/* Append a node; returns its id or -1 when out of memory. */
int slm_graph_add(slm_graph *g, const slm_node *n);
/* Print one line per live node. */
void slm_graph_dump(const slm_graph *g, FILE *f);
const char *slm_op_name(slm_op op);

/* Build the stateful decoder graph for a validated model: the Llama block
 * and what each family adds (config flags: Q/K bias, Q/K norm, post norms,
 * GeGLU, soft-capping, embedding scale, per-layer windows and RoPE tables). */
slm_status slm_build_decoder(slm_graph *g, const slm_model_file *m, slm_err *err);
/* The RoPE table layer l uses: 0 the model's, 1 the sliding-window layers'
 * own (gemma3: another base) when the config gives them one. */
int slm_rope_table_of(const slm_model_config *c, int layer);
/* The stateful encoder graph (bert, nomic-bert, modern-bert; build_decoder.c): every
 * row's final hidden state as the output (role hidden), no LM head. */
slm_status slm_build_encoder(slm_graph *g, const slm_model_file *m, slm_err *err);
/* The vocabulary projection alone (LM head separation). */
slm_status slm_build_lm_head(slm_graph *g, const slm_model_file *m, slm_err *err);

#endif
