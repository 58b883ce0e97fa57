#include "ir/ir.h"

static const char *const k_op_names[SLM_OP_COUNT] = {
    [SLM_OP_INPUT] = "input",         [SLM_OP_OUTPUT] = "output",
    [SLM_OP_EMBED] = "embed",         [SLM_OP_RMSNORM] = "rmsnorm",
    [SLM_OP_MATMUL] = "matmul",       [SLM_OP_ROPE] = "rope",
    [SLM_OP_READ_VALUE] = "ReadValue", [SLM_OP_CONCAT] = "concat",
    [SLM_OP_ASSIGN] = "Assign",       [SLM_OP_ATTENTION] = "attention",
    [SLM_OP_ADD] = "add",             [SLM_OP_SWIGLU] = "swiglu",
    [SLM_OP_LAST_ROW] = "last_row",   [SLM_OP_KV_VIEW] = "kv_view",
    [SLM_OP_BIAS] = "bias",           [SLM_OP_MOE_ROUTE] = "moe_route",
    [SLM_OP_MOE_MATMUL] = "moe_matmul", [SLM_OP_MOE_COMBINE] = "moe_combine",
    [SLM_OP_SLICE] = "slice",         [SLM_OP_SSM_CONV] = "ssm_conv",
    [SLM_OP_DELTA_GATE] = "delta_gate", [SLM_OP_DELTA_NET] = "delta_net",
    [SLM_OP_LAYERNORM] = "layernorm",  [SLM_OP_GELU] = "gelu",
    [SLM_OP_EMBED_ADD] = "embed_add",
};

static const char *const k_role_names[SLM_IO_ROLE_COUNT] = {
    [SLM_IO_NONE] = "-",
    [SLM_IO_INPUT_IDS] = "input_ids",
    [SLM_IO_POSITION_IDS] = "position_ids",
    [SLM_IO_CACHE_POSITION] = "cache_position",
    [SLM_IO_ATTENTION_MASK] = "attention_mask",
    [SLM_IO_PAST_KEY] = "past_key_values.key",
    [SLM_IO_PAST_VALUE] = "past_key_values.value",
    [SLM_IO_PRESENT_KEY] = "present.key",
    [SLM_IO_PRESENT_VALUE] = "present.value",
    [SLM_IO_LOGITS] = "logits",
    [SLM_IO_HIDDEN] = "hidden",
    [SLM_IO_CONV_STATE] = "conv_state",
    [SLM_IO_RECUR_STATE] = "recurrent_state",
};

const char *slm_op_name(slm_op op) {
    return (op > 0 && op < SLM_OP_COUNT && k_op_names[op]) ? k_op_names[op] : "?";
}

const char *slm_io_role_name(slm_io_role r) {
    return (r >= 0 && r < SLM_IO_ROLE_COUNT) ? k_role_names[r] : "?";
}

void slm_graph_init(slm_graph *g, const char *name) {
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
}

void slm_graph_free(slm_graph *g) {
    slm_xfree(g->nodes);
    memset(g, 0, sizeof *g);
}

slm_status slm_graph_clone(slm_graph *dst, const slm_graph *src, const char *name) {
    slm_graph_init(dst, name);
    dst->nodes = slm_calloc((size_t)src->n_nodes + 1, sizeof(slm_node));
    if (!dst->nodes) return SLM_ERR_NOMEM;
    memcpy(dst->nodes, src->nodes, (size_t)src->n_nodes * sizeof(slm_node));
    dst->n_nodes = dst->cap_nodes = src->n_nodes;
    dst->rows_t = src->rows_t;
    dst->rows_c = src->rows_c;
    dst->rope_table_bytes = src->rope_table_bytes;
    return SLM_OK;
}

int slm_graph_add(slm_graph *g, const slm_node *n) {
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        slm_node *p = slm_realloc(g->nodes, (size_t)cap * sizeof(slm_node));
        if (!p) return -1;
        g->nodes = p;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes] = *n;
    return g->n_nodes++;
}

static void dim_str(char *buf, size_t n, int d) {
    if (d == SLM_DIM_T) snprintf(buf, n, "T");
    else if (d == SLM_DIM_C) snprintf(buf, n, "C");
    else snprintf(buf, n, "%d", d);
}

void slm_graph_dump(const slm_graph *g, FILE *f) {
    fprintf(f, "graph %s", g->name);
    if (g->rows_t) fprintf(f, " (T=%d, C=%d)", g->rows_t, g->rows_c);
    fprintf(f, "\n");
    for (int i = 0; i < g->n_nodes; i++) {
        const slm_node *n = &g->nodes[i];
        if (n->dead) continue;
        char r[16];
        dim_str(r, sizeof r, n->rows);
        fprintf(f, "  %%%-4d = %-10s(", i, slm_op_name(n->op));
        for (int j = 0; j < n->n_in; j++) fprintf(f, "%s%%%d", j ? ", " : "", n->in[j]);
        if (n->weight)
            fprintf(f, "%s%s %s[%lld,%lld]", n->n_in ? ", " : "", n->weight->name,
                    slm_dtype_name(n->weight->type), (long long)n->weight->ne[1],
                    (long long)n->weight->ne[0]);
        fprintf(f, ") : %s[%s,%d]", n->dtype == SLM_I32 ? "i32" : "f32", r, n->cols);
        if (n->role) {
            if (n->layer >= 0) fprintf(f, "  role=%s layer=%d", slm_io_role_name(n->role), n->layer);
            else fprintf(f, "  role=%s", slm_io_role_name(n->role));
        }
        if (n->op == SLM_OP_READ_VALUE || n->op == SLM_OP_ASSIGN)
            fprintf(f, "  var=%s.%d", (n->var & 1) ? "v" : "k", n->var / 2);
        if (n->op == SLM_OP_ROPE) {
            fprintf(f, "  heads=%d head_dim=%d%s", n->heads, n->head_dim, n->neox ? " neox" : "");
            if (n->rot) fprintf(f, " rot=%d", n->rot);
            if (n->table) fprintf(f, " table=%d", n->table);
        }
        if (n->op == SLM_OP_EMBED && n->scale != 0.0f) fprintf(f, "  scale=%g", n->scale);
        if (n->op == SLM_OP_SWIGLU && n->gelu) fprintf(f, "  gelu");
        if (n->op == SLM_OP_SWIGLU && n->sigmoid) fprintf(f, "  sigmoid");
        if (n->op == SLM_OP_SLICE) fprintf(f, "  runs=%d take=%d at=%d", n->group, n->head_dim, n->offset);
        if (n->op == SLM_OP_DELTA_NET) fprintf(f, "  v_heads=%d k_heads=%d state=%d", n->heads, n->kv_heads, n->head_dim);
        if ((n->op == SLM_OP_ATTENTION || n->op == SLM_OP_MATMUL) && n->scale != 0.0f) fprintf(f, "  scale=%g", n->scale);
        if (n->softcap != 0.0f) fprintf(f, "  softcap=%g", n->softcap);
        if (n->op == SLM_OP_RMSNORM && n->group) fprintf(f, "  group=%d", n->group);
        if (n->op == SLM_OP_ATTENTION) {
            fprintf(f, "  heads=%d kv_heads=%d head_dim=%d", n->heads, n->kv_heads, n->head_dim);
            if (n->weight) fprintf(f, " sinks=%s", n->weight->name);
            if (n->window) fprintf(f, " window=%d", n->window);
        }
        if (n->op == SLM_OP_RMSNORM) fprintf(f, "  eps=%g", n->eps);
        if (n->op == SLM_OP_MOE_ROUTE || n->op == SLM_OP_MOE_MATMUL || n->op == SLM_OP_MOE_COMBINE)
            fprintf(f, "  experts=%d used=%d%s%s", n->n_experts, n->n_used, n->expert_norm ? " norm" : "",
                    n->gather ? " gather" : "");
        if (n->op == SLM_OP_MOE_MATMUL && n->pre == SLM_OP_SWIGLU) fprintf(f, "  pre=swiglu(in0, in1)");
        if (n->op == SLM_OP_MOE_MATMUL && n->pre == SLM_OP_GELU) fprintf(f, "  pre=gelu(in0)");
        if (n->op == SLM_OP_MOE_MATMUL && n->oai_limit > 0.0f) fprintf(f, " clamped(alpha=%g, limit=%g)", n->oai_alpha, n->oai_limit);
        if (n->op == SLM_OP_MOE_MATMUL && n->expert_bias) fprintf(f, "  bias");
        if (n->op == SLM_OP_MOE_ROUTE && n->expert_sigmoid) fprintf(f, "  sigmoid");
        if (n->op == SLM_OP_MOE_ROUTE && n->weight) fprintf(f, "  select_bias=%s", n->weight->name);
        if ((n->op == SLM_OP_MOE_COMBINE || n->op == SLM_OP_MOE_ROUTE) && n->scale != 0.0f) fprintf(f, "  scale=%g", n->scale);
        if (n->op == SLM_OP_MOE_COMBINE && n->n_in > 3) fprintf(f, "  shared=%%%d%s", n->in[3], n->n_in > 4 ? " gated" : "");
        if (n->op == SLM_OP_MATMUL && n->pre == SLM_OP_RMSNORM)
            fprintf(f, "  pre=rmsnorm(%s, eps=%g)", n->weight2 ? n->weight2->name : "?", n->eps);
        if (n->op == SLM_OP_MATMUL && n->pre == SLM_OP_SWIGLU) fprintf(f, "  pre=swiglu(in0, in1)");
        if (n->op == SLM_OP_MATMUL && n->post == SLM_OP_ADD) fprintf(f, "  post=add(into %%%d)", n->in[n->post_in]);
        if (n->op == SLM_OP_MATMUL && n->post == SLM_OP_ROPE)
            fprintf(f, "  post=rope(positions=%%%d, heads=%d head_dim=%d%s rot=%d table=%d)", n->in[n->post_in], n->heads,
                    n->head_dim, n->neox ? " neox" : "", n->rot ? n->rot : n->head_dim, n->table);
        fprintf(f, "\n");
    }
}
