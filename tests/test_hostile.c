/* Hostile model files: one generated case per class, each refused with a
 * clean message naming the file and the field (tests/corpus/hostile/README.md
 * lists the classes). tests/test_gguf.c already corrupts every field of a
 * valid GGUF one at a time (truncations, counts, lengths, types, shapes,
 * offsets, random flips, allocation failures) against the reader; the cases
 * here are whole hostile files through slm_model_open / slm_load:
 *   - tensors sharing bytes (any kind, not only repacked matrices), and a
 *     file of 16384 layers that all point at the same bytes (refused in
 *     O(n log n): the old linear name lookup took minutes here);
 *   - claimed shapes whose KV cache and arena exceed the memory budget;
 *   - the GGUF CVE classes: string / array lengths, tensor / kv counts,
 *     offsets, types, dims overflow, alignment, array type confusion. */
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/model.h"
#include "staticlm.h"
#include "t.h"
#include "bytebuf.h"

static char g_dir[256];

/* ---- a GGUF builder ---------------------------------------------------------- */

static void kv_u32(buf *b, const char *key, uint32_t v) {
    put_str(b, key);
    put_u32(b, SLM_GGUF_U32);
    put_u32(b, v);
}

typedef struct tinfo {
    char name[80];
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint64_t offset, nbytes;
} tinfo;

/* A llama model, all f32: dim = hidden = head_dim = 32, one head, vocab 8,
 * tied embeddings. shared: every layer's tensors point at layer 0's bytes. */
typedef struct model {
    tinfo *t;
    int nt;
    buf extra_kv; /* raw kv records appended after the model's keys */
    int n_extra_kv;
    uint64_t n_kv_override, n_tensors_override; /* 0: the real counts */
    int n_layers;
    uint32_t block_count_type; /* 0: u32 */
} model;

static void add_t(model *m, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1) {
    tinfo *t = &m->t[m->nt++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = t->ne[3] = 1;
    t->type = SLM_F32;
    t->nbytes = ne0 * t->ne[1] * 4;
}

static void model_init(model *m, int n_layers, int shared) {
    memset(m, 0, sizeof *m);
    m->n_layers = n_layers;
    m->t = calloc((size_t)n_layers * 9 + 4, sizeof *m->t);
    add_t(m, "token_embd.weight", 2, 32, 8);
    add_t(m, "output_norm.weight", 1, 32, 1);
    static const char *const k[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                     "ffn_norm", "ffn_gate", "ffn_down", "ffn_up"};
    for (int l = 0; l < n_layers; l++)
        for (int j = 0; j < 9; j++) {
            char name[80];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, k[j]);
            const int vec = j == 0 || j == 5;
            add_t(m, name, vec ? 1 : 2, 32, 32);
        }
    uint64_t off = 0;
    for (int i = 0; i < m->nt; i++) {
        if (shared && i >= 2 + 9) {
            m->t[i].offset = m->t[2 + (i - 2) % 9].offset; /* layer 0's tensor of the same kind */
            continue;
        }
        m->t[i].offset = off;
        off += (m->t[i].nbytes + 31) / 32 * 32;
    }
}

static void model_free(model *m) {
    free(m->t);
    free(m->extra_kv.p);
}

/* Serialize to path; returns the byte count. */
static size_t model_write(const model *m, const char *path) {
    buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, m->n_tensors_override ? m->n_tensors_override : (uint64_t)m->nt);
    put_u64(&b, m->n_kv_override ? m->n_kv_override : (uint64_t)(6 + m->n_extra_kv));
    put_str(&b, "general.architecture");
    put_u32(&b, SLM_GGUF_STRING);
    put_str(&b, "llama");
    kv_u32(&b, "llama.embedding_length", 32);
    kv_u32(&b, "llama.feed_forward_length", 32);
    if (m->block_count_type == SLM_GGUF_STRING) {
        put_str(&b, "llama.block_count");
        put_u32(&b, SLM_GGUF_STRING);
        put_str(&b, "2");
    } else if (m->block_count_type == SLM_GGUF_ARRAY) {
        put_str(&b, "llama.block_count");
        put_u32(&b, SLM_GGUF_ARRAY);
        put_u32(&b, SLM_GGUF_U32);
        put_u64(&b, 1);
        put_u32(&b, (uint32_t)m->n_layers);
    } else {
        kv_u32(&b, "llama.block_count", (uint32_t)m->n_layers);
    }
    kv_u32(&b, "llama.attention.head_count", 1);
    kv_u32(&b, "llama.context_length", 64);
    put(&b, m->extra_kv.p, m->extra_kv.len);
    uint64_t data = 0;
    for (int i = 0; i < m->nt; i++) {
        const tinfo *t = &m->t[i];
        put_str(&b, t->name);
        put_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 4; d++) put_u64(&b, t->ne[d]);
        for (uint32_t d = 4; d < t->n_dims; d++) put_u64(&b, 1);
        put_u32(&b, t->type);
        put_u64(&b, t->offset);
        if (t->offset + t->nbytes > data && t->offset < (1ull << 40) && t->nbytes < (1ull << 40))
            data = t->offset + t->nbytes;
    }
    while (b.len % 32) put(&b, "", 1);
    size_t start = b.len;
    for (uint64_t i = 0; i < data; i++) {
        float v = (float)((start + i) % 7) * 0.01f + 0.5f; /* norm weights must be finite */
        if (i % 4 == 0) put(&b, &v, 4);
    }
    FILE *f = fopen(path, "wb");
    size_t n = b.len;
    if (!f || fwrite(b.p, 1, b.len, f) != b.len) n = 0;
    if (f) fclose(f);
    free(b.p);
    return n;
}

/* ---- the expectation ----------------------------------------------------------- */

static int g_cases;

/* path refused by slm_model_open with a message naming the file and `field`. */
static void expect_refused(const char *label, const model *m, const char *field) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", g_dir, label);
    CHECKF(model_write(m, path) > 0, "%s: write", label);
    slm_model_file mf;
    slm_err err = {0};
    slm_status s = slm_model_open(&mf, path, &err);
    g_cases++;
    CHECKF(s != SLM_OK, "%s: accepted", label);
    if (s == SLM_OK) {
        slm_model_close(&mf);
    } else {
        char fname[300];
        snprintf(fname, sizeof fname, "%s.gguf", label);
        CHECKF(strstr(err.msg, fname) != NULL, "%s: message does not name the file: %s", label, err.msg);
        CHECKF(strstr(err.msg, field) != NULL, "%s: message lacks '%s': %s", label, field, err.msg);
    }
    unlink(path);
}

static void test_valid_baseline(void) {
    /* the builder's model is valid: every refusal below is the mutation's */
    model m;
    model_init(&m, 2, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/valid.gguf", g_dir);
    CHECK(model_write(&m, path) > 0);
    slm_model_file mf;
    slm_err err = {0};
    CHECKF(slm_model_open(&mf, path, &err) == SLM_OK, "%s", err.msg);
    CHECK(mf.n_tensors == 2 + 2 * 9);
    CHECK(slm_model_tensor(&mf, "blk.1.ffn_up.weight") != NULL && slm_model_tensor(&mf, "blk.2.ffn_up.weight") == NULL);
    CHECK(slm_model_tensor(&mf, "blk.0.attn_q.weight") == &mf.tensors[2 + 1]);
    slm_model_close(&mf);
    unlink(path);
    model_free(&m);
}

/* Two vectors (not repacked matrices) sharing bytes, and two matrices. */
static void test_shared_bytes(void) {
    model m;
    model_init(&m, 2, 0);
    m.t[2 + 9 + 0].offset = m.t[2 + 0].offset; /* blk.1.attn_norm = blk.0.attn_norm's bytes */
    expect_refused("shared_norm", &m, "'blk.0.attn_norm.weight'");
    model_free(&m);
    model_init(&m, 2, 0);
    m.t[2 + 9 + 8].offset = m.t[2 + 6].offset + 32 * 4; /* blk.1.ffn_up overlaps blk.0.ffn_gate's tail */
    expect_refused("shared_partial", &m, "share data bytes");
    model_free(&m);
}

/* 16384 layers, all pointing at layer 0's bytes: a 10 MB file that claimed
 * 147k tensors. Refused for sharing bytes, and fast. */
static void test_many_layers_shared(void) {
    model m;
    model_init(&m, 16384, 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect_refused("many_layers_shared", &m, "share data bytes");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    fprintf(stderr, "  16384 layers (%d tensors) refused in %.2f s\n", m.nt, sec);
    CHECKF(sec < 30.0, "took %.1f s", sec);
    model_free(&m);
}

/* The GGUF CVE classes, each on the otherwise valid model. */
static void test_gguf_cve_classes(void) {
    model m;
#define CASE(label, field, mutate)      \
    do {                                \
        model_init(&m, 2, 0);           \
        mutate;                         \
        expect_refused(label, &m, field); \
        model_free(&m);                 \
    } while (0)
    /* string lengths */
    CASE("kv_key_len_huge", "string length", (put_u64(&m.extra_kv, 1ull << 62), m.n_extra_kv = 1));
    CASE("kv_str_len_huge", "string length",
         (put_str(&m.extra_kv, "general.name"), put_u32(&m.extra_kv, SLM_GGUF_STRING), put_u64(&m.extra_kv, ~0ull),
          m.n_extra_kv = 1));
    /* array lengths: n * element size overflows; strings that cannot fit */
    CASE("arr_len_overflow", "array of",
         (put_str(&m.extra_kv, "x.arr"), put_u32(&m.extra_kv, SLM_GGUF_ARRAY), put_u32(&m.extra_kv, SLM_GGUF_U32),
          put_u64(&m.extra_kv, 1ull << 62), m.n_extra_kv = 1));
    CASE("arr_str_count_huge", "strings cannot fit",
         (put_str(&m.extra_kv, "tokenizer.ggml.tokens"), put_u32(&m.extra_kv, SLM_GGUF_ARRAY),
          put_u32(&m.extra_kv, SLM_GGUF_STRING), put_u64(&m.extra_kv, 1ull << 40), m.n_extra_kv = 1));
    CASE("arr_nested", "nested arrays",
         (put_str(&m.extra_kv, "x.arr"), put_u32(&m.extra_kv, SLM_GGUF_ARRAY), put_u32(&m.extra_kv, SLM_GGUF_ARRAY),
          put_u64(&m.extra_kv, 1), m.n_extra_kv = 1));
    CASE("arr_elem_type_unknown", "unknown array element type",
         (put_str(&m.extra_kv, "x.arr"), put_u32(&m.extra_kv, SLM_GGUF_ARRAY), put_u32(&m.extra_kv, 77),
          put_u64(&m.extra_kv, 1), m.n_extra_kv = 1));
    CASE("kv_type_unknown", "unknown value type",
         (put_str(&m.extra_kv, "x.v"), put_u32(&m.extra_kv, 1000), m.n_extra_kv = 1));
    /* array / type confusion: a key of the wrong kind */
    CASE("block_count_string", "llama.block_count", (m.block_count_type = SLM_GGUF_STRING));
    CASE("block_count_array", "llama.block_count", (m.block_count_type = SLM_GGUF_ARRAY));
    CASE("alignment_string", "general.alignment",
         (put_str(&m.extra_kv, "general.alignment"), put_u32(&m.extra_kv, SLM_GGUF_STRING), put_str(&m.extra_kv, "32"),
          m.n_extra_kv = 1));
    /* alignment */
    CASE("alignment_not_pow2", "general.alignment", (kv_u32(&m.extra_kv, "general.alignment", 48), m.n_extra_kv = 1));
    CASE("alignment_zero", "general.alignment", (kv_u32(&m.extra_kv, "general.alignment", 0), m.n_extra_kv = 1));
    CASE("offset_unaligned", "alignment", (m.t[3].offset += 4));
    /* counts */
    CASE("n_tensors_huge", "n_tensors", (m.n_tensors_override = 1ull << 60));
    CASE("n_kv_huge", "n_kv", (m.n_kv_override = ~0ull >> 1));
    /* offsets */
    CASE("offset_beyond_file", "beyond end of file", (m.t[4].offset = 1ull << 40));
    CASE("offset_wraps", "beyond end of file", (m.t[4].offset = ~0ull - 31));
    /* types */
    CASE("tensor_type_unknown", "unknown tensor type", (m.t[3].type = 9999));
    CASE("tensor_type_wrong_kind", "not supported for norm", (m.t[1].type = SLM_F16, m.t[1].nbytes = 64));
    /* dims */
    CASE("n_dims_zero", "n_dims", (m.t[3].n_dims = 0));
    CASE("n_dims_five", "n_dims", (m.t[3].n_dims = 5));
    CASE("ne_zero", "ne[1]", (m.t[3].ne[1] = 0));
    CASE("ne_overflow", "overflows",
         (m.t[3].n_dims = 4, m.t[3].ne[1] = 1ull << 20, m.t[3].ne[2] = 1ull << 20, m.t[3].ne[3] = 1ull << 20));
    CASE("ne_negative", "ne[0]", (m.t[3].ne[0] = (uint64_t)INT64_MIN));
    CASE("shape_mismatch", "shape", (m.t[3].ne[1] = 16, m.t[3].nbytes /= 2));
    /* names */
    CASE("tensor_name_long", "name is",
         (memset(m.t[3].name, 'a', 70), m.t[3].name[70] = 0));
    CASE("tensor_name_duplicate", "duplicate tensor name", (snprintf(m.t[3].name, sizeof m.t[3].name, "%s", m.t[2].name)));
    CASE("kv_duplicate", "duplicate key", (kv_u32(&m.extra_kv, "llama.embedding_length", 32), m.n_extra_kv = 1));
    /* config claims */
    CASE("n_layers_huge", "n_layers", (m.n_layers = 1 << 30));
#undef CASE
}

/* The memory budget: a model whose KV cache and arena exceed the limit is
 * refused before the runtime allocates them, with the numbers. */
static void test_memory_budget(void) {
    slm_options o = slm_default_options();
    o.tokenizer_path = T_SHARED("models/tok512.bin");
    o.n_threads = 1;
    o.max_memory_mb = 1;
    o.kv_type = SLM_KV_F32; /* 1.0 MiB of f32 KV alone (f16 halves it) */
    slm_engine *e = NULL;
    slm_status s = slm_load(&e, T_SHARED("models/stories260K.bin"), &o);
    CHECKF(s == SLM_ERR_CAPACITY, "status %d: %s", (int)s, slm_last_error(e));
    CHECKF(strstr(slm_last_error(e), "stories260K.bin") && strstr(slm_last_error(e), "KV cache") &&
               strstr(slm_last_error(e), "memory limit is 1.0 MiB"),
           "%s", slm_last_error(e));
    slm_free(e);
    /* a longer context claims more: the same model fits at 64 MiB, not with 2^20 rows at 8 MiB */
    o.max_memory_mb = 64;
    CHECKF(slm_load(&e, T_SHARED("models/stories260K.bin"), &o) == SLM_OK, "%s", slm_last_error(e));
    slm_free(e);
    o.max_memory_mb = 8;
    o.min_response_len = 1 << 20;
    s = slm_load(&e, T_SHARED("models/stories260K.bin"), &o);
    /* stories260K's context is 512 rows: the compiler clamps, so this fits */
    CHECKF(s == SLM_OK, "%s", slm_last_error(e));
    slm_free(e);
    /* no limit */
    o.max_memory_mb = -1;
    o.min_response_len = 128;
    CHECKF(slm_load(&e, T_SHARED("models/stories260K.bin"), &o) == SLM_OK, "%s", slm_last_error(e));
    slm_free(e);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "test_hostile.tmp.%d", (int)getpid());
    mkdir(g_dir, 0700);
    T_RUN(test_valid_baseline);
    T_RUN(test_shared_bytes);
    T_RUN(test_many_layers_shared);
    T_RUN(test_gguf_cve_classes);
    T_RUN(test_memory_budget);
    rmdir(g_dir);
    fprintf(stderr, "%d hostile files refused\n", g_cases);
    T_DONE();
}
