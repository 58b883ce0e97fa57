/* staticlm bench: prompt processing (pp) and token generation (tg) speed,
 * reported like llama-bench, plus the machine's read bandwidth, decode as a
 * percent of the bandwidth limit, and where a decode step's time goes.
 *
 * pp<P>: reset, then one prefill of P random ids (P rows of the prefill
 *        program); tokens/s = P / time.
 * tg<N>: reset, then N decode steps on random ids from an empty cache (as
 *        llama-bench's tg test); tokens/s = N / time.
 * -d D:  before each pp and tg run, D random ids are prefilled (untimed),
 *        so the test runs with D tokens already in the KV cache
 *        (llama-bench's n_depth; shown as "pp512 @ d4096", jsonl n_depth).
 *        The decode breakdown below runs at the same depth.
 * Each test runs once untimed (warm-up: pages the weights in) and then -r
 * times; avg_ts and stddev_ts are the mean and sample standard deviation of
 * the per-repetition tokens/s (llama-bench's definition).
 *
 * Bandwidth: -t threads each sum their slice of a buffer much bigger than the
 * last-level cache (1 GiB by default); the best of 5 passes, measured before
 * and after the tests, the higher one counts. The decode limit
 * is bandwidth / bytes of weights one decode step reads (every tensor, except
 * the embedding table of an untied model, of which one row is read).
 *
 * Breakdown: one more tg pass with the executor's per-kind profile on
 * (slm_exec_profile), reset before each step: the caller thread's time per
 * task kind, 'barrier' = waiting for the other threads at stage ends,
 * 'runtime' = the step's time outside the task list (binding, mask and
 * position updates, the call). Reported as the mean over the steps and as
 * the median step by wall time (which a busy machine disturbs less). The
 * fixed overhead of a step is everything but matmul.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "common/cpu.h"
#include "common/dtype.h"
#include "device/device.h"
#include "device/kernels.h"
#include "device/kernels_amx.h"
#include "blob/blob.h"
#include "blob/format.h"
#include "format/model.h"
#include "staticlm.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: staticlm bench -m MODEL [-p 512] [-n 128] [-t THREADS] [-r 5] [-o md|jsonl]\n"
            "\n"
            "Prompt processing (ppP: one prefill of P random tokens) and token generation\n"
            "(tgN: N decode steps from an empty cache) in tokens/s, mean +- stddev over -r\n"
            "repetitions, like llama-bench; then the machine's read bandwidth, decode as a\n"
            "percent of the bandwidth limit, the int8 peak of the vector units (AVX-512 VNNI)\n"
            "and of the matrix engine (AMX) with prefill as a percent of each, the time to\n"
            "first token, and the decode step's time by task kind.\n"
            "\n"
            "  -m, --model PATH          GGUF, llama2.c .bin, Hugging Face folder, or a blob\n"
            "  -z, --tokenizer PATH      llama2.c tokenizer.bin (llama2.c models only)\n"
            "  -p, --n-prompt P          prompt tokens for pp (default 512; 0 = skip; clamped to\n"
            "                            the model's context length)\n"
            "  -n, --n-gen N             tokens for tg (default 128; 0 = skip)\n"
            "  -d, --n-depth D           fill the KV cache with D tokens before each pp and tg\n"
            "                            repetition (untimed), as llama-bench's -d (default 0)\n"
            "  -t, --threads T           threads (default: all cores)\n"
            "  -r, --repetitions R       timed repetitions per test (default 5)\n"
            "  -embd, --embeddings 0|1   1: pp runs the embedding programs (every row's hidden state,\n"
            "                            no LM head), as llama-bench's -embd 1; an encoder (bert,\n"
            "                            nomic-bert) needs it; no tg, depth or --ttft then (default 0)\n"
            "  -o, --output FMT          md (default) or jsonl (one object per test)\n"
            "      --kernels NAME        scalar | avx2 | avx512 | amx (default: best for this CPU)\n"
            "      --bw-mib M            bandwidth buffer size in MiB (default 1024; 0 = skip)\n"
            "      --tile-kb K           weight bytes per matrix task, KiB (default: an eighth of L2)\n"
            "      --schedule S          rendezvous (default) | counted: how threads meet between stages\n"
            SLM_CLI_KV_TYPE_HELP SLM_CLI_WEIGHT_TYPE_HELP
            SLM_CLI_PREFETCH_HELP
            "                            (-ctk T too: both K and V take it)\n"
            "      --ttft N              time to first token of an N-token prompt: one prefill from\n"
            "                            an empty cache, in chunks of the prefill program (default\n"
            "                            1000; 0 = skip, and skipped with -p 0; clamped to the\n"
            "                            KV capacity)\n"
            "      --no-profile          skip the per-kind decode breakdown\n"
            SLM_CLI_TRACE_HELP
            "  -h, --help                this help\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* ---- memory read bandwidth ---------------------------------------------- */

typedef struct bw_job {
    const uint64_t *p;
    size_t n; /* uint64 words */
    uint64_t sum;
    pthread_barrier_t *start;
} bw_job;

/* The fastest plain reader we have: whole 64-byte lines in four vector
 * accumulators, the stream touched 1 KiB ahead toward L1 and 4 KiB toward
 * L2 as the decode kernels do (a scalar loop of 8 words measured 18-20 GB/s
 * where this reads 22-26 on the 2-core test VM, below what Q8_0 decode
 * itself read: the bound must not be weaker than the kernels it judges). */
typedef uint64_t bw_line __attribute__((vector_size(64), aligned(64)));

static uint64_t sum_words(const uint64_t *p, size_t n) {
    const bw_line *v = (const bw_line *)(const void *)p;
    const size_t lines = n / 8;
    bw_line a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = 0;
    for (; i + 4 <= lines; i += 4) {
        for (int l = 0; l < 256; l += 64) {
            __builtin_prefetch((const char *)(v + i) + 1024 + l, 0, 3);
            __builtin_prefetch((const char *)(v + i) + 4096 + l, 0, 2);
        }
        a += v[i], b += v[i + 1], c += v[i + 2], d += v[i + 3];
    }
    for (; i < lines; i++) a += v[i];
    a += b + c + d;
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += a[k];
    for (size_t j = lines * 8; j < n; j++) s += p[j];
    return s;
}

static void *bw_worker(void *arg) {
    bw_job *j = arg;
    pthread_barrier_wait(j->start);
    j->sum = sum_words(j->p, j->n);
    return NULL;
}

/* Best of `passes` multi-threaded reads over `bytes`, in bytes/s; 0 on failure. */
static double measure_bandwidth(size_t bytes, int threads, int passes) {
    uint64_t *buf = slm_aligned_alloc(bytes);
    if (!buf) return 0.0;
    const size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) buf[i] = i; /* fault every page in */
    bw_job jobs[256];
    pthread_t tids[256];
    if (threads > 256) threads = 256;
    double best = 0.0;
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < passes; pass++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads);
        const size_t per = (words / (size_t)threads) & ~(size_t)7;
        for (int t = 0; t < threads; t++) {
            jobs[t].p = buf + (size_t)t * per;
            jobs[t].n = t == threads - 1 ? words - (size_t)t * per : per;
            jobs[t].start = &start;
        }
        int started = 0;
        for (int t = 1; t < threads; t++)
            if (pthread_create(&tids[t], NULL, bw_worker, &jobs[t]) == 0) started++;
        if (started != threads - 1) { /* cannot start them all: give up */
            pthread_barrier_destroy(&start);
            best = 0.0;
            break;
        }
        pthread_barrier_wait(&start);
        double t0 = now_s();
        jobs[0].sum = sum_words(jobs[0].p, jobs[0].n);
        for (int t = 1; t < threads; t++) pthread_join(tids[t], NULL);
        double dt = now_s() - t0;
        pthread_barrier_destroy(&start);
        for (int t = 0; t < threads; t++) sink += jobs[t].sum;
        if (dt > 0 && bytes / dt > best) best = (double)bytes / dt;
    }
    (void)sink;
    slm_aligned_free(buf);
    return best;
}

/* ---- the model file's facts ---------------------------------------------- */

typedef struct model_facts {
    uint64_t size, params, per_token; /* tensor bytes, elements, bytes a decode step reads */
    uint64_t active;                  /* elements a token multiplies by (MoE: K of E experts, and the
                                         whole shared expert: every token runs it) */
    int shared;                       /* 1: the model has a shared expert (qwen2moe, granitemoe) */
    uint64_t vocab;                   /* elements of token_embd and output: a prompt's rows but the
                                         last look one embedding row up and skip the LM head */
    char type[32];                    /* the file's type (general.file_type, e.g. "Q4_K_M"), else the type
                                         holding most matrix bytes, e.g. "Q4_0" */
    char mix[160];                    /* every type: "q4_0 x154, q6_k x1, f32 x45" */
} model_facts;

/* One tensor into the totals (by_type, count: per dtype). */
static void facts_add(model_facts *f, uint64_t *by_type, uint64_t *count, const char *name, uint32_t type,
                      uint32_t n_dims, const int64_t *ne, uint64_t nbytes, const slm_model_config *cfg) {
    const int tied = cfg->tied_embeddings;
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims && d < 4; d++) n *= (uint64_t)ne[d];
    f->params += n;
    f->size += nbytes;
    /* an expert's matrix (blk.N.ffn_gate.E.weight): a token reads K of the E; the shared
     * expert's (blk.N.ffn_gate_shexp.weight) count whole, as dense matrices */
    f->shared = cfg->shared_ffn > 0;
    int l, e, end = 0;
    char kind[8];
    if (sscanf(name, "blk.%d.", &l) == 1 && l >= cfg->n_layers) { /* glm4moe's MTP layers: never run */
        if (type < SLM_DTYPE_COUNT) {
            count[type]++;
            if (n_dims >= 2) by_type[type] += nbytes;
        }
        return;
    }
    if (cfg->n_experts > 0 && sscanf(name, "blk.%d.ffn_%5[a-z].%d.weight%n", &l, kind, &e, &end) == 3 && end > 0 &&
        !name[end]) {
        f->active += n * (uint64_t)cfg->n_experts_used / (uint64_t)cfg->n_experts;
        f->per_token += nbytes * (uint64_t)cfg->n_experts_used / (uint64_t)cfg->n_experts;
        if (type < SLM_DTYPE_COUNT) {
            count[type]++;
            by_type[type] += nbytes;
        }
        return;
    }
    f->active += n;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight")) f->vocab += n;
    if (type < SLM_DTYPE_COUNT) {
        count[type]++;
        if (n_dims >= 2) by_type[type] += nbytes;
    }
    if (!strcmp(name, "token_embd.weight") && !tied && n_dims >= 2 && ne[1] > 0)
        f->per_token += nbytes / (uint64_t)ne[1]; /* one row */
    else
        f->per_token += nbytes;
}

/* llama_ftype's name (GGUF general.file_type, as llama-quantize writes it),
 * NULL for a value it does not define. A Q4_K_M file holds most of its bytes
 * in Q5_0 or Q6_K when its widths are not multiples of 256, so the largest
 * type alone would name it wrongly. */
static const char *ftype_name(uint32_t ft) {
    static const char *const names[] = {
        [0] = "F32",      [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",     [8] = "Q5_0",
        [9] = "Q5_1",     [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L",  [14] = "Q4_K_S",
        [15] = "Q4_K_M",  [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",   [19] = "IQ2_XXS", [20] = "IQ2_XS",
        [21] = "Q2_K_S",  [22] = "IQ3_XS", [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL",  [26] = "IQ3_S",
        [27] = "IQ3_M",   [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS", [31] = "IQ1_M",   [32] = "BF16",
        [38] = "MXFP4_MOE",
    };
    return ft < sizeof names / sizeof names[0] ? names[ft] : NULL;
}

/* A blob's tensor table (docs/blob.md, .slm.tensors: 120-byte records, a
 * repacked type is 0x80 | its base type). 0 when it does not open. */
static int blob_facts(const char *path, model_facts *f, uint64_t *by_type, uint64_t *count, const char **fname) {
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok = NULL;
    slm_err err;
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    memset(&err, 0, sizeof err);
    if (slm_blob_open(&b, path, 0, &c, &tok, &err)) return 0;
    const char *v;
    uint64_t vl;
    if (slm_blob_meta(&b, "general.file_type", &v, &vl) && vl > 0 && vl < 12) { /* the GGUF's u32, in decimal */
        char num[12];
        memcpy(num, v, (size_t)vl);
        num[vl] = 0;
        char *end;
        const unsigned long ft = strtoul(num, &end, 10);
        if (*end == 0 && ft <= UINT32_MAX) *fname = ftype_name((uint32_t)ft);
    }
    for (uint32_t i = 0; i < b.n_tensors; i++) {
        const uint8_t *e = b.tensors + (size_t)i * BLOB_TENSOR_SIZE;
        uint32_t type, n_dims;
        int64_t ne[4];
        uint64_t nbytes;
        memcpy(&type, e + 64, 4);
        memcpy(&n_dims, e + 68, 4);
        memcpy(ne, e + 72, sizeof ne);
        memcpy(&nbytes, e + 112, 8);
        if (type & 0x80u) type &= 0x7fu;
        facts_add(f, by_type, count, (const char *)e, type, n_dims, ne, nbytes, &c.cfg);
    }
    slm_tok_free(tok);
    slm_compiled_free(&c);
    slm_blob_close(&b);
    return 1;
}

static int model_facts_get(const char *path, model_facts *f) {
    memset(f, 0, sizeof *f);
    uint64_t by_type[SLM_DTYPE_COUNT] = {0}, count[SLM_DTYPE_COUNT] = {0};
    const char *fname = NULL;
    if (slm_blob_is_elf(path)) {
        if (!blob_facts(path, f, by_type, count, &fname)) return 0;
    } else {
        slm_model_file m;
        memset(&m, 0, sizeof m);
        slm_err err;
        memset(&err, 0, sizeof err);
        if (slm_model_open(&m, path, &err)) {
            slm_model_close(&m);
            return 0;
        }
        uint32_t ft;
        if (m.gguf && slm_gguf_get_u32(m.gguf, "general.file_type", &ft)) fname = ftype_name(ft);
        for (int i = 0; i < m.n_tensors; i++) {
            const slm_tensor *t = &m.tensors[i];
            int64_t ne[4] = {0};
            for (uint32_t d = 0; d < t->n_dims && d < 4; d++) ne[d] = (int64_t)t->ne[d];
            facts_add(f, by_type, count, t->name, t->type, t->n_dims, ne, t->nbytes, &m.cfg);
        }
        slm_model_close(&m);
    }
    int best = 0;
    for (int t = 0; t < SLM_DTYPE_COUNT; t++)
        if (by_type[t] > by_type[best]) best = t;
    const char *name = fname ? fname : slm_dtype_name((uint32_t)best);
    size_t k = 0;
    for (; name && name[k] && k + 1 < sizeof f->type; k++)
        f->type[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k]);
    f->type[k] = 0;
    int o = 0;
    for (int t = 0; t < SLM_DTYPE_COUNT && o < (int)sizeof f->mix - 24; t++)
        if (count[t])
            o += snprintf(f->mix + o, sizeof f->mix - (size_t)o, "%s%s x%llu", o ? ", " : "",
                          slm_dtype_name((uint32_t)t), (unsigned long long)count[t]);
    return 1;
}

/* ---- statistics ------------------------------------------------------------ */

typedef struct test_result {
    const char *name; /* "pp" or "tg" */
    int n_prompt, n_gen, n_depth, reps;
    double ts[64];    /* tokens/s per repetition */
    double ns[64];    /* ns per repetition */
    double avg_ts, sd_ts, avg_ns, sd_ns;
} test_result;

static void finish_stats(test_result *r) {
    double s = 0, s2 = 0, n = 0, n2 = 0;
    for (int i = 0; i < r->reps; i++) s += r->ts[i], n += r->ns[i];
    r->avg_ts = s / r->reps;
    r->avg_ns = n / r->reps;
    for (int i = 0; i < r->reps; i++) {
        s2 += (r->ts[i] - r->avg_ts) * (r->ts[i] - r->avg_ts);
        n2 += (r->ns[i] - r->avg_ns) * (r->ns[i] - r->avg_ns);
    }
    r->sd_ts = r->reps > 1 ? sqrt(s2 / (r->reps - 1)) : 0.0;
    r->sd_ns = r->reps > 1 ? sqrt(n2 / (r->reps - 1)) : 0.0;
}

static uint64_t g_rand = 0x853c49e6748fea9bull;
static int32_t rand_id(int vocab) {
    g_rand ^= g_rand << 13;
    g_rand ^= g_rand >> 7;
    g_rand ^= g_rand << 17;
    return (int32_t)(g_rand % (uint64_t)vocab);
}

/* -d N: N random ids into the KV cache (untimed, as llama-bench's n_depth).
 * The first fill is kept: later repetitions trim the cache back to it, as
 * llama-bench restores its saved state at the same depth. */
static int g_filled = -1; /* the depth the cache was filled to (-1: none) */
static int fill_depth(slm_engine *e, int32_t *ids, int depth, int vocab) {
    if (depth > 0 && g_filled == depth && slm_num_stored(e) >= depth) {
        /* untimed; a recurrent model (qwen35) prefills the depth again to rebuild its state */
        if (slm_trim(e, depth) == SLM_OK) return 1;
        fprintf(stderr, "staticlm bench: %s\n", slm_last_error(e));
        return 0;
    }
    slm_reset(e);
    g_filled = -1;
    if (depth <= 0) return 1;
    for (int i = 0; i < depth; i++) ids[i] = rand_id(vocab);
    const float *logits;
    slm_status s = slm_prefill(e, ids, depth, &logits);
    if (s) fprintf(stderr, "staticlm bench: filling the KV cache to depth %d: %s\n", depth, slm_last_error(e));
    else g_filled = depth;
    return s == SLM_OK;
}

/* -embd 1: pp runs the embedding programs on a session (every row's
 * hidden state out, as llama-bench's embeddings mode; an encoder's only
 * mode) into g_rows. */
static slm_session *g_embd;
static float *g_rows;

static int run_pp(slm_engine *e, int32_t *ids, int p, int depth, int vocab, double *sec) {
    if (g_embd) {
        for (int i = 0; i < p; i++) ids[i] = rand_id(vocab);
        slm_info in;
        slm_get_info(e, &in);
        const double t0 = now_s();
        const slm_status s = slm_session_embed(g_embd, ids, p, SLM_POOLING_NONE, g_rows, (size_t)p * (size_t)in.dim);
        *sec = now_s() - t0;
        if (s) fprintf(stderr, "staticlm bench: embedding: %s\n", slm_session_error(g_embd));
        return s == SLM_OK;
    }
    if (!fill_depth(e, ids, depth, vocab)) return 0;
    for (int i = 0; i < p; i++) ids[i] = rand_id(vocab);
    const float *logits;
    double t0 = now_s();
    slm_status s = slm_prefill(e, ids, p, &logits);
    *sec = now_s() - t0;
    if (s) fprintf(stderr, "staticlm bench: prefill: %s\n", slm_last_error(e));
    return s == SLM_OK;
}

static int run_tg(slm_engine *e, int32_t *ids, int n, int depth, int vocab, double *sec) {
    const float *logits;
    if (!fill_depth(e, ids, depth, vocab)) return 0;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        slm_status s = slm_decode(e, rand_id(vocab), &logits);
        if (s) {
            fprintf(stderr, "staticlm bench: decode step %d: %s\n", i, slm_last_error(e));
            return 0;
        }
    }
    *sec = now_s() - t0;
    return 1;
}

/* One decode step's profile: ns per task kind (caller thread) and wall ns. */
typedef struct prof {
    uint64_t ns[SLM_T_OP_COUNT];
    double wall;
} prof;

static int prof_cmp(const void *a, const void *b) {
    double x = ((const prof *)a)->wall, y = ((const prof *)b)->wall;
    return (x > y) - (x < y);
}

/* The step's time outside the task list. */
static double prof_runtime(const prof *p) {
    double sum = 0;
    for (int k = 0; k < SLM_T_OP_COUNT; k++) sum += (double)p->ns[k];
    return p->wall - sum;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* One bench run: the options, then what was measured. */
typedef struct bench {
    const char *model, *tok, *fmt, *kernels;
    int p, n, depth, threads, reps, bw_mib, profile, tile_kb, jsonl, schedule, kv_type, prefetch, ttft, weight_type;
    int embd, n_set;                /* -embd 1: pp through the embedding programs; -n given */
    model_facts mf;
    double bw, bw_before, bw_after; /* bytes/s: the higher, before and after the tests */
    double limit;                   /* decode tokens/s the bandwidth allows */
    const char *kname;              /* the kernels in use */
    const char *kv_name;            /* the KV cache's element type */
    test_result res[2];             /* pp, tg (those run) */
    int n_res;
    prof pm, pmed;                  /* the decode profile: mean, median step */
    int profiled;
    double amx_peak;                /* the matrix engine's int8 ops/s on one core (0: none) */
    double vnni_peak;               /* AVX-512 VNNI's int8 ops/s on one core, the higher of before and
                                       after the tests (0: none) */
    double ttft_s;                  /* time to first token of a b->ttft-token prompt (0: not run) */
    int ttft_chunk;                 /* rows of the prefill program it ran in */
    int ttft_set;                   /* --ttft given */
} bench;

/* The command line into b; 0: go on, else the exit code (help: 0 too,
 * with *done set). */
static int parse_args(bench *b, int argc, char **argv, int *done) {
    *done = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        const int tr = slm_cli_trace_opt(argc, argv, &i);
        if (tr < 0) return 2;
        if (tr) continue;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            *done = 1;
            return 0;
        } else if (!strcmp(o, "--no-profile")) {
            b->profile = 0;
            continue;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) b->model = v;
        else if (!strcmp(o, "-z") || !strcmp(o, "--tokenizer")) b->tok = v;
        else if (!strcmp(o, "-o") || !strcmp(o, "--output")) b->fmt = v;
        else if (!strcmp(o, "--kernels")) b->kernels = v;
        else if (!strcmp(o, "-p") || !strcmp(o, "--n-prompt")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &b->p);
        else if (!strcmp(o, "-n") || !strcmp(o, "--n-gen")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &b->n), b->n_set = 1;
        else if (!strcmp(o, "-embd") || !strcmp(o, "--embeddings")) ok = slm_cli_parse_int(v, o, 0, 1, &b->embd);
        else if (!strcmp(o, "-d") || !strcmp(o, "--n-depth")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &b->depth);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) ok = slm_cli_parse_int(v, o, 0, 256, &b->threads);
        else if (!strcmp(o, "-r") || !strcmp(o, "--repetitions")) ok = slm_cli_parse_int(v, o, 1, 64, &b->reps);
        else if (!strcmp(o, "--bw-mib")) ok = slm_cli_parse_int(v, o, 0, 1 << 16, &b->bw_mib);
        else if (!strcmp(o, "--ttft")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &b->ttft), b->ttft_set = 1;
        else if (!strcmp(o, "--tile-kb")) ok = slm_cli_parse_int(v, o, 1, 1 << 20, &b->tile_kb);
        else if (!strcmp(o, "--schedule")) ok = slm_cli_parse_schedule(v, &b->schedule);
        else if (!strcmp(o, "--prefetch")) ok = slm_cli_parse_prefetch(v, o, &b->prefetch);
        else if (!strcmp(o, "--kv-type") || !strcmp(o, "-ctk")) ok = slm_cli_parse_kv_type(v, o, &b->kv_type);
        else if (!strcmp(o, "--weight-type")) ok = slm_cli_parse_weight_type(v, o, &b->weight_type);
        else {
            fprintf(stderr, "staticlm bench: unknown option '%s' (see staticlm bench --help)\n", o);
            return 2;
        }
        if (!ok) return 2;
        if (!v) {
            fprintf(stderr, "staticlm bench: %s needs a value\n", o);
            return 2;
        }
        i++;
    }
    if (!b->model) {
        fprintf(stderr, "staticlm bench: -m MODEL is required\n\n");
        usage(stderr);
        return 2;
    }
    b->jsonl = !strcmp(b->fmt, "jsonl");
    if (!b->jsonl && strcmp(b->fmt, "md")) {
        fprintf(stderr, "staticlm bench: -o expects md or jsonl, got '%s'\n", b->fmt);
        return 2;
    }
    if (b->kernels && !slm_kernels_select(b->kernels)) {
        fprintf(stderr, "staticlm bench: kernels '%s' are not available on this CPU (scalar, avx2, avx512, amx)\n",
                b->kernels);
        return 1;
    }
    if (b->kernels && !strcmp(b->kernels, "amx") && strcmp(slm_kernels_active()->name, "amx"))
        fprintf(stderr, "staticlm bench: no AMX (%s): kernels %s\n", slm_cpu_features()->amx_why,
                slm_kernels_active()->name);
    if (b->embd && !b->n_set) b->n = 0; /* embeddings: pp alone unless -n asks */
    if (b->embd && (b->n > 0 || b->depth > 0)) {
        fprintf(stderr, "staticlm bench: -embd 1 times the embedding programs (pp) from an empty cache: no tg (-n 0) "
                        "and no depth (-d 0)\n");
        return 2;
    }
    if (b->embd && b->ttft_set && b->ttft > 0) {
        fprintf(stderr, "staticlm bench: --ttft times a prefill program; -embd 1 runs the embedding programs (--ttft 0)\n");
        return 2;
    }
    if (b->embd) b->ttft = 0; /* no prefill program to time it with */
    if (b->threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        b->threads = c > 0 ? (int)(c > 256 ? 256 : c) : 1;
    }
    return 0;
}

/* The warm-up, then pp and tg -r times each; 0 when a step failed. */
static int run_tests(bench *b, slm_engine *e, int32_t *ids, int vocab) {
    double sec;
    /* warm-up: pages the weights in, wakes the threads */
    if (b->p > 0 && !run_pp(e, ids, b->p, b->depth, vocab, &sec)) return 0;
    if (b->n > 0 && !run_tg(e, ids, b->n < 16 ? b->n : 16, b->depth, vocab, &sec)) return 0;
    if (b->p > 0) {
        test_result *r = &b->res[b->n_res++];
        memset(r, 0, sizeof *r);
        r->name = "pp", r->n_prompt = b->p, r->n_depth = b->depth, r->reps = b->reps;
        for (int i = 0; i < b->reps; i++) {
            if (!run_pp(e, ids, b->p, b->depth, vocab, &sec)) return 0;
            r->ns[i] = sec * 1e9, r->ts[i] = b->p / sec;
        }
        finish_stats(r);
    }
    if (b->n > 0) {
        test_result *r = &b->res[b->n_res++];
        memset(r, 0, sizeof *r);
        r->name = "tg", r->n_gen = b->n, r->n_depth = b->depth, r->reps = b->reps;
        for (int i = 0; i < b->reps; i++) {
            if (!run_tg(e, ids, b->n, b->depth, vocab, &sec)) return 0;
            r->ns[i] = sec * 1e9, r->ts[i] = b->n / sec;
        }
        finish_stats(r);
    }
    return 1;
}

/* Time to first token: one prefill of b->ttft random tokens from an empty
 * cache (the runtime cuts it into chunks of the prefill program). */
static int run_ttft(bench *b, slm_engine *e, int32_t *ids, int vocab) {
    if (b->ttft <= 0) return 1;
    g_filled = -1;
    if (!fill_depth(e, ids, 0, vocab)) return 0;
    for (int i = 0; i < b->ttft; i++) ids[i] = rand_id(vocab);
    const float *logits;
    const double t0 = now_s();
    const slm_status s = slm_prefill(e, ids, b->ttft, &logits);
    b->ttft_s = now_s() - t0;
    if (s) fprintf(stderr, "staticlm bench: time to first token: %s\n", slm_last_error(e));
    slm_reset(e);
    return s == SLM_OK;
}

/* The decode breakdown: one more tg pass, each step profiled on its own
 * (the mean, and the median step by wall time: robust when other
 * processes take the cores now and then). 0 when a step failed. */
static int profile_decode(bench *b, slm_engine *e, int32_t *ids, int vocab) {
    const int n = b->n;
    prof *steps = slm_calloc((size_t)n, sizeof *steps);
    if (!steps) return 0;
    const float *logits;
    int ok = fill_depth(e, ids, b->depth, vocab); /* at the tests' depth, as they ran */
    for (int i = 0; i < n && ok; i++) {
        uint64_t calls = 0;
        slm_exec_profile(1);
        double t0 = now_s();
        ok = slm_decode(e, rand_id(vocab), &logits) == SLM_OK;
        steps[i].wall = (now_s() - t0) * 1e9;
        slm_exec_profile_get(steps[i].ns, &calls);
        slm_exec_profile(0);
    }
    if (ok) {
        for (int i = 0; i < n; i++) {
            b->pm.wall += steps[i].wall / n;
            for (int k = 0; k < SLM_T_OP_COUNT; k++) b->pm.ns[k] += steps[i].ns[k];
        }
        for (int k = 0; k < SLM_T_OP_COUNT; k++) b->pm.ns[k] /= (uint64_t)n;
        qsort(steps, (size_t)n, sizeof *steps, prof_cmp);
        b->pmed = steps[n / 2];
        b->profiled = 1;
    } else {
        fprintf(stderr, "staticlm bench: decode (profile pass): %s\n", slm_last_error(e));
    }
    slm_xfree(steps);
    return ok;
}

/* One JSON object per test (the tg one with bandwidth and profile). */
static void print_jsonl(const bench *b) {
    const test_result *tg = b->n > 0 ? &b->res[b->n_res - 1] : NULL;
    const model_facts *mf = &b->mf;
    for (int i = 0; i < b->n_res; i++) {
        const test_result *r = &b->res[i];
        printf("{\"model_filename\": ");
        json_str(stdout, b->model);
        printf(", \"model_type\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, \"layer_params\": %llu, "
               "\"backend\": \"CPU\", "
               "\"kernels\": \"%s\", \"schedule\": \"%s\", \"n_threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"reps\": %d, "
               "\"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ts\": [",
               mf->type, (unsigned long long)mf->size, (unsigned long long)mf->params,
               (unsigned long long)(mf->active > mf->vocab ? mf->active - mf->vocab : 0), b->kname,
               slm_cli_schedule_name(b->schedule), b->threads,
               r->n_prompt, r->n_gen, r->n_depth, r->reps, r->avg_ns, r->sd_ns, r->avg_ts, r->sd_ts);
        for (int j = 0; j < r->reps; j++) printf("%s%.4f", j ? ", " : "", r->ts[j]);
        printf("], \"type_k\": \"%s\", \"type_v\": \"%s\"", b->kv_name, b->kv_name);
        printf(", \"embeddings\": %s", b->embd ? "true" : "false");
        printf(", \"amx_int8_peak_ops\": %.0f", b->amx_peak); /* one core; 0: no AMX */
        printf(", \"vnni_int8_peak_ops\": %.0f", b->vnni_peak); /* one core; 0: no AVX-512 VNNI */
        if (b->ttft_s > 0) printf(", \"ttft_n_prompt\": %d, \"ttft_ms\": %.3f", b->ttft, b->ttft_s * 1e3);
        if (r == tg) {
            printf(", \"bandwidth_gbs\": %.3f, \"bytes_per_token\": %llu, \"limit_ts\": %.3f, "
                   "\"pct_of_limit\": %.2f, \"read_gbs\": %.3f",
                   b->bw / 1e9, (unsigned long long)mf->per_token, b->limit,
                   b->limit > 0 ? 100.0 * r->avg_ts / b->limit : 0.0, (double)mf->per_token * r->avg_ts / 1e9);
            if (b->profiled) {
                const prof *ps[2] = {&b->pm, &b->pmed};
                const char *names[2] = {"profile_mean_ns", "profile_median_step_ns"};
                for (int j = 0; j < 2; j++) {
                    printf(", \"%s\": {", names[j]);
                    for (int k = 0; k < SLM_T_OP_COUNT; k++)
                        if (ps[j]->ns[k]) printf("\"%s\": %llu, ", slm_task_op_name(k), (unsigned long long)ps[j]->ns[k]);
                    printf("\"runtime\": %.0f, \"step\": %.0f, \"fixed_overhead\": %.0f}", prof_runtime(ps[j]),
                           ps[j]->wall, ps[j]->wall - (double)ps[j]->ns[SLM_T_MATMUL]);
                }
            }
        }
        printf("}\n");
    }
}

/* The decode step by task kind, as a markdown table. */
static void print_profile_md(const bench *b) {
    const prof *pm = &b->pm, *pmed = &b->pmed;
    printf("\ndecode step by task kind (one more tg%d pass, each step profiled; the caller thread's time):\n\n", b->n);
    printf("| kind | mean us/step | share | median step us | share |\n| --- | ---: | ---: | ---: | ---: |\n");
    for (int k = 0; k < SLM_T_OP_COUNT; k++) {
        if ((!pm->ns[k] && !pmed->ns[k]) || k == SLM_T_BARRIER) continue;
        printf("| %s | %.1f | %.1f%% | %.1f | %.1f%% |\n", slm_task_op_name(k), pm->ns[k] / 1e3,
               100.0 * pm->ns[k] / pm->wall, pmed->ns[k] / 1e3, 100.0 * pmed->ns[k] / pmed->wall);
    }
    printf("| barrier (waiting for the other threads) | %.1f | %.1f%% | %.1f | %.1f%% |\n",
           pm->ns[SLM_T_BARRIER] / 1e3, 100.0 * pm->ns[SLM_T_BARRIER] / pm->wall, pmed->ns[SLM_T_BARRIER] / 1e3,
           100.0 * pmed->ns[SLM_T_BARRIER] / pmed->wall);
    printf("| runtime (outside the task list) | %.1f | %.1f%% | %.1f | %.1f%% |\n", prof_runtime(pm) / 1e3,
           100.0 * prof_runtime(pm) / pm->wall, prof_runtime(pmed) / 1e3, 100.0 * prof_runtime(pmed) / pmed->wall);
    printf("| **step** | %.1f | 100%% | %.1f | 100%% |\n", pm->wall / 1e3, pmed->wall / 1e3);
    const double fm = pm->wall - (double)pm->ns[SLM_T_MATMUL], fmed = pmed->wall - (double)pmed->ns[SLM_T_MATMUL];
    printf("\nfixed overhead per decode step (everything but matmul): mean %.1f us (%.1f%%), median step "
           "%.1f us (%.1f%%)\n",
           fm / 1e3, 100.0 * fm / pm->wall, fmed / 1e3, 100.0 * fmed / pmed->wall);
}

/* llama-bench's table, then bandwidth, limit and the profile. */
/* Prefill's matmul work (2 operations per weight per token) as a share of
 * an int8 peak (ops/s for all threads). */
static void print_peak_share(const bench *b, double peak) {
    for (int i = 0; i < b->n_res; i++)
        if (b->res[i].n_prompt && b->mf.active > b->mf.vocab) {
            /* the layers' matrices for every row (MoE: the experts a row uses), the LM head once */
            const double w = (double)(b->mf.active - b->mf.vocab), ops = b->res[i].avg_ts * 2.0 * w;
            printf("pp%d does %.2f Tops/s of matmul work (2 x %.0fM layer params per token%s): %.1f%% of that peak "
                   "(kernels %s)\n", b->res[i].n_prompt, ops / 1e12, w / 1e6,
                   b->mf.active >= b->mf.params ? "" : b->mf.shared ? ", the experts a token uses and the shared one"
                                                                      : ", the experts a token uses",
                   100.0 * ops / peak, b->kname);
        }
}

/* The vector units' int8 peak (slm_vnni_int8_peak: 12 chains of vpdpbusd,
 * one core, times the threads) and prefill's matmul work as a share. */
static void print_vnni_md(const bench *b) {
    if (b->vnni_peak <= 0) return;
    const double peak = b->vnni_peak * b->threads;
    printf("int8 dot products (AVX-512 VNNI): %.2f Tops/s measured on one core, %.2f Tops/s for %d threads\n",
           b->vnni_peak / 1e12, peak / 1e12, b->threads);
    print_peak_share(b, peak);
}

/* The matrix engine: its measured peak (kernels_amx.c: a dependent chain
 * of TDPBUSD on each of 4 accumulator tiles, one core, times the threads)
 * and prefill's matmul work as a share. */
static void print_amx_md(const bench *b) {
    if (b->amx_peak <= 0) {
        const char *why = slm_cpu_features()->amx_why;
        printf("matrix engine (AMX): none here (%s)\n", why ? why : "not measured");
        return;
    }
    const double peak = b->amx_peak * b->threads;
    printf("matrix engine (AMX-INT8): %.2f Tops/s measured on one core, %.1f Tops/s for %d threads\n", b->amx_peak / 1e12,
           peak / 1e12, b->threads);
    print_peak_share(b, peak);
}

static void print_ttft_md(const bench *b) {
    if (b->ttft_s <= 0) return;
    const int calls = (b->ttft + b->ttft_chunk - 1) / b->ttft_chunk;
    printf("time to first token of a %d-token prompt: %.1f ms (%d prefill call%s of up to %d rows, %.1f tokens/s; kernels %s)\n",
           b->ttft, b->ttft_s * 1e3, calls, calls == 1 ? "" : "s", b->ttft_chunk, b->ttft / b->ttft_s, b->kname);
}

static void print_md(const bench *b) {
    const test_result *tg = b->n > 0 ? &b->res[b->n_res - 1] : NULL;
    const model_facts *mf = &b->mf;
    printf("| model | size | params | backend | threads | test | t/s |\n");
    printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < b->n_res; i++) {
        const test_result *r = &b->res[i];
        char depth[32] = "";
        if (r->n_depth > 0) snprintf(depth, sizeof depth, " @ d%d", r->n_depth);
        printf("| %s %s | %.2f MiB | %.2f %s | CPU (%s) | %d | %s%d%s | %.2f ± %.2f |\n", slm_basename(b->model),
               mf->type, mf->size / 1048576.0, mf->params >= 1000000000ull ? mf->params / 1e9 : mf->params / 1e6,
               mf->params >= 1000000000ull ? "B" : "M", b->kname, b->threads, r->name,
               r->n_prompt ? r->n_prompt : r->n_gen, depth, r->avg_ts, r->sd_ts);
    }
    printf("\ntensor types: %s; KV cache: %s\nschedule: %s\n", mf->mix, b->kv_name, slm_cli_schedule_name(b->schedule));
    if (b->bw > 0)
        printf("memory read bandwidth: %.1f GB/s (%d threads, %d MiB buffer, best of 5 passes; %.1f before the "
               "tests, %.1f after)\n",
               b->bw / 1e9, b->threads, b->bw_mib, b->bw_before / 1e9, b->bw_after / 1e9);
    if (tg && b->limit > 0) {
        printf("decode reads %.1f MB of weights per token: bandwidth limit %.1f t/s; tg%d = %.1f%% of it\n",
               mf->per_token / 1e6, b->limit, tg->n_gen, 100.0 * tg->avg_ts / b->limit);
        /* the read rate itself: on machines whose bandwidth changes between
           measurements (a VM's memory placement), the percentage alone misleads */
        const double rate = mf->per_token * tg->avg_ts;
        printf("tg%d reads the weights at %.1f GB/s (%.0f%% of the %.1f GB/s before the tests, %.0f%% of the %.1f "
               "after)\n",
               tg->n_gen, rate / 1e9, b->bw_before > 0 ? 100.0 * rate / b->bw_before : 0.0, b->bw_before / 1e9,
               b->bw_after > 0 ? 100.0 * rate / b->bw_after : 0.0, b->bw_after / 1e9);
    }
    print_vnni_md(b);
    print_amx_md(b);
    print_ttft_md(b);
    if (tg && b->profiled) print_profile_md(b);
}

int slm_cli_bench(int argc, char **argv) {
    bench bb, *b = &bb;
    memset(b, 0, sizeof *b);
    b->fmt = "md";
    b->p = 512, b->n = 128, b->reps = 5, b->bw_mib = 1024, b->profile = 1, b->ttft = 1000;
    int done, rc = parse_args(b, argc, argv, &done);
    if (rc || done) return rc;
    if (b->p == 0 && b->ttft > 0) { /* decode alone: no prefill program of any size to time */
        if (b->ttft_set) fprintf(stderr, "note: --ttft %d needs a prefill program: skipped with -p 0\n", b->ttft);
        b->ttft = 0;
    }

    if (!model_facts_get(b->model, &b->mf)) memset(&b->mf, 0, sizeof b->mf);
    /* the bandwidth first, while nothing else of ours runs */
    if (b->bw_mib > 0) b->bw = measure_bandwidth((size_t)b->bw_mib << 20, b->threads, 5);

    if (!slm_cli_trace_begin()) return 1;
    slm_options opt = slm_default_options();
    opt.tokenizer_path = b->tok;
    const int is_blob = slm_blob_is_elf(b->model);
    if (!is_blob) { /* a blob's shapes were fixed at compile time: pp and tg are clamped to them below */
        /* room for the depth, then the test (llama-bench: n_ctx = n_prompt + n_gen + n_depth) */
        opt.max_prompt_len = b->p > 0 ? b->p : (b->depth > 0 ? (b->depth < 512 ? b->depth : 512) : 1);
        opt.min_response_len = b->n + b->depth;
        /* and room for the time-to-first-token prompt */
        if (b->ttft > opt.max_prompt_len + opt.min_response_len) opt.min_response_len = b->ttft - opt.max_prompt_len;
    }
    opt.tile_kb = b->tile_kb; /* a blob refuses another value, naming its own */
    opt.kv_type = b->kv_type;
    opt.weight_type = b->weight_type;
    opt.prefetch = b->prefetch;
    opt.n_threads = b->threads;
    opt.schedule = b->schedule;
    opt.embeddings = b->embd;
    slm_engine *e = NULL;
    if (slm_load(&e, b->model, &opt)) {
        fprintf(stderr, "staticlm bench: %s\n", slm_last_error(e));
        slm_free(e);
        return 1;
    }
    slm_info in;
    slm_get_info(e, &in);
    if (b->p > in.max_prompt_len) {
        if (is_blob)
            fprintf(stderr, "note: pp%d does not fit the blob's prefill program of %d rows: clamped to pp%d\n", b->p,
                    in.max_prompt_len, in.max_prompt_len);
        else
            fprintf(stderr, "note: pp%d does not fit the model's context length %d: clamped to pp%d\n", b->p,
                    in.context_len, in.max_prompt_len);
        b->p = in.max_prompt_len;
    }
    if (b->depth > 0 && b->depth + (b->p > b->n ? b->p : b->n) > in.kv_capacity) {
        fprintf(stderr, "staticlm bench: depth %d + the test's %d tokens do not fit the KV capacity %d\n", b->depth,
                b->p > b->n ? b->p : b->n, in.kv_capacity);
        slm_free(e);
        return 1;
    }
    if (b->n > in.kv_capacity) {
        fprintf(stderr, "note: tg%d does not fit the KV capacity %d: clamped to tg%d\n", b->n, in.kv_capacity,
                in.kv_capacity);
        b->n = in.kv_capacity;
    }
    if (b->ttft > in.kv_capacity) {
        fprintf(stderr, "note: a %d-token prompt does not fit the KV capacity %d: time to first token of %d tokens\n", b->ttft,
                in.kv_capacity, in.kv_capacity);
        b->ttft = in.kv_capacity;
    }
    b->ttft_chunk = in.max_prompt_len;
    int most = b->p > b->depth ? b->p : b->depth; /* the ids any test writes */
    if (b->ttft > most) most = b->ttft;
    int32_t *ids = slm_malloc(((size_t)most + 1) * sizeof *ids);
    if (!ids) {
        slm_free(e);
        return 1;
    }
    if (b->embd && (slm_session_new(e, NULL, &g_embd) ||
                    !(g_rows = slm_malloc((size_t)(b->p > 0 ? b->p : 1) * (size_t)in.dim * sizeof(float))))) {
        fprintf(stderr, "staticlm bench: %s\n", g_embd ? "out of memory" : slm_last_error(e));
        slm_session_free(g_embd);
        slm_xfree(ids);
        slm_free(e);
        return 1;
    }
    b->kname = slm_kernels_active()->name;
    b->kv_name = in.kv_type;
    b->amx_peak = slm_amx_int8_peak(0.2); /* 0 (at once) without AMX */
    b->vnni_peak = b->p > 0 ? slm_vnni_int8_peak(0.1) : 0; /* 0 (at once) without AVX-512 VNNI */
    rc = 1;
    if (!run_tests(b, e, ids, in.vocab_size)) goto done;
    if (!run_ttft(b, e, ids, in.vocab_size)) goto done;
    if (b->profile && b->n > 0 && !profile_decode(b, e, ids, in.vocab_size)) goto done;

    /* the bandwidth again, after the tests: other processes on the machine
     * move it; the higher of the two bounds decode more honestly */
    if (b->bw_mib > 0) b->bw_after = measure_bandwidth((size_t)b->bw_mib << 20, b->threads, 5);
    if (b->p > 0) { /* the VM's speed moves too: the higher of the two */
        const double v = slm_vnni_int8_peak(0.1);
        if (v > b->vnni_peak) b->vnni_peak = v;
    }
    b->bw_before = b->bw;
    if (b->bw_after > b->bw) b->bw = b->bw_after;
    b->limit = b->bw > 0 && b->mf.per_token ? b->bw / (double)b->mf.per_token : 0.0;
    if (b->jsonl) print_jsonl(b);
    else print_md(b);
    fflush(stdout);
    rc = 0;
done:
    slm_session_free(g_embd);
    g_embd = NULL;
    slm_xfree(g_rows);
    g_rows = NULL;
    slm_xfree(ids);
    slm_free(e);
    return rc;
}
