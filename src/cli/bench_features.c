/* staticlm bench-features: what the runtime's answers to static shapes
 * save on a given model (issue: variants, prefix cache):
 *   - decode step time with the smallest fitting generate variant vs the
 *     largest program,
 *   - prefill time of a short prompt with prefill variants vs one
 *     max_prompt_len-row program,
 *   - time to first token of a second request sharing a long prefix, with
 *     and without the prefix cache.
 * The model is driven through the public API only; one line per
 * measurement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "common/common.h"
#include "staticlm.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct bf_args {
    const char *model, *tok;
    int threads, max_prompt_len, min_response_len, short_prompt, prefix, steps, reps;
} bf_args;

static slm_engine *open_engine(const bf_args *a, slm_options o) {
    o.tokenizer_path = a->tok;
    o.n_threads = a->threads;
    o.max_prompt_len = a->max_prompt_len;
    o.min_response_len = a->min_response_len;
    slm_engine *e = NULL;
    if (slm_load(&e, a->model, &o)) {
        fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
        slm_free(e);
        return NULL;
    }
    return e;
}

/* Deterministic ids in [3, vocab) (BOS first). */
static void fill_ids(int32_t *ids, int n, int vocab, unsigned seed) {
    ids[0] = 1;
    for (int i = 1; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = 3 + (int32_t)((seed >> 8) % (unsigned)(vocab - 3));
    }
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Per repetition: the mean decode step (ms) after a prompt of n ids, into
 * ms[0..reps); *cap_used: the generate program's capacity the steps ran
 * on at the first step (slm_variant_get). 0 on failure. */
static int decode_step_ms(slm_engine *e, const int32_t *ids, int n, int steps, int reps, int vocab, double *ms,
                          int *cap_used) {
    for (int r = 0; r < reps; r++) {
        slm_reset(e);
        const float *lg;
        if (slm_prefill(e, ids, n, &lg)) return 0;
        int t = argmax(lg, vocab);
        double t0 = now_ms();
        for (int i = 0; i < steps; i++) {
            if (slm_decode(e, t, &lg)) return 0;
            t = argmax(lg, vocab);
            if (i == 0) {
                slm_variant_state v;
                slm_variant_get(e, &v);
                *cap_used = v.current;
            }
        }
        ms[r] = (now_ms() - t0) / steps;
    }
    return 1;
}

static int prefill_ms(slm_engine *e, const int32_t *ids, int n, int reps, double *ms) {
    for (int r = 0; r < reps; r++) {
        slm_reset(e);
        const float *lg;
        double t0 = now_ms();
        if (slm_prefill(e, ids, n, &lg)) return 0;
        ms[r] = now_ms() - t0;
    }
    return 1;
}

/* Median, smallest and largest of x[0..n). */
typedef struct spread {
    double med, lo, hi;
} spread;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static spread spread_of(const double *x, int n) {
    double s[64];
    memcpy(s, x, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    spread r = {n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2, s[0], s[n - 1]};
    return r;
}

/* One table row: median (min-max) of each side, the ratio of medians and
 * its range; "within noise" when the two ranges overlap. */
static void print_row(const char *what, const double *without, const double *with, int reps) {
    spread a = spread_of(without, reps), b = spread_of(with, reps);
    printf("| %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.2fx (%.2f-%.2f)%s |\n", what, a.med, a.lo, a.hi, b.med, b.lo,
           b.hi, b.med > 0 ? a.med / b.med : 0.0, b.hi > 0 ? a.lo / b.hi : 0.0, b.lo > 0 ? a.hi / b.lo : 0.0,
           a.lo <= b.hi && b.lo <= a.hi ? ", within noise" : "");
}

/* The time to first token of a second request sharing n_prefix prompt
 * tokens with the first, without (plain) and with (pc) the prefix cache;
 * one table row. 0: out of memory. */
static int prefix_row(slm_engine *plain, slm_engine *pc, const int32_t *ids, int n_prefix, int reps, int V) {
    double w0[64], w1[64];
    char what[256];
    int32_t *second = slm_malloc(sizeof(int32_t) * (size_t)(n_prefix + 20));
    if (!second) return 0;
    memcpy(second, ids, sizeof(int32_t) * (size_t)n_prefix);
    fill_ids(second + n_prefix - 1, 21, V, 99); /* a different tail */
    second[n_prefix - 1] = ids[n_prefix - 1];
    for (int r = 0; r < reps; r++) {
        const float *lg;
        slm_reset(plain);
        slm_prefill(plain, ids, n_prefix + 10, &lg); /* the first request */
        double t0 = now_ms();
        slm_reset(plain);
        slm_prefill(plain, second, n_prefix + 20, &lg);
        argmax(lg, V);
        w0[r] = now_ms() - t0;
        slm_reset(pc);
        slm_prefill(pc, ids, n_prefix + 10, &lg);
        t0 = now_ms();
        slm_reset(pc);
        slm_prefill(pc, second, n_prefix + 20, &lg);
        argmax(lg, V);
        w1[r] = now_ms() - t0;
    }
    snprintf(what, sizeof what, "time to first token of a second request sharing %d prompt tokens: prefix cache",
             n_prefix);
    print_row(what, w0, w1, reps);
    slm_xfree(second);
    return 1;
}

int slm_cli_bench_features(int argc, char **argv) {
    bf_args a = {NULL, NULL, 0, 1024, 128, 20, 400, 16, 3};
    for (int i = 1; i < argc; i += 2) { /* an option and its value */
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: staticlm bench-features -m MODEL [-z TOK] [-t N] [--max-prompt-len L]\n"
                   "       [--min-response-len R] [--short N] [--prefix N] [--steps N] [-r REPS]\n\n"
                   "Measures what the runtime's options save on MODEL:\n"
                   "  decode step: smallest fitting generate variant vs the full-capacity program\n"
                   "  prefill of a --short token prompt (default 20): prefill variants vs one L-row program\n"
                   "  second request sharing a --prefix token prefix (default 400): time to first\n"
                   "  token with and without the prefix cache\n"
                   "Each is timed -r times (default 3, at most 64): median and range, and a row\n"
                   "only where two different programs ran.\n"
                   "  -h, --help                this text\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "staticlm: %s needs a value\n", o);
            return 2;
        }
        int ok = 1; /* each in the range its measurement takes */
        if (!strcmp(o, "-m")) a.model = v;
        else if (!strcmp(o, "-z")) a.tok = v;
        else if (!strcmp(o, "-t")) ok = slm_cli_parse_int(v, o, 0, 1024, &a.threads);
        else if (!strcmp(o, "--max-prompt-len")) ok = slm_cli_parse_int(v, o, 1, 1 << 20, &a.max_prompt_len);
        else if (!strcmp(o, "--min-response-len")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &a.min_response_len);
        else if (!strcmp(o, "--short")) ok = slm_cli_parse_int(v, o, 2, 1 << 20, &a.short_prompt);
        else if (!strcmp(o, "--prefix")) ok = slm_cli_parse_int(v, o, 8, 1 << 20, &a.prefix);
        else if (!strcmp(o, "--steps")) ok = slm_cli_parse_int(v, o, 1, 1 << 20, &a.steps);
        else if (!strcmp(o, "-r")) ok = slm_cli_parse_int(v, o, 1, 64, &a.reps);
        else {
            fprintf(stderr, "staticlm: unknown option '%s' (see staticlm bench-features --help)\n", o);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!a.model) {
        fprintf(stderr, "staticlm: bench-features needs -m MODEL\n");
        return 2;
    }
    int rc = 1;
    slm_options base = slm_default_options();
    slm_engine *plain = open_engine(&a, base), *var = NULL, *pc = NULL;
    if (!plain) return 1;
    slm_info info;
    slm_get_info(plain, &info);
    const int V = info.vocab_size, cap = info.kv_capacity, L = info.max_prompt_len;
    int n_short = a.short_prompt < 2 ? 2 : a.short_prompt;
    if (n_short > L) n_short = L;
    int n_prefix = a.prefix;
    if (n_prefix + 40 > cap) n_prefix = cap - 40;
    if (n_prefix < 8) n_prefix = 8;

    slm_options vo = base;
    /* powers of two below max_prompt_len; generate capacities 256, 512 below the capacity */
    int k = 0;
    for (int r = 16; r < L && k < 7; r *= 2) vo.prefill_variants[k++] = r;
    k = 0;
    for (int c = 256; c < cap && k < 7; c *= 2) vo.generate_variants[k++] = c;
    var = open_engine(&a, vo);
    slm_options po = base;
    po.prefix_cache_mb = 4096;
    pc = open_engine(&a, po);
    if (!var || !pc) goto done;

    int32_t *ids = slm_malloc(sizeof(int32_t) * (size_t)(cap + 1));
    if (!ids) goto done;
    fill_ids(ids, cap, V, 7);
    printf("model %s: capacity %d (max_prompt_len %d + min_response_len %d), %d threads\n\n", a.model, cap, L,
           info.min_response_len, a.threads);
    printf("%d repetitions each: median (min-max) in ms; saved = ratio of the medians (its range: the\n"
           "slowest against the fastest); a row is printed only where two different programs ran\n\n",
           a.reps);
    printf("| measurement | without | with | saved |\n| --- | ---: | ---: | ---: |\n");
    double w0[64], w1[64];

    /* 1. decode step: the largest program vs the smallest fitting variant */
    int cap_big = 0, cap_small = 0;
    if (!decode_step_ms(plain, ids, n_short, a.steps, a.reps, V, w0, &cap_big) ||
        !decode_step_ms(var, ids, n_short, a.steps, a.reps, V, w1, &cap_small)) {
        fprintf(stderr, "staticlm: %s\n", slm_last_error(plain));
        slm_xfree(ids);
        goto done;
    }
    char what[256];
    if (cap_small && cap_small < cap_big) {
        snprintf(what, sizeof what, "decode step after a %d-token prompt: generate.%d vs generate.%d", n_short,
                 cap_big, cap_small);
        print_row(what, w0, w1, a.reps);
    } else {
        printf("| decode step after a %d-token prompt: no generate variant smaller than the capacity %d holds "
               "prompt + min_response_len (%d rows; variants are built at 256, 512, ... below the capacity): not "
               "compared | | | |\n",
               n_short, cap, n_short + info.min_response_len);
    }

    /* 2. prefill of a short prompt: one L-row program vs prefill variants */
    int rows_small = 0;
    for (int i = 0; i < 8 && vo.prefill_variants[i]; i++)
        if (vo.prefill_variants[i] >= n_short && (!rows_small || vo.prefill_variants[i] < rows_small))
            rows_small = vo.prefill_variants[i];
    if (rows_small && rows_small < L) {
        if (!prefill_ms(plain, ids, n_short, a.reps, w0) || !prefill_ms(var, ids, n_short, a.reps, w1)) {
            fprintf(stderr, "staticlm: %s\n", slm_last_error(plain));
            slm_xfree(ids);
            goto done;
        }
        snprintf(what, sizeof what, "prefill of a %d-token prompt: prefill.%d vs prefill.%d", n_short, L, rows_small);
        print_row(what, w0, w1, a.reps);
    } else {
        printf("| prefill of a %d-token prompt: no prefill variant smaller than %d rows holds it: not compared "
               "| | | |\n", n_short, L);
    }

    /* 3. a second request sharing an n_prefix-token prefix */
    int ok = prefix_row(plain, pc, ids, n_prefix, a.reps, V);
    slm_xfree(ids);
    if (!ok) goto done;
    rc = 0;
done:
    slm_free(plain);
    slm_free(var);
    slm_free(pc);
    return rc;
}
