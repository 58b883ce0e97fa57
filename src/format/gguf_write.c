/* GGUF v3 writer.
 *
 * Metadata is serialized as it is set, into one growing buffer, in insertion
 * order. Tensors are recorded (name, type, shape) with a reference to their
 * data. slm_gguf_write lays out the tensor infos with offsets aligned to 32,
 * pads the data section and streams everything into a temporary file in the
 * target's directory, fsyncs it and renames it over the target.
 *
 * Setter errors (bad key, duplicate, out of memory) are sticky: the setter
 * returns the status and slm_gguf_write reports the first one with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"

#define GGUF_W_ALIGNMENT 32u
#define GGUF_W_MAX_NAME 64u

typedef struct wtensor {
    char name[GGUF_W_MAX_NAME];
    uint32_t type;    /* slm_dtype */
    uint32_t n_dims;  /* 1..4 */
    int64_t ne[4];    /* elements per dim, ne[0] innermost */
    const void *data; /* [nbytes], referenced */
    uint64_t nbytes;
    uint64_t offset;  /* in the data section; set by slm_gguf_write */
} wtensor;

struct slm_gguf_writer {
    uint8_t *kv;        /* serialized kv pairs, [kv_len] of [kv_cap] bytes */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys;        /* [n_kv] copies, for duplicate checks */
    size_t keys_cap;
    wtensor *tensors;   /* [n_tensors] of [tensors_cap] */
    uint64_t n_tensors, tensors_cap;
    slm_status status;  /* first setter failure (sticky) */
    char msg[256];      /* its explanation */
};

static const uint8_t k_elem_size[SLM_GGUF_TYPE_COUNT] = {
    [SLM_GGUF_U8] = 1,  [SLM_GGUF_I8] = 1,  [SLM_GGUF_U16] = 2, [SLM_GGUF_I16] = 2,
    [SLM_GGUF_U32] = 4, [SLM_GGUF_I32] = 4, [SLM_GGUF_F32] = 4, [SLM_GGUF_BOOL] = 1,
    [SLM_GGUF_U64] = 8, [SLM_GGUF_I64] = 8, [SLM_GGUF_F64] = 8,
};

slm_gguf_writer *slm_gguf_writer_new(void) { return slm_calloc(1, sizeof(slm_gguf_writer)); }

void slm_gguf_writer_free(slm_gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) slm_xfree(w->keys[i]);
    slm_xfree(w->keys);
    slm_xfree(w->kv);
    slm_xfree(w->tensors);
    slm_xfree(w);
}

static slm_status fail(slm_gguf_writer *w, slm_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static slm_status fail(slm_gguf_writer *w, slm_status s, const char *fmt, ...) {
    if (w->status == SLM_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
        w->status = s;
    }
    return s;
}

/* ---- the kv buffer ------------------------------------------------------- */

static int kv_reserve(slm_gguf_writer *w, uint64_t n) {
    if (n > SIZE_MAX - w->kv_len) return 0;
    size_t need = w->kv_len + (size_t)n;
    if (need <= w->kv_cap) return 1;
    size_t cap = w->kv_cap ? w->kv_cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) { cap = need; break; }
        cap *= 2;
    }
    uint8_t *p = slm_realloc(w->kv, cap);
    if (!p) return 0;
    w->kv = p;
    w->kv_cap = cap;
    return 1;
}

/* Callers reserve first. */
static void put(slm_gguf_writer *w, const void *p, size_t n) {
    if (n) memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}
static void put_u32(slm_gguf_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(slm_gguf_writer *w, uint64_t v) { put(w, &v, 8); }
static void put_str(slm_gguf_writer *w, const char *s, uint64_t len) {
    put_u64(w, len);
    put(w, s, (size_t)len);
}

/* Start a kv pair: check the key, reserve its bytes plus `value_bytes`,
 * and write key + type. On failure the buffer is unchanged. */
static slm_status begin_kv(slm_gguf_writer *w, const char *key, slm_gguf_type type, uint64_t value_bytes) {
    if (w->status) return w->status;
    if (!key || !*key) return fail(w, SLM_ERR_ARG, "empty metadata key");
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return fail(w, SLM_ERR_ARG, "duplicate metadata key '%s'", key);
    uint64_t klen = strlen(key), total;
    if (!slm_add_ok(12 + klen, value_bytes, &total) || !kv_reserve(w, total))
        return fail(w, SLM_ERR_NOMEM, "out of memory for metadata key '%s'", key);
    if (w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? w->keys_cap * 2 : 16;
        char **k = slm_realloc(w->keys, cap * sizeof *k);
        if (!k) return fail(w, SLM_ERR_NOMEM, "out of memory for metadata key '%s'", key);
        w->keys = k;
        w->keys_cap = cap;
    }
    char *copy = slm_strdup(key);
    if (!copy) return fail(w, SLM_ERR_NOMEM, "out of memory for metadata key '%s'", key);
    w->keys[w->n_kv++] = copy;
    put_str(w, key, klen);
    put_u32(w, (uint32_t)type);
    return SLM_OK;
}

static slm_status set_scalar(slm_gguf_writer *w, const char *key, slm_gguf_type type, const void *v) {
    slm_status s = begin_kv(w, key, type, k_elem_size[type]);
    if (s) return s;
    put(w, v, k_elem_size[type]);
    return SLM_OK;
}

slm_status slm_gguf_set_u32(slm_gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, SLM_GGUF_U32, &v);
}
slm_status slm_gguf_set_i32(slm_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, SLM_GGUF_I32, &v);
}
slm_status slm_gguf_set_f32(slm_gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, SLM_GGUF_F32, &v);
}
slm_status slm_gguf_set_bool(slm_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    return set_scalar(w, key, SLM_GGUF_BOOL, &b);
}

slm_status slm_gguf_set_str(slm_gguf_writer *w, const char *key, const char *v) {
    if (!v) return fail(w, SLM_ERR_ARG, "NULL string value for '%s'", key ? key : "");
    uint64_t len = strlen(v);
    slm_status s = begin_kv(w, key, SLM_GGUF_STRING, 8 + len);
    if (s) return s;
    put_str(w, v, len);
    return SLM_OK;
}

slm_status slm_gguf_set_arr(slm_gguf_writer *w, const char *key, slm_gguf_type elem_type,
                            const void *data, uint64_t n) {
    if (elem_type >= SLM_GGUF_TYPE_COUNT || elem_type == SLM_GGUF_STRING || elem_type == SLM_GGUF_ARRAY)
        return fail(w, SLM_ERR_ARG, "bad numeric array element type for '%s'", key ? key : "");
    if (n && !data) return fail(w, SLM_ERR_ARG, "NULL array data for '%s'", key ? key : "");
    uint64_t bytes, total;
    if (!slm_mul_ok(n, k_elem_size[elem_type], &bytes) || !slm_add_ok(bytes, 12, &total))
        return fail(w, SLM_ERR_ARG, "array too large for '%s'", key ? key : "");
    slm_status s = begin_kv(w, key, SLM_GGUF_ARRAY, total);
    if (s) return s;
    put_u32(w, (uint32_t)elem_type);
    put_u64(w, n);
    put(w, data, (size_t)bytes);
    return SLM_OK;
}

slm_status slm_gguf_set_arr_str(slm_gguf_writer *w, const char *key, const char *const *s,
                                const uint64_t *lens, uint64_t n) {
    if (n && (!s || !lens)) return fail(w, SLM_ERR_ARG, "NULL string array for '%s'", key ? key : "");
    uint64_t total = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (lens[i] && !s[i]) return fail(w, SLM_ERR_ARG, "NULL string in array '%s'", key ? key : "");
        if (!slm_add_ok(total, 8, &total) || !slm_add_ok(total, lens[i], &total))
            return fail(w, SLM_ERR_ARG, "string array too large for '%s'", key ? key : "");
    }
    slm_status st = begin_kv(w, key, SLM_GGUF_ARRAY, total);
    if (st) return st;
    put_u32(w, SLM_GGUF_STRING);
    put_u64(w, n);
    for (uint64_t i = 0; i < n; i++) put_str(w, s[i], lens[i]);
    return SLM_OK;
}

slm_status slm_gguf_add_tensor(slm_gguf_writer *w, const char *name, uint32_t type,
                               uint32_t n_dims, const int64_t *ne, const void *data,
                               uint64_t nbytes) {
    if (w->status) return w->status;
    if (!name || !*name || strlen(name) >= GGUF_W_MAX_NAME)
        return fail(w, SLM_ERR_ARG, "tensor name '%s' is empty or 64 bytes or longer", name ? name : "");
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return fail(w, SLM_ERR_ARG, "duplicate tensor '%s'", name);
    const slm_dtype_info *ti = slm_dtype_get(type);
    if (!ti) return fail(w, SLM_ERR_ARG, "tensor '%s': unknown type", name);
    if (n_dims < 1 || n_dims > 4 || !ne) return fail(w, SLM_ERR_ARG, "tensor '%s': n_dims must be 1..4", name);
    uint64_t rows = 1, want;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] <= 0) return fail(w, SLM_ERR_ARG, "tensor '%s': dims must be positive", name);
        if (d > 0 && !slm_mul_ok(rows, (uint64_t)ne[d], &rows))
            return fail(w, SLM_ERR_ARG, "tensor '%s': size overflows", name);
    }
    uint64_t row;
    if ((uint64_t)ne[0] % ti->block)
        return fail(w, SLM_ERR_ARG, "tensor '%s': ne[0] is not a multiple of the block size", name);
    if (!slm_mul_ok((uint64_t)ne[0] / ti->block, ti->bytes, &row))
        return fail(w, SLM_ERR_ARG, "tensor '%s': size overflows", name);
    if (!slm_mul_ok(row, rows, &want) || want != nbytes)
        return fail(w, SLM_ERR_ARG, "tensor '%s': nbytes does not match the type and shape", name);
    if (!data) return fail(w, SLM_ERR_ARG, "tensor '%s': NULL data", name);
    if (w->n_tensors == w->tensors_cap) {
        uint64_t cap = w->tensors_cap ? w->tensors_cap * 2 : 16;
        wtensor *t = slm_realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) return fail(w, SLM_ERR_NOMEM, "out of memory for tensor '%s'", name);
        w->tensors = t;
        w->tensors_cap = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = data;
    t->nbytes = nbytes;
    return SLM_OK;
}

/* ---- the file ------------------------------------------------------------- */

/* A small buffered writer over a file descriptor. */
typedef struct wout {
    int fd;
    uint8_t buf[1 << 16];
    size_t len;
    int err; /* errno of the first failure */
} wout;

static void out_flush(wout *o) {
    size_t off = 0;
    while (!o->err && off < o->len) {
        ssize_t n = write(o->fd, o->buf + off, o->len - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            o->err = errno;
        } else {
            off += (size_t)n;
        }
    }
    o->len = 0;
}

static void out_put(wout *o, const void *p, uint64_t n) {
    const uint8_t *b = p;
    while (n && !o->err) {
        size_t k = sizeof o->buf - o->len;
        if (k > n) k = (size_t)n;
        memcpy(o->buf + o->len, b, k);
        o->len += k;
        b += k;
        n -= k;
        if (o->len == sizeof o->buf) out_flush(o);
    }
}

static void out_u32(wout *o, uint32_t v) { out_put(o, &v, 4); }
static void out_u64(wout *o, uint64_t v) { out_put(o, &v, 8); }
static void out_pad(wout *o, uint64_t pos) {
    static const uint8_t zeros[GGUF_W_ALIGNMENT];
    out_put(o, zeros, (GGUF_W_ALIGNMENT - pos % GGUF_W_ALIGNMENT) % GGUF_W_ALIGNMENT);
}

/* Make the rename durable: fsync the directory holding path. */
static void sync_dir(const char *path) {
    char dir[1024];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

slm_status slm_gguf_write(slm_gguf_writer *w, const char *path, slm_err *err) {
    slm_status s = SLM_OK;
    if (!w || !path) return slm_errf(err, SLM_ERR_ARG, "gguf writer: NULL argument");
    if (w->status) return slm_errf(err, w->status, "%s: %s", path, w->msg);

    /* Offsets of the tensors inside the data section. */
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        uint64_t padded = (w->tensors[i].nbytes + GGUF_W_ALIGNMENT - 1) / GGUF_W_ALIGNMENT * GGUF_W_ALIGNMENT;
        if (!slm_add_ok(off, padded, &off)) return slm_errf(err, SLM_ERR_ARG, "%s: tensor data too large", path);
    }

    size_t plen = strlen(path);
    char *tmp = slm_malloc(plen + 16);
    if (!tmp) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    wout *o = slm_malloc(sizeof *o);
    if (!o) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", path);
        goto fail_free_tmp;
    }
    o->len = 0;
    o->err = 0;
    o->fd = mkstemp(tmp);
    if (o->fd < 0) {
        s = slm_errf(err, SLM_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        goto fail_free_out;
    }
    (void)fchmod(o->fd, 0644);

    out_put(o, "GGUF", 4);
    out_u32(o, 3);
    out_u64(o, w->n_tensors);
    out_u64(o, w->n_kv);
    out_put(o, w->kv, w->kv_len);
    uint64_t pos = 24 + w->kv_len;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        uint64_t nlen = strlen(t->name);
        out_u64(o, nlen);
        out_put(o, t->name, nlen);
        out_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) out_u64(o, (uint64_t)t->ne[d]);
        out_u32(o, t->type);
        out_u64(o, t->offset);
        pos += 8 + nlen + 4 + 8ull * t->n_dims + 4 + 8;
    }
    out_pad(o, pos);
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        out_put(o, w->tensors[i].data, w->tensors[i].nbytes);
        out_pad(o, w->tensors[i].nbytes);
    }
    out_flush(o);
    if (!o->err && fsync(o->fd) != 0) o->err = errno;
    if (close(o->fd) != 0 && !o->err) o->err = errno;
    if (o->err) {
        s = slm_errf(err, SLM_ERR_IO, "%s: write failed: %s", path, strerror(o->err));
        goto fail_unlink_tmp;
    }
    if (rename(tmp, path) != 0) {
        s = slm_errf(err, SLM_ERR_IO, "%s: cannot rename the temporary file into place: %s", path, strerror(errno));
        goto fail_unlink_tmp;
    }
    sync_dir(path);
    slm_xfree(o);
    slm_xfree(tmp);
    return SLM_OK;

fail_unlink_tmp:
    unlink(tmp);
fail_free_out:
    slm_xfree(o);
fail_free_tmp:
    slm_xfree(tmp);
    return s;
}
