/* safetensors reader (Hugging Face): an 8-byte little-endian header length,
 * a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, ...,
 * "__metadata__": {...}}, then the data area; offsets count from the start
 * of the data area.
 *
 * The reader parses a file already mapped in memory and checks everything
 * against the mapping, with the GGUF reader's discipline: the header length
 * against the file size, well-formed JSON (an object of objects), every
 * dtype known (F32, F16, BF16, and U8 as raw bytes, SLM_I8: gpt-oss's MXFP4
 * blocks and scales; I64 and I32 as SLM_I64 / SLM_I32, integer buffers such
 * as BERT's embeddings.position_ids that a loader skips; others are refused
 * by name), every shape
 * dimension positive, element count x element size == end - begin without
 * overflow, offsets inside the data area, no two tensors overlapping, no
 * name twice. Messages name the file and the tensor and field. Tensor data
 * is never copied: tensors point into the mapping.
 *
 * Needs cJSON (SLM_HAVE_CJSON); without it slm_st_parse returns
 * SLM_ERR_UNSUPPORTED ("built without JSON support"). The parsed header
 * (cJSON, whose hooks common/json.c points at slm_malloc) lives only while
 * parsing; the result is built with slm_malloc.
 */
#ifndef SLM_SAFETENSORS_H
#define SLM_SAFETENSORS_H

#include "common/common.h"
#include "common/dtype.h"

#define SLM_ST_MAX_DIMS 4
/* The header may not exceed this (the safetensors library's own limit). */
#define SLM_ST_MAX_HEADER (100u << 20)

typedef struct slm_st_tensor {
    char *name;                     /* NUL-terminated, slm_malloc'd */
    uint32_t type;                  /* SLM_F32, SLM_F16, SLM_BF16, SLM_I8 (U8: raw bytes), SLM_I64, SLM_I32 */
    uint32_t n_dims;                /* 0..SLM_ST_MAX_DIMS (0: a scalar) */
    int64_t shape[SLM_ST_MAX_DIMS]; /* as the file lists it: outermost first */
    uint64_t begin, end;            /* byte offsets into the data area */
    const void *data;               /* into the mapping */
} slm_st_tensor;

typedef struct slm_st {
    slm_st_tensor *tensors; /* in header order */
    int n_tensors;
    int *by_name;           /* [n_tensors] indices sorted by name (slm_st_find bisects) */
    uint64_t data_start;    /* 8 + header length: where the data area begins */
} slm_st;

/* Parse a safetensors image of `size` bytes at `data` (kept by the caller
 * while the result is used). `name` is used in messages (the file name). */
slm_status slm_st_parse(slm_st *out, const void *data, uint64_t size, const char *name, slm_err *err);
void slm_st_free(slm_st *st);
const slm_st_tensor *slm_st_find(const slm_st *st, const char *name);
/* Point every tensor's data at base + data_start + begin (after the file is
 * mapped again elsewhere). */
void slm_st_rebase(slm_st *st, const void *base);

#endif
