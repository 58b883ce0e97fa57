/* staticlm convert: a llama2.c checkpoint (or a GGUF llama model) and its
 * tokenizer into a GGUF v3 llama model that llama.cpp loads.
 *
 * Weights keep their layout: llama2.c's RoPE rotates adjacent pairs, as
 * llama.cpp's llama architecture does, so Q and K are not permuted. Norm
 * vectors stay F32; matrices become --type (f32, f16 or q8_0; a q8_0 matrix
 * whose rows are not a multiple of 32 falls back to f16).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "format/gguf.h"
#include "format/model.h"
#include "text/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: staticlm convert -m MODEL -z TOKENIZER.bin -o OUT.gguf [--type f32|f16|q8_0] [--name NAME]\n"
            "\n"
            "Convert a llama2.c checkpoint (.bin) and its tokenizer.bin into a GGUF v3 llama model.\n"
            "A GGUF llama model is accepted too (re-encoded; -z optional, its own vocabulary is used).\n"
            "\n"
            "  -m, --model PATH       the model file\n"
            "  -z, --tokenizer PATH   llama2.c tokenizer.bin\n"
            "  -o, --output PATH      the GGUF file to write (atomically)\n"
            "      --type TYPE        matrix type: f32 (default), f16 or q8_0; norms stay f32\n"
            "      --name NAME        general.name (default: the model's file name)\n"
            "  -h, --help             this help\n");
}

/* GGUF general.file_type values (llama_ftype). */
enum { FTYPE_ALL_F32 = 0, FTYPE_MOSTLY_F16 = 1, FTYPE_MOSTLY_Q8_0 = 7 };

/* The token as GGUF stores it: ' ' -> U+2581, llama2.c's "\n<s>\n" -> "<s>". */
static char *gguf_token(const char *s, uint64_t *len) {
    if (strcmp(s, "\n<s>\n") == 0) s = "<s>";
    else if (strcmp(s, "\n</s>\n") == 0) s = "</s>";
    size_t n = 0;
    for (const char *p = s; *p; p++) n += *p == ' ' ? 3 : 1;
    char *out = slm_malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (const char *p = s; *p; p++) {
        if (*p == ' ') {
            memcpy(out + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
    *len = o;
    return out;
}

static int is_byte_token(const char *s) {
    static const char hex[] = "0123456789ABCDEFabcdef";
    return strlen(s) == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && s[3] && s[4] && strchr(hex, s[3]) &&
           strchr(hex, s[4]);
}

/* SentencePiece token types: 1 normal, 2 unknown, 3 control, 6 byte. */
static int32_t token_type(const slm_tokenizer *tok, int id, int from_llama2c) {
    if (!from_llama2c) {
        int t = slm_tok_type(tok, id);
        if (t >= 1 && t <= 6) return t;
    }
    if (id == 0) return 2;
    if (id == 1 || id == 2) return 3;
    return is_byte_token(slm_tok_str(tok, id)) ? 6 : 1;
}

/* Token metadata: tokens, scores, types, special ids. */
static slm_status write_vocab(slm_gguf_writer *w, const slm_tokenizer *tok, int from_llama2c, slm_err *err) {
    slm_status s = SLM_OK;
    int n = slm_tok_vocab_size(tok);
    char **strs = slm_calloc((size_t)n, sizeof *strs);
    uint64_t *lens = slm_calloc((size_t)n, sizeof *lens);
    float *scores = slm_calloc((size_t)n, sizeof *scores);
    int32_t *types = slm_calloc((size_t)n, sizeof *types);
    if (!strs || !lens || !scores || !types) {
        s = slm_errf(err, SLM_ERR_NOMEM, "convert: out of memory for %d tokens", n);
        goto fail_free_vocab;
    }
    for (int i = 0; i < n; i++) {
        const char *t = slm_tok_str(tok, i);
        if (!t) t = "";
        if (!(strs[i] = gguf_token(t, &lens[i]))) {
            s = slm_errf(err, SLM_ERR_NOMEM, "convert: out of memory for token %d", i);
            goto fail_free_vocab;
        }
        scores[i] = slm_tok_score(tok, i);
        types[i] = token_type(tok, i, from_llama2c);
    }
    int bos = from_llama2c ? 1 : slm_tok_bos(tok), eos = from_llama2c ? 2 : slm_tok_eos(tok);
    slm_gguf_set_str(w, "tokenizer.ggml.model", "llama");
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)strs, lens, (uint64_t)n);
    slm_gguf_set_arr(w, "tokenizer.ggml.scores", SLM_GGUF_F32, scores, (uint64_t)n);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, (uint64_t)n);
    slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(bos >= 0 ? bos : 1));
    slm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(eos >= 0 ? eos : 2));
    slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    slm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
    slm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 0);

fail_free_vocab:
    if (strs)
        for (int i = 0; i < n; i++) slm_xfree(strs[i]);
    slm_xfree(strs);
    slm_xfree(lens);
    slm_xfree(scores);
    slm_xfree(types);
    return s;
}

/* Converted tensor buffers, freed after the write. */
typedef struct bufs {
    void **p;
    int n, cap;
} bufs;

static void *bufs_alloc(bufs *b, size_t n) {
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 64;
        void **p = slm_realloc(b->p, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        b->p = p;
        b->cap = cap;
    }
    void *q = slm_malloc(n);
    if (q) b->p[b->n++] = q;
    return q;
}

static void bufs_free(bufs *b) {
    for (int i = 0; i < b->n; i++) slm_xfree(b->p[i]);
    slm_xfree(b->p);
}

/* Add one tensor, converted to `type` (the source may be f32, f16 or q8_0). */
static slm_status add_tensor(slm_gguf_writer *w, bufs *b, const slm_tensor *t, uint32_t type, slm_err *err) {
    if (type == SLM_Q8_0 && t->ne[0] % SLM_QK8_0) {
        fprintf(stderr, "convert: %s: rows of %lld are not a multiple of %d: writing f16 instead of q8_0\n", t->name,
                (long long)t->ne[0], SLM_QK8_0);
        type = SLM_F16;
    }
    const int64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (type == t->type)
        return slm_gguf_add_tensor(w, t->name, type, t->n_dims, t->ne, t->data, t->nbytes) == SLM_OK
                   ? SLM_OK
                   : slm_errf(err, SLM_ERR_INTERNAL, "convert: cannot add tensor '%s'", t->name);
    uint64_t src_row = slm_row_bytes(t->type, (uint64_t)ne0), dst_row = slm_row_bytes(type, (uint64_t)ne0);
    uint64_t nbytes = dst_row * (uint64_t)rows;
    uint8_t *dst = bufs_alloc(b, (size_t)nbytes);
    float *row = slm_malloc((size_t)ne0 * sizeof *row);
    if (!dst || !row) {
        slm_xfree(row);
        return slm_errf(err, SLM_ERR_NOMEM, "convert: out of memory for tensor '%s'", t->name);
    }
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < rows; r++) {
        if (!slm_dequantize_row(t->type, src + (uint64_t)r * src_row, row, ne0)) {
            slm_xfree(row);
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "convert: tensor '%s': cannot convert from %s", t->name,
                            slm_dtype_name(t->type));
        }
        uint8_t *out = dst + (uint64_t)r * dst_row;
        if (type == SLM_F32) {
            memcpy(out, row, (size_t)ne0 * 4);
        } else if (type == SLM_F16) {
            for (int64_t i = 0; i < ne0; i++) {
                uint16_t h = slm_f32_to_f16(row[i]);
                memcpy(out + 2 * i, &h, 2);
            }
        } else {
            slm_quantize_row_q8_0(row, out, ne0);
        }
    }
    slm_xfree(row);
    if (slm_gguf_add_tensor(w, t->name, type, t->n_dims, t->ne, dst, nbytes) != SLM_OK)
        return slm_errf(err, SLM_ERR_INTERNAL, "convert: cannot add tensor '%s'", t->name);
    return SLM_OK;
}

static slm_status write_tensors(slm_gguf_writer *w, bufs *b, const slm_model_file *m, uint32_t type, slm_err *err) {
    static const char *const per_layer[] = {
        "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_down", "ffn_up",
    };
    slm_status s;
    const slm_tensor *t;
    if ((s = add_tensor(w, b, slm_model_tensor(m, "token_embd.weight"), type, err))) return s;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        for (size_t j = 0; j < sizeof per_layer / sizeof per_layer[0]; j++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, per_layer[j]);
            t = slm_model_tensor(m, name);
            if ((s = add_tensor(w, b, t, t->n_dims == 1 ? SLM_F32 : type, err))) return s;
        }
    }
    if ((s = add_tensor(w, b, slm_model_tensor(m, "output_norm.weight"), SLM_F32, err))) return s;
    if ((t = slm_model_tensor(m, "output.weight")) && !m->cfg.tied_embeddings)
        if ((s = add_tensor(w, b, t, type, err))) return s;
    return SLM_OK;
}

int slm_cli_convert(int argc, char **argv) {
    const char *model_path = NULL, *tok_path = NULL, *out_path = NULL, *type_name = "f32", *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        const char **dst = !strcmp(a, "-m") || !strcmp(a, "--model")       ? &model_path
                           : !strcmp(a, "-z") || !strcmp(a, "--tokenizer") ? &tok_path
                           : !strcmp(a, "-o") || !strcmp(a, "--output")    ? &out_path
                           : !strcmp(a, "--type")                          ? &type_name
                           : !strcmp(a, "--name")                          ? &name
                                                                           : NULL;
        if (!dst) {
            fprintf(stderr, "convert: unknown option '%s'\n", a);
            usage(stderr);
            return 2; /* a usage error */
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "convert: option '%s' needs a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if (!model_path || !out_path) {
        fprintf(stderr, "convert: -m MODEL and -o OUT.gguf are required\n");
        usage(stderr);
        return 2;
    }
    uint32_t type, ftype;
    if (!strcmp(type_name, "f32")) type = SLM_F32, ftype = FTYPE_ALL_F32;
    else if (!strcmp(type_name, "f16")) type = SLM_F16, ftype = FTYPE_MOSTLY_F16;
    else if (!strcmp(type_name, "q8_0")) type = SLM_Q8_0, ftype = FTYPE_MOSTLY_Q8_0;
    else {
        fprintf(stderr, "convert: --type '%s' is not one of f32, f16, q8_0\n", type_name);
        return 2;
    }

    int rc = 1;
    slm_err err = {0};
    slm_model_file m;
    slm_tokenizer *tok = NULL;
    slm_gguf_writer *w = NULL;
    bufs b = {0};
    int from_llama2c = 1;

    if (slm_model_open(&m, model_path, &err)) goto fail_report;
    if (tok_path) {
        if (slm_tok_load_llama2c(&tok, tok_path, m.cfg.vocab_size, &err)) goto fail_close_model;
    } else if (m.gguf) {
        from_llama2c = 0;
        if (slm_tok_load_gguf(&tok, m.gguf, slm_basename(model_path), &err)) goto fail_close_model;
    } else {
        slm_errf(&err, SLM_ERR_ARG, "%s: a llama2.c checkpoint needs -z TOKENIZER.bin", slm_basename(model_path));
        goto fail_close_model;
    }
    if (slm_tok_vocab_size(tok) != m.cfg.vocab_size) {
        slm_errf(&err, SLM_ERR_FORMAT, "%s: %d tokens but the model has vocab_size %d",
                 slm_basename(tok_path ? tok_path : model_path), slm_tok_vocab_size(tok), m.cfg.vocab_size);
        goto fail_free_tok;
    }

    if (!(w = slm_gguf_writer_new())) {
        slm_errf(&err, SLM_ERR_NOMEM, "convert: out of memory");
        goto fail_free_tok;
    }
    char gname[256];
    if (name) {
        snprintf(gname, sizeof gname, "%s", name);
    } else {
        snprintf(gname, sizeof gname, "%s", slm_basename(model_path));
        char *dot = strrchr(gname, '.');
        if (dot && dot != gname) *dot = 0;
    }
    const slm_model_config *c = &m.cfg;
    slm_gguf_set_str(w, "general.architecture", "llama");
    slm_gguf_set_str(w, "general.name", gname);
    slm_gguf_set_u32(w, "general.file_type", ftype);
    if (type == SLM_Q8_0) slm_gguf_set_u32(w, "general.quantization_version", 2);
    slm_gguf_set_u32(w, "llama.context_length", (uint32_t)c->context_len);
    slm_gguf_set_u32(w, "llama.embedding_length", (uint32_t)c->dim);
    slm_gguf_set_u32(w, "llama.block_count", (uint32_t)c->n_layers);
    slm_gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim);
    slm_gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)c->head_dim);
    slm_gguf_set_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads);
    slm_gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    slm_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", c->norm_eps);
    slm_gguf_set_f32(w, "llama.rope.freq_base", c->rope_base);
    slm_gguf_set_u32(w, "llama.vocab_size", (uint32_t)c->vocab_size);
    if (write_vocab(w, tok, from_llama2c, &err)) goto fail_free_writer;
    if (write_tensors(w, &b, &m, type, &err)) goto fail_free_writer;
    if (slm_gguf_write(w, out_path, &err)) goto fail_free_writer;
    fprintf(stderr, "convert: wrote %s (%s, %d layers, dim %d, vocab %d)\n", out_path, type_name, c->n_layers, c->dim,
            c->vocab_size);
    rc = 0;

fail_free_writer:
    slm_gguf_writer_free(w);
    bufs_free(&b);
fail_free_tok:
    slm_tok_free(tok);
fail_close_model:
    slm_model_close(&m);
fail_report:
    if (rc) fprintf(stderr, "convert: %s\n", err.msg[0] ? err.msg : slm_status_str(err.status));
    return rc;
}
