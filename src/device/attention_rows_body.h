/* The prefill block entries' shared second half: the walk over tiles of
 * keys, query rows and the heads of the group that calls the includer's
 * vector steps. Include after attention_rows_tile.h and the definitions of
 *   void rows_chunk_any(a, const float *kt, const float *vt, int nq, q, o, rm, st, m, l)
 *     (nq query vectors, 1 .. ROWS_NQ, against one converted tile: their
 *     scores, softmax steps and P V; q[h], o[h] their queries and outputs,
 *     rm[h] the keys they take, st[h] the index of their m / l)
 *   void rows_normalize(float *o, int hd, float inv)   (o *= inv)
 * with ROWS_NAME the entry's name and ROWS_NQ the query vectors one chunk
 * takes (as many as the includer's score registers hold); j0, the tile's
 * first KV row, for ALiBi, which only an includer defining ROWS_ALIBI 1
 * takes (the others decline such a block). */
#ifndef ROWS_ALIBI
#define ROWS_ALIBI 0
#endif
ROWS_ATTR int ROWS_NAME(const slm_attn_rows *a) {
    const int R = a->rows, G = a->group, hd = a->head_dim;
    if ((a->alibi && (!ROWS_ALIBI || !a->qpos)) || R < 1 || R > SLM_ATTN_ROWS_MAX || G < 1 || G > RMAX_GROUP ||
        hd < ROWS_LANES || hd % ROWS_LANES ||
        hd > RMAX_HD || !(a->kv_type == SLM_F32 || a->kv_type == SLM_F16 || (a->kv_type == SLM_Q8_0 && hd % 32 == 0)))
        return 0;
    float m[RMAX_VEC], l[RMAX_VEC];
    int jlo = INT32_MAX, jhi = -1;
    for (int i = 0; i < R; i++) {
        if (a->first[i] > a->last[i]) continue;
        jlo = a->first[i] < jlo ? a->first[i] : jlo;
        jhi = a->last[i] > jhi ? a->last[i] : jhi;
    }
    for (int i = 0; i < R; i++)
        for (int g = 0; g < G; g++) {
            m[i * G + g] = -INFINITY;
            l[i * G + g] = 0.0f;
            memset(a->out + (size_t)i * a->out_ld + (size_t)g * a->out_stride, 0, (size_t)hd * sizeof(float));
        }
    float kt[RMAX_HD * RT] __attribute__((aligned(RALIGN))), vt[RT * RMAX_HD] __attribute__((aligned(RALIGN)));
    for (int j0 = jlo; j0 <= jhi; j0 += RT) {
        const int nt = jhi + 1 - j0 < RT ? jhi + 1 - j0 : RT;
        uint32_t vm = 0;
        for (int t = 0; t < nt; t++) vm |= (a->mask[j0 + t] != 0) ? 1u << t : 0u;
        if (!vm) continue; /* the mask rules the whole tile out */
        rows_tile(a, j0, vm, kt, vt);
        const float *q[ROWS_NQ];
        float *o[ROWS_NQ];
        uint32_t rm[ROWS_NQ];
        int st[ROWS_NQ], nq = 0;
        for (int i = 0; i < R; i++) {
            const int lo = a->first[i] > j0 ? a->first[i] - j0 : 0;
            const int hi = a->last[i] < j0 + nt - 1 ? a->last[i] - j0 : nt - 1;
            if (lo > hi) continue;
            const uint32_t bits = (hi - lo == 31 ? 0xffffffffu : ((1u << (hi - lo + 1)) - 1u)) << lo;
            if (!(vm & bits)) continue;
            for (int g = 0; g < G; g++) {
                q[nq] = a->q + (size_t)i * a->q_ld + (size_t)g * a->q_stride;
                o[nq] = a->out + (size_t)i * a->out_ld + (size_t)g * a->out_stride;
                rm[nq] = vm & bits;
                st[nq] = i * G + g;
                if (++nq == ROWS_NQ) {
                    rows_chunk_any(a, kt, vt, ROWS_NQ, q, o, rm, st, m, l, j0);
                    nq = 0;
                }
            }
        }
        /* fewer than ROWS_NQ left: an inlined rows_chunk_any drops its full count here */
        if (nq >= ROWS_NQ) __builtin_unreachable();
        if (nq) rows_chunk_any(a, kt, vt, nq, q, o, rm, st, m, l, j0);
    }
    for (int i = 0; i < R; i++)
        for (int g = 0; g < G; g++) {
            const float li = l[i * G + g];
            if (!(li > 0.0f)) continue;
            rows_normalize(a->out + (size_t)i * a->out_ld + (size_t)g * a->out_stride, hd, 1.0f / li);
        }
    return 1;
}
#undef ROWS_ALIBI
