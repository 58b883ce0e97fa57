/* format/gguf: reader, writer, the GGUF llama loader and `staticlm convert`.
 *
 * A small valid llama GGUF is built byte by byte here, recording where each
 * field lies; the tests then read it back and corrupt every field (counts,
 * lengths, types, shapes, offsets) and truncate it everywhere. Each corrupt
 * image is opened from an exact-size heap copy (so ASan sees any overread)
 * under a counting allocator (so a huge count cannot allocate gigabytes), and
 * must fail with a message that names the file and the field. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/model.h"
#include "text/tokenizer.h"
#include "t.h"
#include "bytebuf.h"

static char g_dir[256];

static void tmp_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

static int no_temp_files(void);

/* ---- a counting allocator ------------------------------------------------ */

static size_t g_live, g_peak; /* bytes */
static long g_fail_at = -1;    /* fail the allocation with this index (-1: never) */
static long g_n_allocs;

static void *cnt_alloc(void *ud, size_t n) {
    (void)ud;
    if (g_n_allocs++ == g_fail_at) return NULL;
    size_t *p = malloc(n + 16);
    if (!p) return NULL;
    p[0] = n;
    g_live += n;
    if (g_live > g_peak) g_peak = g_live;
    return (char *)p + 16;
}
static void cnt_free(void *ud, void *q) {
    (void)ud;
    if (!q) return;
    size_t *p = (size_t *)((char *)q - 16);
    g_live -= p[0];
    free(p);
}
static void *cnt_realloc(void *ud, void *q, size_t n) {
    if (!q) return cnt_alloc(ud, n);
    if (g_n_allocs++ == g_fail_at) return NULL;
    size_t *p = (size_t *)((char *)q - 16), old = p[0];
    size_t *r = realloc(p, n + 16);
    if (!r) return NULL;
    r[0] = n;
    g_live = g_live - old + n;
    if (g_live > g_peak) g_peak = g_live;
    return (char *)r + 16;
}
static const slm_allocator k_counting = {cnt_alloc, cnt_realloc, cnt_free, NULL};

/* ---- a byte builder -------------------------------------------------------- */

static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(buf *b, uint16_t v) { put(b, &v, 2); }
static void put_f32(buf *b, float v) { put(b, &v, 4); }
static void put_f64(buf *b, double v) { put(b, &v, 8); }
static void set_u32(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }
static void set_u64(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static uint64_t get_u64(const uint8_t *p, size_t off) {
    uint64_t v;
    memcpy(&v, p + off, 8);
    return v;
}

/* Where each field of the built file lies. */
typedef struct kv_pos {
    const char *key;
    size_t key_len; /* offset of the key's u64 length */
    size_t type;    /* offset of the u32 value type */
    size_t val;     /* offset of the value (string: its u64 length; array: u32 elem type) */
    size_t arr_n;   /* arrays: offset of the u64 count */
    size_t elem3;   /* string arrays: offset of element 3's u64 length */
} kv_pos;

typedef struct ti_pos {
    const char *name;
    size_t name_len, n_dims, ne[2], type, offset;
} ti_pos;

typedef struct layout {
    kv_pos kv[32];
    int n_kv;
    ti_pos ti[16];
    int n_t;
    size_t data;  /* start of the data section */
    size_t size;
} layout;

typedef struct opts {
    const char *arch;        /* general.architecture (NULL: "llama") */
    const char *skip_key;    /* omit this key */
    const char *skip_tensor; /* omit this tensor */
    int64_t up_ne1;          /* blk.0.ffn_up.weight ne[1] (0: 64) */
    uint32_t version;        /* 0: 3 */
} opts;

/* The tiny model: dim 32, hidden 64, 1 layer, 4 heads, 2 kv heads (kv_dim 16),
 * vocab 8, context 16; f32, f16 and q8_0 tensors. */
static const struct {
    const char *name;
    uint32_t type, n_dims;
    int64_t ne0, ne1;
} k_tensors[] = {
    {"token_embd.weight", SLM_F32, 2, 32, 8},
    {"blk.0.attn_norm.weight", SLM_F32, 1, 32, 1},
    {"blk.0.attn_q.weight", SLM_F16, 2, 32, 32},
    {"blk.0.attn_k.weight", SLM_Q8_0, 2, 32, 16},
    {"blk.0.attn_v.weight", SLM_F32, 2, 32, 16},
    {"blk.0.attn_output.weight", SLM_Q8_0, 2, 32, 32},
    {"blk.0.ffn_norm.weight", SLM_F32, 1, 32, 1},
    {"blk.0.ffn_gate.weight", SLM_F16, 2, 32, 64},
    {"blk.0.ffn_down.weight", SLM_Q8_0, 2, 64, 32},
    {"blk.0.ffn_up.weight", SLM_F32, 2, 32, 64},
    {"output_norm.weight", SLM_F32, 1, 32, 1},
    {"output.weight", SLM_Q8_0, 2, 32, 8},
};
#define N_TENSORS ((int)(sizeof k_tensors / sizeof k_tensors[0]))
static const char *const k_tokens[8] = {"<unk>", "<s>", "</s>", "a", ("\xe2\x96\x81" "b"), "", "cd", "<0x0A>"};

static uint8_t tensor_byte(int j, uint64_t i) { return (uint8_t)(j * 31 + i * 7 + (i >> 8)); }

static kv_pos *kv_begin(buf *b, layout *l, const opts *o, const char *key, uint32_t type) {
    if (o->skip_key && strcmp(o->skip_key, key) == 0) return NULL;
    kv_pos *k = &l->kv[l->n_kv++];
    memset(k, 0, sizeof *k);
    k->key = key;
    k->key_len = b->len;
    put_str(b, key);
    k->type = b->len;
    put_u32(b, type);
    k->val = b->len;
    return k;
}

static void build(buf *b, layout *l, const opts *o) {
    memset(l, 0, sizeof *l);
    b->len = 0;
    int n_t = 0;
    for (int j = 0; j < N_TENSORS; j++) n_t += !(o->skip_tensor && !strcmp(o->skip_tensor, k_tensors[j].name));
    put(b, "GGUF", 4);
    put_u32(b, o->version ? o->version : 3);
    put_u64(b, (uint64_t)n_t);
    size_t n_kv_at = b->len;
    put_u64(b, 0); /* patched below */

    kv_pos *k;
    if ((k = kv_begin(b, l, o, "general.architecture", SLM_GGUF_STRING))) put_str(b, o->arch ? o->arch : "llama");
    if ((k = kv_begin(b, l, o, "general.alignment", SLM_GGUF_U32))) put_u32(b, 32);
    if ((k = kv_begin(b, l, o, "general.name", SLM_GGUF_STRING))) put_str(b, "tiny");
    if ((k = kv_begin(b, l, o, "llama.context_length", SLM_GGUF_U64))) put_u64(b, 16);
    if ((k = kv_begin(b, l, o, "llama.embedding_length", SLM_GGUF_U32))) put_u32(b, 32);
    if ((k = kv_begin(b, l, o, "llama.block_count", SLM_GGUF_I32))) put_u32(b, 1);
    if ((k = kv_begin(b, l, o, "llama.feed_forward_length", SLM_GGUF_U16))) put_u16(b, 64);
    if ((k = kv_begin(b, l, o, "llama.attention.head_count", SLM_GGUF_U8))) put_u8(b, 4);
    if ((k = kv_begin(b, l, o, "llama.attention.head_count_kv", SLM_GGUF_I64))) put_u64(b, 2);
    if ((k = kv_begin(b, l, o, "llama.rope.freq_base", SLM_GGUF_F32))) put_f32(b, 50000.0f);
    if ((k = kv_begin(b, l, o, "llama.attention.layer_norm_rms_epsilon", SLM_GGUF_F64))) put_f64(b, 1e-6);
    if ((k = kv_begin(b, l, o, "test.i8", SLM_GGUF_I8))) put_u8(b, (uint8_t)-5);
    if ((k = kv_begin(b, l, o, "test.i16", SLM_GGUF_I16))) put_u16(b, (uint16_t)-300);
    if ((k = kv_begin(b, l, o, "test.bool", SLM_GGUF_BOOL))) put_u8(b, 1);
    if ((k = kv_begin(b, l, o, "test.key_a", SLM_GGUF_U32))) put_u32(b, 1);
    if ((k = kv_begin(b, l, o, "test.key_b", SLM_GGUF_U32))) put_u32(b, 2);
    if ((k = kv_begin(b, l, o, "test.u64big", SLM_GGUF_U64))) put_u64(b, UINT64_MAX);
    if ((k = kv_begin(b, l, o, "tokenizer.ggml.tokens", SLM_GGUF_ARRAY))) {
        put_u32(b, SLM_GGUF_STRING);
        k->arr_n = b->len;
        put_u64(b, 8);
        for (int i = 0; i < 8; i++) {
            if (i == 3) k->elem3 = b->len;
            put_str(b, k_tokens[i]);
        }
    }
    if ((k = kv_begin(b, l, o, "tokenizer.ggml.scores", SLM_GGUF_ARRAY))) {
        put_u32(b, SLM_GGUF_F32);
        k->arr_n = b->len;
        put_u64(b, 8);
        for (int i = 0; i < 8; i++) put_f32(b, -(float)i);
    }
    if ((k = kv_begin(b, l, o, "test.arr_u8", SLM_GGUF_ARRAY))) {
        put_u32(b, SLM_GGUF_U8);
        k->arr_n = b->len;
        put_u64(b, 3);
        put_u8(b, 7), put_u8(b, 8), put_u8(b, 9);
    }
    set_u64(b->p, n_kv_at, (uint64_t)l->n_kv);

    uint64_t off = 0, sizes[N_TENSORS];
    int map[N_TENSORS];
    for (int j = 0; j < N_TENSORS; j++) {
        if (o->skip_tensor && !strcmp(o->skip_tensor, k_tensors[j].name)) continue;
        ti_pos *t = &l->ti[l->n_t];
        map[l->n_t++] = j;
        int64_t ne1 = k_tensors[j].ne1;
        if (o->up_ne1 && !strcmp(k_tensors[j].name, "blk.0.ffn_up.weight")) ne1 = o->up_ne1;
        t->name = k_tensors[j].name;
        t->name_len = b->len;
        put_str(b, t->name);
        t->n_dims = b->len;
        put_u32(b, k_tensors[j].n_dims);
        t->ne[0] = b->len;
        put_u64(b, (uint64_t)k_tensors[j].ne0);
        if (k_tensors[j].n_dims == 2) {
            t->ne[1] = b->len;
            put_u64(b, (uint64_t)ne1);
        }
        t->type = b->len;
        put_u32(b, k_tensors[j].type);
        t->offset = b->len;
        put_u64(b, off);
        sizes[j] = slm_row_bytes(k_tensors[j].type, (uint64_t)k_tensors[j].ne0) * (uint64_t)ne1;
        off += (sizes[j] + 31) / 32 * 32;
    }
    while (b->len % 32) put_u8(b, 0);
    l->data = b->len;
    for (int i = 0; i < l->n_t; i++) {
        int j = map[i];
        while ((b->len - l->data) % 32) put_u8(b, 0);
        for (uint64_t x = 0; x < sizes[j]; x++) put_u8(b, tensor_byte(j, x));
    }
    l->size = b->len; /* no padding after the last tensor */
}

static const kv_pos *kv_named(const layout *l, const char *key) {
    for (int i = 0; i < l->n_kv; i++)
        if (!strcmp(l->kv[i].key, key)) return &l->kv[i];
    return NULL;
}
static const ti_pos *ti_named(const layout *l, const char *name) {
    for (int i = 0; i < l->n_t; i++)
        if (!strcmp(l->ti[i].name, name)) return &l->ti[i];
    return NULL;
}

/* ---- opening images ----------------------------------------------------- */

/* What slm_model_open does after mapping: GGUF parse, llama load, validate. */
static slm_status open_image(const void *p, size_t len, const char *name, slm_err *err) {
    slm_model_file m;
    memset(&m, 0, sizeof m);
    snprintf(m.path, sizeof m.path, "%s", name);
    m.map.data = (void *)p;
    m.map.size = len;
    slm_status s = slm_gguf_model_load(&m, err);
    if (s == SLM_OK) s = slm_model_validate(&m, err);
    m.map.data = NULL; /* not ours to unmap */
    m.map.size = 0;
    slm_model_close(&m);
    return s;
}

static int g_cases;

/* Expect a failure with the file's name (and needle) in the message, using
 * at most a few times the image size in heap. */
static void expect_bad_ex(const uint8_t *p, size_t len, const char *label, const char *needle, slm_status want) {
    uint8_t *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, p, len);
    slm_err err = {0};
    g_live = g_peak = 0;
    slm_set_allocator(&k_counting);
    slm_status s = open_image(copy, len, "corrupt.gguf", &err);
    slm_set_allocator(NULL);
    g_cases++;
    CHECKF(s != SLM_OK, "%s: opened", label);
    if (want != SLM_OK) CHECKF(s == want, "%s: status %s, want %s (%s)", label, slm_status_str(s), slm_status_str(want), err.msg);
    CHECKF(strncmp(err.msg, "corrupt.gguf: ", 14) == 0, "%s: message does not start with the file name: %s", label,
           err.msg);
    if (needle) CHECKF(strstr(err.msg, needle) != NULL, "%s: message lacks '%s': %s", label, needle, err.msg);
    CHECKF(g_live == 0, "%s: leaked %zu bytes", label, g_live);
    CHECKF(g_peak <= 16 * len + 4096, "%s: peak heap %zu for a %zu-byte image", label, g_peak, len);
    free(copy);
}
static void expect_bad(const uint8_t *p, size_t len, const char *label, const char *needle) {
    expect_bad_ex(p, len, label, needle, SLM_OK);
}

/* Corrupt a u32 / u64 field of a fresh copy and expect failure. */
static void bad32(const buf *b, size_t off, uint32_t v, const char *label, const char *needle) {
    uint8_t *p = malloc(b->len);
    memcpy(p, b->p, b->len);
    set_u32(p, off, v);
    char l[160];
    snprintf(l, sizeof l, "%s = %u", label, v);
    expect_bad(p, b->len, l, needle);
    free(p);
}
static void bad64(const buf *b, size_t off, uint64_t v, const char *label, const char *needle) {
    uint8_t *p = malloc(b->len);
    memcpy(p, b->p, b->len);
    set_u64(p, off, v);
    char l[160];
    snprintf(l, sizeof l, "%s = %llu", label, (unsigned long long)v);
    expect_bad(p, b->len, l, needle);
    free(p);
}

/* ---- the reader on a valid file --------------------------------------- */

static void test_reader_values(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    slm_gguf *g = NULL;
    slm_err err = {0};
    uint8_t *img = malloc(b.len);
    memcpy(img, b.p, b.len);
    slm_status s = slm_gguf_open(&g, img, b.len, "tiny.gguf", &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s) goto done;
    CHECK(slm_gguf_version(g) == 3);
    CHECK(slm_gguf_n_kv(g) == (uint64_t)l.n_kv && slm_gguf_n_tensors(g) == N_TENSORS);
    CHECK(slm_gguf_alignment(g) == 32);
    for (int i = 0; i < l.n_kv; i++) {
        CHECK(slm_gguf_find(g, l.kv[i].key) == i);
        CHECK(slm_gguf_str_eq(slm_gguf_key(g, i), l.kv[i].key));
    }
    CHECK(slm_gguf_find(g, "nope") == -1 && slm_gguf_find(g, "") == -1);
    CHECK(slm_gguf_key(g, -1).s == NULL && slm_gguf_key(g, l.n_kv).s == NULL);
    CHECK(slm_gguf_kv_type(g, 0) == SLM_GGUF_STRING && slm_gguf_kv_type(g, 3) == SLM_GGUF_U64);
    CHECK(slm_gguf_kv_type(g, 99) == SLM_GGUF_TYPE_COUNT);

    slm_gguf_str str;
    uint32_t u;
    int64_t i64;
    float f;
    int bo;
    CHECK(slm_gguf_get_str(g, "general.architecture", &str) && slm_gguf_str_eq(str, "llama"));
    CHECK(!slm_gguf_get_str(g, "general.alignment", &str));
    CHECK(slm_gguf_get_u32(g, "general.alignment", &u) && u == 32);
    CHECK(slm_gguf_get_u32(g, "llama.context_length", &u) && u == 16);      /* u64 */
    CHECK(slm_gguf_get_u32(g, "llama.block_count", &u) && u == 1);          /* i32 */
    CHECK(slm_gguf_get_u32(g, "llama.feed_forward_length", &u) && u == 64); /* u16 */
    CHECK(slm_gguf_get_u32(g, "llama.attention.head_count", &u) && u == 4); /* u8 */
    CHECK(slm_gguf_get_i64(g, "llama.attention.head_count_kv", &i64) && i64 == 2);
    CHECK(slm_gguf_get_f32(g, "llama.rope.freq_base", &f) && f == 50000.0f);
    CHECK(slm_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) && f == 1e-6f); /* f64 */
    CHECK(!slm_gguf_get_f32(g, "general.alignment", &f));
    u = 77;
    CHECK(!slm_gguf_get_u32(g, "test.i8", &u) && u == 77); /* negative: no */
    CHECK(slm_gguf_get_i64(g, "test.i8", &i64) && i64 == -5);
    CHECK(slm_gguf_get_i64(g, "test.i16", &i64) && i64 == -300);
    CHECK(!slm_gguf_get_u32(g, "test.u64big", &u));
    CHECK(!slm_gguf_get_i64(g, "test.u64big", &i64));
    CHECK(slm_gguf_get_bool(g, "test.bool", &bo) && bo == 1);
    CHECK(!slm_gguf_get_bool(g, "test.key_a", &bo));
    CHECK(!slm_gguf_get_u32(g, "general.name", &u));

    slm_gguf_type et;
    uint64_t n;
    const void *data;
    CHECK(slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data) && et == SLM_GGUF_STRING && n == 8);
    for (int i = 0; i < 8; i++) CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &str) && slm_gguf_str_eq(str, k_tokens[i]));
    CHECK(!slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 8, &str));
    CHECK(!slm_gguf_arr_str(g, "tokenizer.ggml.scores", 0, &str));
    CHECK(slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n, &data) && et == SLM_GGUF_F32 && n == 8);
    for (int i = 0; i < 8; i++) {
        memcpy(&f, (const uint8_t *)data + 4 * i, 4);
        CHECK(f == -(float)i);
    }
    CHECK(slm_gguf_get_arr(g, "test.arr_u8", &et, &n, &data) && et == SLM_GGUF_U8 && n == 3);
    CHECK(memcmp(data, "\x07\x08\x09", 3) == 0);
    CHECK(!slm_gguf_get_arr(g, "general.name", &et, &n, &data));

    for (int j = 0; j < N_TENSORS; j++) {
        const slm_gguf_tensor *t = slm_gguf_tensor_at(g, (uint64_t)j);
        CHECK(t && slm_gguf_find_tensor(g, k_tensors[j].name) == t);
        if (!t) continue;
        CHECK(slm_gguf_str_eq(t->name, k_tensors[j].name));
        CHECK(t->type == k_tensors[j].type && t->n_dims == k_tensors[j].n_dims);
        CHECK(t->ne[0] == k_tensors[j].ne0 && t->ne[1] == k_tensors[j].ne1 && t->ne[2] == 1 && t->ne[3] == 1);
        CHECK(t->offset % 32 == 0);
        CHECK(t->nbytes == slm_row_bytes(t->type, (uint64_t)t->ne[0]) * (uint64_t)t->ne[1]);
        CHECK((const uint8_t *)t->data == img + l.data + t->offset);
        int ok = 1;
        for (uint64_t x = 0; x < t->nbytes; x++) ok &= ((const uint8_t *)t->data)[x] == tensor_byte(j, x);
        CHECK(ok);
    }
    CHECK(slm_gguf_tensor_at(g, N_TENSORS) == NULL && slm_gguf_find_tensor(g, "nope") == NULL);
    slm_gguf_close(g);

    /* The whole model path accepts it; GGUF v2 too. */
    CHECK(open_image(img, b.len, "tiny.gguf", &err) == SLM_OK);
    set_u32(img, 4, 2);
    s = open_image(img, b.len, "tiny.gguf", &err);
    CHECKF(s == SLM_OK, "v2: %s", err.msg);
done:
    free(img);
    free(b.p);
}

static void test_model_from_gguf(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    char path[512];
    tmp_path(path, sizeof path, "tiny.gguf");
    CHECK(t_write_file(path, b.p, b.len));
    slm_model_file m;
    slm_err err = {0};
    slm_status s = slm_model_open(&m, path, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s == SLM_OK) {
        const slm_model_config *c = &m.cfg;
        CHECK(m.kind == SLM_MODEL_GGUF && m.gguf != NULL);
        CHECK(c->dim == 32 && c->hidden_dim == 64 && c->n_layers == 1 && c->n_heads == 4 && c->n_kv_heads == 2);
        CHECK(c->head_dim == 8 && c->vocab_size == 8 && c->context_len == 16 && !c->tied_embeddings);
        CHECK(c->rope_base == 50000.0f && c->norm_eps == 1e-6f);
        CHECK(m.n_tensors == N_TENSORS);
        const slm_tensor *t = slm_model_tensor(&m, "blk.0.attn_k.weight");
        CHECK(t && t->type == SLM_Q8_0 && t->nbytes == 16 * 34);
        slm_model_close(&m);
    }
    /* Tied embeddings without output.weight; vocab from the token list. */
    o.skip_tensor = "output.weight";
    build(&b, &l, &o);
    CHECK(t_write_file(path, b.p, b.len));
    s = slm_model_open(&m, path, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s == SLM_OK) {
        CHECK(m.cfg.tied_embeddings == 1 && m.cfg.vocab_size == 8);
        slm_model_close(&m);
    }
    /* Defaults: no head_count_kv... is a shape error here (kv_dim 32 != 16). */
    o.skip_tensor = NULL;
    o.skip_key = "llama.rope.freq_base";
    build(&b, &l, &o);
    CHECK(t_write_file(path, b.p, b.len));
    s = slm_model_open(&m, path, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s == SLM_OK) {
        CHECK(m.cfg.rope_base == 10000.0f);
        slm_model_close(&m);
    }
    unlink(path);
    free(b.p);
}

/* ---- malformed GGUF ------------------------------------------------------ */

static void test_truncations(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    char label[64];
    for (size_t cut = 0; cut <= l.data; cut++) {
        snprintf(label, sizeof label, "cut at %zu", cut);
        expect_bad(b.p, cut, label, NULL);
    }
    for (size_t cut = l.data; cut < l.size; cut += 97) {
        snprintf(label, sizeof label, "cut at %zu", cut);
        expect_bad(b.p, cut, label, "beyond end of file");
    }
    expect_bad(b.p, l.size - 1, "cut at size-1", "tensor 'output.weight': data offset");
    /* A few truncations through the file path too. */
    size_t cuts[] = {1, 3, 4, 23, 24, 100, l.data - 1, l.data + 1, l.size - 1};
    char path[512];
    tmp_path(path, sizeof path, "cut.gguf");
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        slm_model_file m;
        slm_err err = {0};
        CHECK(t_write_file(path, b.p, cuts[i]));
        CHECK(slm_model_open(&m, path, &err) != SLM_OK);
        CHECKF(strstr(err.msg, "cut.gguf") != NULL, "%s", err.msg);
        slm_model_close(&m);
    }
    unlink(path);
    free(b.p);
}

static void test_header_corruptions(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    uint64_t size = b.len;
    bad32(&b, 0, 0x58554747u /* GGUX */, "magic", "bad magic");
    bad32(&b, 0, 0, "magic", "bad magic");
    bad32(&b, 4, 1, "version", "version 1");
    bad32(&b, 4, 4, "version", "version 4");
    bad32(&b, 4, 0, "version", "version 0");
    bad32(&b, 4, 3u << 16, "version", "big-endian");
    bad64(&b, 8, UINT64_MAX, "n_tensors", "n_tensors");
    bad64(&b, 8, 1ull << 40, "n_tensors", "n_tensors");
    bad64(&b, 8, size / 32, "n_tensors", NULL);
    bad64(&b, 8, N_TENSORS + 1, "n_tensors", NULL);
    bad64(&b, 8, N_TENSORS - 2, "n_tensors", "missing tensor 'output_norm.weight'");
    bad64(&b, 8, 0, "n_tensors", "missing tensor 'token_embd.weight'");
    bad64(&b, 16, UINT64_MAX, "n_kv", "n_kv");
    bad64(&b, 16, 1ull << 60, "n_kv", "n_kv");
    bad64(&b, 16, size, "n_kv", "n_kv");
    bad64(&b, 16, size / 13, "n_kv", NULL);
    bad64(&b, 16, 0, "n_kv", "n_dims");
    bad64(&b, 16, (uint64_t)l.n_kv + 1, "n_kv", NULL);
    /* Both counts that fit alone but not together. */
    uint8_t *p = malloc(b.len);
    memcpy(p, b.p, b.len);
    set_u64(p, 8, (size - 24) / 32);
    set_u64(p, 16, (size - 24) / 13);
    expect_bad(p, b.len, "n_kv + n_tensors", "n_kv, n_tensors");
    free(p);
    free(b.p);
}

static void test_kv_corruptions(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    uint64_t size = b.len;
    const kv_pos *arch = kv_named(&l, "general.architecture");
    const kv_pos *align = kv_named(&l, "general.alignment");
    const kv_pos *ctx = kv_named(&l, "llama.context_length");
    const kv_pos *toks = kv_named(&l, "tokenizer.ggml.tokens");
    const kv_pos *scores = kv_named(&l, "tokenizer.ggml.scores");
    const kv_pos *kb = kv_named(&l, "test.key_b");
    const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 7, 1ull << 63, 1ull << 40, size, size - arch->key_len - 7};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        bad64(&b, arch->key_len, huge[i], "kv #0 key length", "kv #0 key: string length");
        bad64(&b, arch->val, huge[i], "arch value length", "kv #0 'general.architecture': string length");
        bad64(&b, toks->arr_n, huge[i], "tokens count", "'tokenizer.ggml.tokens': array of");
        bad64(&b, toks->elem3, huge[i], "tokens[3] length", "'tokenizer.ggml.tokens': element 3: string length");
        bad64(&b, scores->arr_n, huge[i], "scores count", "'tokenizer.ggml.scores': array of");
    }
    bad64(&b, scores->arr_n, UINT64_MAX / 4 + 1, "scores count (overflow)", "'tokenizer.ggml.scores': array of");
    bad64(&b, arch->key_len, 0, "kv #0 key length", "unknown value type");
    bad64(&b, arch->val, 4, "arch value length", NULL);
    bad64(&b, arch->val, 6, "arch value length", NULL);
    const uint32_t bad_types[] = {13, 14, 255, 0x80000000u, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        bad32(&b, ctx->type, bad_types[i], "context_length type", "kv #3 'llama.context_length': unknown value type");
        bad32(&b, toks->val, bad_types[i], "tokens elem type", "'tokenizer.ggml.tokens': unknown array element type");
    }
    bad32(&b, ctx->type, SLM_GGUF_ARRAY, "context_length type", "unknown array element type 16");
    bad32(&b, toks->val, SLM_GGUF_ARRAY, "tokens elem type", "nested arrays");
    bad32(&b, ctx->type, SLM_GGUF_STRING, "context_length type", "kv #4");
    bad32(&b, align->val, 0, "alignment", "'general.alignment': 0 is not a power of two");
    bad32(&b, align->val, 3, "alignment", "'general.alignment': 3 is not a power of two");
    bad32(&b, align->val, 48, "alignment", "power of two");
    bad32(&b, align->val, 1u << 31, "alignment", "not a multiple of the alignment 2147483648");
    bad32(&b, align->type, SLM_GGUF_I32, "alignment type", "'general.alignment': type i32, expected u32");
    bad32(&b, align->val, 64, "alignment", "not a multiple of the alignment 64");
    /* Duplicate key: test.key_b -> test.key_a. */
    uint8_t *p = malloc(b.len);
    memcpy(p, b.p, b.len);
    p[kb->key_len + 8 + 9] = 'a';
    expect_bad(p, b.len, "duplicate key", "'test.key_a': duplicate key");
    free(p);
    free(b.p);
}

static void test_tensor_corruptions(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    uint64_t size = b.len;
    const ti_pos *emb = ti_named(&l, "token_embd.weight");
    const ti_pos *k = ti_named(&l, "blk.0.attn_k.weight"); /* q8_0 */
    const ti_pos *norm = ti_named(&l, "output_norm.weight");
    const ti_pos *last = ti_named(&l, "output.weight");
    const uint64_t huge[] = {UINT64_MAX, 1ull << 63, 1ull << 40, size};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        bad64(&b, emb->name_len, huge[i], "tensor name length", "tensor #0 name: string length");
        bad64(&b, emb->ne[1], huge[i], "token_embd ne[1]", "'token_embd.weight'");
        bad64(&b, norm->ne[0], huge[i], "norm ne[0]", "'output_norm.weight'");
        bad64(&b, last->offset, huge[i] & ~31ull, "output offset", "tensor 'output.weight': data offset");
    }
    bad64(&b, emb->name_len, 0, "tensor name length", "tensor #0 '': empty tensor name");
    bad64(&b, emb->name_len, 64, "tensor name length", "at most 63");
    const uint32_t bad_dims[] = {0, 5, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++)
        bad32(&b, emb->n_dims, bad_dims[i], "n_dims", "tensor #0 'token_embd.weight': n_dims");
    bad64(&b, emb->ne[0], 0, "ne[0]", "'token_embd.weight': ne[0] = 0 (must be positive)");
    bad64(&b, emb->ne[1], 0, "ne[1]", "'token_embd.weight': ne[1] = 0");
    bad64(&b, emb->ne[0], UINT64_MAX, "ne[0]", "ne[0] = -1");
    bad64(&b, emb->ne[1], (uint64_t)INT64_MAX, "ne[1]", "element count overflows");
    bad64(&b, emb->ne[1], 1ull << 62, "ne[1]", "overflows");
    bad64(&b, norm->ne[0], 1ull << 62, "norm ne[0] (row bytes wrap)", "overflows");
    bad64(&b, k->ne[0], 33, "q8_0 ne[0]", "'blk.0.attn_k.weight': ne[0] = 33 is not a multiple of the q8_0 block size 32");
    bad64(&b, k->ne[1], 15, "attn_k ne[1]", "tensor 'blk.0.attn_k.weight': shape [32, 15] but the config needs [32, 16]");
    bad64(&b, emb->ne[1], 9, "token_embd ne[1]", "shape [32, 9] but the config needs [32, 8]");
    bad32(&b, emb->n_dims, 1, "token_embd n_dims 1", NULL);
    const uint32_t bad_types[] = {4, 5, 31, 38, 40, 1000, UINT32_MAX}; /* 39: mxfp4 */
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++)
        bad32(&b, emb->type, bad_types[i], "tensor type", "tensor #0 'token_embd.weight': unknown tensor type");
    bad32(&b, emb->type, SLM_I32, "tensor type", "type i32 is not supported for matrices");
    bad32(&b, k->type, SLM_Q4_K, "tensor type", "not a multiple of the q4_k block size 256");
    bad32(&b, k->type, SLM_Q2_K, "tensor type", "not a multiple of the q2_k block size 256");
    bad32(&b, k->type, SLM_IQ4_XS, "tensor type", "not a multiple of the iq4_xs block size 256");
    bad32(&b, emb->type, SLM_Q8_1, "tensor type", "type q8_1 is not supported for matrices (supported: f32, f16, bf16, "
          "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs, iq2_xxs, iq2_xs, iq2_s, "
          "iq3_xxs, iq3_s, iq1_s, iq1_m, mxfp4)");
    bad32(&b, k->type, SLM_IQ2_XXS, "tensor type", "not a multiple of the iq2_xxs block size 256");
    bad32(&b, k->type, SLM_IQ1_M, "tensor type", "not a multiple of the iq1_m block size 256");
    bad32(&b, norm->type, SLM_F16, "norm type", "f32 only");
    bad64(&b, emb->offset, 1, "offset", "data offset 0x1 is not a multiple of the alignment 32");
    bad64(&b, emb->offset, 16, "offset", "not a multiple of the alignment");
    bad64(&b, last->offset, get_u64(b.p, last->offset) + 32, "offset", "tensor 'output.weight': data offset");
    bad64(&b, last->offset, UINT64_MAX - 31, "offset (overflow)", "beyond end of file");
    /* Duplicate tensor name: attn_k -> attn_q (same length). */
    uint8_t *p = malloc(b.len);
    memcpy(p, b.p, b.len);
    p[k->name_len + 8 + 11] = 'q';
    expect_bad(p, b.len, "duplicate tensor", "tensor #3 'blk.0.attn_q.weight': duplicate tensor name");
    free(p);
    free(b.p);
}

/* The one architecture list: every name found again by slm_arch_find, the
 * message string SLM_SUPPORTED_ARCHS the same names in the same order. */
static void test_arch_list(void) {
    char joined[256] = "";
    for (int a = 0; a < SLM_ARCH_COUNT; a++) {
        const char *n = slm_arch_name(a);
        CHECKF(n && slm_arch_find(n, strlen(n)) == a, "arch %d", a);
        if (!n) continue;
        if (a) strcat(joined, ", ");
        strcat(joined, n);
    }
    CHECKF(!strcmp(joined, SLM_SUPPORTED_ARCHS), "'%s' vs '%s'", joined, SLM_SUPPORTED_ARCHS);
    CHECK(slm_arch_name(-1) == NULL && slm_arch_name(SLM_ARCH_COUNT) == NULL);
    CHECK(slm_arch_find("llam", 4) < 0 && slm_arch_find("llamas", 6) < 0 && slm_arch_find("qwen3xyz", 5) == SLM_ARCH_QWEN3);
}

static void test_model_key_errors(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    o.arch = "falcon";
    build(&b, &l, &o);
    expect_bad_ex(b.p, b.len, "arch falcon", "corrupt.gguf: architecture 'falcon' is not supported (supported: " SLM_SUPPORTED_ARCHS ")",
                  SLM_ERR_UNSUPPORTED);
    static const char *const required[] = {"general.architecture", "llama.embedding_length",
                                           "llama.feed_forward_length", "llama.block_count",
                                           "llama.attention.head_count", "llama.context_length"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        opts oi = {0};
        oi.skip_key = required[i];
        build(&b, &l, &oi);
        char needle[128];
        snprintf(needle, sizeof needle, "missing required key '%s'", required[i]);
        expect_bad(b.p, b.len, required[i], needle);
    }
    for (int j = 0; j < N_TENSORS - 1; j++) { /* output.weight is optional */
        opts oj = {0};
        oj.skip_tensor = k_tensors[j].name;
        build(&b, &l, &oj);
        char needle[128];
        snprintf(needle, sizeof needle, "missing tensor '%s'", k_tensors[j].name);
        expect_bad(b.p, b.len, k_tensors[j].name, needle);
    }
    opts ou = {0};
    ou.up_ne1 = 100;
    build(&b, &l, &ou);
    expect_bad(b.p, b.len, "ffn_up shape",
               "corrupt.gguf: tensor 'blk.0.ffn_up.weight': shape [32, 100] but the config needs [32, 64]");
    /* Config values out of range / of the wrong type. */
    opts ok = {0};
    build(&b, &l, &ok);
    bad32(&b, kv_named(&l, "llama.block_count")->val, 0, "block_count", "'llama.block_count': 0 is out of range");
    bad32(&b, kv_named(&l, "llama.block_count")->val, (uint32_t)-1, "block_count", "'llama.block_count': -1 is out of range");
    bad32(&b, kv_named(&l, "llama.embedding_length")->val, 30, "embedding_length", NULL);
    bad32(&b, kv_named(&l, "llama.embedding_length")->type, SLM_GGUF_F32, "embedding_length type",
          "'llama.embedding_length': expected an integer");
    bad32(&b, kv_named(&l, "llama.rope.freq_base")->type, SLM_GGUF_U32, "freq_base type", "'llama.rope.freq_base': expected a float");
    bad32(&b, kv_named(&l, "llama.rope.freq_base")->val, 0, "freq_base", "rope_base");
    free(b.p);
}

/* Random byte flips in the header region: any outcome but a crash. */
static void test_random_flips(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    uint8_t *p = malloc(b.len);
    uint32_t rng = 12345;
    int failed = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(p, b.p, b.len);
        for (int f = 0; f < 1 + it % 4; f++) {
            rng = rng * 1664525u + 1013904223u;
            size_t at = (rng >> 8) % l.data;
            rng = rng * 1664525u + 1013904223u;
            p[at] = (uint8_t)(rng >> 24);
        }
        slm_err err = {0};
        g_live = g_peak = 0;
        slm_set_allocator(&k_counting);
        slm_status s = open_image(p, b.len, "flip.gguf", &err);
        slm_set_allocator(NULL);
        if (s) {
            failed++;
            CHECKF(strncmp(err.msg, "flip.gguf: ", 11) == 0, "%s", err.msg);
        }
        CHECK(g_live == 0);
        CHECK(g_peak <= 16 * b.len + 4096);
    }
    CHECK(failed > 1000);
    free(p);
    free(b.p);
}

/* Fail the Nth allocation of a GGUF open, load and write: NOMEM, no leak. */
static void test_alloc_failures(void) {
    buf b = {0};
    layout l;
    opts o = {0};
    build(&b, &l, &o);
    int saw_ok = 0;
    for (long n = 0; n < 64 && !saw_ok; n++) {
        slm_err err = {0};
        g_live = g_peak = 0;
        g_n_allocs = 0;
        g_fail_at = n;
        slm_set_allocator(&k_counting);
        slm_status s = open_image(b.p, b.len, "nomem.gguf", &err);
        slm_set_allocator(NULL);
        g_fail_at = -1;
        CHECKF(s == SLM_OK || s == SLM_ERR_NOMEM, "fail at %ld: %s", n, err.msg);
        CHECKF(g_live == 0, "fail at %ld: leaked %zu", n, g_live);
        saw_ok = s == SLM_OK;
    }
    CHECK(saw_ok);
    char path[512];
    tmp_path(path, sizeof path, "nomem_out.gguf");
    float x[64] = {0};
    int64_t ne[2] = {32, 2};
    saw_ok = 0;
    for (long n = 0; n < 64 && !saw_ok; n++) {
        slm_err err = {0};
        g_live = g_peak = 0;
        g_n_allocs = 0;
        g_fail_at = n;
        slm_set_allocator(&k_counting);
        slm_gguf_writer *w = slm_gguf_writer_new();
        slm_status s = SLM_ERR_NOMEM;
        if (w) {
            for (int i = 0; i < 40; i++) {
                char key[32];
                snprintf(key, sizeof key, "key.%d", i);
                slm_gguf_set_str(w, key, "some value that takes space");
            }
            const char *strs[2] = {"a", "b"};
            uint64_t lens[2] = {1, 1};
            slm_gguf_set_arr_str(w, "arr", strs, lens, 2);
            slm_gguf_add_tensor(w, "t", SLM_F32, 2, ne, x, sizeof x);
            s = slm_gguf_write(w, path, &err);
            slm_gguf_writer_free(w);
        }
        slm_set_allocator(NULL);
        g_fail_at = -1;
        CHECKF(s == SLM_OK || s == SLM_ERR_NOMEM, "writer fail at %ld: %s", n, err.msg);
        CHECKF(g_live == 0, "writer fail at %ld: leaked %zu", n, g_live);
        saw_ok = s == SLM_OK;
    }
    CHECK(saw_ok);
    CHECK(no_temp_files());
    unlink(path);
    free(b.p);
}

/* ---- the writer ---------------------------------------------------------- */

static int no_temp_files(void) {
    DIR *d = opendir(g_dir);
    int ok = 1;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) ok = 0;
    if (d) closedir(d);
    return ok;
}

static void test_writer_roundtrip(void) {
    enum { DIM = 64, HID = 96, L = 2, VOC = 40, KV = 32 };
    uint32_t rng = 7;
    slm_gguf_writer *w = slm_gguf_writer_new();
    CHECK(w != NULL);
    if (!w) return;
    /* metadata: every setter, arrays of every numeric type */
    CHECK(slm_gguf_set_str(w, "general.architecture", "llama") == SLM_OK);
    CHECK(slm_gguf_set_str(w, "general.name", "roundtrip \xe2\x96\x81 model") == SLM_OK);
    CHECK(slm_gguf_set_u32(w, "llama.embedding_length", DIM) == SLM_OK);
    CHECK(slm_gguf_set_i32(w, "llama.block_count", L) == SLM_OK);
    CHECK(slm_gguf_set_u32(w, "llama.feed_forward_length", HID) == SLM_OK);
    CHECK(slm_gguf_set_u32(w, "llama.attention.head_count", 8) == SLM_OK);
    CHECK(slm_gguf_set_u32(w, "llama.attention.head_count_kv", 4) == SLM_OK);
    CHECK(slm_gguf_set_u32(w, "llama.context_length", 128) == SLM_OK);
    CHECK(slm_gguf_set_f32(w, "llama.rope.freq_base", 10000.0f) == SLM_OK);
    CHECK(slm_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f) == SLM_OK);
    CHECK(slm_gguf_set_i32(w, "test.neg", -123456) == SLM_OK);
    CHECK(slm_gguf_set_bool(w, "test.true", 7) == SLM_OK);
    CHECK(slm_gguf_set_bool(w, "test.false", 0) == SLM_OK);
    CHECK(slm_gguf_set_str(w, "test.empty", "") == SLM_OK);
    uint8_t a_u8[3] = {1, 2, 255};
    int8_t a_i8[2] = {-1, 5};
    uint16_t a_u16[2] = {65535, 7};
    int16_t a_i16[2] = {-32768, 9};
    uint32_t a_u32[2] = {UINT32_MAX, 0};
    int32_t a_i32[3] = {INT32_MIN, 0, INT32_MAX};
    float a_f32[2] = {1.5f, -0.0f};
    uint8_t a_bool[2] = {1, 0};
    uint64_t a_u64[1] = {UINT64_MAX};
    int64_t a_i64[2] = {INT64_MIN, 42};
    double a_f64[2] = {3.141592653589793, -1e300};
    struct { const char *key; slm_gguf_type t; const void *d; uint64_t n, sz; } arrs[] = {
        {"arr.u8", SLM_GGUF_U8, a_u8, 3, 1},     {"arr.i8", SLM_GGUF_I8, a_i8, 2, 1},
        {"arr.u16", SLM_GGUF_U16, a_u16, 2, 2},  {"arr.i16", SLM_GGUF_I16, a_i16, 2, 2},
        {"arr.u32", SLM_GGUF_U32, a_u32, 2, 4},  {"arr.i32", SLM_GGUF_I32, a_i32, 3, 4},
        {"arr.f32", SLM_GGUF_F32, a_f32, 2, 4},  {"arr.bool", SLM_GGUF_BOOL, a_bool, 2, 1},
        {"arr.u64", SLM_GGUF_U64, a_u64, 1, 8},  {"arr.i64", SLM_GGUF_I64, a_i64, 2, 8},
        {"arr.f64", SLM_GGUF_F64, a_f64, 2, 8},  {"arr.empty", SLM_GGUF_F32, NULL, 0, 4},
    };
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++)
        CHECK(slm_gguf_set_arr(w, arrs[i].key, arrs[i].t, arrs[i].d, arrs[i].n) == SLM_OK);
    const char *strs[4] = {"hello", "", "nul\0inside", "\xe2\x96\x81x"};
    uint64_t lens[4] = {5, 0, 10, 4};
    CHECK(slm_gguf_set_arr_str(w, "arr.str", strs, lens, 4) == SLM_OK);
    char **toks = malloc(VOC * sizeof *toks);
    uint64_t tlens[VOC];
    for (int i = 0; i < VOC; i++) {
        toks[i] = malloc(16);
        tlens[i] = (uint64_t)snprintf(toks[i], 16, "tok%d", i);
    }
    CHECK(slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, tlens, VOC) == SLM_OK);

    /* tensors: f32, f16 and q8_0 with random bytes (q8_0 scales kept finite) */
    struct { char name[64]; uint32_t type; uint32_t nd; int64_t ne[2]; uint8_t *data; uint64_t nbytes; } ts[64];
    int nts = 0;
    const char *per[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                         "ffn_norm", "ffn_gate", "ffn_down", "ffn_up"};
    const int64_t shp[9][2] = {{DIM, 1}, {DIM, DIM}, {DIM, KV}, {DIM, KV}, {DIM, DIM},
                               {DIM, 1}, {DIM, HID}, {HID, DIM}, {DIM, HID}};
    const uint32_t types3[3] = {SLM_F32, SLM_F16, SLM_Q8_0};
    for (int t = -1; t <= L; t++) {
        int count = (t < 0 || t == L) ? 2 : 9;
        for (int j = 0; j < count; j++) {
            if (t < 0 && j == 1) break;
            if (t < 0) snprintf(ts[nts].name, 64, "token_embd.weight"), ts[nts].ne[0] = DIM, ts[nts].ne[1] = VOC;
            else if (t == L && j == 0) snprintf(ts[nts].name, 64, "output_norm.weight"), ts[nts].ne[0] = DIM, ts[nts].ne[1] = 1;
            else if (t == L) snprintf(ts[nts].name, 64, "output.weight"), ts[nts].ne[0] = DIM, ts[nts].ne[1] = VOC;
            else snprintf(ts[nts].name, 64, "blk.%d.%s.weight", t, per[j]), ts[nts].ne[0] = shp[j][0], ts[nts].ne[1] = shp[j][1];
            int vec = ts[nts].ne[1] == 1;
            ts[nts].nd = vec ? 1 : 2;
            ts[nts].type = vec ? SLM_F32 : types3[nts % 3];
            ts[nts].nbytes = slm_row_bytes(ts[nts].type, (uint64_t)ts[nts].ne[0]) * (uint64_t)ts[nts].ne[1];
            ts[nts].data = malloc(ts[nts].nbytes);
            for (uint64_t x = 0; x < ts[nts].nbytes; x++) {
                rng = rng * 1664525u + 1013904223u;
                ts[nts].data[x] = (uint8_t)(rng >> 24);
            }
            CHECK(slm_gguf_add_tensor(w, ts[nts].name, ts[nts].type, ts[nts].nd, ts[nts].ne, ts[nts].data,
                                      ts[nts].nbytes) == SLM_OK);
            nts++;
        }
    }
    char path[512];
    tmp_path(path, sizeof path, "written.gguf");
    slm_err err = {0};
    CHECK(t_write_file(path, "old contents", 12)); /* replaced atomically */
    slm_status s = slm_gguf_write(w, path, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    CHECK(no_temp_files());
    slm_gguf_writer_free(w);

    slm_model_file m;
    s = slm_model_open(&m, path, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s == SLM_OK) {
        const slm_gguf *g = m.gguf;
        CHECK(slm_gguf_version(g) == 3 && slm_gguf_alignment(g) == 32);
        CHECK(m.cfg.dim == DIM && m.cfg.n_layers == L && m.cfg.hidden_dim == HID && m.cfg.n_kv_heads == 4);
        CHECK(m.cfg.vocab_size == VOC && m.cfg.context_len == 128 && !m.cfg.tied_embeddings);
        slm_gguf_str str;
        int64_t i64;
        int bo;
        CHECK(slm_gguf_get_str(g, "general.name", &str) && slm_gguf_str_eq(str, "roundtrip \xe2\x96\x81 model"));
        CHECK(slm_gguf_get_str(g, "test.empty", &str) && str.len == 0);
        CHECK(slm_gguf_get_i64(g, "test.neg", &i64) && i64 == -123456);
        CHECK(slm_gguf_get_bool(g, "test.true", &bo) && bo == 1);
        CHECK(slm_gguf_get_bool(g, "test.false", &bo) && bo == 0);
        CHECK(slm_gguf_kv_type(g, slm_gguf_find(g, "llama.block_count")) == SLM_GGUF_I32);
        for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
            slm_gguf_type et;
            uint64_t n;
            const void *d;
            CHECKF(slm_gguf_get_arr(g, arrs[i].key, &et, &n, &d) && et == arrs[i].t && n == arrs[i].n, "%s",
                   arrs[i].key);
            if (arrs[i].n) CHECKF(memcmp(d, arrs[i].d, (size_t)(arrs[i].n * arrs[i].sz)) == 0, "%s", arrs[i].key);
        }
        for (int i = 0; i < 4; i++)
            CHECK(slm_gguf_arr_str(g, "arr.str", (uint64_t)i, &str) && str.len == lens[i] &&
                  memcmp(str.s, strs[i], (size_t)lens[i]) == 0);
        for (int i = 0; i < VOC; i++)
            CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &str) && slm_gguf_str_eq(str, toks[i]));
        CHECK(slm_gguf_n_tensors(g) == (uint64_t)nts);
        const uint8_t *data0 = NULL;
        for (int i = 0; i < nts; i++) {
            const slm_tensor *t = slm_model_tensor(&m, ts[i].name);
            CHECKF(t != NULL, "%s", ts[i].name);
            if (!t) continue;
            CHECK(t->type == ts[i].type && t->n_dims == ts[i].nd && t->ne[0] == ts[i].ne[0] && t->ne[1] == ts[i].ne[1]);
            CHECK(t->nbytes == ts[i].nbytes && memcmp(t->data, ts[i].data, ts[i].nbytes) == 0);
            CHECK(((const uint8_t *)t->data - (const uint8_t *)m.map.data) % 32 == 0);
            if (i == 0) data0 = t->data;
            CHECK(slm_gguf_tensor_at(g, (uint64_t)i)->offset == (uint64_t)((const uint8_t *)t->data - data0));
        }
        slm_model_close(&m);
    }
    for (int i = 0; i < nts; i++) free(ts[i].data);
    for (int i = 0; i < VOC; i++) free(toks[i]);
    free(toks);
    unlink(path);
}

static void test_writer_errors(void) {
    slm_err err = {0};
    char path[512];
    tmp_path(path, sizeof path, "never.gguf");
    float x[32] = {0};
    int64_t ne[2] = {32, 1};

    slm_gguf_writer *w = slm_gguf_writer_new();
    CHECK(slm_gguf_set_u32(w, "a", 1) == SLM_OK);
    CHECK(slm_gguf_set_u32(w, "a", 2) == SLM_ERR_ARG);
    CHECK(slm_gguf_write(w, path, &err) == SLM_ERR_ARG && strstr(err.msg, "duplicate metadata key 'a'"));
    slm_gguf_writer_free(w);

    w = slm_gguf_writer_new();
    CHECK(slm_gguf_add_tensor(w, "t", SLM_F32, 1, ne, x, 100) == SLM_ERR_ARG);
    CHECK(slm_gguf_write(w, path, &err) == SLM_ERR_ARG && strstr(err.msg, "'t'"));
    slm_gguf_writer_free(w);

    w = slm_gguf_writer_new();
    CHECK(slm_gguf_add_tensor(w, "t", SLM_F32, 1, ne, x, 128) == SLM_OK);
    CHECK(slm_gguf_add_tensor(w, "t", SLM_F32, 1, ne, x, 128) == SLM_ERR_ARG);
    slm_gguf_writer_free(w);

    w = slm_gguf_writer_new();
    int64_t ne33[1] = {33};
    CHECK(slm_gguf_add_tensor(w, "q", SLM_Q8_0, 1, ne33, x, 34) == SLM_ERR_ARG);
    slm_gguf_writer_free(w);

    w = slm_gguf_writer_new();
    CHECK(slm_gguf_add_tensor(w, "t", SLM_F32, 2, ne, x, 128) == SLM_OK);
    CHECK(slm_gguf_write(w, "/nonexistent/dir/out.gguf", &err) == SLM_ERR_IO);
    CHECK(strstr(err.msg, "/nonexistent/dir/out.gguf") != NULL);
    slm_gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0);
    CHECK(no_temp_files());
    slm_gguf_writer_free(NULL);
}

/* ---- staticlm convert ---------------------------------------------------- */

static int run_cli(const char *args, const char *log) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "\"%s\" %s >\"%s\" 2>&1", SLM_CLI_PATH, args, log);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_convert_cli_errors(void) {
    char log[512], out[512], args[1536];
    tmp_path(log, sizeof log, "cli.log");
    tmp_path(out, sizeof out, "cli_out.gguf");
    CHECK(run_cli("convert --help", log) == 0);
    char *txt = t_read_file(log, NULL);
    CHECK(txt && strstr(txt, "usage: staticlm convert"));
    free(txt);
    CHECK(run_cli("convert", log) == 2);
    CHECK(run_cli("convert -m", log) == 2);
    CHECK(run_cli("convert --bogus x", log) == 2);
    snprintf(args, sizeof args, "convert -m /nonexistent/m.bin -z %s -o %s", T_SHARED("models/tok512.bin"), out);
    CHECK(run_cli(args, log) == 1);
    txt = t_read_file(log, NULL);
    CHECK(txt && strstr(txt, "m.bin"));
    free(txt);
    snprintf(args, sizeof args, "convert -m %s -z %s -o %s --type q4_0", T_SHARED("models/stories260K.bin"),
             T_SHARED("models/tok512.bin"), out);
    CHECK(run_cli(args, log) == 2); /* a bad option value: a usage error */
    snprintf(args, sizeof args, "convert -m %s -o %s", T_SHARED("models/stories260K.bin"), out);
    CHECK(run_cli(args, log) == 1); /* no tokenizer */
    snprintf(args, sizeof args, "convert -m %s -z %s -o %s", T_SHARED("models/stories260K.bin"),
             T_SHARED("models/llama2-tokenizer.bin"), out);
    (void)run_cli(args, log); /* a 32000-token file holds >= 512 records: accepted or not, no crash */
    snprintf(args, sizeof args, "convert -m %s -z %s -o /nonexistent/dir/x.gguf", T_SHARED("models/stories260K.bin"),
             T_SHARED("models/tok512.bin"));
    CHECK(run_cli(args, log) == 1);
    unlink(log);
    unlink(out);
}

static float max_abs_diff_row(uint32_t type, const void *data, const float *ref, int64_t n) {
    float *row = malloc((size_t)n * sizeof *row), m = 0;
    slm_dequantize_row(type, data, row, n);
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(row[i] - ref[i]));
    free(row);
    return m;
}

static void check_converted(const char *type, const slm_model_file *src, const slm_tokenizer *tok) {
    char out[512], log[512], args[1536];
    snprintf(out, sizeof out, "%s/stories260K_%s.gguf", g_dir, type);
    tmp_path(log, sizeof log, "convert.log");
    snprintf(args, sizeof args, "convert -m %s -z %s -o %s --type %s", T_SHARED("models/stories260K.bin"),
             T_SHARED("models/tok512.bin"), out, type);
    int rc = run_cli(args, log);
    char *txt = t_read_file(log, NULL);
    CHECKF(rc == 0, "convert %s: rc %d: %s", type, rc, txt ? txt : "");
    if (!strcmp(type, "q8_0")) CHECKF(txt && strstr(txt, "blk.0.ffn_down.weight") && strstr(txt, "f16"), "%s", txt);
    free(txt);
    unlink(log);
    if (rc) return;

    slm_model_file m;
    slm_err err = {0};
    slm_status s = slm_model_open(&m, out, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s) return;
    const slm_gguf *g = m.gguf;
    CHECK(slm_gguf_version(g) == 3);
    CHECK(m.cfg.dim == 64 && m.cfg.hidden_dim == 172 && m.cfg.n_layers == 5 && m.cfg.n_heads == 8);
    CHECK(m.cfg.n_kv_heads == 4 && m.cfg.vocab_size == 512 && m.cfg.context_len == 512 && m.cfg.tied_embeddings);
    CHECK(m.cfg.rope_base == 10000.0f && m.cfg.norm_eps == 1e-5f);
    slm_gguf_str str;
    uint32_t u;
    CHECK(slm_gguf_get_str(g, "general.architecture", &str) && slm_gguf_str_eq(str, "llama"));
    CHECK(slm_gguf_get_str(g, "general.name", &str) && slm_gguf_str_eq(str, "stories260K"));
    uint32_t want_ft = !strcmp(type, "f32") ? 0 : !strcmp(type, "f16") ? 1 : 7;
    CHECK(slm_gguf_get_u32(g, "general.file_type", &u) && u == want_ft);
    CHECK(slm_gguf_get_u32(g, "llama.rope.dimension_count", &u) && u == 8);
    CHECK(slm_gguf_get_u32(g, "llama.vocab_size", &u) && u == 512);
    CHECK(slm_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u) && u == 1);
    CHECK(slm_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &u) && u == 2);
    CHECK(slm_gguf_get_u32(g, "tokenizer.ggml.unknown_token_id", &u) && u == 0);
    CHECK(slm_gguf_get_str(g, "tokenizer.ggml.model", &str) && slm_gguf_str_eq(str, "llama"));
    slm_gguf_type et;
    uint64_t n;
    const void *types, *scores;
    CHECK(slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n, &types) && et == SLM_GGUF_I32 && n == 512);
    CHECK(slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n, &scores) && et == SLM_GGUF_F32 && n == 512);
    CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 0, &str) && slm_gguf_str_eq(str, "<unk>"));
    CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 1, &str) && slm_gguf_str_eq(str, "<s>"));
    CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 2, &str) && slm_gguf_str_eq(str, "</s>"));
    CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 3, &str) && slm_gguf_str_eq(str, "<0x00>"));
    CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 258, &str) && slm_gguf_str_eq(str, "<0xFF>"));
    CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 259, &str) && slm_gguf_str_eq(str, "\xe2\x96\x81t"));
    CHECK(slm_gguf_arr_str(g, "tokenizer.ggml.tokens", 410, &str) && slm_gguf_str_eq(str, "\xe2\x96\x81"));
    int32_t ty[512];
    float sc[512];
    if (types) memcpy(ty, types, sizeof ty);
    if (scores) memcpy(sc, scores, sizeof sc);
    CHECK(ty[0] == 2 && ty[1] == 3 && ty[2] == 3 && ty[3] == 6 && ty[258] == 6 && ty[259] == 1 && ty[511] == 1);
    for (int i = 0; tok && i < 512; i++) CHECK(sc[i] == slm_tok_score(tok, i));

    /* Tensors: norms stay f32 and exact; matrices within the type's error. */
    uint32_t mt = !strcmp(type, "f32") ? SLM_F32 : !strcmp(type, "f16") ? SLM_F16 : SLM_Q8_0;
    CHECK(m.n_tensors == src->n_tensors);
    for (int i = 0; i < src->n_tensors; i++) {
        const slm_tensor *a = &src->tensors[i], *b = slm_model_tensor(&m, a->name);
        CHECKF(b != NULL, "%s", a->name);
        if (!b) continue;
        CHECK(b->ne[0] == a->ne[0] && b->ne[1] == a->ne[1] && b->n_dims == a->n_dims);
        uint32_t want = a->n_dims == 1 ? SLM_F32 : (mt == SLM_Q8_0 && a->ne[0] % 32) ? SLM_F16 : mt;
        CHECKF(b->type == want, "%s: type %s", a->name, slm_dtype_name(b->type));
        float tol = want == SLM_F32 ? 0.0f : want == SLM_F16 ? 1e-3f : 0.02f;
        uint64_t rb = slm_row_bytes(b->type, (uint64_t)b->ne[0]);
        float worst = 0;
        for (int64_t r = 0; r < a->ne[1]; r++)
            worst = fmaxf(worst, max_abs_diff_row(b->type, (const uint8_t *)b->data + (uint64_t)r * rb,
                                                  (const float *)a->data + r * a->ne[0], a->ne[0]));
        CHECKF(worst <= tol, "%s: max |diff| %g > %g", a->name, (double)worst, (double)tol);
    }

    /* The GGUF's vocabulary tokenizes like tok512.bin. */
    slm_tokenizer *gt = NULL;
    s = slm_tok_load_gguf(&gt, g, "stories260K.gguf", &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s == SLM_OK && tok) {
        const char *texts[] = {"Once upon a time, there was a little girl named Lily.", "", "  two  spaces\tand tab",
                               "caf\xc3\xa9 \xf0\x9f\x98\x80 emoji"};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            int32_t x[256], y[256];
            int nx = slm_tok_encode(tok, texts[i], 1, 0, x, 256), ny = slm_tok_encode(gt, texts[i], 1, 0, y, 256);
            CHECKF(nx == ny && nx > 0 && nx <= 256 && memcmp(x, y, (size_t)nx * 4) == 0, "encode '%s': %d vs %d",
                   texts[i], nx, ny);
        }
        CHECK(slm_tok_bos(gt) == 1 && slm_tok_eos(gt) == 2);
    }
    slm_tok_free(gt);
    slm_model_close(&m);

    /* Converting the GGUF again (its own vocabulary) gives the same tensors. */
    if (!strcmp(type, "f16")) {
        char out2[512];
        snprintf(out2, sizeof out2, "%s/again.gguf", g_dir);
        snprintf(args, sizeof args, "convert -m %s -o %s --type f16", out, out2);
        tmp_path(log, sizeof log, "convert2.log");
        rc = run_cli(args, log);
        CHECK(rc == 0);
        slm_model_file m1, m2;
        if (rc == 0 && slm_model_open(&m1, out, &err) == SLM_OK) {
            if (slm_model_open(&m2, out2, &err) == SLM_OK) {
                for (int i = 0; i < m1.n_tensors; i++) {
                    const slm_tensor *b = slm_model_tensor(&m2, m1.tensors[i].name);
                    CHECK(b && b->nbytes == m1.tensors[i].nbytes && memcmp(b->data, m1.tensors[i].data, b->nbytes) == 0);
                }
                slm_gguf_str s1, s2;
                for (uint64_t i = 0; i < 512; i++)
                    CHECK(slm_gguf_arr_str(m1.gguf, "tokenizer.ggml.tokens", i, &s1) &&
                          slm_gguf_arr_str(m2.gguf, "tokenizer.ggml.tokens", i, &s2) && s1.len == s2.len &&
                          memcmp(s1.s, s2.s, (size_t)s1.len) == 0);
                slm_model_close(&m2);
            }
            slm_model_close(&m1);
        }
        unlink(out2);
        unlink(log);
    }
    unlink(out);
}

static void test_convert_stories260k(void) {
    slm_model_file src;
    slm_err err = {0};
    slm_status s = slm_model_open(&src, T_SHARED("models/stories260K.bin"), &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    if (s) return;
    slm_tokenizer *tok = NULL;
    s = slm_tok_load_llama2c(&tok, T_SHARED("models/tok512.bin"), 512, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    check_converted("f32", &src, tok);
    check_converted("f16", &src, tok);
    check_converted("q8_0", &src, tok);
    slm_tok_free(tok);
    slm_model_close(&src);
    CHECK(no_temp_files());
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/slm_test_gguf_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    T_RUN(test_reader_values);
    T_RUN(test_model_from_gguf);
    T_RUN(test_truncations);
    T_RUN(test_header_corruptions);
    T_RUN(test_kv_corruptions);
    T_RUN(test_tensor_corruptions);
    T_RUN(test_arch_list);
    T_RUN(test_model_key_errors);
    T_RUN(test_random_flips);
    T_RUN(test_alloc_failures);
    T_RUN(test_writer_roundtrip);
    T_RUN(test_writer_errors);
    T_RUN(test_convert_cli_errors);
    T_RUN(test_convert_stories260k);
    fprintf(stderr, "%d corrupt images rejected\n", g_cases);
    rmdir(g_dir);
    T_DONE();
}
