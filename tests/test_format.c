/* format/: the llama2.c checkpoint loader and slm_model_open / validate.
 * Real checkpoints from ../shared/models, synthetic ones made here, and
 * malformed variants of both: every failure must be a status with a message
 * naming the file, never a crash (run this under the ASan build too). */
#include <stdint.h>
#include <unistd.h>

#include "format/model.h"
#include "t.h"

static char g_dir[256]; /* a private temporary directory */

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_dir, name); }

static float rd_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}

/* ---- real checkpoints ------------------------------------------------------ */

static void test_stories260k(void) {
    slm_model_file m;
    slm_err err = {0};
    size_t len = 0;
    uint8_t *raw = (uint8_t *)t_read_file(T_SHARED("models/stories260K.bin"), &len);
    CHECK(raw && len == 1056540);
    slm_status s = slm_model_open(&m, T_SHARED("models/stories260K.bin"), &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s != SLM_OK || !raw) {
        free(raw);
        return;
    }
    const slm_model_config *c = &m.cfg;
    CHECK(m.kind == SLM_MODEL_LLAMA2C);
    CHECK(m.gguf == NULL);
    CHECK(strcmp(c->arch, "llama") == 0);
    CHECK(c->dim == 64 && c->hidden_dim == 172 && c->n_layers == 5);
    CHECK(c->n_heads == 8 && c->n_kv_heads == 4 && c->head_dim == 8);
    CHECK(c->vocab_size == 512 && c->context_len == 512);
    CHECK(c->rope_base == 10000.0f && c->norm_eps == 1e-5f);
    CHECK(c->tied_embeddings == 1);
    CHECK(m.n_tensors == 1 + 5 * 9 + 1);
    CHECK(slm_model_tensor(&m, "output.weight") == NULL);
    CHECK(strstr(m.path, "stories260K.bin") != NULL);

    const slm_tensor *e = slm_model_tensor(&m, "token_embd.weight");
    CHECK(e && e->type == SLM_F32 && e->ne[0] == 64 && e->ne[1] == 512 && e->nbytes == 64 * 512 * 4);
    if (e) {
        CHECK((const uint8_t *)e->data == (const uint8_t *)m.map.data + 28);
        for (int i = 0; i < 16; i++) CHECK(((const float *)e->data)[i] == rd_f32(raw + 28 + 4 * i));
    }
    /* Offsets of a few tensors in the stacked layout. */
    const uint64_t dim = 64, hid = 172, L = 5, kv = 32, voc = 512;
    uint64_t o_rms_att = 28 + voc * dim * 4;
    uint64_t o_wq = o_rms_att + L * dim * 4;
    uint64_t o_wk = o_wq + L * dim * dim * 4;
    uint64_t o_wv = o_wk + L * kv * dim * 4;
    uint64_t o_wo = o_wv + L * kv * dim * 4;
    uint64_t o_rms_ffn = o_wo + L * dim * dim * 4;
    uint64_t o_w1 = o_rms_ffn + L * dim * 4;
    uint64_t o_w2 = o_w1 + L * hid * dim * 4;
    uint64_t o_w3 = o_w2 + L * dim * hid * 4;
    uint64_t o_fin = o_w3 + L * hid * dim * 4;
    struct { const char *name; uint64_t off; int64_t ne0, ne1; } want[] = {
        {"blk.0.attn_norm.weight", o_rms_att, 64, 1},
        {"blk.3.attn_q.weight", o_wq + 3 * dim * dim * 4, 64, 64},
        {"blk.2.attn_k.weight", o_wk + 2 * kv * dim * 4, 64, 32},
        {"blk.4.attn_v.weight", o_wv + 4 * kv * dim * 4, 64, 32},
        {"blk.1.attn_output.weight", o_wo + 1 * dim * dim * 4, 64, 64},
        {"blk.4.ffn_norm.weight", o_rms_ffn + 4 * dim * 4, 64, 1},
        {"blk.2.ffn_gate.weight", o_w1 + 2 * hid * dim * 4, 64, 172},
        {"blk.2.ffn_down.weight", o_w2 + 2 * dim * hid * 4, 172, 64},
        {"blk.2.ffn_up.weight", o_w3 + 2 * hid * dim * 4, 64, 172},
        {"output_norm.weight", o_fin, 64, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const slm_tensor *t = slm_model_tensor(&m, want[i].name);
        CHECKF(t != NULL, "%s", want[i].name);
        if (!t) continue;
        CHECKF((const uint8_t *)t->data == (const uint8_t *)m.map.data + want[i].off, "%s", want[i].name);
        CHECKF(t->ne[0] == want[i].ne0 && t->ne[1] == want[i].ne1, "%s", want[i].name);
        CHECK(t->n_dims == (want[i].ne1 == 1 ? 1u : 2u));
        CHECK(memcmp(t->data, raw + want[i].off, 8) == 0);
    }
    /* The freq_cis tables follow output_norm and end the file. */
    CHECK(o_fin + dim * 4 + 2 * 512 * 4 * 4 == len);
    slm_model_close(&m);
    slm_model_close(&m); /* twice is fine */
    free(raw);
}

static void test_rand288(void) {
    slm_model_file m;
    slm_err err = {0};
    slm_status s = slm_model_open(&m, T_SHARED("models/rand288.bin"), &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s) return;
    CHECK(m.cfg.dim == 288 && m.cfg.hidden_dim == 768 && m.cfg.n_layers == 6);
    CHECK(m.cfg.n_heads == 6 && m.cfg.n_kv_heads == 6 && m.cfg.head_dim == 48);
    CHECK(m.cfg.vocab_size == 512 && m.cfg.context_len == 256 && m.cfg.tied_embeddings);
    const slm_tensor *t = slm_model_tensor(&m, "blk.5.ffn_down.weight");
    CHECK(t && t->ne[0] == 768 && t->ne[1] == 288);
    FILE *f = fopen(T_SHARED("models/rand288.bin"), "rb");
    float first[4];
    CHECK(f && fseek(f, 28, SEEK_SET) == 0 && fread(first, 4, 4, f) == 4);
    if (f) fclose(f);
    const slm_tensor *e = slm_model_tensor(&m, "token_embd.weight");
    CHECK(e && memcmp(e->data, first, sizeof first) == 0);
    slm_model_close(&m);
}

/* ---- synthetic checkpoints ---------------------------------------------- */

/* A llama2.c checkpoint with weights w[i] = i * 1e-3 (per group); vocab < 0
 * appends a wcls. Returns a malloc'd image and its size. */
static uint8_t *make_l2c(int dim, int hidden, int L, int heads, int kvh, int vocab, int seq, size_t *len) {
    int v = vocab < 0 ? -vocab : vocab, kv_dim = dim * kvh / heads, hs = dim / heads;
    size_t nf = (size_t)v * dim + (size_t)L * dim + (size_t)L * dim * dim * 2 + (size_t)L * kv_dim * dim * 2 +
                (size_t)L * dim + (size_t)L * hidden * dim * 3 + dim + (size_t)seq * hs + (vocab < 0 ? (size_t)v * dim : 0);
    *len = 28 + nf * 4;
    uint8_t *p = malloc(*len);
    int32_t h[7] = {dim, hidden, L, heads, kvh, vocab, seq};
    memcpy(p, h, 28);
    for (size_t i = 0; i < nf; i++) {
        float f = (float)(i % 1000) * 1e-3f;
        memcpy(p + 28 + 4 * i, &f, 4);
    }
    return p;
}

static slm_status open_bytes(const char *name, const void *data, size_t len, slm_model_file *m, slm_err *err) {
    char path[512];
    tmp_path(path, sizeof path, name);
    if (!t_write_file(path, data, len)) return SLM_ERR_IO;
    slm_status s = slm_model_open(m, path, err);
    unlink(path);
    return s;
}

/* Expect failure with a message naming the file (and `needle` if given). */
static void expect_fail(const char *name, const void *data, size_t len, const char *needle) {
    slm_model_file m;
    slm_err err = {0};
    slm_status s = open_bytes(name, data, len, &m, &err);
    CHECKF(s != SLM_OK, "%s: opened", name);
    if (s == SLM_OK) {
        slm_model_close(&m);
        return;
    }
    CHECKF(strstr(err.msg, name) != NULL, "%s: message lacks the file name: %s", name, err.msg);
    if (needle) CHECKF(strstr(err.msg, needle) != NULL, "%s: message lacks '%s': %s", name, needle, err.msg);
    slm_model_close(&m); /* safe after a failed open */
}

static void test_synthetic_wcls(void) {
    size_t len;
    uint8_t *p = make_l2c(16, 40, 2, 4, 2, -10, 8, &len);
    slm_model_file m;
    slm_err err = {0};
    slm_status s = open_bytes("wcls.bin", p, len, &m, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s == SLM_OK) {
        CHECK(m.cfg.tied_embeddings == 0 && m.cfg.vocab_size == 10 && m.cfg.n_kv_heads == 2);
        const slm_tensor *o = slm_model_tensor(&m, "output.weight");
        CHECK(o && o->ne[0] == 16 && o->ne[1] == 10);
        if (o) CHECK((const uint8_t *)o->data + o->nbytes == (const uint8_t *)m.map.data + m.map.size);
        const slm_tensor *k = slm_model_tensor(&m, "blk.1.attn_k.weight");
        CHECK(k && k->ne[0] == 16 && k->ne[1] == 8);
        slm_model_close(&m);
    }
    /* Without the classifier the file is too short. */
    expect_fail("wcls_short.bin", p, len - 16 * 10 * 4, "output.weight");
    expect_fail("wcls_short1.bin", p, len - 1, "output.weight");
    free(p);
}

static void test_header_fields(void) {
    static const char *const field[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                                         "seq_len"};
    size_t len;
    uint8_t *base = (uint8_t *)t_read_file(T_SHARED("models/stories260K.bin"), &len);
    CHECK(base != NULL);
    if (!base) return;
    const int32_t bad[] = {0, -1, -7, INT32_MIN, INT32_MAX, 1 << 30, 1 << 24, 3, 65, 100000};
    uint8_t *p = malloc(len);
    for (int f = 0; f < 7; f++) {
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            memcpy(p, base, len);
            int32_t v = bad[b], orig;
            memcpy(&orig, base + 4 * f, 4);
            if (v == orig) continue;
            memcpy(p + 4 * f, &v, 4);
            char name[64];
            snprintf(name, sizeof name, "hdr_%s_%d.bin", field[f], (int)b);
            expect_fail(name, p, len, NULL);
        }
    }
    /* Messages name the field. */
    struct { int f; int32_t v; const char *needle; } named[] = {
        {0, 0, "dim"},           {1, -1, "hidden_dim"},    {2, INT32_MAX, "n_layers"}, {3, 0, "n_heads"},
        {4, -3, "n_kv_heads"},   {5, 0, "vocab_size"},     {6, -1, "seq_len"},        {0, 65, "n_heads"},
        {4, 3, "n_kv_heads"},    {4, 16, "n_kv_heads"},    {5, -512, "output.weight"}, {6, 1 << 30, "seq_len"},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        memcpy(p, base, len);
        memcpy(p + 4 * named[i].f, &named[i].v, 4);
        char name[64];
        snprintf(name, sizeof name, "named_%d.bin", (int)i);
        expect_fail(name, p, len, named[i].needle);
    }
    /* Odd head size: dim 72 / 8 heads = 9. */
    memcpy(p, base, len);
    int32_t d72 = 72;
    memcpy(p, &d72, 4);
    expect_fail("odd_head.bin", p, len, "even");
    /* One layer fewer: trailing bytes. */
    memcpy(p, base, len);
    int32_t l4 = 4;
    memcpy(p + 8, &l4, 4);
    expect_fail("fewer_layers.bin", p, len, "trailing");
    /* llama2.c's newer export format. */
    memcpy(p, base, len);
    uint32_t magic = 0x616b3432u;
    memcpy(p, &magic, 4);
    expect_fail("v1export.bin", p, len, "not supported");
    free(p);
    free(base);
}

static void test_truncated(void) {
    size_t len;
    uint8_t *base = (uint8_t *)t_read_file(T_SHARED("models/stories260K.bin"), &len);
    CHECK(base != NULL);
    if (!base) return;
    size_t cuts[] = {0, 1, 4, 27, 28, 29, 32, 28 + 512 * 64 * 4, len - 2 * 512 * 16, len - 4, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "trunc_%zu.bin", cuts[i]);
        expect_fail(name, base, cuts[i], NULL);
    }
    int n = 0;
    for (size_t cut = 28; cut < len; cut += 4097, n++) {
        char name[64];
        snprintf(name, sizeof name, "trunc4097_%zu.bin", cut);
        expect_fail(name, base, cut, cut > 28 ? "beyond end of file" : NULL);
    }
    CHECK(n > 200);
    /* A message for a cut inside layer 3's wq names that tensor. */
    size_t cut = 28 + 512 * 64 * 4 + 5 * 64 * 4 + 3 * 64 * 64 * 4 + 100;
    expect_fail("trunc_wq3.bin", base, cut, "blk.3.attn_q.weight");
    free(base);
}

static void test_open_errors(void) {
    slm_model_file m;
    slm_err err = {0};
    CHECK(slm_model_open(&m, "/nonexistent/dir/nomodel.bin", &err) == SLM_ERR_IO);
    CHECK(strstr(err.msg, "nomodel.bin") != NULL);
    slm_model_close(&m);
    CHECK(slm_model_open(&m, g_dir, &err) != SLM_OK); /* a directory */
    slm_model_close(&m);
    /* Close is safe on a zeroed struct. */
    slm_model_file z;
    memset(&z, 0, sizeof z);
    slm_model_close(&z);
}

/* Validation of a config / tensor table built by hand. */
static void test_validate(void) {
    size_t len;
    uint8_t *p = make_l2c(16, 40, 2, 4, 2, 10, 8, &len);
    slm_model_file m;
    slm_err err = {0};
    slm_status s = open_bytes("val.bin", p, len, &m, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s == SLM_OK) {
        slm_tensor *up = (slm_tensor *)slm_model_tensor(&m, "blk.1.ffn_up.weight");
        up->ne[1] = 39;
        CHECK(slm_model_validate(&m, &err) == SLM_ERR_FORMAT);
        CHECKF(strstr(err.msg, "val.bin: tensor 'blk.1.ffn_up.weight': shape [16, 39] but the config needs [16, 40]"),
               "%s", err.msg);
        up->ne[1] = 40;
        up->type = SLM_Q8_1; /* a GGML type the kernels do not take: refused with the supported list */
        CHECK(slm_model_validate(&m, &err) == SLM_ERR_UNSUPPORTED);
        CHECKF(strstr(err.msg, "type q8_1 is not supported") && strstr(err.msg, "q4_k") && strstr(err.msg, "q5_0") &&
                   strstr(err.msg, "q2_k") && strstr(err.msg, "iq4_xs"),
               "%s", err.msg);
        /* llama-quantize's types (and its fallbacks for rows not a multiple of 256), and MXFP4, are taken */
        static const uint32_t taken[] = {SLM_Q5_0, SLM_Q5_1, SLM_IQ4_NL, SLM_Q2_K, SLM_Q3_K, SLM_IQ4_XS, SLM_Q4_K, SLM_MXFP4,
                                         SLM_MXFP4_R16};
        for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
            CHECKF(slm_matrix_type_supported(taken[i]), "%s refused", slm_dtype_name(taken[i]));
        CHECK(!slm_matrix_type_supported(SLM_Q8_K) && !slm_matrix_type_supported(SLM_I8));
        up->type = SLM_F32;
        slm_tensor *norm = (slm_tensor *)slm_model_tensor(&m, "blk.0.ffn_norm.weight");
        norm->type = SLM_F16;
        CHECK(slm_model_validate(&m, &err) == SLM_ERR_UNSUPPORTED);
        norm->type = SLM_F32;
        memcpy(norm->name, "blk.0.ffn_nrm.weight", 21);
        CHECK(slm_model_validate(&m, &err) == SLM_ERR_FORMAT);
        CHECKF(strstr(err.msg, "missing tensor 'blk.0.ffn_norm.weight'"), "%s", err.msg);
        memcpy(norm->name, "blk.0.ffn_norm.weight", 22);
        CHECK(slm_model_validate(&m, &err) == SLM_OK);
        m.cfg.norm_eps = 0;
        CHECK(slm_model_validate(&m, &err) == SLM_ERR_FORMAT);
        m.cfg.norm_eps = 1e-5f;
        m.cfg.n_kv_heads = 3;
        CHECK(slm_model_validate(&m, &err) != SLM_OK);
        m.cfg.n_kv_heads = 2;
        m.cfg.tied_embeddings = 0; /* no output.weight */
        CHECK(slm_model_validate(&m, &err) == SLM_ERR_FORMAT);
        CHECK(strstr(err.msg, "output.weight") != NULL);
        slm_model_close(&m);
    }
    free(p);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/slm_test_format_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    T_RUN(test_stories260k);
    T_RUN(test_rand288);
    T_RUN(test_synthetic_wcls);
    T_RUN(test_header_fields);
    T_RUN(test_truncated);
    T_RUN(test_open_errors);
    T_RUN(test_validate);
    rmdir(g_dir);
    T_DONE();
}
