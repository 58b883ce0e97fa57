/* Shared by the Hugging Face folder tests (test_hf, test_hf_families,
 * test_hf_qwen35, test_hf_gemma4): a folder's tensors written again as a
 * GGUF twin (the experts as stacks too), the logits' relative error, and a
 * folder that must be refused. Include after t.h and st_write.h. */
#ifndef SLM_TEST_HF_TWIN_H
#define SLM_TEST_HF_TWIN_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "format/gguf.h"
#include "format/model.h"

/* Adds t's values f ([rows][cols] as t's shape; the writer takes f) to g as
 * tensor gn in t's dtype (1-D tensors and F32 ones as F32, as the
 * converter writes norms); the bytes stay in keep[*nk] until the file is
 * written (hf_twin_write). */
static void hf_twin_add(slm_gguf_writer *g, const char *gn, const st_item *t, float *f, void **keep, int *nk) {
    const int64_t rows = t->n_dims == 2 ? t->shape[0] : 1, cols = t->n_dims == 2 ? t->shape[1] : t->shape[0];
    const uint32_t type = t->n_dims == 1 || !strcmp(t->dtype, "F32") ? SLM_F32
                          : !strcmp(t->dtype, "F16")                 ? SLM_F16
                                                                     : SLM_BF16;
    const uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    void *data = f;
    if (type != SLM_F32) {
        data = malloc((size_t)(rb * (uint64_t)rows));
        for (int64_t r = 0; r < rows; r++) slm_quantize_row(type, f + r * cols, (uint8_t *)data + r * rb, cols);
        free(f);
    }
    keep[(*nk)++] = data;
    int64_t ne[2] = {cols, rows};
    slm_gguf_add_tensor(g, gn, type, t->n_dims == 2 ? 2 : 1, ne, data, rb * (uint64_t)rows);
}

/* Writes g to path (checked), frees g and the kept tensors; 1 if written. */
static int hf_twin_write(slm_gguf_writer *g, const char *path, void **keep, int nk) {
    slm_err err = {0};
    const slm_status st = slm_gguf_write(g, path, &err);
    CHECKF(st == SLM_OK, "write %s: %s", path, err.msg);
    slm_gguf_writer_free(g);
    for (int i = 0; i < nk; i++) free(keep[i]);
    return st == SLM_OK;
}

/* max |a - b| over max |b| (at least 1e-6); infinite when a is NaN */
static double rel_err(const float *a, const float *b, int n) {
    double md = 0, mr = 1e-6;
    for (int i = 0; i < n; i++) {
        md = fmax(md, fabs((double)a[i] - b[i]));
        mr = fmax(mr, fabs((double)b[i]));
    }
    return isnan(a[0]) ? INFINITY : md / mr;
}

/* A folder that slm_model_open refuses with want, and a message holding w1 and w2. */
static void expect_folder(const char *dir, slm_status want, const char *w1, const char *w2) {
    slm_model_file m;
    slm_err err = {0};
    slm_status s = slm_model_open(&m, dir, &err);
    CHECKF(s == want, "%s: status %d, want %d (%s)", dir, s, want, err.msg);
    CHECKF((!w1 || strstr(err.msg, w1)) && (!w2 || strstr(err.msg, w2)), "%s: message '%s' (want '%s', '%s')", dir,
           err.msg, w1 ? w1 : "", w2 ? w2 : "");
    if (s == SLM_OK) slm_model_close(&m);
}

/* A test folder's expert matrix j (0 gate, 1 up, 2 down) of expert e in
 * layer l, [rows][cols] floats (NULL: not in the folder). */
typedef const float *(*hf_twin_expert_fn)(const void *ctx, int l, int j, int e);

/* The experts as llama.cpp's converter writes them: blk.N.ffn_{gate,up,down}_exps.weight,
 * 3-D {in, out, E}, in dtype mat ("F32", "F16", else BF16); D the model's
 * width, F an expert's, L layers of E experts. A stack whose expert 0 is
 * NULL is not written (ungated experts' gate, a layer without experts). */
static inline void hf_twin_experts(slm_gguf_writer *g, const char *mat, int L, int64_t D, int64_t F, int E, hf_twin_expert_fn get,
                                   const void *ctx, void **keep, int *nk) {
    static const char *const kind[3] = {"gate", "up", "down"};
    const uint32_t type = !strcmp(mat, "F32") ? SLM_F32 : !strcmp(mat, "F16") ? SLM_F16 : SLM_BF16;
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 3; j++) {
            if (!get(ctx, l, j, 0)) continue;
            const int64_t rows = j == 2 ? D : F, cols = j == 2 ? F : D;
            const uint64_t rb = slm_row_bytes(type, (uint64_t)cols), nb = rb * (uint64_t)rows * (uint64_t)E;
            uint8_t *d = calloc(1, (size_t)nb);
            CHECK(d != NULL);
            if (!d) return;
            for (int e = 0; e < E; e++) {
                const float *f = get(ctx, l, j, e);
                CHECKF(f != NULL, "layer %d expert %d %s: not in the folder", l, e, kind[j]);
                for (int64_t r = 0; f && r < rows; r++)
                    slm_quantize_row(type, f + r * cols, d + ((uint64_t)e * (uint64_t)rows + (uint64_t)r) * rb, cols);
            }
            keep[(*nk)++] = d;
            char n[64];
            snprintf(n, sizeof n, "blk.%d.ffn_%s_exps.weight", l, kind[j]);
            const int64_t ne[3] = {cols, rows, E};
            slm_gguf_add_tensor(g, n, type, 3, ne, d, nb);
        }
}

#endif
