/* Repacking: the compiler rewrites the matrices a matmul reads into the
 * 16-row interleaved layout defined in common/layout_r16.c (the layout the
 * kernels and a blob's weights section use). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "compiler/compiler.h"

uint32_t slm_repack_type(uint32_t t, int64_t k, int64_t n) {
    if (n < 16 || k <= 0) return 0; /* n % 16 rows at the end stay as they are */
    if (t == SLM_Q4_0 && k % 32 == 0) return SLM_Q4_0_R16;
    if (t == SLM_Q6_K && k % 256 == 0) return SLM_Q6_K_R16;
    if (t == SLM_Q4_K && k % 256 == 0) return SLM_Q4_K_R16;
    if (t == SLM_Q5_K && k % 256 == 0) return SLM_Q5_K_R16;
    if (t == SLM_Q8_0 && k % 32 == 0) return SLM_Q8_0_R16;
    if (t == SLM_Q5_0 && k % 32 == 0) return SLM_Q5_0_R16;
    if (t == SLM_IQ4_NL && k % 32 == 0) return SLM_IQ4_NL_R16;
    if (t == SLM_Q3_K && k % 256 == 0) return SLM_Q3_K_R16;
    if (t == SLM_IQ4_XS && k % 256 == 0) return SLM_IQ4_XS_R16;
    if (t == SLM_Q2_K && k % 256 == 0) return SLM_Q2_K_R16;
    if (t == SLM_Q4_1 && k % 32 == 0) return SLM_Q4_1_R16;
    if (t == SLM_Q5_1 && k % 32 == 0) return SLM_Q5_1_R16;
    if (t == SLM_MXFP4 && k % 32 == 0) return SLM_MXFP4_R16;
    if (t == SLM_F16) return SLM_F16_R16;
    return 0;
}

/* Row c's 32 codes (4 bits each, in the low bits of q) into a block's quads. */
static inline void put_nibbles(uint8_t *blk, int c, const uint8_t q[32]) {
    for (int g = 0; g < 4; g++)
        for (int e = 0; e < 4; e++) blk[g * 64 + c * 4 + e] = (uint8_t)((q[8 * g + e] & 0xF) | (q[8 * g + 4 + e] & 0xF) << 4);
}

/* Row c's 32 2-bit fields (bits sh..sh+1 of q) into two half blocks of
 * 64 bytes at hi: half h, row c, byte e, bits 2f..2f+1 = element 16h + 4f + e
 * (Q6_K's high bits, Q3_K's and Q2_K's low bits). */
static inline void put_crumbs(uint8_t *hi, int c, const uint8_t q[32], int sh) {
    for (int h = 0; h < 2; h++)
        for (int e = 0; e < 4; e++) {
            uint8_t v = 0;
            for (int f = 0; f < 4; f++) v |= (uint8_t)(((q[16 * h + 4 * f + e] >> sh) & 3) << (2 * f));
            hi[h * 64 + c * 4 + e] = v;
        }
}

/* A 32-element block's 16 bytes of nibbles as 32 codes (low nibbles first:
 * Q4_0, IQ4_NL and MXFP4 order them alike). */
static void split_nibbles(const uint8_t *qs, uint8_t *q) {
    for (int e = 0; e < 16; e++) {
        q[e] = qs[e] & 0xF;
        q[e + 16] = qs[e] >> 4;
    }
}

static void repack_group_q4_0(const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    for (int c = 0; c < 16; c++) {
        const slm_block_q4_0 *row = (const slm_block_q4_0 *)(src + (size_t)c * wrow);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = dst + b * 288, q[32];
            split_nibbles(row[b].qs, q);
            put_nibbles(blk, c, q);
            memcpy(blk + 256 + 2 * c, &row[b].d, 2);
        }
    }
}

/* Q5_0 (the fifth bits in hb), IQ4_NL (the codes are table indices), Q4_1
 * and Q5_1 (the mins after the scales) as Q4_0. */
static void repack_group_small(uint32_t t, const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    const int five = t == SLM_Q5_0 || t == SLM_Q5_1, mins = t == SLM_Q4_1 || t == SLM_Q5_1;
    const size_t cb = five ? 320 : 256, bb = cb + 32 + 32 * (size_t)mins;
    const size_t sb = (size_t)slm_row_bytes(t, 32); /* bytes per source block */
    for (int c = 0; c < 16; c++) {
        const uint8_t *row = src + (size_t)c * wrow;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *x = row + (size_t)b * sb; /* f16 d, [f16 m], [u8 qh[4]], u8 qs[16] */
            const uint8_t *qh = x + 2 + 2 * mins, *qs = qh + 4 * five;
            uint8_t *blk = dst + (size_t)b * bb, q[32];
            uint32_t h = 0;
            if (five) h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
            for (int e = 0; e < 32; e++) q[e] = (uint8_t)(((qs[e % 16] >> (4 * (e / 16))) & 0xF) | ((h >> e) & 1) << 4);
            put_nibbles(blk, c, q);
            if (five)
                for (int e = 0; e < 4; e++) {
                    uint8_t v = 0;
                    for (int f = 0; f < 8; f++) v |= (uint8_t)(((q[4 * f + e] >> 4) & 1) << f);
                    blk[256 + c * 4 + e] = v;
                }
            memcpy(blk + cb + 2 * c, x, 2);
            if (mins) memcpy(blk + cb + 32 + 2 * c, x + 2, 2);
        }
    }
}

/* MXFP4: the codes as Q4_0's, then the 16 rows' E8M0 bytes. */
static void repack_group_mxfp4(const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    for (int c = 0; c < 16; c++) {
        const slm_block_mxfp4 *row = (const slm_block_mxfp4 *)(src + (size_t)c * wrow);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = dst + b * 272, q[32];
            split_nibbles(row[b].qs, q);
            put_nibbles(blk, c, q);
            blk[256 + c] = row[b].e;
        }
    }
}

static void repack_group_q6_k(const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    const int64_t ns = nb / 8;
    for (int c = 0; c < 16; c++) {
        const slm_block_q6_K *row = (const slm_block_q6_K *)(src + (size_t)c * wrow);
        for (int64_t s = 0; s < ns; s++) {
            const slm_block_q6_K *x = &row[s];
            uint8_t *sup = dst + s * 3360, q[256];
            memcpy(sup + 2 * c, &x->d, 2);
            for (int H = 0; H < 2; H++) /* the codes in element order (as the dequantizer reads them) */
                for (int l = 0; l < 32; l++) {
                    const uint8_t *ql = x->ql + 64 * H, qh = x->qh[32 * H + l];
                    q[128 * H + l] = (uint8_t)((ql[l] & 0xF) | (qh & 3) << 4);
                    q[128 * H + l + 32] = (uint8_t)((ql[l + 32] & 0xF) | ((qh >> 2) & 3) << 4);
                    q[128 * H + l + 64] = (uint8_t)((ql[l] >> 4) | ((qh >> 4) & 3) << 4);
                    q[128 * H + l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((qh >> 6) & 3) << 4);
                }
            for (int bb = 0; bb < 8; bb++) {
                uint8_t *blk = sup + 32 + bb * 416;
                const uint8_t *qb = q + 32 * bb;
                put_nibbles(blk, c, qb);
                put_crumbs(blk + 256, c, qb, 4);
                blk[384 + c] = (uint8_t)x->scales[2 * bb];
                blk[400 + c] = (uint8_t)x->scales[2 * bb + 1];
            }
        }
    }
}

/* Q2_K: per super-block the rows' d and dmin in a header, then 8 blocks of
 * codes and their halves' scale | min << 4 bytes. */
static void repack_group_q2_k(const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    const int64_t ns = nb / 8;
    for (int c = 0; c < 16; c++) {
        const slm_block_q2_K *row = (const slm_block_q2_K *)(src + (size_t)c * wrow);
        for (int64_t s = 0; s < ns; s++) {
            const slm_block_q2_K *x = &row[s];
            uint8_t *sup = dst + s * 1344;
            memcpy(sup + 2 * c, &x->d, 2);
            memcpy(sup + 32 + 2 * c, &x->dmin, 2);
            for (int bb = 0; bb < 8; bb++) {
                uint8_t *blk = sup + 64 + bb * 160, q[32];
                const int h = bb / 4, j = bb % 4; /* as the dequantizer reads them */
                for (int l = 0; l < 32; l++) q[l] = (uint8_t)((x->qs[32 * h + l] >> (2 * j)) & 3);
                put_crumbs(blk, c, q, 0);
                for (int hh = 0; hh < 2; hh++) blk[128 + 16 * hh + c] = x->scales[2 * bb + hh];
            }
        }
    }
}

/* IQ4_XS: per super-block the rows' d and 6-bit block scales in a header,
 * then 8 blocks of codes as IQ4_NL's. */
static void repack_group_iq4_xs(const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    const int64_t ns = nb / 8;
    for (int c = 0; c < 16; c++) {
        const slm_block_iq4_xs *row = (const slm_block_iq4_xs *)(src + (size_t)c * wrow);
        for (int64_t s = 0; s < ns; s++) {
            const slm_block_iq4_xs *x = &row[s];
            uint8_t *sup = dst + s * 2176;
            memcpy(sup + 2 * c, &x->d, 2);
            for (int bb = 0; bb < 8; bb++) {
                const int lo = (x->scales_l[bb / 2] >> (4 * (bb % 2))) & 0xF, hi = (x->scales_h >> (2 * bb)) & 3;
                if (bb % 2 == 0) sup[32 + 16 * (bb / 2) + c] = 0;
                sup[32 + 16 * (bb / 2) + c] |= (uint8_t)(lo << (4 * (bb % 2)));
                if (bb % 4 == 0) sup[96 + 16 * (bb / 4) + c] = 0;
                sup[96 + 16 * (bb / 4) + c] |= (uint8_t)(hi << (2 * (bb % 4)));
                uint8_t q[32];
                for (int e = 0; e < 16; e++) {
                    q[e] = x->qs[16 * bb + e] & 0xF;
                    q[e + 16] = x->qs[16 * bb + e] >> 4;
                }
                put_nibbles(sup + 128 + bb * 256, c, q);
            }
        }
    }
}

/* Q3_K: per super-block the rows' d and the scales' high bits in a header,
 * then 8 blocks of low code bits, third bits and the scales' low bits. */
static void repack_group_q3_k(const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    const int64_t ns = nb / 8;
    for (int c = 0; c < 16; c++) {
        const slm_block_q3_K *row = (const slm_block_q3_K *)(src + (size_t)c * wrow);
        for (int64_t s = 0; s < ns; s++) {
            const slm_block_q3_K *x = &row[s];
            uint8_t *sup = dst + s * 1760;
            memcpy(sup + 2 * c, &x->d, 2);
            for (int j = 0; j < 16; j++) {
                const int sc = slm_get_scale_q3_k(j, x->scales);
                if (j % 4 == 0) sup[32 + 16 * (j / 4) + c] = 0;
                sup[32 + 16 * (j / 4) + c] |= (uint8_t)((sc >> 4) << (2 * (j % 4)));
                uint8_t *blk = sup + 96 + (j / 2) * 208;
                if (j % 2 == 0) blk[192 + c] = (uint8_t)(sc & 0xF);
                else blk[192 + c] |= (uint8_t)((sc & 0xF) << 4);
            }
            for (int bb = 0; bb < 8; bb++) {
                uint8_t *blk = sup + 96 + bb * 208, q[32];
                const int h = bb / 4, j = bb % 4; /* as the dequantizer reads them */
                for (int l = 0; l < 32; l++) {
                    const int lo = (x->qs[32 * h + l] >> (2 * j)) & 3, hi = (x->hmask[l] >> (4 * h + j)) & 1;
                    q[l] = (uint8_t)(lo | hi << 2);
                }
                put_crumbs(blk, c, q, 0);
                for (int e = 0; e < 4; e++) {
                    uint8_t v = 0;
                    for (int f = 0; f < 8; f++) v |= (uint8_t)(((q[4 * f + e] >> 2) & 1) << f);
                    blk[128 + c * 4 + e] = v;
                }
            }
        }
    }
}

/* Q4_K / Q5_K: per super-block the rows' scales in a header, then 8 blocks
 * of codes (and, for Q5_K, their fifth bits). */
static void repack_group_k(int five, const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    const int64_t ns = nb / 8;
    const size_t sup_bytes = five ? 2816 : 2304, blk_bytes = five ? 320 : 256;
    for (int c = 0; c < 16; c++) {
        const uint8_t *row = src + (size_t)c * wrow;
        for (int64_t s = 0; s < ns; s++) {
            const slm_block_q4_K *x4 = (const slm_block_q4_K *)row + s;
            const slm_block_q5_K *x5 = (const slm_block_q5_K *)row + s;
            const uint8_t *scales = five ? x5->scales : x4->scales, *qs = five ? x5->qs : x4->qs;
            uint8_t *sup = dst + (size_t)s * sup_bytes;
            memcpy(sup + 2 * c, five ? &x5->d : &x4->d, 2);
            memcpy(sup + 32 + 2 * c, five ? &x5->dmin : &x4->dmin, 2);
            for (int bb = 0; bb < 8; bb++) {
                uint8_t sc, mn, q[32];
                slm_get_scale_min_k4(bb, scales, &sc, &mn);
                sup[64 + 16 * bb + c] = (uint8_t)((sc & 0xF) | (mn & 0xF) << 4);
                if (bb % 4 == 0) sup[192 + 16 * (bb / 4) + c] = sup[224 + 16 * (bb / 4) + c] = 0;
                sup[192 + 16 * (bb / 4) + c] |= (uint8_t)((sc >> 4) << (2 * (bb % 4)));
                sup[224 + 16 * (bb / 4) + c] |= (uint8_t)((mn >> 4) << (2 * (bb % 4)));
                /* block bb = chunk bb / 2 of qs, low (bb even) or high nibbles */
                uint8_t *blk = sup + 256 + (size_t)bb * blk_bytes;
                for (int l = 0; l < 32; l++) q[l] = (uint8_t)(qs[32 * (bb / 2) + l] >> (4 * (bb % 2))) & 0xF;
                put_nibbles(blk, c, q);
                if (five)
                    for (int e = 0; e < 4; e++) {
                        uint8_t v = 0;
                        for (int f = 0; f < 8; f++) v |= (uint8_t)(((x5->qh[4 * f + e] >> bb) & 1) << f);
                        blk[256 + c * 4 + e] = v;
                    }
            }
        }
    }
}

static void repack_group_q8_0(const uint8_t *src, uint64_t wrow, int64_t nb, uint8_t *dst) {
    for (int c = 0; c < 16; c++) {
        const slm_block_q8_0 *row = (const slm_block_q8_0 *)(src + (size_t)c * wrow);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = dst + b * 544;
            for (int v = 0; v < 8; v++)
                for (int e = 0; e < 4; e++) blk[v * 64 + c * 4 + e] = (uint8_t)(row[b].qs[4 * v + e] ^ 0x80);
            memcpy(blk + 512 + 2 * c, &row[b].d, 2);
        }
    }
}

void slm_repack_r16(uint32_t t, void *data, int64_t k, int64_t n, void *tmp) {
    const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
    const int64_t nb = k / 32;
    for (int64_t g = 0; g < n / 16; g++) {
        uint8_t *grp = (uint8_t *)data + (size_t)g * 16 * wrow;
        memcpy(tmp, grp, (size_t)(16 * wrow));
        if (t == SLM_F16) {
            const uint16_t *src = tmp;
            uint16_t *dst = (uint16_t *)grp;
            for (int c = 0; c < 16; c++)
                for (int64_t e = 0; e < k; e++) dst[e * 16 + c] = src[(size_t)c * (size_t)k + (size_t)e];
        } else if (t == SLM_Q4_0) repack_group_q4_0(tmp, wrow, nb, grp);
        else if (t == SLM_Q8_0) repack_group_q8_0(tmp, wrow, nb, grp);
        else if (t == SLM_MXFP4) repack_group_mxfp4(tmp, wrow, nb, grp);
        else if (t == SLM_Q5_0 || t == SLM_IQ4_NL || t == SLM_Q4_1 || t == SLM_Q5_1) repack_group_small(t, tmp, wrow, nb, grp);
        else if (t == SLM_Q4_K || t == SLM_Q5_K) repack_group_k(t == SLM_Q5_K, tmp, wrow, nb, grp);
        else if (t == SLM_Q3_K) repack_group_q3_k(tmp, wrow, nb, grp);
        else if (t == SLM_IQ4_XS) repack_group_iq4_xs(tmp, wrow, nb, grp);
        else if (t == SLM_Q2_K) repack_group_q2_k(tmp, wrow, nb, grp);
        else repack_group_q6_k(tmp, wrow, nb, grp);
    }
}

/* ---- the compiler's weight layout ------------------------------------------- */

/* Matrices a matmul reads: every 2-D tensor but an untied embedding table
 * (only read by row, where the layout gains nothing). */
static uint32_t repack_type_of(const slm_model_file *m, const slm_tensor *t) {
    if (t->n_dims != 2) return 0;
    if (!m->cfg.tied_embeddings && !strcmp(t->name, "token_embd.weight")) return 0;
    /* rows not a multiple of 16 (tail rows left as they are): the vocabulary
     * matrix only, whose tiles carry no RoPE epilogue that a cut inside a
     * head would break */
    if (t->ne[1] % 16 && strcmp(t->name, "output.weight") && strcmp(t->name, "token_embd.weight")) return 0;
    return slm_repack_type(t->type, t->ne[0], t->ne[1]);
}

/* Threads share the tensors to repack (a tensor at a time, claimed with a
 * counter): the work is page faults (private copies) and byte shuffling. */
typedef struct repack_job {
    slm_model_file *m;
    _Atomic int next;
    _Atomic int failed; /* a temporary buffer could not be allocated */
} repack_job;

static void *repack_worker(void *arg) {
    repack_job *j = arg;
    for (;;) {
        const int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->m->n_tensors) return NULL;
        slm_tensor *t = &j->m->tensors[i];
        const uint32_t rt = repack_type_of(j->m, t);
        if (!rt) continue;
        void *tmp = slm_malloc((size_t)slm_row_bytes(t->type, (uint64_t)t->ne[0]) * 16);
        if (!tmp) {
            atomic_store(&j->failed, 1);
            return NULL;
        }
        slm_repack_r16(t->type, (void *)(uintptr_t)t->data, t->ne[0], t->ne[1], tmp);
        slm_xfree(tmp);
        t->type = rt;
    }
}

static int by_data(const void *a, const void *b) {
    const slm_tensor *x = *(const slm_tensor *const *)a, *y = *(const slm_tensor *const *)b;
    return (const uint8_t *)x->data < (const uint8_t *)y->data ? -1 : (const uint8_t *)x->data > (const uint8_t *)y->data;
}

slm_status slm_model_repack(slm_model_file *m, slm_err *err) {
    if (!m->map.data) return SLM_OK; /* e.g. a Hugging Face folder: float weights, nothing to repack */
    /* Repacking rewrites bytes in place, a tensor per thread: tensors that
     * share bytes (a malformed file) would corrupt each other, so refuse them. */
    {
        const slm_tensor **v = slm_malloc(sizeof *v * (size_t)(m->n_tensors + 1));
        if (!v) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", slm_basename(m->path));
        int n = 0;
        for (int i = 0; i < m->n_tensors; i++)
            if (repack_type_of(m, &m->tensors[i])) v[n++] = &m->tensors[i];
        qsort(v, (size_t)n, sizeof *v, by_data);
        for (int i = 1; i < n; i++)
            if ((const uint8_t *)v[i - 1]->data + v[i - 1]->nbytes > (const uint8_t *)v[i]->data) {
                slm_status s = slm_errf(err, SLM_ERR_FORMAT, "%s: tensors '%s' and '%s' share data bytes",
                                        slm_basename(m->path), v[i - 1]->name, v[i]->name);
                slm_xfree(v);
                return s;
            }
        slm_xfree(v);
    }
    const uint8_t *lo = m->map.data, *hi = lo + m->map.size;
    const uint8_t *first = hi, *last = lo; /* the span of the tensors to repack */
    for (int i = 0; i < m->n_tensors; i++) {
        const slm_tensor *t = &m->tensors[i];
        if (!repack_type_of(m, t)) continue;
        const uint8_t *d = t->data;
        if (d < lo || d > hi || t->nbytes > (uint64_t)(hi - d))
            return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor '%s' outside the mapping", slm_basename(m->path), t->name);
        if (d < first) first = d;
        if (d + t->nbytes > last) last = d + t->nbytes;
    }
    if (first >= last) return SLM_OK;
    if (mprotect(m->map.data, (size_t)m->map.size, PROT_READ | PROT_WRITE) != 0)
        return slm_errf(err, SLM_ERR_IO, "%s: cannot make the mapping writable to repack weights: %s",
                        slm_basename(m->path), strerror(errno));
    /* Private copies of the pages up front, in one call: a page first read
     * (mapped from the file) and then written is copied again and its old
     * mapping shot down on every CPU of the process, which measured slower
     * than repacking itself. (Best effort: Linux 5.14+.) */
#ifdef MADV_POPULATE_WRITE
    {
        const long pg = sysconf(_SC_PAGESIZE);
        const uintptr_t a = (uintptr_t)first & ~(uintptr_t)(pg - 1);
        madvise((void *)a, (size_t)((uintptr_t)last - a), MADV_POPULATE_WRITE);
    }
#endif
    repack_job job = {.m = m};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu > 1 ? (int)(ncpu > 8 ? 8 : ncpu) : 1;
    pthread_t th[8];
    int started = 0;
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[started], NULL, repack_worker, &job) == 0) started++;
    repack_worker(&job);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    mprotect(m->map.data, (size_t)m->map.size, PROT_READ);
    if (atomic_load(&job.failed))
        return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory repacking the weights", slm_basename(m->path));
    return SLM_OK;
}

