/* The logits staticlm computes at every position of a prompt, for
 * tools/compare_llamacpp.sh (not built by CMake, not run in CI; the script
 * compiles it against build/libstaticlm.a through the public API).
 *
 *   slm_logits dump MODEL OUTDIR N PROMPT [KV [CTX]]
 *       tokenizes PROMPT (with BOS), keeps the first N ids, and writes
 *       OUTDIR/ids.txt (one id a line), OUTDIR/prefix_K.txt (the text of
 *       ids 1..K-1, what llama.cpp re-tokenizes for the prefix of K ids) and
 *       OUTDIR/slm_K.bin (f32 logits after K ids: prefill of the first id,
 *       then one decode step each), with the KV cache's element type KV
 *       (f32, f16, q8_0, or default: staticlm's default) and a context (KV
 *       capacity) of CTX rows (default 2N; LongRoPE models pick their long
 *       factors above their original context). Also prefills all N ids at
 *       once and prints how far its last logits are from the decode path's.
 *   slm_logits compare A.bin B.bin
 *       prints max |a - b|, the range of b (max - min), their ratio, both
 *       argmaxes and b's top-2 gap, for two f32 logit vectors of the same
 *       length.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "staticlm.h"

static float *read_f32(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *x = bytes > 0 ? malloc((size_t)bytes) : NULL;
    if (!x || fread(x, 1, (size_t)bytes, f) != (size_t)bytes) {
        free(x);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = bytes / 4;
    return x;
}

static int argmax(const float *x, long n) {
    long b = 0;
    for (long i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int)b;
}

static int compare(const char *a_path, const char *b_path) {
    long na = 0, nb = 0;
    float *a = read_f32(a_path, &na), *b = read_f32(b_path, &nb);
    if (!a || !b || na != nb) {
        fprintf(stderr, "slm_logits: cannot compare %s (%ld) and %s (%ld)\n", a_path, na, b_path, nb);
        free(a);
        free(b);
        return 1;
    }
    /* max |a - b|, the range of b (max - min), their ratio, both argmaxes, and
     * b's gap between its two largest logits (a differing argmax counts only
     * where this gap exceeds the difference) */
    double maxd = 0, bmax = -INFINITY, bmin = INFINITY;
    for (long i = 0; i < na; i++) {
        maxd = fmax(maxd, fabs((double)a[i] - b[i]));
        bmax = fmax(bmax, b[i]);
        bmin = fmin(bmin, b[i]);
    }
    int ab = argmax(b, nb);
    double second = -INFINITY;
    for (long i = 0; i < nb; i++)
        if (i != ab) second = fmax(second, b[i]);
    double range = fmax(bmax - bmin, 1e-30);
    printf("%.6g %.6g %.6g %d %d %.6g\n", maxd, range, maxd / range, argmax(a, na), ab, b[ab] - second);
    free(a);
    free(b);
    return 0;
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static int dump(const char *model, const char *dir, int n_max, const char *prompt, const char *kv, int ctx) {
    slm_options o = slm_default_options();
    if (kv && strcmp(kv, "default") && (o.kv_type = slm_kv_type_parse(kv)) < 0) {
        fprintf(stderr, "slm_logits: KV type '%s' (default, f32, f16, q8_0)\n", kv);
        return 2;
    }
    if (ctx && ctx < 2 * n_max) {
        fprintf(stderr, "slm_logits: context %d below 2N = %d\n", ctx, 2 * n_max);
        return 2;
    }
    o.max_prompt_len = n_max;
    /* KV capacity 2N unless CTX is given: under a LongRoPE model's original
     * context (short factors); a CTX above it takes the long factors */
    o.min_response_len = ctx ? ctx - n_max : n_max;
    o.n_threads = 0;
    slm_engine *e = NULL;
    if (slm_load(&e, model, &o)) {
        fprintf(stderr, "slm_logits: %s\n", e ? slm_last_error(e) : "out of memory");
        slm_free(e);
        return 1;
    }
    slm_info info;
    slm_get_info(e, &info);
    const int V = info.vocab_size;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_max + 1024 + strlen(prompt)));
    int n = slm_tokenize(e, prompt, 1, ids, (int)(n_max + 1024 + strlen(prompt)));
    if (n <= 0) {
        fprintf(stderr, "slm_logits: cannot tokenize the prompt\n");
        return 1;
    }
    if (n > n_max) n = n_max;
    char path[4096];
    snprintf(path, sizeof path, "%s/ids.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    for (int i = 0; i < n; i++) fprintf(f, "%d\n", ids[i]);
    fclose(f);
    /* prefix texts: the pieces of ids 1..K-1 (llama.cpp adds the BOS itself) */
    size_t cap = 1 << 16, len = 0;
    char *text = calloc(cap, 1);
    for (int k = 1; k <= n; k++) {
        if (k >= 2) {
            const char *piece = slm_token_piece(e, ids[k - 2], ids[k - 1]);
            size_t pl = piece ? strlen(piece) : 0;
            if (len + pl + 1 > cap) text = realloc(text, cap = 2 * (len + pl + 1));
            memcpy(text + len, piece, pl);
            text[len += pl] = 0;
        }
        snprintf(path, sizeof path, "%s/prefix_%d.txt", dir, k);
        if (!write_file(path, text, len)) return 1;
    }
    const float *lg = NULL;
    slm_reset(e);
    for (int k = 1; k <= n; k++) {
        slm_status s = k == 1 ? slm_prefill(e, ids, 1, &lg) : slm_decode(e, ids[k - 1], &lg);
        if (s) {
            fprintf(stderr, "slm_logits: position %d: %s\n", k - 1, slm_last_error(e));
            return 1;
        }
        snprintf(path, sizeof path, "%s/slm_%d.bin", dir, k);
        if (!write_file(path, lg, sizeof(float) * (size_t)V)) return 1;
    }
    float *last = malloc(sizeof(float) * (size_t)V);
    memcpy(last, lg, sizeof(float) * (size_t)V);
    slm_reset(e);
    if (slm_prefill(e, ids, n, &lg) == SLM_OK) {
        double d = 0, m = 1e-30;
        for (int i = 0; i < V; i++) {
            d = fmax(d, fabs((double)lg[i] - last[i]));
            m = fmax(m, fabs((double)last[i]));
        }
        printf("prefill of %d ids vs %d decode steps: max |diff| %.3g (relative %.3g)\n", n, n - 1, d, d / m);
    }
    free(last);
    free(text);
    free(ids);
    slm_free(e);
    printf("%d\n", n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "compare")) return compare(argv[2], argv[3]);
    if (argc >= 6 && argc <= 8 && !strcmp(argv[1], "dump"))
        return dump(argv[2], argv[3], atoi(argv[4]), argv[5], argc >= 7 ? argv[6] : NULL, argc == 8 ? atoi(argv[7]) : 0);
    fprintf(stderr, "usage: slm_logits dump MODEL OUTDIR N PROMPT [KV [CTX]] | slm_logits compare A.bin B.bin\n");
    return 2;
}
