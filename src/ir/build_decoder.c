/* The decoder as a stateful graph (what a model converter would emit): the
 * Llama block, with what the other families change switched by the config;
 * and the encoder (bert, nomic-bert) at the end. */
#include <math.h>

#include "ir/ir.h"

typedef struct builder {
    slm_graph *g;
    const slm_model_file *m;
    slm_err *err;
    int failed;
} builder;

static int add(builder *b, slm_node n) {
    if (b->failed) return -1;
    int id = slm_graph_add(b->g, &n);
    if (id < 0) b->failed = 1;
    return id;
}

static slm_node node(slm_op op, int rows, int cols) {
    slm_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.rows = rows;
    n.cols = cols;
    n.dtype = SLM_F32;
    n.layer = -1;
    n.var = -1;
    for (int i = 0; i < 5; i++) n.in[i] = -1;
    return n;
}

static void set_in(slm_node *n, int a, int b2, int c, int d, int e) {
    int v[5] = {a, b2, c, d, e};
    n->n_in = 0;
    for (int i = 0; i < 5; i++) {
        n->in[i] = v[i];
        if (v[i] >= 0) n->n_in = i + 1;
    }
}

static const slm_tensor *W(builder *b, const char *fmt, int layer) {
    char name[64];
    snprintf(name, sizeof name, fmt, layer);
    const slm_tensor *t = slm_model_tensor(b->m, name);
    if (!t) {
        slm_errf(b->err, SLM_ERR_FORMAT, "%s: tensor '%s' missing", slm_basename(b->m->path), name);
        b->failed = 1;
    }
    return t;
}

static int input(builder *b, slm_io_role role, int rows, uint32_t dtype) {
    slm_node n = node(SLM_OP_INPUT, rows, 1);
    n.role = role;
    n.dtype = dtype;
    return add(b, n);
}

static int unary_w(builder *b, slm_op op, int x, const slm_tensor *w, int rows, int cols) {
    slm_node n = node(op, rows, cols);
    set_in(&n, x, -1, -1, -1, -1);
    n.weight = w;
    return add(b, n);
}

int slm_rope_table_of(const slm_model_config *c, int layer) {
    const int own = (c->rope_base_swa > 0.0f && c->rope_base_swa != c->rope_base) ||
                    (c->rope_scale_swa > 0.0f && c->rope_scale_swa != c->rope_scale) || c->head_dim_swa > 0;
    return own && slm_layer_swa(c, layer) ? 1 : 0;
}

static int rmsnorm(builder *b, int x, const slm_tensor *w, int cols, int group, int layer) {
    slm_node n = node(SLM_OP_RMSNORM, SLM_DIM_T, cols);
    set_in(&n, x, -1, -1, -1, -1);
    n.weight = w;
    n.eps = b->m->cfg.norm_eps;
    n.group = group;
    n.layer = layer;
    return add(b, n);
}

static int rope(builder *b, int x, int pos, int heads, int layer) {
    const slm_model_config *c = &b->m->cfg;
    const int hd = slm_layer_head_dim(c, layer), rot = slm_layer_rope_dims(c, layer);
    slm_node n = node(SLM_OP_ROPE, SLM_DIM_T, heads * hd);
    set_in(&n, x, pos, -1, -1, -1);
    n.heads = heads;
    n.head_dim = hd;
    n.neox = c->rope_neox;
    n.rot = rot != hd ? rot : 0;
    n.table = slm_rope_table_of(c, layer);
    n.layer = layer;
    return add(b, n);
}

/* Layer l's K (s = 0) or V (s = 1) state: the past rows (ReadValue), the
 * fresh rows after them (concat), stored back (Assign); returns the concat
 * [C, cols] that attention reads. */
static int kv_state(builder *b, int fresh, int l, int s, int cols) {
    slm_node n = node(SLM_OP_READ_VALUE, SLM_DIM_C, cols);
    n.var = 2 * l + s;
    n.layer = l;
    const int past = add(b, n);
    n = node(SLM_OP_CONCAT, SLM_DIM_C, cols);
    set_in(&n, past, fresh, -1, -1, -1);
    n.layer = l;
    const int all = add(b, n);
    n = node(SLM_OP_ASSIGN, SLM_DIM_C, cols);
    set_in(&n, all, -1, -1, -1, -1);
    n.var = 2 * l + s;
    n.layer = l;
    add(b, n);
    return all;
}

/* The shared expert: a dense SwiGLU FFN of every row (ordinary matmuls),
 * sh[0] its output [T, dim], and sh[1] its gate's logit [T, 1] (qwen2moe)
 * or -1. */
static void shared_expert(builder *b, int xn, int l, int sh[2]) {
    const slm_model_config *c = &b->m->cfg;
    const int T = SLM_DIM_T;
    int gate = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ffn_gate_shexp.weight", l), T, c->shared_ffn);
    int up = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ffn_up_shexp.weight", l), T, c->shared_ffn);
    slm_node n = node(SLM_OP_SWIGLU, T, c->shared_ffn);
    set_in(&n, gate, up, -1, -1, -1);
    int h = add(b, n);
    sh[0] = unary_w(b, SLM_OP_MATMUL, h, W(b, "blk.%d.ffn_down_shexp.weight", l), T, c->dim);
    sh[1] = c->shared_gate ? unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ffn_gate_inp_shexp.weight", l), T, 1) : -1;
}

/* A mixture-of-experts FFN: the router's logits, the routing table, every
 * expert's gate and up over the rows routed to it, the down projection
 * with the SwiGLU as its prologue, the shared expert when the model has
 * one, and the weighted sum (plus the shared expert's output) into the
 * residual. */
/* The routing table of the router's logits and the experts' down rows
 * [T, K * dim] of the input xn (their gate and up over the rows routed to
 * each, the down projection with the SwiGLU or GeGLU as its prologue; an
 * ungated expert's up alone, GELU its down's prologue); *route receives
 * the table. */
static int experts(builder *b, int xn, int logits, int l, int *route_out) {
    const slm_model_config *c = &b->m->cfg;
    const int E = c->n_experts, K = c->n_experts_used, T = SLM_DIM_T;
    slm_node n = node(SLM_OP_MOE_ROUTE, T, 3 * K + 2 * E);
    set_in(&n, logits, -1, -1, -1, -1);
    n.dtype = SLM_I32;
    n.n_experts = E;
    n.n_used = K;
    n.expert_norm = c->expert_norm;
    n.expert_sigmoid = c->expert_sigmoid;
    n.weight = c->expert_sel_bias ? W(b, "blk.%d.exp_probs_b.bias", l) : NULL;
    n.scale = c->expert_scale;
    n.weight2 = c->expert_down_scale ? W(b, "blk.%d.ffn_down_exps.scale", l) : NULL;
    n.layer = l;
    const int route = add(b, n);
    *route_out = route;
    int h[3];
    for (int j = c->expert_ungated ? 1 : 0; j < 3; j++) { /* ungated (nomic-bert-moe): up, then down of gelu(up) */
        n = node(SLM_OP_MOE_MATMUL, T, K * (j == 2 ? c->dim : c->hidden_dim));
        if (j < 2) set_in(&n, xn, route, -1, -1, -1);
        else if (c->expert_ungated) set_in(&n, h[1], route, -1, -1, -1);
        else set_in(&n, h[0], h[1], route, -1, -1);
        n.gather = j < 2;
        n.pre = j < 2 ? 0 : c->expert_ungated ? SLM_OP_GELU : SLM_OP_SWIGLU;
        n.n_experts = E;
        n.n_used = K;
        n.experts = &slm_model_expert(b->m, l, j, 0);
        n.expert_bias = c->expert_bias ? &slm_model_expert(b->m, l, 3 + j, 0) : NULL;
        n.weight = n.experts[0];
        if (j == 2) {
            n.oai_alpha = c->swiglu_alpha;
            n.oai_limit = c->swiglu_limit;
            n.gelu = c->ffn_gelu; /* gemma4's experts: GeGLU */
        }
        n.layer = l;
        h[j] = add(b, n);
    }
    return h[2];
}

/* A mixture-of-experts FFN: the router's logits, the experts, the shared
 * expert when the model has one, and the weighted sum (plus the shared
 * expert's output) into the residual. */
static int moe_ffn(builder *b, int x, int xn, int l) {
    const slm_model_config *c = &b->m->cfg;
    const int E = c->n_experts, K = c->n_experts_used, T = SLM_DIM_T;
    if (!b->m->experts) {
        slm_errf(b->err, SLM_ERR_INTERNAL, "%s: no expert table", slm_basename(b->m->path));
        b->failed = 1;
        return -1;
    }
    int logits = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ffn_gate_inp.weight", l), T, E);
    if (c->expert_bias) logits = unary_w(b, SLM_OP_BIAS, logits, W(b, "blk.%d.ffn_gate_inp.bias", l), T, E);
    int route = -1;
    const int down = experts(b, xn, logits, l, &route);
    slm_node n;
    int sh[2] = {-1, -1};
    if (c->shared_ffn) shared_expert(b, xn, l, sh);
    n = node(SLM_OP_MOE_COMBINE, T, c->dim);
    set_in(&n, x, down, route, sh[0], sh[1]);
    n.n_experts = E;
    n.n_used = K;
    n.scale = c->residual_scale;
    n.layer = l;
    return add(b, n);
}

/* gemma4's experts branch of the residual x (its MoE layers): the router
 * reads rmsnorm(x) times ffn_gate_inp.scale (a matmul prologue) and its
 * product times 1/sqrt(dim); the experts read x normed by pre_ffw_norm_2;
 * their weighted sum (in that input's storage) normed by post_ffw_norm_2. */
static int gemma4_experts(builder *b, int x, int l) {
    const slm_model_config *c = &b->m->cfg;
    const int T = SLM_DIM_T;
    if (!b->m->experts) {
        slm_errf(b->err, SLM_ERR_INTERNAL, "%s: no expert table", slm_basename(b->m->path));
        b->failed = 1;
        return -1;
    }
    const int rn = rmsnorm(b, x, W(b, "blk.%d.ffn_gate_inp.scale", l), c->dim, 0, l);
    const int logits = unary_w(b, SLM_OP_MATMUL, rn, W(b, "blk.%d.ffn_gate_inp.weight", l), T, c->n_experts);
    if (logits >= 0) b->g->nodes[logits].scale = 1.0f / sqrtf((float)c->dim);
    const int xn = rmsnorm(b, x, W(b, "blk.%d.pre_ffw_norm_2.weight", l), c->dim, 0, l);
    int route = -1;
    const int down = experts(b, xn, logits, l, &route);
    slm_node n = node(SLM_OP_MOE_COMBINE, T, c->dim);
    set_in(&n, xn, down, route, -1, -1);
    n.n_experts = c->n_experts;
    n.n_used = c->n_experts_used;
    n.moe_set = 1;
    n.layer = l;
    const int sum = add(b, n);
    return rmsnorm(b, sum, W(b, "blk.%d.post_ffw_norm_2.weight", l), c->dim, 0, l);
}

/* gemma4's per-layer inputs [T, ple * layers] of the scaled embedding x:
 * per_layer_token_embd's rows times sqrt(ple), plus x projected by
 * per_layer_model_proj times 1/sqrt(dim), RMS-normed per layer's ple
 * columns. llama.cpp then multiplies the sum by 1/sqrt(2): that factor is
 * the post-scale of each layer's proj matmul instead, before its norm. */
static int per_layer_inputs(builder *b, int ids, int x) {
    const slm_model_config *c = &b->m->cfg;
    const int PL = c->ple_dim * c->n_layers;
    slm_node n = node(SLM_OP_EMBED, SLM_DIM_T, PL);
    set_in(&n, ids, -1, -1, -1, -1);
    n.weight = W(b, "per_layer_token_embd.weight", 0);
    n.scale = sqrtf((float)c->ple_dim);
    const int tok = add(b, n);
    int proj = unary_w(b, SLM_OP_MATMUL, x, W(b, "per_layer_model_proj.weight", 0), SLM_DIM_T, PL);
    if (proj >= 0) b->g->nodes[proj].scale = 1.0f / sqrtf((float)c->dim);
    proj = rmsnorm(b, proj, W(b, "per_layer_proj_norm.weight", 0), PL, c->ple_dim, -1);
    n = node(SLM_OP_ADD, SLM_DIM_T, PL);
    set_in(&n, proj, tok, -1, -1, -1);
    return add(b, n);
}

/* Layer l's output scale (gemma4's layer_output_scale), 0 = none. */
static float layer_scale(builder *b, int l) {
    if (!b->m->cfg.layer_scale) return 0.0f;
    const slm_tensor *t = W(b, "blk.%d.layer_output_scale.weight", l);
    float v = 0.0f;
    if (t) memcpy(&v, t->data, sizeof v);
    return v == 1.0f ? 0.0f : v;
}

/* gemma4's per-layer embedding at the end of layer l: x + norm(proj(gelu(x
 * inp_gate) * layer l's input)), times the layer's output scale. */
static int per_layer_embedding(builder *b, int x, int pli, int l) {
    const slm_model_config *c = &b->m->cfg;
    int gate = unary_w(b, SLM_OP_MATMUL, x, W(b, "blk.%d.inp_gate.weight", l), SLM_DIM_T, c->ple_dim);
    slm_node n = node(SLM_OP_SWIGLU, SLM_DIM_T, c->ple_dim);
    set_in(&n, gate, pli, -1, -1, -1);
    n.gelu = 1;
    n.col0 = l * c->ple_dim;
    n.layer = l;
    int h = add(b, n);
    int pr = unary_w(b, SLM_OP_MATMUL, h, W(b, "blk.%d.proj.weight", l), SLM_DIM_T, c->dim);
    if (pr >= 0) b->g->nodes[pr].scale = (float)M_SQRT1_2;
    pr = rmsnorm(b, pr, W(b, "blk.%d.post_norm.weight", l), c->dim, 0, l);
    n = node(SLM_OP_ADD, SLM_DIM_T, c->dim);
    set_in(&n, x, pr, -1, -1, -1);
    n.scale = layer_scale(b, l);
    n.layer = l;
    return add(b, n);
}

/* A state input of DeltaNet layer l (role CONV_STATE or RECUR_STATE): one
 * row of `cols` floats per sequence (lowering gives batch programs theirs). */
static int state_input(builder *b, slm_io_role role, int64_t cols, int l) {
    slm_node n = node(SLM_OP_INPUT, 1, (int)cols);
    n.role = role;
    n.layer = l;
    return add(b, n);
}

/* A Gated DeltaNet layer (qwen35) on the residual x: the branch's
 * projections from the normed row (fused Q/K/V, the output gate z, beta and
 * alpha), the causal conv with its window, the decay, the delta rule with
 * its state, the gated RMSNorm (per head, times silu(z)) and ssm_out, added
 * into the residual. */
static int delta_layer(builder *b, int x, int cpos, int l) {
    const slm_model_config *c = &b->m->cfg;
    const int T = SLM_DIM_T, cd = slm_conv_dim(c), vd = c->ssm_v_heads * c->ssm_state, hv = c->ssm_v_heads;
    int xn = rmsnorm(b, x, W(b, "blk.%d.attn_norm.weight", l), c->dim, 0, l);
    int qkv = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.attn_qkv.weight", l), T, cd);
    int z = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.attn_gate.weight", l), T, vd);
    int beta = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ssm_beta.weight", l), T, hv);
    int alpha = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ssm_alpha.weight", l), T, hv);
    const int cs = state_input(b, SLM_IO_CONV_STATE, slm_conv_state_floats(c), l);
    const int rs = state_input(b, SLM_IO_RECUR_STATE, slm_delta_state_floats(c), l);
    slm_node n = node(SLM_OP_SSM_CONV, T, cd);
    set_in(&n, qkv, cs, cpos, -1, -1);
    n.weight = W(b, "blk.%d.ssm_conv1d.weight", l);
    n.head_dim = c->ssm_conv;
    n.layer = l;
    const int conv = add(b, n);
    n = node(SLM_OP_DELTA_GATE, T, hv);
    set_in(&n, alpha, -1, -1, -1, -1);
    n.weight = W(b, "blk.%d.ssm_dt.bias", l);
    n.weight2 = W(b, "blk.%d.ssm_a", l);
    n.layer = l;
    const int gate = add(b, n);
    n = node(SLM_OP_DELTA_NET, T, vd);
    set_in(&n, conv, gate, beta, rs, cpos);
    n.heads = hv;
    n.kv_heads = c->ssm_k_heads;
    n.head_dim = c->ssm_state;
    n.eps = c->norm_eps;
    n.layer = l;
    const int o = add(b, n);
    const int on = rmsnorm(b, o, W(b, "blk.%d.ssm_norm.weight", l), vd, c->ssm_state, l);
    n = node(SLM_OP_SWIGLU, T, vd);
    set_in(&n, z, on, -1, -1, -1);
    const int gated = add(b, n);
    const int out = unary_w(b, SLM_OP_MATMUL, gated, W(b, "blk.%d.ssm_out.weight", l), T, c->dim);
    n = node(SLM_OP_ADD, T, c->dim);
    set_in(&n, x, out, -1, -1, -1);
    return add(b, n);
}

/* The dense FFN of layer l on the normed row xn (SwiGLU or GeGLU; its
 * product times granite's residual scale); gemma4 with experts: that
 * normed by post_ffw_norm_1, plus the experts' branch of the residual x. */
static int ffn_branch(builder *b, int x, int xn, int l) {
    const slm_model_config *c = &b->m->cfg;
    const int F = slm_layer_ffn(c, l), T = SLM_DIM_T;
    int gate = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ffn_gate.weight", l), T, F);
    int up = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.ffn_up.weight", l), T, F);
    slm_node n = node(SLM_OP_SWIGLU, T, F);
    set_in(&n, gate, up, -1, -1, -1);
    n.gelu = c->ffn_gelu;
    int h = add(b, n);
    int down = unary_w(b, SLM_OP_MATMUL, h, W(b, "blk.%d.ffn_down.weight", l), T, c->dim);
    if (down >= 0) b->g->nodes[down].scale = c->residual_scale;
    if (!c->moe_dense) return down;
    down = rmsnorm(b, down, W(b, "blk.%d.post_ffw_norm_1.weight", l), c->dim, 0, l);
    const int ex = gemma4_experts(b, x, l);
    n = node(SLM_OP_ADD, T, c->dim);
    set_in(&n, down, ex, -1, -1, -1);
    n.layer = l;
    return add(b, n);
}

/* Columns [offset, offset + take) of each run of `runs` columns of x. */
static int slice(builder *b, int x, int cols, int runs, int take, int offset, int layer) {
    slm_node n = node(SLM_OP_SLICE, SLM_DIM_T, cols);
    set_in(&n, x, -1, -1, -1, -1);
    n.group = runs;
    n.head_dim = take;
    n.offset = offset;
    n.layer = layer;
    return add(b, n);
}

slm_status slm_build_decoder(slm_graph *g, const slm_model_file *m, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    builder b = {g, m, err, 0};
    const int T = SLM_DIM_T, C = SLM_DIM_C;
    /* each layer's K and V over the cache (KV-shared layers attend over another layer's) */
    int *kv_of = slm_calloc((size_t)c->n_layers * 2, sizeof(int));
    if (!kv_of) return slm_errf(err, SLM_ERR_NOMEM, "out of memory building the graph");

    int ids = input(&b, SLM_IO_INPUT_IDS, T, SLM_I32);
    int pos = input(&b, SLM_IO_POSITION_IDS, T, SLM_I32);
    int cpos = input(&b, SLM_IO_CACHE_POSITION, T, SLM_I32);
    int mask = input(&b, SLM_IO_ATTENTION_MASK, C, SLM_I32);

    slm_node n = node(SLM_OP_EMBED, T, c->dim);
    set_in(&n, ids, -1, -1, -1, -1);
    n.weight = W(&b, "token_embd.weight", 0);
    n.scale = c->embed_scale;
    int x = add(&b, n);
    const int pli = c->ple_dim ? per_layer_inputs(&b, ids, x) : -1;
    for (int l = 0; l < c->n_layers && !b.failed; l++) {
        /* this layer's shape (gemma4's two kinds of layer; the config's elsewhere) */
        const int hd = slm_layer_head_dim(c, l), kvh = slm_layer_kv_heads(c, l), kv_dim = kvh * hd,
                  q_dim = c->n_heads * hd, own_kv = slm_layer_has_kv(c, l);
        int xn, att_gate = -1;
        if (slm_layer_recurrent(c, l)) { /* qwen35: a DeltaNet layer in place of attention */
            x = delta_layer(&b, x, cpos, l);
            goto ffn;
        }
        /* olmo2: no pre-norm, Q/K/V read the residual itself */
        xn = c->no_pre_norms ? x : rmsnorm(&b, x, W(&b, "blk.%d.attn_norm.weight", l), c->dim, 0, l);
        int q = unary_w(&b, SLM_OP_MATMUL, xn, W(&b, "blk.%d.attn_q.weight", l), T, c->attn_gate ? 2 * q_dim : q_dim);
        if (c->attn_gate) { /* qwen35: per head its query, then its gate */
            att_gate = slice(&b, q, q_dim, 2 * hd, hd, hd, l);
            q = slice(&b, q, q_dim, 2 * hd, hd, 0, l);
        }
        int k = -1, v = -1;
        if (own_kv) {
            char vname[64];
            snprintf(vname, sizeof vname, "blk.%d.attn_v.weight", l);
            k = unary_w(&b, SLM_OP_MATMUL, xn, W(&b, "blk.%d.attn_k.weight", l), T, kv_dim);
            /* gemma4: V is K's projection where the layer has no attn_v */
            if (!c->v_norm || slm_model_tensor(m, vname))
                v = unary_w(&b, SLM_OP_MATMUL, xn, W(&b, "blk.%d.attn_v.weight", l), T, kv_dim);
        }
        if (c->qkv_bias) {
            q = unary_w(&b, SLM_OP_BIAS, q, W(&b, "blk.%d.attn_q.bias", l), T, q_dim);
            k = unary_w(&b, SLM_OP_BIAS, k, W(&b, "blk.%d.attn_k.bias", l), T, kv_dim);
            v = unary_w(&b, SLM_OP_BIAS, v, W(&b, "blk.%d.attn_v.bias", l), T, kv_dim);
        }
        if (own_kv && c->v_norm) /* gemma4: each V head RMS-normed without a gain, from K's before its norm */
            v = rmsnorm(&b, v >= 0 ? v : k, NULL, kv_dim, hd, l);
        if (c->qk_norm) { /* before RoPE: each head on its own (qwen3, gemma3), or whole rows (olmo2) */
            const int group = c->qk_norm == 2 ? 0 : hd;
            q = rmsnorm(&b, q, W(&b, "blk.%d.attn_q_norm.weight", l), q_dim, group, l);
            if (own_kv) k = rmsnorm(&b, k, W(&b, "blk.%d.attn_k_norm.weight", l), kv_dim, group, l);
        }
        if (slm_layer_rope(c, l)) { /* smollm3: every fourth layer has none */
            q = rope(&b, q, pos, c->n_heads, l);
            if (own_kv) k = rope(&b, k, pos, kvh, l);
        }

        int *kv_all = kv_of + 2 * l;
        int fresh[2] = {k, v};
        if (!own_kv) { /* gemma4: the K and V another layer stored in this call */
            kv_all[0] = kv_of[2 * slm_layer_kv_src(c, l)];
            kv_all[1] = kv_of[2 * slm_layer_kv_src(c, l) + 1];
        }
        for (int s = 0; s < 2 && own_kv; s++) kv_all[s] = kv_state(&b, fresh[s], l, s, kv_dim);

        n = node(SLM_OP_ATTENTION, T, q_dim);
        set_in(&n, q, kv_all[0], kv_all[1], mask, cpos);
        n.heads = c->n_heads;
        n.kv_heads = kvh;
        n.head_dim = hd;
        n.window = slm_layer_swa(c, l) ? c->sliding_window : 0;
        if (c->encoder == 3) /* gemma-embedding: both ways; the window layers |i - j| <= window / 2 */
            n.window = slm_layer_swa(c, l) ? -(c->sliding_window / 2 + 1) : -1;
        n.scale = c->attn_scale;
        n.softcap = c->attn_softcap;
        n.weight = c->attn_sinks ? W(&b, "blk.%d.attn_sinks.weight", l) : NULL;
        n.layer = l;
        int att = add(&b, n);
        if (att_gate >= 0) { /* the output times sigmoid(gate), in the gate's storage */
            n = node(SLM_OP_SWIGLU, T, q_dim);
            set_in(&n, att_gate, att, -1, -1, -1);
            n.sigmoid = 1;
            att = add(&b, n);
        }
        int o = unary_w(&b, SLM_OP_MATMUL, att, W(&b, "blk.%d.attn_output.weight", l), T, c->dim);
        if (c->o_bias) o = unary_w(&b, SLM_OP_BIAS, o, W(&b, "blk.%d.attn_output.bias", l), T, c->dim);
        if (o >= 0) g->nodes[o].scale = c->residual_scale; /* granite */
        if (c->post_norms) o = rmsnorm(&b, o, W(&b, "blk.%d.post_attention_norm.weight", l), c->dim, 0, l);
        n = node(SLM_OP_ADD, T, c->dim);
        set_in(&n, x, o, -1, -1, -1);
        x = add(&b, n);
    ffn:
        xn = c->no_pre_norms ? x : rmsnorm(&b, x, W(&b, "blk.%d.ffn_norm.weight", l), c->dim, 0, l);
        if (slm_layer_moe(c, l) && !c->moe_dense) { /* glm4moe: after the leading dense layers */
            x = moe_ffn(&b, x, xn, l);
            continue;
        }
        int down = ffn_branch(&b, x, xn, l);
        if (c->post_norms) down = rmsnorm(&b, down, W(&b, "blk.%d.post_ffw_norm.weight", l), c->dim, 0, l);
        n = node(SLM_OP_ADD, T, c->dim);
        set_in(&n, x, down, -1, -1, -1);
        if (!c->ple_dim) n.scale = layer_scale(&b, l); /* gemma4 without per-layer embeddings (31B) */
        x = add(&b, n);
        if (c->ple_dim) x = per_layer_embedding(&b, x, pli, l);
    }
    slm_xfree(kv_of);
    int xf = rmsnorm(&b, x, W(&b, "output_norm.weight", 0), c->dim, 0, -1);
    const slm_tensor *head = c->tied_embeddings ? W(&b, "token_embd.weight", 0) : W(&b, "output.weight", 0);
    int logits = unary_w(&b, SLM_OP_MATMUL, xf, head, T, c->vocab_size);
    if (logits >= 0) {
        g->nodes[logits].softcap = c->final_softcap;
        g->nodes[logits].scale = c->logit_scale > 0.0f ? 1.0f / c->logit_scale : 0.0f; /* granite */
    }
    n = node(SLM_OP_OUTPUT, T, c->vocab_size);
    set_in(&n, logits, -1, -1, -1, -1);
    n.role = SLM_IO_LOGITS;
    add(&b, n);

    if (b.failed) {
        if (err && err->status == SLM_OK) slm_errf(err, SLM_ERR_NOMEM, "out of memory building the graph");
        return err ? err->status : SLM_ERR_NOMEM;
    }
    return SLM_OK;
}

/* The LM head alone: hidden [T, dim] -> logits [T, vocab]. cache_position
 * is an input too: the executor takes the valid rows from it. */
slm_status slm_build_lm_head(slm_graph *g, const slm_model_file *m, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    builder b = {g, m, err, 0};
    int hid = input(&b, SLM_IO_HIDDEN, SLM_DIM_T, SLM_F32);
    if (hid >= 0) g->nodes[hid].cols = c->dim;
    input(&b, SLM_IO_CACHE_POSITION, SLM_DIM_T, SLM_I32);
    const slm_tensor *head = c->tied_embeddings ? W(&b, "token_embd.weight", 0) : W(&b, "output.weight", 0);
    int logits = unary_w(&b, SLM_OP_MATMUL, hid, head, SLM_DIM_T, c->vocab_size);
    if (logits >= 0) {
        g->nodes[logits].softcap = c->final_softcap;
        g->nodes[logits].scale = c->logit_scale > 0.0f ? 1.0f / c->logit_scale : 0.0f; /* granite */
    }
    slm_node n = node(SLM_OP_OUTPUT, SLM_DIM_T, c->vocab_size);
    set_in(&n, logits, -1, -1, -1, -1);
    n.role = SLM_IO_LOGITS;
    add(&b, n);
    if (b.failed) {
        if (err && err->status == SLM_OK) slm_errf(err, SLM_ERR_NOMEM, "out of memory building the graph");
        return err ? err->status : SLM_ERR_NOMEM;
    }
    return SLM_OK;
}

/* ---- encoders (bert, nomic-bert, nomic-bert-moe, modern-bert, jina-bert-v2) - */

static int layernorm(builder *b, int x, const char *fmt, int layer) {
    char name[64];
    slm_node n = node(SLM_OP_LAYERNORM, SLM_DIM_T, b->m->cfg.dim);
    set_in(&n, x, -1, -1, -1, -1);
    snprintf(name, sizeof name, fmt, layer);
    n.weight = W(b, name, layer);
    snprintf(name + strlen(name) - 6, 7, "bias"); /* "...weight" -> "...bias" */
    n.weight2 = b->m->cfg.encoder == 4 ? NULL : W(b, name, layer); /* modern-bert's norms have no bias */
    n.eps = b->m->cfg.norm_eps;
    n.layer = layer;
    return add(b, n);
}

/* 1 when the file has the tensor fmt of layer l. */
static int has(builder *b, const char *fmt, int l) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    return slm_model_tensor(b->m, name) != NULL;
}

/* A matmul of layer l, then its bias where the file has one. */
static int matmul_bias(builder *b, int x, const char *wfmt, const char *bfmt, int l, int cols) {
    char name[64];
    int y = unary_w(b, SLM_OP_MATMUL, x, W(b, wfmt, l), SLM_DIM_T, cols);
    snprintf(name, sizeof name, bfmt, l);
    return slm_model_tensor(b->m, name) ? unary_w(b, SLM_OP_BIAS, y, W(b, bfmt, l), SLM_DIM_T, cols) : y;
}

/* modern-bert's layers (pre-norm, model.h: encoder 4) over the normed
 * embeddings x, and its output norm. */
static int modern_layers(builder *b, int x, int pos, int cpos, int mask) {
    const slm_model_config *c = &b->m->cfg;
    const int T = SLM_DIM_T, dim = c->dim;
    for (int l = 0; l < c->n_layers && !b->failed; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        const int xn = slm_model_tensor(b->m, name) ? layernorm(b, x, "blk.%d.attn_norm.weight", l) : x; /* layer 0 */
        int q = unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.attn_q.weight", l), T, dim);
        int kv[2] = {unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.attn_k.weight", l), T, dim),
                     unary_w(b, SLM_OP_MATMUL, xn, W(b, "blk.%d.attn_v.weight", l), T, dim)};
        q = rope(b, q, pos, c->n_heads, l); /* the window layers' own base: table 1 */
        kv[0] = rope(b, kv[0], pos, c->n_heads, l);
        for (int s = 0; s < 2; s++) kv[s] = kv_state(b, kv[s], l, s, dim);
        slm_node n = node(SLM_OP_ATTENTION, T, dim);
        set_in(&n, q, kv[0], kv[1], mask, cpos);
        n.heads = c->n_heads;
        n.kv_heads = c->n_kv_heads;
        n.head_dim = c->head_dim;
        n.window = slm_layer_swa(c, l) ? -(c->sliding_window / 2 + 1) : -1; /* |i - j| <= window / 2, or all */
        n.layer = l;
        const int att = add(b, n);
        const int o = unary_w(b, SLM_OP_MATMUL, att, W(b, "blk.%d.attn_output.weight", l), T, dim);
        n = node(SLM_OP_ADD, T, dim);
        set_in(&n, x, o, -1, -1, -1);
        n.layer = l;
        x = add(b, n);
        const int fn = layernorm(b, x, "blk.%d.ffn_norm.weight", l);
        const int gate = unary_w(b, SLM_OP_MATMUL, fn, W(b, "blk.%d.ffn_gate.weight", l), T, c->hidden_dim);
        const int up = unary_w(b, SLM_OP_MATMUL, fn, W(b, "blk.%d.ffn_up.weight", l), T, c->hidden_dim);
        n = node(SLM_OP_SWIGLU, T, c->hidden_dim);
        set_in(&n, gate, up, -1, -1, -1);
        n.gelu = c->ffn_gelu; /* GeGLU, or SwiGLU (hidden_activation silu) */
        const int h = add(b, n);
        const int down = unary_w(b, SLM_OP_MATMUL, h, W(b, "blk.%d.ffn_down.weight", l), T, dim);
        n = node(SLM_OP_ADD, T, dim);
        set_in(&n, x, down, -1, -1, -1);
        n.layer = l;
        x = add(b, n);
    }
    return layernorm(b, x, "output_norm.weight", -1);
}

slm_status slm_build_encoder(slm_graph *g, const slm_model_file *m, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    builder b = {g, m, err, 0};
    const int T = SLM_DIM_T, C = SLM_DIM_C, dim = c->dim;
    int ids = input(&b, SLM_IO_INPUT_IDS, T, SLM_I32);
    int pos = input(&b, SLM_IO_POSITION_IDS, T, SLM_I32);
    int cpos = input(&b, SLM_IO_CACHE_POSITION, T, SLM_I32);
    int mask = input(&b, SLM_IO_ATTENTION_MASK, C, SLM_I32);

    slm_node n = node(SLM_OP_EMBED, T, dim);
    set_in(&n, ids, -1, -1, -1, -1);
    n.weight = W(&b, "token_embd.weight", 0);
    int x = add(&b, n);
    if (slm_model_tensor(m, "token_types.weight")) { /* every token is of type 0 ("sentence A"), as llama.cpp */
        n = node(SLM_OP_EMBED_ADD, T, dim);
        set_in(&n, x, -1, -1, -1, -1);
        n.weight = W(&b, "token_types.weight", 0);
        x = add(&b, n);
    }
    if (c->encoder == 1) { /* bert: learned positions */
        n = node(SLM_OP_EMBED_ADD, T, dim);
        set_in(&n, x, pos, -1, -1, -1);
        n.weight = W(&b, "position_embd.weight", 0);
        x = add(&b, n);
    }
    x = layernorm(&b, x, "token_embd_norm.weight", -1);
    if (c->encoder == 4) x = modern_layers(&b, x, pos, cpos, mask);
    for (int l = 0; l < c->n_layers && !b.failed && c->encoder != 4; l++) {
        const int x_in = x;
        int q = matmul_bias(&b, x, "blk.%d.attn_q.weight", "blk.%d.attn_q.bias", l, dim);
        int kv[2] = {matmul_bias(&b, x, "blk.%d.attn_k.weight", "blk.%d.attn_k.bias", l, dim),
                     matmul_bias(&b, x, "blk.%d.attn_v.weight", "blk.%d.attn_v.bias", l, dim)};
        if (c->encoder == 5 && has(&b, "blk.%d.attn_q_norm.weight", l)) /* jina-bert-v2: LayerNorms of Q and K */
            q = layernorm(&b, q, "blk.%d.attn_q_norm.weight", l);
        if (c->encoder == 5 && has(&b, "blk.%d.attn_k_norm.weight", l))
            kv[0] = layernorm(&b, kv[0], "blk.%d.attn_k_norm.weight", l);
        if (c->encoder == 2 || c->encoder == 6) { /* nomic-bert(-moe): rotary positions */
            q = rope(&b, q, pos, c->n_heads, l);
            kv[0] = rope(&b, kv[0], pos, c->n_heads, l);
        }
        for (int s = 0; s < 2; s++) kv[s] = kv_state(&b, kv[s], l, s, dim); /* through the cache, as a prefill's */
        n = node(SLM_OP_ATTENTION, T, dim);
        set_in(&n, q, kv[0], kv[1], mask, cpos);
        n.heads = c->n_heads;
        n.kv_heads = c->n_kv_heads;
        n.head_dim = c->head_dim;
        n.window = -1; /* both ways */
        n.alibi = c->encoder == 5 ? 8.0f : 0.0f; /* jina-bert-v2: llama.cpp's largest ALiBi bias */
        n.layer = l;
        int att = add(&b, n);
        int o = matmul_bias(&b, att, "blk.%d.attn_output.weight", "blk.%d.attn_output.bias", l, dim);
        const int norm2 = c->encoder == 5 && has(&b, "blk.%d.attn_norm_2.weight", l);
        n = node(SLM_OP_ADD, T, dim);
        if (norm2) set_in(&n, o, x, -1, -1, -1); /* a sum is in place on its first input: x is read again below */
        else set_in(&n, x, o, -1, -1, -1);
        n.layer = l;
        x = layernorm(&b, add(&b, n), "blk.%d.attn_output_norm.weight", l);
        if (norm2) { /* jina-v2-code: LN(that + the layer's input) */
            n = node(SLM_OP_ADD, T, dim);
            set_in(&n, x, x_in, -1, -1, -1);
            n.layer = l;
            x = layernorm(&b, add(&b, n), "blk.%d.attn_norm_2.weight", l);
        }
        if (slm_layer_moe(c, l)) { /* nomic-bert-moe: x = LN(x + the experts' weighted sum of x) */
            x = layernorm(&b, moe_ffn(&b, x, x, l), "blk.%d.layer_output_norm.weight", l);
            continue;
        }
        int h;
        if (c->encoder == 2 || (c->encoder == 5 && has(&b, "blk.%d.ffn_gate.weight", l))) {
            /* nomic-bert: SwiGLU; jina-bert-v2: GeGLU (biases where the file has them) */
            const int jb = c->encoder == 5; /* nomic-bert's biases are not read (llama.cpp) */
            int gate = jb ? matmul_bias(&b, x, "blk.%d.ffn_gate.weight", "blk.%d.ffn_gate.bias", l, c->hidden_dim)
                          : unary_w(&b, SLM_OP_MATMUL, x, W(&b, "blk.%d.ffn_gate.weight", l), T, c->hidden_dim);
            int up = jb ? matmul_bias(&b, x, "blk.%d.ffn_up.weight", "blk.%d.ffn_up.bias", l, c->hidden_dim)
                        : unary_w(&b, SLM_OP_MATMUL, x, W(&b, "blk.%d.ffn_up.weight", l), T, c->hidden_dim);
            n = node(SLM_OP_SWIGLU, T, c->hidden_dim);
            set_in(&n, gate, up, -1, -1, -1);
            n.gelu = c->encoder == 5;
            h = add(&b, n);
        } else {
            int up = matmul_bias(&b, x, "blk.%d.ffn_up.weight", "blk.%d.ffn_up.bias", l, c->hidden_dim);
            n = node(SLM_OP_GELU, T, c->hidden_dim);
            set_in(&n, up, -1, -1, -1, -1);
            n.layer = l;
            h = add(&b, n);
        }
        int down = matmul_bias(&b, h, "blk.%d.ffn_down.weight", "blk.%d.ffn_down.bias", l, dim);
        n = node(SLM_OP_ADD, T, dim);
        set_in(&n, x, down, -1, -1, -1);
        n.layer = l;
        x = layernorm(&b, add(&b, n), "blk.%d.layer_output_norm.weight", l);
    }
    n = node(SLM_OP_OUTPUT, T, dim);
    set_in(&n, x, -1, -1, -1, -1);
    n.role = SLM_IO_HIDDEN;
    add(&b, n);
    if (b.failed) {
        if (err && err->status == SLM_OK) slm_errf(err, SLM_ERR_NOMEM, "out of memory building the graph");
        return err ? err->status : SLM_ERR_NOMEM;
    }
    return SLM_OK;
}
