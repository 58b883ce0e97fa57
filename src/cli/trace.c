/* staticlm trace FILE.json [--svg OUT.svg]: read a trace written by
 * --trace, print where the time went (per task kind, per thread, the
 * critical stage) and draw the timeline as SVG: one row per thread, a
 * colour per task kind, barrier waits as lines, the engine's events in a
 * row above. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"
#include "common/json.h"

#ifndef SLM_HAVE_CJSON

int slm_cli_trace(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "staticlm: trace needs cJSON at build time (Debian: libcjson-dev)\n");
    return 1;
}

#else

#include <cjson/cJSON.h>

enum { EV_TASK, EV_BARRIER, EV_SLICE, EV_INSTANT };

typedef struct ev {
    double ts, dur;    /* us */
    int tid, type, kind; /* kind: index into the kind table (tasks) */
    int stage, layer;
    const char *name, *prog; /* into the JSON tree */
} ev;

#define MAX_KINDS 16
#define MAX_TIDS 256

static const char *const k_colors[MAX_KINDS] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f", "#e15759",
                                                 "#76b7b2", "#edc948", "#ff9da7", "#bab0ac", "#86bcb6", "#d37295",
                                                 "#8cd17d", "#b6992d", "#499894", "#79706e"};

typedef struct trace_data {
    ev *e;
    int n;
    const char *kinds[MAX_KINDS];
    int n_kinds;
    const char *tname[MAX_TIDS];
    int n_tids; /* highest tid + 1 */
    double t0, t1;
} trace_data;

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *k, double def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static int kind_of(trace_data *d, const char *name) {
    for (int i = 0; i < d->n_kinds; i++)
        if (!strcmp(d->kinds[i], name)) return i;
    if (d->n_kinds == MAX_KINDS) return MAX_KINDS - 1;
    d->kinds[d->n_kinds] = name;
    return d->n_kinds++;
}

/* The events of the tree into d (pointing into it). 0 on a malformed file. */
static int load(const cJSON *root, trace_data *d) {
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(evs)) return 0;
    int cap = cJSON_GetArraySize(evs);
    d->e = slm_calloc((size_t)(cap > 0 ? cap : 1), sizeof *d->e);
    if (!d->e) return 0;
    d->t0 = INFINITY;
    d->t1 = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, evs) {
        const char *ph = jstr(o, "ph"), *name = jstr(o, "name"), *cat = jstr(o, "cat");
        const int tid = (int)jnum(o, "tid", -1);
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
        if (!ph || !name || tid < 0 || tid >= MAX_TIDS) continue;
        if (!strcmp(ph, "M")) {
            if (!strcmp(name, "thread_name") && jstr(args, "name")) d->tname[tid] = jstr(args, "name");
            continue;
        }
        ev *e = &d->e[d->n];
        e->ts = jnum(o, "ts", 0);
        e->dur = jnum(o, "dur", 0);
        e->tid = tid;
        e->name = name;
        e->prog = jstr(args, "program");
        e->stage = (int)jnum(args, "stage", -1);
        e->layer = (int)jnum(args, "layer", -1);
        if (!strcmp(ph, "i") || !strcmp(ph, "I")) e->type = EV_INSTANT;
        else if (strcmp(ph, "X")) continue;
        else if (cat && !strcmp(cat, "task")) e->type = EV_TASK, e->kind = kind_of(d, name);
        else if (cat && !strcmp(cat, "barrier")) e->type = EV_BARRIER;
        else e->type = EV_SLICE;
        if (tid + 1 > d->n_tids) d->n_tids = tid + 1;
        if (e->ts < d->t0) d->t0 = e->ts;
        if (e->ts + e->dur > d->t1) d->t1 = e->ts + e->dur;
        d->n++;
    }
    if (!d->n) d->t0 = 0;
    return 1;
}

/* Keep the events that start in [from, to) ms after the first one. */
static void window(trace_data *d, double from_ms, double to_ms) {
    const double a = d->t0 + from_ms * 1e3, b = to_ms > 0 ? d->t0 + to_ms * 1e3 : INFINITY;
    int n = 0;
    d->t0 = INFINITY;
    d->t1 = 0;
    for (int i = 0; i < d->n; i++) {
        const ev *e = &d->e[i];
        if (e->ts < a || e->ts >= b) continue;
        if (e->ts < d->t0) d->t0 = e->ts;
        if (e->ts + e->dur > d->t1) d->t1 = e->ts + e->dur;
        d->e[n++] = *e;
    }
    d->n = n;
    if (!n) d->t0 = 0;
}

/* ---- the summary ----------------------------------------------------------- */

typedef struct stage_sum {
    const char *prog;
    int stage, layer;
    double busy, wait; /* us summed over threads */
    unsigned kinds;    /* bit per kind */
} stage_sum;

static stage_sum *stage_find(stage_sum *s, int *n, int cap, const char *prog, int stage) {
    for (int i = 0; i < *n; i++)
        if (s[i].stage == stage && s[i].prog == prog) return &s[i];
    for (int i = 0; i < *n; i++) /* the same name at another address */
        if (s[i].stage == stage && !strcmp(s[i].prog, prog)) return &s[i];
    if (*n == cap) return NULL;
    s[*n] = (stage_sum){prog, stage, -2, 0, 0, 0};
    return &s[(*n)++];
}

static void summary(const trace_data *d, FILE *f) {
    double kind_us[MAX_KINDS] = {0}, wait_us = 0, busy[MAX_TIDS] = {0}, wait[MAX_TIDS] = {0};
    long kind_n[MAX_KINDS] = {0}, n_tasks = 0;
    const int cap = 4096;
    stage_sum *st = slm_calloc((size_t)cap, sizeof *st);
    int n_st = 0, threads = 0;
    for (int i = 0; i < d->n; i++) {
        const ev *e = &d->e[i];
        if (e->type == EV_TASK) {
            kind_us[e->kind] += e->dur;
            kind_n[e->kind]++;
            busy[e->tid] += e->dur;
            n_tasks++;
        } else if (e->type == EV_BARRIER) {
            wait_us += e->dur;
            wait[e->tid] += e->dur;
        } else continue;
        stage_sum *s = st && e->prog ? stage_find(st, &n_st, cap, e->prog, e->stage) : NULL;
        if (!s) continue;
        if (e->type == EV_TASK) {
            s->busy += e->dur;
            s->kinds |= 1u << e->kind;
            if (s->layer == -2) s->layer = e->layer;
            else if (s->layer != e->layer) s->layer = -3; /* several */
        } else s->wait += e->dur;
    }
    for (int t = 0; t < d->n_tids; t++) threads += busy[t] > 0 || wait[t] > 0;
    const double span = d->t1 - d->t0;
    double all = wait_us;
    for (int k = 0; k < d->n_kinds; k++) all += kind_us[k];
    fprintf(f, "trace: %d events, %ld task slices, %d executor threads, %.3f ms from first to last event\n\n", d->n,
            n_tasks, threads, span / 1e3);
    fprintf(f, "| kind | tasks | time ms (all threads) | share | mean us |\n| --- | ---: | ---: | ---: | ---: |\n");
    for (int k = 0; k < d->n_kinds; k++)
        if (kind_n[k])
        fprintf(f, "| %s | %ld | %.3f | %.1f%% | %.2f |\n", d->kinds[k], kind_n[k], kind_us[k] / 1e3,
                all > 0 ? 100 * kind_us[k] / all : 0.0, kind_n[k] ? kind_us[k] / (double)kind_n[k] : 0.0);
    fprintf(f, "| barrier wait | | %.3f | %.1f%% | |\n\n", wait_us / 1e3, all > 0 ? 100 * wait_us / all : 0.0);
    fprintf(f, "| thread | name | tasks ms | barrier ms | idle share |\n| ---: | --- | ---: | ---: | ---: |\n");
    for (int t = 0; t < d->n_tids; t++) {
        if (!(busy[t] > 0 || wait[t] > 0)) continue;
        fprintf(f, "| %d | %s | %.3f | %.3f | %.1f%% |\n", t, d->tname[t] ? d->tname[t] : "", busy[t] / 1e3,
                wait[t] / 1e3, span > 0 ? 100 * (1 - busy[t] / span) : 0.0);
    }
    /* the critical stage: the longest wall time, a stage's wall being its
     * threads' task and barrier time averaged over the threads */
    int best = -1;
    double best_wall = 0, total_wall = 0;
    for (int i = 0; i < n_st; i++) {
        const double wall = (st[i].busy + st[i].wait) / (threads ? threads : 1);
        total_wall += wall;
        if (wall > best_wall) best_wall = wall, best = i;
    }
    if (best >= 0) {
        const stage_sum *s = &st[best];
        fprintf(f, "\ncritical stage: %s stage %d (", s->prog, s->stage);
        if (s->layer >= 0) fprintf(f, "layer %d, ", s->layer);
        for (int k = 0, first = 1; k < d->n_kinds; k++)
            if (s->kinds >> k & 1) fprintf(f, "%s%s", first ? "" : "+", d->kinds[k]), first = 0;
        fprintf(f, "): %.3f ms wall over the trace, %.1f%% of all stages' wall; its threads were busy %.1f%% of it\n",
                best_wall / 1e3, total_wall > 0 ? 100 * best_wall / total_wall : 0.0,
                s->busy + s->wait > 0 ? 100 * s->busy / (s->busy + s->wait) : 0.0);
    }
    slm_xfree(st);
}

/* ---- the picture ------------------------------------------------------------ */

static void svg_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static int write_svg(const trace_data *d, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    const double left = 170, right = 20, top = 40, row = 22, width = 1400;
    const int rows = d->n_tids + 1; /* row 0: the engine's events */
    const double span = d->t1 > d->t0 ? d->t1 - d->t0 : 1, sx = (width - left - right) / span;
    const double height = top + rows * row + 70;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
            "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height);
    fprintf(f, "<text x=\"%.0f\" y=\"16\" font-size=\"13\">staticlm trace: %.3f ms, %d threads</text>\n", left,
            span / 1e3, d->n_tids);
    /* time axis: about ten ticks at a round step */
    double step = pow(10, floor(log10(span / 10)));
    if (span / step > 20) step *= 5;
    else if (span / step > 10) step *= 2;
    for (double t = 0; t <= span; t += step) {
        const double x = left + t * sx;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", x, top - 4, x,
                top + rows * row);
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#666\">%g ms</text>\n", x, top - 8,
                t / 1e3);
    }
    for (int r = 0; r < rows; r++) {
        char def[32];
        snprintf(def, sizeof def, "thread %d", r - 1);
        const char *label = r == 0 ? "engine / runtime" : d->tname[r - 1] ? d->tname[r - 1] : def;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", left - 6, top + r * row + row * 0.65);
        svg_text(f, label);
        fputs("</text>\n", f);
    }
    for (int i = 0; i < d->n; i++) {
        const ev *e = &d->e[i];
        const double x = left + (e->ts - d->t0) * sx, w = e->dur * sx > 0.3 ? e->dur * sx : 0.3;
        const double y = top + (e->type == EV_SLICE || e->type == EV_INSTANT ? 0 : e->tid + 1) * row;
        if (e->type == EV_TASK) {
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>", x, y + 3, w,
                    row - 6, k_colors[e->kind]);
            svg_text(f, e->name);
            fprintf(f, " %s stage %d layer %d, %.2f us</title></rect>\n", e->prog ? e->prog : "", e->stage, e->layer,
                    e->dur);
        } else if (e->type == EV_BARRIER) { /* the wait: a line through the row, a tick at its end */
            fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#888\"/>", x, y + row / 2, x + w,
                    y + row / 2);
            fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\" stroke-width=\"0.5\"/>\n",
                    x + w, y + 2, x + w, y + row - 2);
        } else if (e->type == EV_SLICE) {
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"none\" stroke=\"#555\"><title>",
                    x, y + 3, w, row - 6);
            svg_text(f, e->name);
            fprintf(f, ", %.2f us</title></rect>\n", e->dur);
        } else {
            fprintf(f, "<path d=\"M%.2f %.1f l-4 -7 h8 z\" fill=\"#c00\"><title>", x, y + row - 2);
            svg_text(f, e->name);
            fputs("</title></path>\n", f);
        }
    }
    /* legend */
    double lx = left;
    const double ly = top + rows * row + 20;
    for (int k = 0; k < d->n_kinds; k++) {
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>", lx, ly, k_colors[k]);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", lx + 16, ly + 10);
        svg_text(f, d->kinds[k]);
        fputs("</text>\n", f);
        lx += 24 + 7 * (double)strlen(d->kinds[k]);
    }
    fprintf(f,
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\"/><text x=\"%.0f\" y=\"%.0f\">barrier "
            "wait</text>\n",
            lx, ly + 6, lx + 14, ly + 6, lx + 18, ly + 10);
    lx += 100;
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"none\" stroke=\"#555\"/><text x=\"%.0f\" "
            "y=\"%.0f\">engine slice (decode, prefill chunk, sample, request)</text>\n",
            lx, ly, lx + 16, ly + 10);
    fprintf(f, "<path d=\"M%.0f %.0f l-4 -7 h8 z\" fill=\"#c00\"/><text x=\"%.0f\" y=\"%.0f\">engine event (variant "
               "switch, prefix-cache hit, speculation)</text>\n",
            left + 4, ly + 36, left + 12, ly + 34);
    fputs("</svg>\n", f);
    const int bad = ferror(f);
    return !(fclose(f) | bad);
}

int slm_cli_trace(int argc, char **argv) {
    const char *in = NULL, *svg = NULL;
    float from_ms = 0, to_ms = 0;
    int to_set = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: staticlm trace FILE.json [--svg OUT.svg] [--from MS] [--to MS]\n\n"
                   "Reads a trace written by --trace FILE.json (run, chat, bench, serve, simulate)\n"
                   "and prints the time per task kind, each thread's task, barrier and idle time,\n"
                   "and the critical stage (the longest wall time). --svg draws the timeline: a row\n"
                   "per thread, a colour per task kind, barrier waits as lines (docs/trace.md).\n"
                   "--from and --to keep the events that start in that window (ms after the first\n"
                   "event; --to after --from).\n");
            return 0;
        }
        if (!strcmp(argv[i], "--svg") && i + 1 < argc) svg = argv[++i];
        else if ((!strcmp(argv[i], "--from") || !strcmp(argv[i], "--to")) && i + 1 < argc) {
            float v;
            if (!slm_cli_parse_float(argv[i + 1], argv[i], 0.0f, 1e9f, &v)) return 2;
            if (argv[i][2] == 'f') from_ms = v;
            else to_ms = v, to_set = 1;
            i++;
        }
        else if (argv[i][0] != '-' && !in) in = argv[i];
        else {
            fprintf(stderr, "staticlm: trace: unexpected '%s' (see staticlm trace --help)\n", argv[i]);
            return 2;
        }
    }
    if (!in) {
        fprintf(stderr, "usage: staticlm trace FILE.json [--svg OUT.svg]\n");
        return 2;
    }
    if (to_set && !(to_ms > from_ms)) { /* 0 would read as no end */
        fprintf(stderr, "staticlm: trace: --to %g: the window ends after --from %g\n", to_ms, from_ms);
        return 2;
    }
    slm_map map;
    slm_err err = {0};
    if (slm_map_file(&map, in, &err)) {
        fprintf(stderr, "staticlm: %s\n", err.msg);
        return 1;
    }
    slm_json_init_hooks();
    cJSON *root = cJSON_ParseWithLength((const char *)map.data, (size_t)map.size);
    slm_unmap(&map);
    trace_data d;
    memset(&d, 0, sizeof d);
    if (!root || !load(root, &d)) {
        fprintf(stderr, "staticlm: %s: not a trace-event JSON file (no traceEvents array)\n", in);
        cJSON_Delete(root);
        slm_xfree(d.e);
        return 1;
    }
    if (from_ms > 0 || to_ms > 0) window(&d, from_ms, to_ms);
    summary(&d, stdout);
    int rc = 0;
    if (svg) {
        if (write_svg(&d, svg)) fprintf(stderr, "wrote %s\n", svg);
        else {
            fprintf(stderr, "staticlm: %s: cannot write\n", svg);
            rc = 1;
        }
    }
    slm_xfree(d.e);
    cJSON_Delete(root);
    return rc;
}

#endif
