/* GGUF v2/v3 reader and writer.
 *
 * The reader parses a file already mapped in memory. It validates every
 * count, length, type and offset against the mapping before use, and never
 * copies tensor data: tensors point into the mapping. Strings are (ptr, len)
 * views into the mapping and are NOT NUL-terminated.
 */
#ifndef SLM_GGUF_H
#define SLM_GGUF_H

#include "common/common.h"
#include "common/dtype.h"

/* GGUF metadata value types (the file's numbering). */
typedef enum slm_gguf_type {
    SLM_GGUF_U8 = 0, SLM_GGUF_I8 = 1, SLM_GGUF_U16 = 2, SLM_GGUF_I16 = 3,
    SLM_GGUF_U32 = 4, SLM_GGUF_I32 = 5, SLM_GGUF_F32 = 6, SLM_GGUF_BOOL = 7,
    SLM_GGUF_STRING = 8, SLM_GGUF_ARRAY = 9, SLM_GGUF_U64 = 10, SLM_GGUF_I64 = 11,
    SLM_GGUF_F64 = 12, SLM_GGUF_TYPE_COUNT = 13
} slm_gguf_type;

typedef struct slm_gguf_str {
    const char *s; /* into the mapping; not NUL-terminated */
    uint64_t len;
} slm_gguf_str;

typedef struct slm_gguf_tensor {
    slm_gguf_str name;
    uint32_t type;     /* slm_dtype (GGML type id) */
    uint32_t n_dims;   /* 1..4 */
    int64_t ne[4];     /* elements per dim, ne[0] innermost; unused dims = 1 */
    uint64_t offset;   /* from the start of the data section */
    uint64_t nbytes;
    const void *data;  /* into the mapping, bounds-checked */
} slm_gguf_tensor;

typedef struct slm_gguf slm_gguf;

/* Parse a GGUF image of `size` bytes at `data` (kept by the caller for the
 * lifetime of the handle). `name` is used in messages (the file name). */
slm_status slm_gguf_open(slm_gguf **out, const void *data, uint64_t size, const char *name,
                         slm_err *err);
void slm_gguf_close(slm_gguf *g);

uint32_t slm_gguf_version(const slm_gguf *g);
uint64_t slm_gguf_n_kv(const slm_gguf *g);
uint64_t slm_gguf_n_tensors(const slm_gguf *g);
uint32_t slm_gguf_alignment(const slm_gguf *g);

/* Metadata lookup by key. -1 when absent. */
int64_t slm_gguf_find(const slm_gguf *g, const char *key);
slm_gguf_str slm_gguf_key(const slm_gguf *g, int64_t i);
slm_gguf_type slm_gguf_kv_type(const slm_gguf *g, int64_t i);

/* Typed getters by key. Return 1 and set *v when the key exists and its
 * value converts without loss (any integer type in range for the integer
 * getters; F32/F64 for floats); 0 otherwise (v untouched). */
int slm_gguf_get_u32(const slm_gguf *g, const char *key, uint32_t *v);
int slm_gguf_get_i64(const slm_gguf *g, const char *key, int64_t *v);
int slm_gguf_get_f32(const slm_gguf *g, const char *key, float *v);
int slm_gguf_get_bool(const slm_gguf *g, const char *key, int *v);
int slm_gguf_get_str(const slm_gguf *g, const char *key, slm_gguf_str *v);
/* A number or bool key as text into buf (integers in decimal, floats by
 * slm_gguf_f32_text, true / false: as llama_model_meta_val_str renders them,
 * the floats exactly): its length, or -1 (absent, a string or an array, or
 * no room). */
int slm_gguf_get_text(const slm_gguf *g, const char *key, char *buf, size_t cap);
/* f as the shortest decimal text that reads back as f ("0.6", not
 * "0.600000024"); snprintf's result. */
int slm_gguf_f32_text(char *buf, size_t cap, float f);

/* Arrays. slm_gguf_get_arr returns 1 when key is an array, setting its
 * element type and length. Numeric arrays: *data points at n packed
 * little-endian elements (may be unaligned: memcpy out). String arrays:
 * use slm_gguf_arr_str (O(1) after open: the reader indexes them). */
int slm_gguf_get_arr(const slm_gguf *g, const char *key, slm_gguf_type *elem_type,
                     uint64_t *n, const void **data);
int slm_gguf_arr_str(const slm_gguf *g, const char *key, uint64_t i, slm_gguf_str *v);

const slm_gguf_tensor *slm_gguf_tensor_at(const slm_gguf *g, uint64_t i);
const slm_gguf_tensor *slm_gguf_find_tensor(const slm_gguf *g, const char *name);

/* Compare a GGUF string with a C string. */
int slm_gguf_str_eq(slm_gguf_str a, const char *b);

/* ---- writer ----------------------------------------------------------- */

typedef struct slm_gguf_writer slm_gguf_writer;

slm_gguf_writer *slm_gguf_writer_new(void);
void slm_gguf_writer_free(slm_gguf_writer *w);
/* Metadata, in insertion order. Keys and strings are copied. */
slm_status slm_gguf_set_u32(slm_gguf_writer *w, const char *key, uint32_t v);
slm_status slm_gguf_set_i32(slm_gguf_writer *w, const char *key, int32_t v);
slm_status slm_gguf_set_f32(slm_gguf_writer *w, const char *key, float v);
slm_status slm_gguf_set_bool(slm_gguf_writer *w, const char *key, int v);
slm_status slm_gguf_set_str(slm_gguf_writer *w, const char *key, const char *v);
/* Numeric array of n elements of elem_type (copied). */
slm_status slm_gguf_set_arr(slm_gguf_writer *w, const char *key, slm_gguf_type elem_type,
                            const void *data, uint64_t n);
/* String array: n strings with lengths (copied). */
slm_status slm_gguf_set_arr_str(slm_gguf_writer *w, const char *key, const char *const *s,
                                const uint64_t *lens, uint64_t n);
/* A tensor: data of nbytes (must equal the size implied by type and ne) is
 * referenced, not copied; it must live until slm_gguf_write returns. */
slm_status slm_gguf_add_tensor(slm_gguf_writer *w, const char *name, uint32_t type,
                               uint32_t n_dims, const int64_t *ne, const void *data,
                               uint64_t nbytes);
/* Write a GGUF v3 file (alignment 32) atomically (temp file + rename). */
slm_status slm_gguf_write(slm_gguf_writer *w, const char *path, slm_err *err);

/* ---- additions (format helper) ----------------------------------------- */

/* "u32", "string", "array", ...; "?" for an unknown type. */
const char *slm_gguf_type_name(slm_gguf_type t);

#endif
