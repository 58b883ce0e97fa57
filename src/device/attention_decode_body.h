/* The per-row decode attention entries' shared second half: the walk over
 * tiles that calls the includer's vector steps. Include after
 * attention_decode_tile.h and the definitions of
 *   DEC_VM_T dec_take(const int32_t *mask, int n)   (bit t: t < n and mask[t] != 0)
 *   void dec_scores(a, dec_rows kr, const dec_keys *, nv, float (*p)[DT_MAX], float *tmax, f16)
 *     (every head's scaled scores of the tile into p, -inf for keys not taken, their maxes)
 *   float dec_softmax(const dec_keys *, tmax, float *m, float *l, float *p)
 *   void dec_pv_group(a, dec_rows vr, nk, p, corr, f16)
 *   void dec_normalize(float *o, int hd, float inv)
 * with DEC_NAME the entry's name (nv: vectors of DEC_LANES floats a head).
 * The last argument of dec_scores and dec_pv_group (direct) says how the
 * rows are read: 0 floats (a converted tile, or an f32 cache), 1 an f16
 * cache in place, 2 a q8_0 cache in place (groups up to DEC_Q8_DIRECT, 0
 * unless the includer defines it: each head converts the V vectors it
 * takes again, which costs more than the converted tile for many heads). */
#ifndef DEC_Q8_DIRECT
#define DEC_Q8_DIRECT 0
#endif
DEC_ATTR int DEC_NAME(const slm_attn_args *a) {
    const int G = a->group, hd = a->head_dim, nv = hd / DEC_LANES;
    if (G < 1 || G > DMAX_GROUP || hd % DEC_LANES || hd > DMAX_HD || (a->kv_type == SLM_Q8_0 && hd % 32) ||
        (a->kv_type != SLM_F32 && a->kv_type != SLM_F16 && a->kv_type != SLM_Q8_0))
        return 0;
    /* keys per tile: a converted tile of K (or V) stays DT_FLOATS, a multiple of 32 */
    const int dt = DT_FLOATS / hd >= DT_MAX ? DT_MAX : DT_FLOATS / hd / 32 * 32;
    float m[DMAX_GROUP], l[DMAX_GROUP], corr[DMAX_GROUP];
    float p[DMAX_GROUP][DT_MAX] __attribute__((aligned(64)));
    float kbuf[DT_FLOATS] __attribute__((aligned(64))), vbuf[DT_FLOATS] __attribute__((aligned(64)));
    float tmax[DMAX_GROUP];
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
        memset(a->out + (size_t)g * a->out_stride, 0, (size_t)hd * sizeof(float));
    }
    dec_prefetch(a, a->first, a->first + dt);
    for (int j0 = a->first; j0 <= a->last; j0 += dt) {
        dec_keys k = {.j0 = j0, .nk = a->last + 1 - j0 < dt ? (a->last + DEC_LANES - j0) / DEC_LANES * DEC_LANES : dt};
        int n = 0;
        for (int c = 0; c < k.nk / DEC_LANES; c++) { /* keys past last: not taken, their mask not read */
            const int left = a->last + 1 - (j0 + DEC_LANES * c);
            k.vm[c] = dec_take(a->mask + j0 + DEC_LANES * c, left < DEC_LANES ? left : DEC_LANES);
            n += __builtin_popcount(k.vm[c]);
        }
        if (!n) continue; /* the mask rules the whole tile out */
        k.all = n == k.nk;
        dec_prefetch(a, j0 + dt, j0 + 2 * dt);
        /* a whole tile of an f16 (or, where the includer takes it, q8_0) cache is read in place:
           converting the tile, storing it and reading it back cost more than converting each
           vector where it is used. direct: 0 the rows are floats, 1 f16 in place, 2 q8_0 */
        const int direct = !k.all ? 0 : a->kv_type == SLM_F16 ? 1 : a->kv_type == SLM_Q8_0 && G <= DEC_Q8_DIRECT ? 2 : 0;
        const size_t rb = dec_row_bytes(a, a->ld);
        dec_rows kr, vr = {(const uint8_t *)a->V + (size_t)j0 * rb, rb};
        if (direct) {
            kr = (dec_rows){(const uint8_t *)a->K + (size_t)j0 * rb, rb};
        } else {
            size_t kld;
            kr.base = (const uint8_t *)dec_tile(a, a->K, &k, kbuf, &kld);
            kr.stride = kld * sizeof(float);
        }
        int any = 0;
        dec_scores(a, kr, &k, nv, p, tmax, direct);
        for (int g = 0; g < G; g++) {
            if (tmax[g] == -INFINITY) { /* every score -inf: the head's output stays (a NaN goes on) */
                memset(p[g], 0, sizeof p[g]);
                corr[g] = 1.0f;
                continue;
            }
            corr[g] = dec_softmax(&k, tmax[g], &m[g], &l[g], p[g]);
            any = 1;
        }
        if (!any) continue;
        if (!direct) {
            size_t vld;
            vr.base = (const uint8_t *)dec_tile(a, a->V, &k, vbuf, &vld);
            vr.stride = vld * sizeof(float);
        }
        dec_pv_group(a, vr, k.nk, (const float (*)[DT_MAX])p, corr, direct);
    }
    if (a->ml)
        for (int g = 0; g < G; g++) a->ml[2 * g] = m[g], a->ml[2 * g + 1] = l[g];
    for (int g = 0; g < G; g++)
        if (l[g] > 0.0f) dec_normalize(a->out + (size_t)g * a->out_stride, hd, 1.0f / l[g]);
    return 1;
}
