/* The prefill block entries' shared first half (attention.c's avx512 entry
 * at 16 lanes, attention_rows_avx2.c at 8): the tile of keys, the shapes
 * they take and the conversion of one tile to K^T and V on the stack. The
 * includer defines ROWS_ATTR (its target attribute), ROWS_LANES (floats a
 * vector) and ROWS_KV_ROW (its slm_kv_row512 / slm_kv_row256), and
 * includes <string.h>, common/dtype.h and device/attention.h first;
 * attention_rows_body.h then makes the entry. x86-64 only. */
#ifndef SLM_DEVICE_ATTENTION_ROWS_TILE_H
#define SLM_DEVICE_ATTENTION_ROWS_TILE_H

#define RT 32 /* keys per tile: one bit each of a uint32_t */
#define RMAX_HD 256
#define RMAX_GROUP 64
#define RMAX_VEC (SLM_ATTN_ROWS_MAX * RMAX_GROUP)
#define RALIGN (4 * ROWS_LANES) /* bytes of one vector: the steps load the tiles aligned */

/* Keys [j0, j0 + RT) whose bits are set in vm into kt ([hd][RT]) and vt
 * ([RT][hd]); the others are zeros. */
ROWS_ATTR static void rows_tile(const slm_attn_rows *a, int j0, uint32_t vm, float *kt, float *vt) {
    const int hd = a->head_dim;
    const size_t rb = a->kv_type == SLM_F32 ? a->ld * sizeof(float) : (size_t)slm_row_bytes((uint32_t)a->kv_type, a->ld);
    float kr[RMAX_HD] __attribute__((aligned(RALIGN)));
    for (int t = 0; t < RT; t++) {
        float *vr = vt + (size_t)t * hd;
        if (!(vm >> t & 1u)) {
            for (int d = 0; d < hd; d++) kt[(size_t)d * RT + t] = 0.0f;
            memset(vr, 0, (size_t)hd * sizeof(float));
            continue;
        }
        const uint8_t *kp = (const uint8_t *)a->K + (size_t)(j0 + t) * rb, *vp = (const uint8_t *)a->V + (size_t)(j0 + t) * rb;
        const float *k = kr;
        if (a->kv_type == SLM_F32) {
            k = (const float *)(const void *)kp;
            memcpy(vr, vp, (size_t)hd * sizeof(float));
        } else {
            ROWS_KV_ROW(a->kv_type, hd, kp, kr);
            ROWS_KV_ROW(a->kv_type, hd, vp, vr);
        }
        for (int d = 0; d < hd; d++) kt[(size_t)d * RT + t] = k[d];
    }
}

#endif
