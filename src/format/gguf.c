/* GGUF v2/v3 reader.
 *
 * The file is parsed once at open, front to back, through a bounded reader:
 * every count, length, type, shape and offset is checked against the bytes
 * that remain before it is used, with overflow-checked arithmetic. Nothing is
 * copied: keys, strings and tensor data are views into the caller's image.
 * Keys and tensor names go into open-addressing hash tables (duplicates are
 * refused, lookups are O(1)); string arrays are indexed so that
 * slm_gguf_arr_str is O(1).
 *
 * Layout (little-endian):
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv   x { string key, u32 type, value }
 *   n_tensors x { string name, u32 n_dims, n_dims x u64 ne, u32 type, u64 offset }
 *   padding to general.alignment (default 32), then the data section.
 * A string is u64 len + len bytes; an array is u32 elem type + u64 n + n elems.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "format/gguf.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u
#define GGUF_MAX_NAME 64u /* tensor names are < 64 bytes (GGML_MAX_NAME) */

/* The smallest encodings, used to refuse counts that cannot fit in the bytes
 * left before anything is allocated for them. */
#define GGUF_MIN_KV_BYTES 13u     /* u64 key len + u32 type + 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 32u /* u64 name len + u32 n_dims + u64 ne + u32 type + u64 off */
#define GGUF_MIN_STRING_BYTES 8u  /* u64 len */

typedef struct gguf_kv {
    slm_gguf_str key;
    uint32_t type;       /* slm_gguf_type */
    uint32_t elem_type;  /* arrays: element type */
    uint64_t n;          /* arrays: element count; strings: byte length */
    const uint8_t *val;  /* scalars: the value bytes; strings: the chars;
                            arrays: the first element */
    slm_gguf_str *strs;  /* string arrays: [n] views; NULL otherwise */
} gguf_kv;

struct slm_gguf {
    const uint8_t *base;      /* the image, [size] bytes, owned by the caller */
    uint64_t size;            /* bytes */
    char name[128];           /* for messages */
    uint32_t version;         /* 2 or 3 */
    uint32_t alignment;       /* bytes, power of two */
    uint64_t data_offset;     /* bytes from the start of the image */
    uint64_t n_kv;
    gguf_kv *kv;              /* [n_kv] */
    uint64_t n_tensors;
    slm_gguf_tensor *tensors; /* [n_tensors] */
    uint64_t *kv_hash;        /* [kv_hash_cap] kv index + 1; 0 = empty */
    uint64_t kv_hash_cap;     /* power of two >= 2 * n_kv */
    uint64_t *t_hash;         /* [t_hash_cap] tensor index + 1; 0 = empty */
    uint64_t t_hash_cap;
    uint64_t seed;            /* hash seed, drawn at open */
};

/* Element sizes of the scalar value types; 0 for string and array. */
static const uint8_t k_type_size[SLM_GGUF_TYPE_COUNT] = {
    [SLM_GGUF_U8] = 1,  [SLM_GGUF_I8] = 1,  [SLM_GGUF_U16] = 2, [SLM_GGUF_I16] = 2,
    [SLM_GGUF_U32] = 4, [SLM_GGUF_I32] = 4, [SLM_GGUF_F32] = 4, [SLM_GGUF_BOOL] = 1,
    [SLM_GGUF_U64] = 8, [SLM_GGUF_I64] = 8, [SLM_GGUF_F64] = 8,
};

static const char *const k_type_name[SLM_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

static const char *type_name(uint32_t t) { return t < SLM_GGUF_TYPE_COUNT ? k_type_name[t] : "?"; }

const char *slm_gguf_type_name(slm_gguf_type t) { return type_name((uint32_t)t); }

/* ---- helpers ------------------------------------------------------------ */

/* A printable, bounded copy of an untrusted string for messages. */
static const char *show(char *buf, size_t cap, const char *s, uint64_t len) {
    size_t o = 0;
    for (uint64_t i = 0; i < len && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = (c >= 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
    }
    if (o + 4 >= cap && len > o) {
        buf[o++] = '.';
        buf[o++] = '.';
        buf[o++] = '.';
    }
    buf[o] = 0;
    return buf;
}

/* The splitmix64 finalizer: every output bit depends on every input bit. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* FNV-1a from a per-open seed, then mixed: a file cannot be crafted so that
 * its names collide in the table (which would make loading quadratic)
 * without knowing the seed. */
static uint64_t hash_bytes(uint64_t seed, const char *s, uint64_t len) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (uint64_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return mix64(h ^ len);
}

static int str_eq(slm_gguf_str a, slm_gguf_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.s, b.s, (size_t)a.len) == 0);
}

int slm_gguf_str_eq(slm_gguf_str a, const char *b) {
    size_t n = strlen(b);
    return a.len == n && (n == 0 || memcmp(a.s, b, n) == 0);
}

/* Capacity for n entries at load <= 1/2. */
static uint64_t hash_cap(uint64_t n) {
    uint64_t cap = 8;
    while (cap < 2 * n) cap <<= 1;
    return cap;
}

/* Find `key` in a table whose entries name strings via get(i). Returns the
 * slot holding it, or the empty slot where it would go. */
typedef slm_gguf_str (*name_at_fn)(const slm_gguf *g, uint64_t i);

static slm_gguf_str kv_key_at(const slm_gguf *g, uint64_t i) { return g->kv[i].key; }
static slm_gguf_str tensor_name_at(const slm_gguf *g, uint64_t i) { return g->tensors[i].name; }

static uint64_t hash_slot(const slm_gguf *g, const uint64_t *tab, uint64_t cap, name_at_fn at,
                          slm_gguf_str key) {
    uint64_t mask = cap - 1;
    uint64_t i = hash_bytes(g->seed, key.s, key.len) & mask;
    while (tab[i] && !str_eq(at(g, tab[i] - 1), key)) i = (i + 1) & mask;
    return i;
}

static uint64_t hash_find(const slm_gguf *g, const uint64_t *tab, uint64_t cap, name_at_fn at,
                          const char *key) {
    if (!tab) return 0;
    slm_gguf_str k = {key, strlen(key)};
    return tab[hash_slot(g, tab, cap, at, k)]; /* index + 1, or 0 */
}

/* ---- parsing ------------------------------------------------------------ */

/* Read a string header and take a view of its bytes. `what` names the field
 * for the message ("kv #3 key"); elem >= 0 adds ": element N". */
static slm_status read_str(const slm_gguf *g, slm_rd *r, slm_gguf_str *out, const char *what, int64_t elem,
                           slm_err *err) {
    uint64_t len;
    uint64_t at = r->pos;
    const uint8_t *p;
    char el[40] = "";
    int ok_len = slm_rd_u64(r, &len);
    if (ok_len && slm_rd_ptr(r, len, &p)) {
        out->s = (const char *)p;
        out->len = len;
        return SLM_OK;
    }
    r->pos = at;
    if (elem >= 0) snprintf(el, sizeof el, ": element %lld", (long long)elem);
    if (!ok_len)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s%s: string length at offset 0x%llx beyond end of file (%llu bytes)",
                        g->name, what, el, (unsigned long long)at, (unsigned long long)g->size);
    return slm_errf(err, SLM_ERR_FORMAT, "%s: %s%s: string length %llu at offset 0x%llx beyond end of file (%llu bytes)",
                    g->name, what, el, (unsigned long long)len, (unsigned long long)at, (unsigned long long)g->size);
}

/* The name of item i (a kv's key, a tensor's name); what[cap] names the
 * place in messages, while read ("kv #3 key") and after ("kv #3
 * 'general.name'"). */
static slm_status read_name(const slm_gguf *g, slm_rd *r, const char *item, uint64_t i, const char *field,
                            slm_gguf_str *name, char *what, size_t cap, slm_err *err) {
    char nb[72];
    slm_status s;
    snprintf(what, cap, "%s #%llu %s", item, (unsigned long long)i, field);
    if ((s = read_str(g, r, name, what, -1, err))) return s;
    snprintf(what, cap, "%s #%llu '%s'", item, (unsigned long long)i, show(nb, sizeof nb, name->s, name->len));
    return SLM_OK;
}

static slm_status read_kv(slm_gguf *g, slm_rd *r, uint64_t i, slm_err *err) {
    gguf_kv *kv = &g->kv[i];
    char what[160];
    slm_status s;

    if ((s = read_name(g, r, "kv", i, "key", &kv->key, what, sizeof what, err))) return s;

    uint64_t slot = hash_slot(g, g->kv_hash, g->kv_hash_cap, kv_key_at, kv->key);
    if (g->kv_hash[slot])
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: duplicate key (first at kv #%llu)", g->name, what,
                        (unsigned long long)(g->kv_hash[slot] - 1));
    g->kv_hash[slot] = i + 1;

    if (!slm_rd_u32(r, &kv->type))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: value type beyond end of file (%llu bytes)", g->name, what,
                        (unsigned long long)g->size);
    if (kv->type >= SLM_GGUF_TYPE_COUNT)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: unknown value type %u", g->name, what, kv->type);

    if (kv->type == SLM_GGUF_STRING) {
        slm_gguf_str v;
        if ((s = read_str(g, r, &v, what, -1, err))) return s;
        kv->val = (const uint8_t *)v.s;
        kv->n = v.len;
        return SLM_OK;
    }
    if (kv->type != SLM_GGUF_ARRAY) {
        if (!slm_rd_ptr(r, k_type_size[kv->type], &kv->val))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: %s value beyond end of file (%llu bytes)", g->name, what,
                            type_name(kv->type), (unsigned long long)g->size);
        return SLM_OK;
    }

    /* array */
    if (!slm_rd_u32(r, &kv->elem_type))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: array element type beyond end of file (%llu bytes)", g->name,
                        what, (unsigned long long)g->size);
    if (kv->elem_type >= SLM_GGUF_TYPE_COUNT)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: unknown array element type %u", g->name, what,
                        kv->elem_type);
    if (kv->elem_type == SLM_GGUF_ARRAY)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: %s: nested arrays are not supported", g->name, what);
    if (!slm_rd_u64(r, &kv->n))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: array length beyond end of file (%llu bytes)", g->name, what,
                        (unsigned long long)g->size);
    uint64_t left = r->len - r->pos;
    if (kv->elem_type != SLM_GGUF_STRING) {
        uint64_t nbytes;
        if (!slm_mul_ok(kv->n, k_type_size[kv->elem_type], &nbytes) || !slm_rd_ptr(r, nbytes, &kv->val))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: array of %llu %s beyond end of file (%llu bytes left)",
                            g->name, what, (unsigned long long)kv->n, type_name(kv->elem_type),
                            (unsigned long long)left);
        return SLM_OK;
    }
    if (kv->n > left / GGUF_MIN_STRING_BYTES)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: array of %llu strings cannot fit in the %llu bytes left",
                        g->name, what, (unsigned long long)kv->n, (unsigned long long)left);
    kv->val = r->p + r->pos;
    kv->strs = slm_calloc(kv->n ? (size_t)kv->n : 1, sizeof *kv->strs);
    if (!kv->strs) return slm_errf(err, SLM_ERR_NOMEM, "%s: %s: out of memory", g->name, what);
    for (uint64_t j = 0; j < kv->n; j++)
        if ((s = read_str(g, r, &kv->strs[j], what, (int64_t)j, err))) return s;
    return SLM_OK;
}

static slm_status read_tensor_info(slm_gguf *g, slm_rd *r, uint64_t i, slm_err *err) {
    slm_gguf_tensor *t = &g->tensors[i];
    char what[160];
    slm_status s;

    if ((s = read_name(g, r, "tensor", i, "name", &t->name, what, sizeof what, err))) return s;
    if (t->name.len == 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: empty tensor name", g->name, what);
    if (t->name.len >= GGUF_MAX_NAME)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: name is %llu bytes (at most %u)", g->name, what,
                        (unsigned long long)t->name.len, GGUF_MAX_NAME - 1);
    uint64_t slot = hash_slot(g, g->t_hash, g->t_hash_cap, tensor_name_at, t->name);
    if (g->t_hash[slot])
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: duplicate tensor name (first at tensor #%llu)", g->name, what,
                        (unsigned long long)(g->t_hash[slot] - 1));
    g->t_hash[slot] = i + 1;

    if (!slm_rd_u32(r, &t->n_dims))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: n_dims beyond end of file (%llu bytes)", g->name, what,
                        (unsigned long long)g->size);
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: n_dims %u (must be 1..%u)", g->name, what, t->n_dims,
                        GGUF_MAX_DIMS);
    uint64_t nel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        uint64_t v;
        if (!slm_rd_u64(r, &v))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: ne[%u] beyond end of file (%llu bytes)", g->name, what, d,
                            (unsigned long long)g->size);
        if (v == 0 || v > (uint64_t)INT64_MAX)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: ne[%u] = %lld (must be positive)", g->name, what, d,
                            (long long)v);
        if (!slm_mul_ok(nel, v, &nel) || nel > (uint64_t)INT64_MAX)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: element count overflows at ne[%u] = %llu", g->name, what, d,
                            (unsigned long long)v);
        t->ne[d] = (int64_t)v;
    }
    if (!slm_rd_u32(r, &t->type))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: type beyond end of file (%llu bytes)", g->name, what,
                        (unsigned long long)g->size);
    const slm_dtype_info *ti = t->type < SLM_DTYPE_COUNT ? slm_dtype_get(t->type) : NULL; /* not our repacked ids */
    if (!ti) return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: %s: unknown tensor type %u", g->name, what, t->type);
    if ((uint64_t)t->ne[0] % ti->block)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: ne[0] = %lld is not a multiple of the %s block size %u", g->name,
                        what, (long long)t->ne[0], ti->name, ti->block);
    /* Row bytes computed here, overflow-checked (slm_row_bytes is not). */
    uint64_t rows = nel / (uint64_t)t->ne[0], row_bytes;
    if (!slm_mul_ok((uint64_t)t->ne[0] / ti->block, ti->bytes, &row_bytes) ||
        !slm_mul_ok(row_bytes, rows, &t->nbytes))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: byte size overflows", g->name, what);
    if (!slm_rd_u64(r, &t->offset))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: data offset beyond end of file (%llu bytes)", g->name, what,
                        (unsigned long long)g->size);
    if (t->offset % g->alignment)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: data offset 0x%llx is not a multiple of the alignment %u",
                        g->name, what, (unsigned long long)t->offset, g->alignment);
    return SLM_OK;
}

/* general.alignment, if present: a u32 power of two. */
static slm_status read_alignment(slm_gguf *g, slm_err *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    uint64_t k = hash_find(g, g->kv_hash, g->kv_hash_cap, kv_key_at, "general.alignment");
    if (!k) return SLM_OK;
    const gguf_kv *kv = &g->kv[k - 1];
    if (kv->type != SLM_GGUF_U32)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: kv #%llu 'general.alignment': type %s, expected u32", g->name,
                        (unsigned long long)(k - 1), type_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->val, 4);
    if (a == 0 || (a & (a - 1)))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: kv #%llu 'general.alignment': %u is not a power of two", g->name,
                        (unsigned long long)(k - 1), a);
    g->alignment = a;
    return SLM_OK;
}

slm_status slm_gguf_open(slm_gguf **out, const void *data, uint64_t size, const char *name,
                         slm_err *err) {
    slm_status s;
    *out = NULL;
    if (!name) name = "gguf";
    slm_gguf *g = slm_calloc(1, sizeof *g);
    if (!g) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    g->base = data;
    g->size = size;
    snprintf(g->name, sizeof g->name, "%s", name);
    {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        g->seed = mix64((uint64_t)(uintptr_t)g ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec);
    }

    slm_rd r = {data, size, 0};
    char magic[4];
    if (!slm_rd_bytes(&r, magic, 4)) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: file too small for a GGUF header (%llu bytes)", g->name,
                     (unsigned long long)size);
        goto fail_free_gguf;
    }
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: bad magic (not a GGUF file)", g->name);
        goto fail_free_gguf;
    }
    if (!slm_rd_u32(&r, &g->version) || !slm_rd_u64(&r, &g->n_tensors) || !slm_rd_u64(&r, &g->n_kv)) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: header beyond end of file (%llu bytes; the header is 24)", g->name,
                     (unsigned long long)size);
        goto fail_free_gguf;
    }
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version;
        if ((v & 0xffffu) == 0 && ((v >> 16) == 2 || (v >> 16) == 3))
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: version: big-endian GGUF is not supported", g->name);
        else
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: version: GGUF version %u is not supported (supported: 2, 3)",
                         g->name, v);
        goto fail_free_gguf;
    }
    /* Counts: refuse what cannot fit before allocating for it. */
    uint64_t left = size - r.pos, need_kv, need_t, need;
    if (g->n_kv > left / GGUF_MIN_KV_BYTES) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: n_kv: %llu key-value pairs cannot fit in the %llu bytes left", g->name,
                     (unsigned long long)g->n_kv, (unsigned long long)left);
        goto fail_free_gguf;
    }
    if (g->n_tensors > left / GGUF_MIN_TENSOR_BYTES) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: n_tensors: %llu tensor infos cannot fit in the %llu bytes left", g->name,
                     (unsigned long long)g->n_tensors, (unsigned long long)left);
        goto fail_free_gguf;
    }
    need_kv = g->n_kv * GGUF_MIN_KV_BYTES;
    need_t = g->n_tensors * GGUF_MIN_TENSOR_BYTES;
    if (!slm_add_ok(need_kv, need_t, &need) || need > left) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: n_kv, n_tensors: %llu key-value pairs and %llu tensor infos cannot fit in the %llu bytes left",
                     g->name, (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors,
                     (unsigned long long)left);
        goto fail_free_gguf;
    }

    g->kv = slm_calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof *g->kv);
    g->kv_hash_cap = hash_cap(g->n_kv);
    g->kv_hash = slm_calloc((size_t)g->kv_hash_cap, sizeof *g->kv_hash);
    g->tensors = slm_calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *g->tensors);
    g->t_hash_cap = hash_cap(g->n_tensors);
    g->t_hash = slm_calloc((size_t)g->t_hash_cap, sizeof *g->t_hash);
    if (!g->kv || !g->kv_hash || !g->tensors || !g->t_hash) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for %llu kv and %llu tensors", g->name,
                     (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors);
        goto fail_free_gguf;
    }
    for (uint64_t i = 0; i < g->n_kv; i++)
        if ((s = read_kv(g, &r, i, err))) goto fail_free_gguf;
    if ((s = read_alignment(g, err))) goto fail_free_gguf;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if ((s = read_tensor_info(g, &r, i, err))) goto fail_free_gguf;

    /* The data section starts at the next multiple of the alignment. */
    uint64_t pad = (g->alignment - r.pos % g->alignment) % g->alignment;
    g->data_offset = r.pos + pad; /* r.pos <= size, pad < 2^32: no overflow */
    if (g->n_tensors && g->data_offset > size) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: data section at 0x%llx beyond end of file (%llu bytes)", g->name,
                     (unsigned long long)g->data_offset, (unsigned long long)size);
        goto fail_free_gguf;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        slm_gguf_tensor *t = &g->tensors[i];
        uint64_t end;
        if (!slm_add_ok(t->offset, t->nbytes, &end) || end > size - g->data_offset) {
            char nb[72];
            s = slm_errf(err, SLM_ERR_FORMAT,
                         "%s: tensor '%s': data offset 0x%llx + %llu bytes beyond end of file (%llu bytes)", g->name,
                         show(nb, sizeof nb, t->name.s, t->name.len), (unsigned long long)t->offset,
                         (unsigned long long)t->nbytes, (unsigned long long)size);
            goto fail_free_gguf;
        }
        t->data = g->base + g->data_offset + t->offset;
    }
    *out = g;
    return SLM_OK;

fail_free_gguf:
    slm_gguf_close(g);
    return s;
}

void slm_gguf_close(slm_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) slm_xfree(g->kv[i].strs);
    slm_xfree(g->kv);
    slm_xfree(g->kv_hash);
    slm_xfree(g->tensors);
    slm_xfree(g->t_hash);
    slm_xfree(g);
}

/* ---- queries ------------------------------------------------------------ */

uint32_t slm_gguf_version(const slm_gguf *g) { return g->version; }
uint64_t slm_gguf_n_kv(const slm_gguf *g) { return g->n_kv; }
uint64_t slm_gguf_n_tensors(const slm_gguf *g) { return g->n_tensors; }
uint32_t slm_gguf_alignment(const slm_gguf *g) { return g->alignment; }

int64_t slm_gguf_find(const slm_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return (int64_t)hash_find(g, g->kv_hash, g->kv_hash_cap, kv_key_at, key) - 1;
}

slm_gguf_str slm_gguf_key(const slm_gguf *g, int64_t i) {
    if (!g || i < 0 || (uint64_t)i >= g->n_kv) return (slm_gguf_str){NULL, 0};
    return g->kv[i].key;
}

slm_gguf_type slm_gguf_kv_type(const slm_gguf *g, int64_t i) {
    if (!g || i < 0 || (uint64_t)i >= g->n_kv) return SLM_GGUF_TYPE_COUNT;
    return (slm_gguf_type)g->kv[i].type;
}

static const gguf_kv *find_kv(const slm_gguf *g, const char *key) {
    int64_t i = slm_gguf_find(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

/* An integer value: *neg set for negative signed values; *mag its magnitude
 * (two's complement for negatives is avoided). 0 if not an integer type. */
static int kv_int(const gguf_kv *kv, int *neg, uint64_t *mag) {
    const uint8_t *p = kv->val;
    int64_t sv;
    *neg = 0;
    switch (kv->type) {
    case SLM_GGUF_U8: *mag = p[0]; return 1;
    case SLM_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *mag = v; return 1; }
    case SLM_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *mag = v; return 1; }
    case SLM_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); *mag = v; return 1; }
    case SLM_GGUF_I8: { int8_t v; memcpy(&v, p, 1); sv = v; break; }
    case SLM_GGUF_I16: { int16_t v; memcpy(&v, p, 2); sv = v; break; }
    case SLM_GGUF_I32: { int32_t v; memcpy(&v, p, 4); sv = v; break; }
    case SLM_GGUF_I64: { int64_t v; memcpy(&v, p, 8); sv = v; break; }
    default: return 0;
    }
    if (sv < 0) {
        *neg = 1;
        *mag = (uint64_t)(-(sv + 1)) + 1;
    } else {
        *mag = (uint64_t)sv;
    }
    return 1;
}

int slm_gguf_get_u32(const slm_gguf *g, const char *key, uint32_t *v) {
    const gguf_kv *kv = find_kv(g, key);
    int neg;
    uint64_t mag;
    if (!kv || !kv_int(kv, &neg, &mag) || neg || mag > UINT32_MAX) return 0;
    *v = (uint32_t)mag;
    return 1;
}

int slm_gguf_get_i64(const slm_gguf *g, const char *key, int64_t *v) {
    const gguf_kv *kv = find_kv(g, key);
    int neg;
    uint64_t mag;
    if (!kv || !kv_int(kv, &neg, &mag)) return 0;
    if (neg) {
        *v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
        return 1;
    }
    if (mag > (uint64_t)INT64_MAX) return 0;
    *v = (int64_t)mag;
    return 1;
}

int slm_gguf_get_f32(const slm_gguf *g, const char *key, float *v) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv) return 0;
    if (kv->type == SLM_GGUF_F32) {
        memcpy(v, kv->val, 4);
        return 1;
    }
    if (kv->type == SLM_GGUF_F64) {
        double d;
        memcpy(&d, kv->val, 8);
        *v = (float)d;
        return 1;
    }
    return 0;
}

int slm_gguf_get_bool(const slm_gguf *g, const char *key, int *v) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type != SLM_GGUF_BOOL) return 0;
    *v = kv->val[0] != 0;
    return 1;
}

int slm_gguf_get_str(const slm_gguf *g, const char *key, slm_gguf_str *v) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type != SLM_GGUF_STRING) return 0;
    v->s = (const char *)kv->val;
    v->len = kv->n;
    return 1;
}

int slm_gguf_f32_text(char *buf, size_t cap, float f) {
    int n = 0;
    for (int digits = 6; digits <= 9; digits++) {
        n = snprintf(buf, cap, "%.*g", digits, (double)f);
        if (n < 0 || (size_t)n >= cap || strtof(buf, NULL) == f) break;
    }
    return n;
}

int slm_gguf_get_text(const slm_gguf *g, const char *key, char *buf, size_t cap) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type == SLM_GGUF_STRING || kv->type == SLM_GGUF_ARRAY || !buf || !cap) return -1;
    int64_t i;
    float f;
    int b, n = -1;
    if (kv->type == SLM_GGUF_BOOL && slm_gguf_get_bool(g, key, &b)) n = snprintf(buf, cap, "%s", b ? "true" : "false");
    else if ((kv->type == SLM_GGUF_F32 || kv->type == SLM_GGUF_F64) && slm_gguf_get_f32(g, key, &f))
        n = slm_gguf_f32_text(buf, cap, f);
    else if (slm_gguf_get_i64(g, key, &i)) n = snprintf(buf, cap, "%lld", (long long)i);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int slm_gguf_get_arr(const slm_gguf *g, const char *key, slm_gguf_type *elem_type, uint64_t *n,
                     const void **data) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type != SLM_GGUF_ARRAY) return 0;
    if (elem_type) *elem_type = (slm_gguf_type)kv->elem_type;
    if (n) *n = kv->n;
    if (data) *data = kv->val;
    return 1;
}

int slm_gguf_arr_str(const slm_gguf *g, const char *key, uint64_t i, slm_gguf_str *v) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type != SLM_GGUF_ARRAY || kv->elem_type != SLM_GGUF_STRING || i >= kv->n) return 0;
    *v = kv->strs[i];
    return 1;
}

const slm_gguf_tensor *slm_gguf_tensor_at(const slm_gguf *g, uint64_t i) {
    if (!g || i >= g->n_tensors) return NULL;
    return &g->tensors[i];
}

const slm_gguf_tensor *slm_gguf_find_tensor(const slm_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    uint64_t k = hash_find(g, g->t_hash, g->t_hash_cap, tensor_name_at, name);
    return k ? &g->tensors[k - 1] : NULL;
}
