/* staticlm inspect: what a blob holds, explained (programs, I/O, task
 * counts by kind, memory needs, identity), from a blob already opened and
 * validated by blob_read.c. */
#include <stdio.h>

#include "blob/format.h"
#include "device/kernels.h"

static void print_bytes(FILE *f, uint64_t n) {
    if (n >= (1ull << 30)) fprintf(f, "%.2f GiB", n / 1073741824.0);
    else if (n >= (1ull << 20)) fprintf(f, "%.2f MiB", n / 1048576.0);
    else if (n >= 1024) fprintf(f, "%.1f KiB", n / 1024.0);
    else fprintf(f, "%llu B", (unsigned long long)n);
}

void slm_blob_print(const slm_blob *b, const slm_compiled *c, FILE *f) {
    const slm_model_config *m = &c->cfg;
    const slm_blob_ident *id = &b->ident;
    fprintf(f, "blob %s: %llu bytes, %u sections, format %u, %s\n", b->name, (unsigned long long)b->size, b->n_sections,
            id->format_version, id->compiler);
    fprintf(f, "identity %016llx\n", (unsigned long long)id->identity);
    fprintf(f, "  source   %s: %llu bytes, hash %016llx\n", id->source, (unsigned long long)id->model_bytes,
            (unsigned long long)id->model_hash);
    if (id->tok_bytes)
        fprintf(f, "  tokenizer file: %llu bytes, hash %016llx\n", (unsigned long long)id->tok_bytes, (unsigned long long)id->tok_hash);
    else
        fprintf(f, "  tokenizer: from the model file\n");
    fprintf(f, "  options  hash %016llx; weights hash %016llx\n", (unsigned long long)id->options_hash,
            (unsigned long long)id->weights_hash);
    fprintf(f, "model: %s, dim %d, hidden %d, layers %d, heads %d/%d, head_dim %d, vocab %d, context %d\n", m->arch, m->dim,
            m->hidden_dim, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim, m->vocab_size, m->context_len);
    if (m->head_dim_swa)
        fprintf(f, "gemma4: window layers head_dim %d, %d KV heads; %d KV-shared layers (FFN width %d); per-layer "
                   "embeddings %d wide\n", m->head_dim_swa, slm_layer_kv_heads(m, 0), m->kv_shared,
                m->hidden_dim_shared ? m->hidden_dim_shared : slm_dense_ffn(m), m->ple_dim);
    if (m->n_experts) {
        fprintf(f, "experts: %d of width %d, %d per token%s%s%s", m->n_experts, m->hidden_dim, m->n_experts_used,
                m->expert_sigmoid ? ", sigmoid routing" : "", m->expert_sel_bias ? " with a selection bias" : "",
                m->expert_norm ? ", weights renormalized" : "");
        if (m->expert_scale != 0.0f) fprintf(f, ", scaled by %g", (double)m->expert_scale);
        if (m->dense_lead == 1) fprintf(f, "; layer 0 dense (FFN width %d)", m->dense_ffn);
        else if (m->dense_lead) fprintf(f, "; layers 0..%d dense (FFN width %d)", m->dense_lead - 1, m->dense_ffn);
        if (m->moe_dense)
            fprintf(f, "; beside each layer's dense GeGLU FFN of width %d (gemma4)%s", m->dense_ffn,
                    m->expert_down_scale ? ", per-expert down scales" : "");
        if (m->nextn_layers) fprintf(f, "; %d MTP layer%s not compiled", m->nextn_layers, m->nextn_layers > 1 ? "s" : "");
        if (m->shared_ffn)
            fprintf(f, "; a shared expert of width %d%s", m->shared_ffn, m->shared_gate ? " behind a sigmoid gate" : "");
        fprintf(f, "%s\n", m->attn_sinks ? "; attention sinks (gpt-oss)" : "");
    }
    if (m->recur_interval)
        fprintf(f, "recurrent: Gated DeltaNet layers but every %d-th (full attention, gated query); %d key / %d value "
                   "heads of %d, conv of %d taps; state %.1f MiB per sequence%s\n", m->recur_interval, m->ssm_k_heads,
                m->ssm_v_heads, m->ssm_state, m->ssm_conv,
                (double)m->n_layers * (double)(slm_conv_state_floats(m) + slm_delta_state_floats(m)) * 4.0 *
                    (m->recur_interval - 1) / m->recur_interval / (1024.0 * 1024.0),
                m->nextn_layers ? "; MTP layers not compiled" : "");
    fprintf(f, "options: max_prompt_len %d, min_response_len %d, kv_capacity %d, kv_type %s", c->opt.max_prompt_len,
            c->opt.min_response_len, c->kv_capacity, slm_dtype_name((uint32_t)c->opt.kv_type));
    if (c->opt.matmul_tile_cols) fprintf(f, ", matmul_tile_cols %d", c->opt.matmul_tile_cols);
    if (c->opt.draft_n) fprintf(f, ", draft_n %d", c->opt.draft_n);
    fprintf(f, ", tile_kb %d, prefetch %s\n", c->opt.tile_kb, c->opt.prefetch_off ? "off" : "on");
    if (c->n_seqs > 1) { /* the batch programs: one decode step of B of the n_seqs sequences */
        fprintf(f, "sequences: n_seqs %d (KV regions of %d rows; serve --parallel %d); batch programs", c->n_seqs,
                c->kv_capacity, c->n_seqs);
        for (int i = 0; i < c->n_progs; i++)
            if (c->progs[i].kind == SLM_PROG_BATCH) fprintf(f, " %s", c->progs[i].name);
        fprintf(f, "\n");
    }
    if (b->has_embed) { /* .slm.embed: what the session applies around the embedding programs */
        static const char *const pool[5] = {"none", "mean", "cls", "last", "rank"};
        const slm_blob_embed *e = &b->embed;
        fprintf(f, "embeddings: %s, pooling %s%s, rerank pair%s%s%s%s", e->encoder ? "an encoder's programs alone"
                : "programs beside the decoder's", pool[e->pooling], e->add_eos ? ", EOS added" : "",
                e->pair_bos ? " [BOS]" : "", " query", e->pair_eos ? " [EOS]" : "", e->pair_sep ? " [SEP]" : "");
        fprintf(f, " document%s", e->pair_eos ? " [EOS]" : "");
        if (e->n_cls)
            fprintf(f, "; classifier: %s%d score%s", e->n_cls1 ? "a dense layer, then " : "", e->n_cls, e->n_cls > 1 ? "s" : "");
        if (e->n_dense) {
            fprintf(f, "; Dense modules %d", e->dense[0].in);
            for (int k = 0; k < e->n_dense; k++)
                fprintf(f, " -> %d (dense_%d%s%s)", e->dense[k].out, e->dense[k].module, e->dense[k].bias ? ", bias" : "",
                        e->dense[k].act == SLM_DENSE_TANH ? ", tanh" : "");
        }
        if (e->moe_every) fprintf(f, "; experts on layers l %% %d == 1, ungated", e->moe_every);
        fprintf(f, "\n");
    }
    uint64_t arena = 0, scratch = 0;
    for (int i = 0; i < c->n_progs; i++) {
        const slm_program *p = &c->progs[i];
        if (p->arena_bytes > arena) arena = p->arena_bytes;
        int counts[SLM_T_OP_COUNT] = {0};
        for (int t = 0; t < p->n_tasks; t++) {
            counts[p->tasks[t].op]++;
            uint64_t sb = slm_task_scratch_bytes(&p->tasks[t]);
            if (sb > scratch) scratch = sb;
        }
        fprintf(f, "\nprogram %s: rows %d, KV capacity %d, ", p->name, p->rows, p->kv_capacity);
        if (p->kind == SLM_PROG_EMBED) fprintf(f, "embedding (every row's hidden state), ");
        if (p->kind == SLM_PROG_EMBED_BATCH) fprintf(f, "embedding of %d texts in regions of %d rows, ", p->rows / p->region, p->region);
        fprintf(f, "%d tasks (", p->n_tasks);
        int first = 1;
        for (int k = 0; k < SLM_T_OP_COUNT; k++)
            if (counts[k]) {
                fprintf(f, "%s%s %d", first ? "" : ", ", slm_task_op_name(k), counts[k]);
                first = 0;
            }
        fprintf(f, "), %d relocations, arena ", p->n_relocs);
        print_bytes(f, p->arena_bytes);
        fprintf(f, "\n");
        for (int k = 0; k < p->n_io; k++) {
            const slm_io_desc *d = &p->io[k];
            fprintf(f, "  %-6s %3d %-28s %s[%d,%d]  %s\n", d->is_output ? "output" : "input", k, d->name,
                    d->dtype == SLM_I32 ? "i32" : slm_dtype_name(d->dtype), d->rows, d->cols, slm_io_role_name((slm_io_role)d->role));
        }
    }
    uint64_t kv = 0; /* each layer's rows (gemma4: two widths, none for the KV-shared layers) */
    for (int l = 0; l < m->n_layers; l++)
        kv += 2 * (uint64_t)c->n_seqs * (uint64_t)c->kv_capacity *
              blob_io_bytes((uint32_t)c->opt.kv_type, (uint64_t)slm_layer_kv_dim(m, l));
    fprintf(f, "\nmemory: weights ");
    print_bytes(f, b->weights_size);
    fprintf(f, " (mapped, %u tensors), KV cache ", b->n_tensors);
    print_bytes(f, kv);
    if (c->n_seqs > 1) fprintf(f, " (%d sequences)", c->n_seqs);
    fprintf(f, ", arena ");
    print_bytes(f, arena);
    fprintf(f, ", scratch per thread ");
    print_bytes(f, scratch);
    fprintf(f, ", constants ");
    print_bytes(f, c->consts.bytes);
    uint64_t recur = 0; /* qwen35: the recurrent layers' state of one sequence */
    for (int l = 0; l < m->n_layers; l++)
        if (slm_layer_recurrent(m, l)) recur += (uint64_t)(slm_conv_state_floats(m) + slm_delta_state_floats(m)) * sizeof(float);
    if (recur) {
        fprintf(f, ", recurrent state ");
        print_bytes(f, recur);
        fprintf(f, " per sequence (%d) and as much for each of its checkpoints (--checkpoints)", c->n_seqs);
    }
    fprintf(f, "\n");
    /* weight types as stored: repacked matrices show as *_r16 */
    uint32_t count[256] = {0};
    for (uint32_t i = 0; i < b->n_tensors; i++) {
        const uint32_t t = rd32(b->tensors + (size_t)i * BLOB_TENSOR_SIZE + 64);
        if (t < 256) count[t]++;
    }
    fprintf(f, "tensor types:");
    for (uint32_t t = 0; t < 256; t++)
        if (count[t]) fprintf(f, " %s x%u", slm_dtype_name(t), count[t]);
    fprintf(f, "\n");
}
