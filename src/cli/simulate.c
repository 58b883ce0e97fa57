/* staticlm simulate: replay the compiled programs' task lists on a device
 * profile (program/simulate.h) and print time to first token, time per
 * output token, each lane's utilisation and the lane that bounds each
 * program; --trace writes the simulated timeline; --sweep max_prompt_len
 * compiles the prefill program at several static lengths and says which
 * gives the lowest mean TTFT over a prompt length distribution.
 * docs/simulate.md. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "program/simulate.h"

#define MAX_LENS 64

typedef struct sim_args {
    const char *model, *device, *trace, *sweep, *lens_file;
    int prompt_len, gen, depth, batch, max_prompt_len, min_response_len, tile_kb, trace_steps, verbose;
    int lens[MAX_LENS], n_lens;     /* the prompt length distribution (sweep) */
    int sweep_at[MAX_LENS], n_sweep; /* the static lengths tried */
} sim_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: staticlm simulate [-m MODEL] [--device PROFILE] [--prompt-len P] [--gen N]\n"
            "       staticlm simulate -m MODEL --device PROFILE --sweep max_prompt_len --prompt-lens 32,100,300\n"
            "\n"
            "Compiles MODEL as run does and replays its programs' task lists on the device of\n"
            "PROFILE (transfer / matrix / vector lanes, scratchpad, tiles in flight, launch and\n"
            "barrier costs): time to first token of a P-token prompt, time per output token\n"
            "over N tokens, each lane's utilisation and the lane that bounds each program.\n"
            "Nothing runs: it is arithmetic on the task records (docs/simulate.md).\n"
            "\n"
            "  -m, --model PATH          model file (default: stories260K.bin)\n"
            "      --device PROFILE      a profile name in profiles/ (cpu-host, npu-lunar-lake)\n"
            "                            or a JSON file (default cpu-host)\n"
            "      --prompt-len P        prompt tokens (default 512; 0 = decode from an empty cache)\n"
            "      --gen N               output tokens (default 64)\n"
            "      --depth D             KV rows already stored before the prompt (a kept\n"
            "                            conversation or prefix; bench's -d; default 0)\n"
            "      --batch B             also the batch.B program: B sequences decoding together\n"
            "                            (serve --parallel), each from depth D + P\n"
            "      --max-prompt-len L    prefill program rows (default 1024)\n"
            "      --min-response-len R  KV rows beyond the prompt (default 128)\n"
            "      --tile-kb K           weight panel of one matrix task, KiB (default: as run)\n"
            "      --trace FILE          write the simulated timeline as a Chrome trace (the\n"
            "                            format of run --trace; staticlm trace FILE --svg OUT)\n"
            "      --trace-steps S       decode steps in the trace (default 4; with --trace)\n"
            "      --sweep max_prompt_len  try static prefill lengths (--sweep-at) on the prompt\n"
            "                            lengths of --prompt-lens or --prompt-lens-file (it takes\n"
            "                            none of the options above but -m, --device,\n"
            "                            --min-response-len and --tile-kb; the three below are\n"
            "                            its own)\n"
            "      --sweep-at L,L,...    the lengths tried (default 16,32,...,1024)\n"
            "      --prompt-lens P,P,... prompt lengths, one per prompt (up to 64)\n"
            "      --prompt-lens-file F  prompt lengths, whitespace-separated\n"
            "  -v, --verbose             every stage's bounding lane of the first call\n"
            "  -h, --help                this text\n");
}

/* "32,100,300" into out (positive, at most MAX_LENS). */
static int parse_lens(const char *s, const char *opt, int *out, int *n) {
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 1 || v > (1 << 20) || *n == MAX_LENS || (*end && *end != ',')) {
            fprintf(stderr, "staticlm: %s expects up to %d comma-separated positive integers, got '%s'\n", opt,
                    MAX_LENS, s);
            return 0;
        }
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (!*n) fprintf(stderr, "staticlm: %s is empty\n", opt);
    return *n > 0;
}

static int read_lens_file(const char *path, int *out, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "staticlm: %s: cannot open\n", path);
        return 0;
    }
    long v;
    *n = 0;
    int r;
    while ((r = fscanf(f, "%ld", &v)) == 1) {
        if (v < 1 || v > (1 << 20) || *n == MAX_LENS) {
            fprintf(stderr, "staticlm: %s: length %d: expected up to %d positive integers\n", path, *n + 1, MAX_LENS);
            fclose(f);
            return 0;
        }
        out[(*n)++] = (int)v;
    }
    const int bad = r != EOF || !*n;
    fclose(f);
    if (bad) fprintf(stderr, "staticlm: %s: expected whitespace-separated positive integers\n", path);
    return !bad;
}

/* The options of one mode that the other never reads: the last given of
 * each (NULL: none), refused in the other mode. */
static int in_list(const char *o, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(o, *list)) return 1;
    return 0;
}

static const char *const k_point_only[] = {"--prompt-len", "--gen", "--depth", "--batch", "--max-prompt-len", "--trace",
                                           "--trace-steps", "-v", "--verbose", NULL};
static const char *const k_sweep_only[] = {"--prompt-lens", "--prompt-lens-file", "--sweep-at", NULL};

/* Returns 1 ok, 0 error, 2 help. */
static int parse(int argc, char **argv, sim_args *a) {
    const char *point = NULL, *swept = NULL, *steps = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return 2;
        if (in_list(o, k_point_only)) point = o;
        if (in_list(o, k_sweep_only)) swept = o;
        if (!strcmp(o, "--trace-steps")) steps = o;
        if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) {
            a->verbose = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "staticlm: %s needs a value (see staticlm simulate --help)\n", o);
            return 0;
        }
        i++;
        int ok = 1;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--device")) a->device = v;
        else if (!strcmp(o, "--trace")) a->trace = v;
        else if (!strcmp(o, "--sweep")) a->sweep = v;
        else if (!strcmp(o, "--prompt-lens-file")) a->lens_file = v;
        else if (!strcmp(o, "--prompt-len")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &a->prompt_len);
        else if (!strcmp(o, "--gen")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &a->gen);
        else if (!strcmp(o, "--depth")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &a->depth);
        else if (!strcmp(o, "--batch")) ok = slm_cli_parse_int(v, o, 2, 64, &a->batch);
        else if (!strcmp(o, "--max-prompt-len")) ok = slm_cli_parse_int(v, o, 1, 1 << 20, &a->max_prompt_len);
        else if (!strcmp(o, "--min-response-len")) ok = slm_cli_parse_int(v, o, 0, 1 << 20, &a->min_response_len);
        else if (!strcmp(o, "--tile-kb")) ok = slm_cli_parse_int(v, o, 4, 1 << 20, &a->tile_kb);
        else if (!strcmp(o, "--trace-steps")) ok = slm_cli_parse_int(v, o, 0, 1 << 16, &a->trace_steps);
        else if (!strcmp(o, "--prompt-lens")) ok = parse_lens(v, o, a->lens, &a->n_lens);
        else if (!strcmp(o, "--sweep-at")) ok = parse_lens(v, o, a->sweep_at, &a->n_sweep);
        else {
            fprintf(stderr, "staticlm: unknown option '%s' (see staticlm simulate --help)\n", o);
            return 0;
        }
        if (!ok) return 0;
    }
    if (a->sweep && strcmp(a->sweep, "max_prompt_len")) {
        fprintf(stderr, "staticlm: --sweep takes max_prompt_len (the only swept parameter), got '%s'\n", a->sweep);
        return 0;
    }
    if (a->sweep && point) {
        fprintf(stderr, "staticlm: %s: --sweep simulates only the prefills of --prompt-lens at each --sweep-at "
                        "length (with --min-response-len and --tile-kb); leave it out\n", point);
        return 0;
    }
    if (!a->sweep && swept) {
        fprintf(stderr, "staticlm: %s is read by --sweep max_prompt_len only (one prompt: --prompt-len)\n", swept);
        return 0;
    }
    if (steps && !a->trace) {
        fprintf(stderr, "staticlm: --trace-steps: the decode steps of the --trace FILE; give --trace\n");
        return 0;
    }
    if (a->lens_file && !read_lens_file(a->lens_file, a->lens, &a->n_lens)) return 0;
    if (a->sweep && !a->n_lens) {
        fprintf(stderr, "staticlm: --sweep needs --prompt-lens or --prompt-lens-file\n");
        return 0;
    }
    return 1;
}

/* The directory of this executable (for the bundled profiles). */
static int exe_dir(char *out, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0) return 0;
    out[n] = 0;
    char *s = strrchr(out, '/');
    if (!s) return 0;
    *s = 0;
    return 1;
}

/* A profile by path, or by name in ./profiles, beside the executable's
 * folder or its parent (a build folder in the source tree). */
static int load_profile(const char *dev, slm_sim_profile *p) {
    slm_err err;
    memset(&err, 0, sizeof err);
    char path[PATH_MAX + 64];
    if (strchr(dev, '/') || strstr(dev, ".json")) {
        if (slm_sim_profile_load(p, dev, &err)) {
            fprintf(stderr, "staticlm: %s\n", err.msg);
            return 0;
        }
        return 1;
    }
    char dir[PATH_MAX];
    const char *tries[3] = {".", NULL, NULL};
    char d1[PATH_MAX + 8], d2[PATH_MAX + 8];
    if (exe_dir(dir, sizeof dir)) {
        snprintf(d1, sizeof d1, "%s/..", dir);
        snprintf(d2, sizeof d2, "%s/../..", dir);
        tries[1] = d1;
        tries[2] = d2;
    }
    for (int i = 0; i < 3; i++) {
        if (!tries[i]) continue;
        snprintf(path, sizeof path, "%s/profiles/%s.json", tries[i], dev);
        if (access(path, R_OK)) continue;
        if (slm_sim_profile_load(p, path, &err)) {
            fprintf(stderr, "staticlm: %s\n", err.msg);
            return 0;
        }
        return 1;
    }
    fprintf(stderr, "staticlm: no device profile '%s' (profiles/%s.json here or beside the executable; or give a path)\n",
            dev, dev);
    return 0;
}

static int compile_at(slm_model_file *m, const sim_args *a, int max_prompt_len, int min_response_len,
                      slm_compiled *c) {
    slm_compile_options co;
    memset(&co, 0, sizeof co);
    co.max_prompt_len = max_prompt_len;
    co.min_response_len = min_response_len;
    co.tile_kb = a->tile_kb;
    slm_err err;
    memset(&err, 0, sizeof err);
    if (m->cfg.encoder) {
        fprintf(stderr, "staticlm: %s is an encoder (an embedding model): simulate replays decoders' prefill and "
                        "generate programs\n", m->cfg.arch);
        return 0;
    }
    if (slm_compile(c, m, &co, &err)) {
        fprintf(stderr, "staticlm: %s\n", err.msg);
        return 0;
    }
    return 1;
}

/* What the calls of one program added up to. */
typedef struct prog_sum {
    const slm_program *prog;
    int calls;
    slm_sim_result tot;
} prog_sum;

static void sum_add(prog_sum *s, const slm_program *p, const slm_sim_result *r) {
    s->prog = p;
    s->calls++;
    s->tot.ns += r->ns;
    for (int l = 0; l < SLM_LANE_COUNT; l++) {
        s->tot.busy_ns[l] += r->busy_ns[l];
        s->tot.bound_ns[l] += r->bound_ns[l];
        s->tot.ops[l] += r->ops[l];
    }
    for (int i = 0; i < SLM_DTYPE_COUNT; i++) s->tot.matrix_ops_by_type[i] += r->matrix_ops_by_type[i];
    s->tot.overhead_ns += r->overhead_ns;
    s->tot.barrier_ns += r->barrier_ns;
    s->tot.launch_ns += r->launch_ns;
    s->tot.bytes += r->bytes;
    s->tot.stages = r->stages;
    s->tot.tasks = r->tasks;
}

/* TTFT of a prompt of n tokens: its chunks through the prefill programs,
 * as the runtime runs them (each chunk through the smallest program that
 * holds it, the largest for all but the last). */
static double ttft_ns(const slm_sim_profile *p, slm_compiled *c, int n, int depth, prog_sum *sum,
                      slm_sim_trace *tr) {
    double t = 0;
    for (int done = 0; done < n;) {
        slm_program *pr = slm_pick_prefill(c, n - done);
        if (!pr) pr = slm_largest(c, SLM_PROG_PREFILL);
        if (!pr) return 0;
        const int rows = n - done < pr->rows ? n - done : pr->rows;
        slm_sim_result r;
        if (tr) tr->t0_ns = t;
        slm_sim_run(p, pr, rows, depth + done, &r, tr);
        slm_sim_trace_slice(tr, "prefill_chunk", pr->name, t, r.ns, rows, depth + done);
        if (sum) sum_add(sum, pr, &r);
        t += r.ns;
        done += rows;
    }
    return t;
}

static void print_sum(const slm_sim_profile *p, const prog_sum *s) {
    const double ns = s->tot.ns > 0 ? s->tot.ns : 1;
    const int mu = p->matrix_units, vu = p->shared_units ? p->matrix_units : p->vector_units;
    printf("| %s | %d | %d / %d | %.1f | %.2f | %.3f | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %s |\n", s->prog->name,
           s->calls, s->tot.tasks, s->tot.stages, (double)s->tot.bytes / s->calls * 1e-6,
           (s->tot.ops[SLM_LANE_MATRIX] + s->tot.ops[SLM_LANE_VECTOR]) / s->calls * 1e-9, s->tot.ns / s->calls * 1e-6, 100.0 * s->tot.busy_ns[SLM_LANE_TRANSFER] / ns,
           100.0 * s->tot.busy_ns[SLM_LANE_MATRIX] / (ns * mu), 100.0 * s->tot.busy_ns[SLM_LANE_VECTOR] / (ns * vu),
           100.0 * (s->tot.barrier_ns) / ns, slm_sim_bound(&s->tot));
}

static void print_profile(const slm_sim_profile *p) {
    printf("device: %s%s\n", p->name, p->estimate ? " (ESTIMATE: built from published figures, not measured)" : "");
    if (p->description[0]) printf("  %s\n", p->description);
    printf("  transfer %.1f GB/s", p->xfer_gbps);
    if (p->cache_gbps > 0) printf(" (%.1f GB/s when a call's weights fit %.0f MiB)", p->cache_gbps, p->cache_bytes / 1048576.0);
    printf("; matrix %d unit(s), %.0f G ops/s default; vector %d unit(s)%s, %.1f GFLOP/s\n", p->matrix_units,
           p->matrix_default_gops, p->shared_units ? p->matrix_units : p->vector_units,
           p->shared_units ? " (the same cores)" : "", p->vector_gflops);
    char sp[48];
    if (p->scratch_bytes) snprintf(sp, sizeof sp, "%.0f KiB per unit", p->scratch_bytes / 1024.0);
    else snprintf(sp, sizeof sp, "unlimited");
    printf("  scratchpad %s, %d tile(s) in flight, launch %.2f us, barrier %.2f us, call %.1f us%s\n", sp,
           p->tiles_in_flight, p->launch_ns * 1e-3, p->barrier_ns * 1e-3, p->call_ns * 1e-3,
           p->static_rows ? "; static shapes: padding rows and masked KV rows are computed" : "");
}

/* Every stage of one call and what bounds it (-v). */
static void print_stages(const slm_sim_profile *p, const slm_program *prog, int rows, int depth) {
    printf("\n%s, %d rows at depth %d: per stage\n\n| stage | tasks | first task | ms | bound by |\n| ---: | ---: | --- | ---: | --- |\n",
           prog->name, rows, depth);
    slm_program one = *prog;
    int first = 0, stage = 0;
    for (int i = 0; i <= prog->n_tasks; i++) {
        if (i < prog->n_tasks && prog->tasks[i].op != SLM_T_BARRIER) continue;
        one.tasks = prog->tasks + first;
        one.n_tasks = i - first;
        slm_sim_result r;
        slm_sim_run(p, &one, rows, depth, &r, NULL);
        if (one.n_tasks > 0)
            printf("| %d | %d | %s | %.4f | %s |\n", stage, one.n_tasks, slm_task_op_name(one.tasks[0].op),
                   (r.ns - p->call_ns) * 1e-6, slm_sim_bound(&r));
        stage++;
        first = i + 1;
    }
}

static int simulate(const sim_args *a, const slm_sim_profile *p, slm_compiled *c) {
    if (a->depth + a->prompt_len > c->kv_capacity) {
        fprintf(stderr, "staticlm: --depth %d + --prompt-len %d exceed the KV capacity %d (raise --min-response-len)\n",
                a->depth, a->prompt_len, c->kv_capacity);
        return 2;
    }
    FILE *tf = NULL;
    slm_sim_trace tr;
    memset(&tr, 0, sizeof tr);
    if (a->trace) {
        if (!(tf = fopen(a->trace, "w"))) {
            fprintf(stderr, "staticlm: %s: cannot open trace file for writing\n", a->trace);
            return 1;
        }
        slm_sim_trace_open(&tr, tf, p);
    }
    prog_sum sums[16];
    memset(sums, 0, sizeof sums);
    prog_sum *pre = &sums[0], *gen = &sums[1];
    const double ttft = a->prompt_len > 0 ? ttft_ns(p, c, a->prompt_len, a->depth, pre, tf ? &tr : NULL) : 0;
    slm_program *g = slm_pick_generate(c, a->depth + a->prompt_len + a->gen);
    if (!g) g = slm_largest(c, SLM_PROG_GENERATE);
    double t = ttft, dec = 0, first = 0, last = 0;
    int steps = 0;
    for (int i = 0; g && i < a->gen; i++) {
        const int depth = a->depth + a->prompt_len + i;
        if (depth >= g->kv_capacity) break;
        slm_sim_result r;
        slm_sim_trace *tp = tf && i < a->trace_steps ? &tr : NULL;
        if (tp) tp->t0_ns = t;
        slm_sim_run(p, g, 1, depth, &r, tp);
        slm_sim_trace_slice(tp, "decode", g->name, t, r.ns, 1, depth);
        sum_add(gen, g, &r);
        if (!i) first = r.ns;
        last = r.ns;
        t += r.ns;
        dec += r.ns;
        steps++;
    }
    prog_sum *bat = &sums[2];
    const slm_program *bp = NULL;
    for (int i = 0; a->batch && i < c->n_progs; i++)
        if (c->progs[i].kind == SLM_PROG_BATCH && c->progs[i].rows == a->batch) bp = &c->progs[i];
    for (int i = 0; bp && i < a->gen && a->depth + a->prompt_len + i < c->kv_capacity; i++) {
        slm_sim_result r;
        slm_sim_run(p, bp, a->batch, a->depth + a->prompt_len + i, &r, NULL);
        sum_add(bat, bp, &r);
    }
    print_profile(p);
    printf("model: %s; programs simulated: ", a->model);
    for (int i = 0; i < c->n_progs; i++) printf("%s%s", i ? ", " : "", c->progs[i].name);
    printf("\n\n");
    if (a->prompt_len > 0)
        printf("time to first token: %.3f ms (prompt of %d tokens after %d stored: %d call(s) of %s)\n", ttft * 1e-6,
               a->prompt_len, a->depth, pre->calls, pre->prog ? pre->prog->name : "?");
    if (steps)
        printf("time per output token: %.3f ms (%.1f tokens/s; %d tokens at depth %d..%d: first %.3f ms, last %.3f "
               "ms)\n",
               dec / steps * 1e-6, steps * 1e9 / dec, steps, a->depth + a->prompt_len,
               a->depth + a->prompt_len + steps - 1, first * 1e-6,
               last * 1e-6);
    if (steps < a->gen) printf("(decoding stops at the KV capacity %d)\n", g ? g->kv_capacity : 0);
    if (bat->calls)
        printf("batch of %d sequences (%s): %.3f ms per step, %.1f tokens/s in all (%.2fx one sequence's)\n", a->batch,
               bp->name, bat->tot.ns / bat->calls * 1e-6, a->batch * bat->calls * 1e9 / bat->tot.ns,
               steps && dec > 0 ? (a->batch * bat->calls * 1e9 / bat->tot.ns) / (steps * 1e9 / dec) : 0.0);
    printf("\n| program | calls | tasks / stages | MB per call | G ops per call | ms per call | transfer | matrix | vector "
           "| barriers | bound by |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int i = 0; i < 3; i++)
        if (sums[i].calls) print_sum(p, &sums[i]);
    for (int i = 0; a->verbose && i < 3; i++) {
        if (!sums[i].calls) continue;
        printf("%s matrix G ops per call by weight type:", sums[i].prog->name);
        for (int w = 0; w < SLM_DTYPE_COUNT; w++)
            if (sums[i].tot.matrix_ops_by_type[w] > 0)
                printf(" %s %.3f", slm_dtype_name((uint32_t)w), sums[i].tot.matrix_ops_by_type[w] / sums[i].calls * 1e-9);
        printf("; vector %.3f\n", sums[i].tot.ops[SLM_LANE_VECTOR] / sums[i].calls * 1e-9);
    }
    printf("\n(lane columns: busy time / (units x wall time); barriers: share of wall time in barrier costs;\n"
           " bound by: the lane busiest per unit in the stages that take the most time)\n");
    if (p->estimate) printf("ESTIMATE: %s is a model built from published figures, not a measurement.\n", p->name);
    if (a->verbose && pre->prog)
        print_stages(p, pre->prog, a->prompt_len < pre->prog->rows ? a->prompt_len : pre->prog->rows, a->depth);
    if (a->verbose && g && steps) print_stages(p, g, 1, a->depth + a->prompt_len);
    if (tf) {
        slm_sim_trace_close(&tr);
        if (fclose(tf)) {
            fprintf(stderr, "staticlm: %s: error writing the trace\n", a->trace);
            return 1;
        }
        fprintf(stderr, "wrote %s (%llu events; staticlm trace %s --svg OUT.svg)\n", a->trace,
                (unsigned long long)tr.events, a->trace);
    }
    return 0;
}

static int sweep(const sim_args *a, const slm_sim_profile *p, slm_model_file *m) {
    int at[MAX_LENS], n_at = a->n_sweep;
    if (n_at) memcpy(at, a->sweep_at, sizeof(int) * (size_t)n_at);
    else
        for (int l = 16; l <= 1024; l *= 2) at[n_at++] = l;
    /* one KV capacity for every length tried: the longest prompt (or length) + the response */
    int cap = 0;
    for (int i = 0; i < a->n_lens; i++)
        if (a->lens[i] > cap) cap = a->lens[i];
    for (int j = 0; j < n_at; j++)
        if (at[j] > cap) cap = at[j];
    cap += a->min_response_len;
    print_profile(p);
    printf("model: %s; KV capacity %d for every length; %d prompt(s): ", a->model, cap, a->n_lens);
    for (int i = 0; i < a->n_lens; i++) printf("%s%d", i ? "," : "", a->lens[i]);
    printf("\n\n| max_prompt_len | mean TTFT ms |");
    for (int i = 0; i < a->n_lens && i < 8; i++) printf(" P=%d |", a->lens[i]);
    printf("\n| ---: | ---: |");
    for (int i = 0; i < a->n_lens && i < 8; i++) printf(" ---: |");
    printf("\n");
    int best = -1;
    double best_ms = 0;
    for (int j = 0; j < n_at; j++) {
        slm_compiled c;
        memset(&c, 0, sizeof c);
        if (!compile_at(m, a, at[j], cap - at[j], &c)) return 1;
        if (c.kv_capacity < cap) { /* the model's context length clamped it */
            fprintf(stderr, "staticlm: the model's context length allows a KV capacity of %d, not %d: shorten "
                            "--prompt-lens or --min-response-len\n", c.kv_capacity, cap);
            slm_compiled_free(&c);
            return 1;
        }
        double tot = 0, each[MAX_LENS];
        for (int i = 0; i < a->n_lens; i++) tot += each[i] = ttft_ns(p, &c, a->lens[i], 0, NULL, NULL) * 1e-6;
        const int got = c.opt.max_prompt_len;
        slm_compiled_free(&c);
        const double mean = tot / a->n_lens;
        printf("| %d%s | %.3f |", got, got != at[j] ? " (clamped)" : "", mean);
        for (int i = 0; i < a->n_lens && i < 8; i++) printf(" %.3f |", each[i]);
        printf("\n");
        if (best < 0 || mean < best_ms) best = got, best_ms = mean;
    }
    printf("\nbest: max_prompt_len %d (mean TTFT %.3f ms over %d prompt(s))%s\n", best, best_ms, a->n_lens,
           p->estimate ? " [ESTIMATE]" : "");
    if (!p->static_rows)
        printf("(this profile skips padding rows, as the CPU executor does: a longer static shape costs\n"
               " little; on a static-shape device (static_rows) padding is computed and the choice matters)\n");
    return 0;
}

int slm_cli_simulate(int argc, char **argv) {
    sim_args a;
    memset(&a, 0, sizeof a);
    a.device = "cpu-host";
    a.prompt_len = 512;
    a.gen = 64;
    a.max_prompt_len = 1024;
    a.min_response_len = 128;
    a.trace_steps = 4;
    const int r = parse(argc, argv, &a);
    if (r == 2) {
        usage(stdout);
        return 0;
    }
    if (!r) return 2;
    if (!a.model) a.model = access("models/stories260K.bin", R_OK) ? "../shared/models/stories260K.bin"
                                                                   : "models/stories260K.bin";
    slm_sim_profile prof;
    if (!load_profile(a.device, &prof)) return 1;
    slm_model_file m;
    memset(&m, 0, sizeof m);
    slm_err err;
    memset(&err, 0, sizeof err);
    if (slm_model_open(&m, a.model, &err) || slm_model_repack(&m, &err)) {
        fprintf(stderr, "staticlm: %s\n", err.msg);
        slm_model_close(&m);
        return 1;
    }
    int rc;
    if (a.sweep) {
        rc = sweep(&a, &prof, &m);
    } else {
        slm_compiled c;
        memset(&c, 0, sizeof c);
        rc = compile_at(&m, &a, a.max_prompt_len, a.min_response_len, &c) ? 0 : 1;
        if (!rc && a.batch) {
            const int bs[1] = {a.batch};
            if (slm_compile_batch(&c, &m, a.batch, bs, 1, &err)) {
                fprintf(stderr, "staticlm: %s\n", err.msg);
                rc = 1;
            }
        }
        if (!rc) rc = simulate(&a, &prof, &c);
        slm_compiled_free(&c);
    }
    slm_model_close(&m);
    return rc;
}
