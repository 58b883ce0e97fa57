/* llama2.c legacy ("v0") checkpoint loader.
 *
 * Layout: 7 x int32 header {dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len}, then float32 weights, each matrix [out, in] row-major
 * and each group stacked over the layers:
 *   token_embedding_table [vocab, dim]
 *   rms_att_weight        [L, dim]
 *   wq [L, dim, dim]  wk [L, kv_dim, dim]  wv [L, kv_dim, dim]  wo [L, dim, dim]
 *   rms_ffn_weight        [L, dim]
 *   w1 [L, hidden, dim]  w2 [L, dim, hidden]  w3 [L, hidden, dim]
 *   rms_final_weight      [dim]
 *   freq_cis_real, freq_cis_imag [seq_len, head_size / 2] each (skipped)
 *   wcls [vocab, dim]     only when vocab_size < 0 (unshared classifier)
 * Unlike run.c, every header field and the file size are checked before any
 * weight is referenced; the file must end exactly where the layout does (a
 * wrong field shifts everything after it). Tensors get GGUF names and point
 * into the mapping.
 */
#include <stdio.h>

#include "format/model.h"

#define L2C_HEADER_BYTES 28u

/* Upper bounds that no real checkpoint comes near; they keep every product
 * below well inside 64 bits before the file-size check. */
#define L2C_MAX_DIM (1 << 20)
#define L2C_MAX_HIDDEN (1 << 22)
#define L2C_MAX_LAYERS (1 << 16)
#define L2C_MAX_HEADS (1 << 16)
#define L2C_MAX_VOCAB (1 << 24)
#define L2C_MAX_SEQ (1 << 24)

/* The magic of llama2.c's newer export formats (version 1/2), "ak42". */
#define L2C_EXPORT_MAGIC 0x616b3432u

typedef struct l2c_group {
    const char *name;   /* GGUF name pattern; "%d" = layer */
    int per_layer;      /* 1: stacked over L layers */
    int64_t ne0, ne1;   /* GGUF shape of one tensor: ne0 = row length (in) */
    int skip;           /* 1: present in the file but not exposed */
} l2c_group;

static slm_status check_field(slm_err *err, const char *file, const char *field, int64_t v, int64_t max) {
    if (v <= 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: header field %s = %lld (must be positive)", file, field, (long long)v);
    if (v > max)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header field %s = %lld is too large (at most %lld)", file, field,
                        (long long)v, (long long)max);
    return SLM_OK;
}

slm_status slm_llama2c_load(slm_model_file *m, slm_err *err) {
    const char *file = slm_basename(m->path);
    slm_rd r = {m->map.data, m->map.size, 0};
    int32_t h[7];
    slm_status s;

    for (int i = 0; i < 7; i++)
        if (!slm_rd_i32(&r, &h[i]))
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: file too small for a llama2.c header (%llu bytes; the header is %u)", file,
                            (unsigned long long)m->map.size, L2C_HEADER_BYTES);
    if ((uint32_t)h[0] == L2C_EXPORT_MAGIC)
        return slm_errf(err, SLM_ERR_UNSUPPORTED,
                        "%s: llama2.c export version %d (magic 'ak42') is not supported; use the legacy (v0) export",
                        file, h[1]);

    int64_t dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv_heads = h[4];
    int64_t vocab = h[5] < 0 ? -(int64_t)h[5] : h[5], seq_len = h[6];
    int shared = h[5] > 0;
    if ((s = check_field(err, file, "dim", dim, L2C_MAX_DIM))) return s;
    if ((s = check_field(err, file, "hidden_dim", hidden, L2C_MAX_HIDDEN))) return s;
    if ((s = check_field(err, file, "n_layers", n_layers, L2C_MAX_LAYERS))) return s;
    if ((s = check_field(err, file, "n_heads", n_heads, L2C_MAX_HEADS))) return s;
    if ((s = check_field(err, file, "n_kv_heads", n_kv_heads, L2C_MAX_HEADS))) return s;
    if (h[5] == 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: header field vocab_size = 0 (must be non-zero)", file);
    if ((s = check_field(err, file, "vocab_size", vocab, L2C_MAX_VOCAB))) return s;
    if ((s = check_field(err, file, "seq_len", seq_len, L2C_MAX_SEQ))) return s;
    if (dim % n_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header field n_heads = %lld does not divide dim = %lld", file,
                        (long long)n_heads, (long long)dim);
    if (n_kv_heads > n_heads || n_heads % n_kv_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header field n_kv_heads = %lld does not divide n_heads = %lld", file,
                        (long long)n_kv_heads, (long long)n_heads);
    int64_t head = dim / n_heads, kv_dim = dim * n_kv_heads / n_heads;
    if (head % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header fields dim / n_heads = %lld: head size must be even", file,
                        (long long)head);

    const l2c_group groups[] = {
        {"token_embd.weight", 0, dim, vocab, 0},
        {"blk.%d.attn_norm.weight", 1, dim, 1, 0},
        {"blk.%d.attn_q.weight", 1, dim, dim, 0},
        {"blk.%d.attn_k.weight", 1, dim, kv_dim, 0},
        {"blk.%d.attn_v.weight", 1, dim, kv_dim, 0},
        {"blk.%d.attn_output.weight", 1, dim, dim, 0},
        {"blk.%d.ffn_norm.weight", 1, dim, 1, 0},
        {"blk.%d.ffn_gate.weight", 1, dim, hidden, 0},
        {"blk.%d.ffn_down.weight", 1, hidden, dim, 0},
        {"blk.%d.ffn_up.weight", 1, dim, hidden, 0},
        {"output_norm.weight", 0, dim, 1, 0},
        {"freq_cis_real", 0, head / 2, seq_len, 1},
        {"freq_cis_imag", 0, head / 2, seq_len, 1},
        {"output.weight", 0, dim, vocab, 0},
    };
    int n_groups = (int)(sizeof groups / sizeof groups[0]) - shared; /* wcls is last */

    /* Walk the layout once to count tensors and check every byte is there.
     * The bounds above keep each product < 2^62; sums are checked. */
    uint64_t off = L2C_HEADER_BYTES;
    int n_tensors = 0;
    for (int g = 0; g < n_groups; g++) {
        uint64_t count = groups[g].per_layer ? (uint64_t)n_layers : 1;
        uint64_t each = (uint64_t)groups[g].ne0 * (uint64_t)groups[g].ne1 * 4, bytes, end;
        if (!slm_mul_ok(each, count, &bytes) || !slm_add_ok(off, bytes, &end) || end > m->map.size) {
            /* Name the first tensor that does not fit. */
            uint64_t l = off < m->map.size ? (m->map.size - off) / each : 0;
            char nm[64];
            snprintf(nm, sizeof nm, groups[g].name, (int)l);
            const char *hint = shared || g != n_groups - 1 ? ""
                               : " (vocab_size < 0: a separate classifier must follow)";
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: tensor '%s': data offset 0x%llx + %llu bytes beyond end of file (%llu bytes)%s; "
                            "header: dim=%lld hidden_dim=%lld n_layers=%lld n_heads=%lld n_kv_heads=%lld "
                            "vocab_size=%d seq_len=%lld",
                            file, nm, (unsigned long long)(off + l * each), (unsigned long long)each,
                            (unsigned long long)m->map.size, hint, (long long)dim, (long long)hidden,
                            (long long)n_layers, (long long)n_heads, (long long)n_kv_heads, h[5],
                            (long long)seq_len);
        }
        off = end;
        if (!groups[g].skip) n_tensors += (int)count;
    }

    /* The legacy export writes exactly this much; extra bytes mean the
     * header does not describe the file (a wrong field shifts everything). */
    if (off != m->map.size)
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: file has %llu bytes but the header implies %llu (%llu trailing bytes); header: dim=%lld "
                        "hidden_dim=%lld n_layers=%lld n_heads=%lld n_kv_heads=%lld vocab_size=%d seq_len=%lld",
                        file, (unsigned long long)m->map.size, (unsigned long long)off,
                        (unsigned long long)(m->map.size - off), (long long)dim, (long long)hidden,
                        (long long)n_layers, (long long)n_heads, (long long)n_kv_heads, h[5], (long long)seq_len);

    m->tensors = slm_calloc((size_t)n_tensors, sizeof *m->tensors);
    if (!m->tensors) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for %d tensors", file, n_tensors);
    m->n_tensors = 0;
    off = L2C_HEADER_BYTES;
    const uint8_t *base = m->map.data;
    for (int g = 0; g < n_groups; g++) {
        int count = groups[g].per_layer ? (int)n_layers : 1;
        uint64_t each = (uint64_t)groups[g].ne0 * (uint64_t)groups[g].ne1 * 4;
        for (int l = 0; l < count; l++, off += each) {
            if (groups[g].skip) continue;
            slm_tensor *t = &m->tensors[m->n_tensors++];
            snprintf(t->name, sizeof t->name, groups[g].name, l);
            t->type = SLM_F32;
            t->n_dims = groups[g].ne1 == 1 ? 1 : 2;
            t->ne[0] = groups[g].ne0;
            t->ne[1] = groups[g].ne1;
            t->ne[2] = t->ne[3] = 1;
            t->data = base + off;
            t->nbytes = each;
        }
    }

    slm_model_config *c = &m->cfg;
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "llama");
    c->dim = (int)dim;
    c->hidden_dim = (int)hidden;
    c->n_layers = (int)n_layers;
    c->n_heads = (int)n_heads;
    c->n_kv_heads = (int)n_kv_heads;
    c->head_dim = (int)head;
    c->vocab_size = (int)vocab;
    c->context_len = (int)seq_len;
    c->rope_base = 10000.0f;
    c->rope_scale = 1.0f;
    c->norm_eps = 1e-5f;
    c->tied_embeddings = shared;
    m->kind = SLM_MODEL_LLAMA2C;
    return SLM_OK;
}
