/* The per-row decode attention entries' shared first half (attention_decode.c
 * at 16 lanes, attention_decode_avx2.c at 8): the tile of keys a query row
 * takes, the rows of K or V it reads, the conversion of a tile to floats and
 * the prefetch of the next one. The includer defines DEC_ATTR (its target
 * attribute), DEC_LANES (keys per score vector), DEC_VM_T (an unsigned type
 * of DEC_LANES bits) and DEC_KV_ROW (its slm_kv_row512 / slm_kv_row256), and
 * includes <immintrin.h>, <string.h>, common/dtype.h and device/attention.h
 * first; attention_decode_body.h then makes the entry. x86-64 only. */
#ifndef SLM_DEVICE_ATTENTION_DECODE_TILE_H
#define SLM_DEVICE_ATTENTION_DECODE_TILE_H

#define DT_MAX 128     /* keys per tile: DT_FLOATS / head_dim, 32 .. 128 */
#define DT_FLOATS 8192 /* floats of one converted tile */
#define DMAX_HD 256    /* head_dim these entries take */
#define DMAX_GROUP 64

/* Keys j0 .. j0 + nk - 1 the row takes, one bit each (vm[c] for keys
 * DEC_LANES * c ..). */
typedef struct dec_keys {
    int j0, nk;
    DEC_VM_T vm[DT_MAX / DEC_LANES];
    int all; /* every key of the tile valid */
} dec_keys;

/* Rows of K or V: row t at base + t * stride bytes, f32 (a converted tile,
 * or an f32 cache in place) or f16 (an f16 cache in place). */
typedef struct dec_rows {
    const uint8_t *base;
    size_t stride;
} dec_rows;

static size_t dec_row_bytes(const slm_attn_args *a, uint64_t n) {
    return a->kv_type == SLM_F32 ? (size_t)n * sizeof(float) : (size_t)slm_row_bytes((uint32_t)a->kv_type, n);
}

/* The tile's rows as floats hd apart in buf: the rows the row takes
 * converted (or copied, f32), the others zeros. Returns the rows and their
 * stride: an f32 tile with every row valid is read in place. */
DEC_ATTR static const float *dec_tile(const slm_attn_args *a, const void *base, const dec_keys *k, float *buf,
                                      size_t *ld) {
    const int hd = a->head_dim;
    if (a->kv_type == SLM_F32 && k->all) {
        *ld = a->ld;
        return (const float *)base + (size_t)k->j0 * a->ld;
    }
    const size_t rb = dec_row_bytes(a, a->ld);
    *ld = (size_t)hd;
    for (int t = 0; t < k->nk; t++) {
        float *o = buf + (size_t)t * hd;
        const uint8_t *r = (const uint8_t *)base + (size_t)(k->j0 + t) * rb;
        if (!(k->vm[t / DEC_LANES] >> (t % DEC_LANES) & 1u)) memset(o, 0, (size_t)hd * sizeof(float));
        else if (a->kv_type == SLM_F32) memcpy(o, r, (size_t)hd * sizeof(float));
        else DEC_KV_ROW(a->kv_type, hd, r, o);
    }
    return buf;
}

/* Touch K and V rows [j0, j1) toward L2: the rows of one KV head are a few
 * lines of each cache row, a stride the hardware prefetchers follow late. */
DEC_ATTR static void dec_prefetch(const slm_attn_args *a, int j0, int j1) {
    const size_t rb = dec_row_bytes(a, a->ld), hb = dec_row_bytes(a, (uint64_t)a->head_dim);
    if (j1 > a->last + 1) j1 = a->last + 1;
    for (int j = j0; j < j1; j++) {
        const char *k = (const char *)a->K + (size_t)j * rb, *v = (const char *)a->V + (size_t)j * rb;
        for (size_t o = 0; o < hb; o += 64) {
            _mm_prefetch(k + o, _MM_HINT_T1);
            _mm_prefetch(v + o, _MM_HINT_T1);
        }
    }
}

#endif
