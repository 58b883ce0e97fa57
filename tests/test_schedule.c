/* The schedule of the task lists (compiler/passes.c slm_pass_schedule,
 * device/exec.c): the counted schedule gives the rendezvous schedule's
 * logits bit for bit (2 threads, stories260K and a Q8_0 GGUF of it, prefill
 * and decode); decode programs hold prefetch tasks on the transfer lane with
 * the distance the dump shows; barriers carry their producer / consumer
 * counts; a blob whose counts, lanes or prefetch distances are wrong is
 * refused. */
#include <elf.h>
#include <unistd.h>

#include "t.h"
#include "rig.h"
#include "run_cmd.h"

#include "amx_engine.h"
#include "blob/blob.h"
#include "program/program.h"

#define M(f) T_SHARED("models/" f)
#define STEPS 12

static char g_tmp[256];

/* Logits after a 5-token prefill, then after each of STEPS greedy decode
 * steps, on `threads` threads under `schedule`. */
static int run_logits_kb(const char *path, int threads, int schedule, int tile_kb, int prefetch_off, float *out,
                         int *vocab) {
    rig r;
    memset(&r, 0, sizeof r);
    slm_err err = {0};
    slm_compile_options o = rig_opts(16, 32);
    o.tile_kb = tile_kb;
    o.prefetch_off = prefetch_off;
    if (slm_model_open(&r.m, path, &err) || slm_model_repack(&r.m, &err) || slm_compile(&r.c, &r.m, &o, &err) ||
        slm_rt_init(&r.rt, &r.c, r.m.map.data, threads, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        slm_compiled_free(&r.c);
        slm_model_close(&r.m);
        return 0;
    }
    r.ok = 1;
    slm_pool_set_schedule(r.rt.pool, schedule);
    CHECK(slm_pool_schedule(r.rt.pool) == schedule);
    const int V = r.c.cfg.vocab_size;
    *vocab = V;
    const int32_t ids[5] = {1, 300 % V, 200 % V, 100 % V, 50 % V};
    slm_status s = slm_rt_prefill(&r.rt, ids, 5, &err);
    if (!s) memcpy(out, r.rt.logits, (size_t)V * sizeof(float));
    for (int i = 0; i < STEPS && !s; i++) {
        int best = 0;
        for (int j = 1; j < V; j++)
            if (r.rt.logits[j] > r.rt.logits[best]) best = j;
        s = slm_rt_decode(&r.rt, best, &err);
        if (!s) memcpy(out + (size_t)(i + 1) * V, r.rt.logits, (size_t)V * sizeof(float));
    }
    CHECKF(s == SLM_OK, "%s: %s", path, err.msg);
    rig_close(&r);
    return s == SLM_OK;
}

static int run_logits(const char *path, int threads, int schedule, float *out, int *vocab) {
    return run_logits_kb(path, threads, schedule, 0, 0, out, vocab);
}

static void same_logits(const char *path) {
    enum { MAXV = 32768 };
    float *a = calloc((size_t)(STEPS + 1) * MAXV, sizeof(float)), *b = calloc((size_t)(STEPS + 1) * MAXV, sizeof(float));
    int va = 0, vb = 0;
    /* twice each, alternating: a thread-order dependence would show */
    for (int rep = 0; rep < 2; rep++) {
        if (!run_logits(path, 2, SLM_SCHEDULE_RENDEZVOUS, a, &va) || !run_logits(path, 2, SLM_SCHEDULE_COUNTED, b, &vb))
            break;
        CHECK(va == vb && va <= MAXV);
        CHECKF(!memcmp(a, b, (size_t)(STEPS + 1) * (size_t)va * sizeof(float)), "%s: counted logits differ from rendezvous",
               path);
    }
    /* one thread (prefetch tasks skipped) agrees too */
    if (run_logits(path, 1, SLM_SCHEDULE_COUNTED, b, &vb))
        CHECKF(!memcmp(a, b, (size_t)(STEPS + 1) * (size_t)va * sizeof(float)), "%s: one thread differs", path);
    /* and without any prefetch */
    if (run_logits_kb(path, 2, SLM_SCHEDULE_COUNTED, 0, 1, b, &vb))
        CHECKF(!memcmp(a, b, (size_t)(STEPS + 1) * (size_t)va * sizeof(float)), "%s: prefetch off differs", path);
    free(a);
    free(b);
}

static void test_same_logits_stories260k(void) { same_logits(M("stories260K.bin")); }

static void test_same_logits_gguf_q8_0(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/s260k_q8_0.gguf", g_tmp);
    char *argv[] = {"staticlm", "convert", "-m", M("stories260K.bin"), "-z", M("tok512.bin"), "-o", path, "--type", "q8_0", NULL};
    char *o = NULL, *e = NULL;
    CHECKF(t_run_capture(g_tmp, SLM_CLI_PATH, argv, &o, &e) == 0, "convert: %s", e ? e : "");
    free(o);
    free(e);
    same_logits(path);
    unlink(path);
}

/* The generate program: prefetch tasks on the transfer lane, each naming a
 * matmul `a` stages on whose tile holds its rows, and the dump shows them;
 * barriers count their stages' work tasks. */
static void test_prefetch_tasks(void) {
    rig r;
    if (!rig_open(&r, M("stories260K.bin"), 16, 32)) return;
    const slm_program *gen = slm_largest(&r.c, SLM_PROG_GENERATE), *pre = slm_largest(&r.c, SLM_PROG_PREFILL);
    int n_pf = 0, n_bad = 0, stage_work = 0, stage = 0;
    for (int i = 0; i < gen->n_tasks; i++) {
        const slm_task *t = &gen->tasks[i];
        if (t->op == SLM_T_BARRIER) {
            n_bad += t->a != stage_work;
            stage_work = 0;
            stage++;
            continue;
        }
        if (t->op != SLM_T_PREFETCH) {
            stage_work++;
            n_bad += t->lane != (t->op == SLM_T_MATMUL || t->op == SLM_T_ATTENTION ? SLM_LANE_MATRIX
                                 : t->op == SLM_T_COPY_ROW                        ? SLM_LANE_TRANSFER
                                                                                  : SLM_LANE_VECTOR);
            continue;
        }
        n_pf++;
        int dist = 0;
        for (int j = i; j < t->c && j < gen->n_tasks; j++) dist += gen->tasks[j].op == SLM_T_BARRIER;
        n_bad += t->lane != SLM_LANE_TRANSFER || t->a < 1 || t->a != dist || gen->tasks[t->c].op != SLM_T_MATMUL ||
                 t->n0 < gen->tasks[t->c].n0 || t->n1 > gen->tasks[t->c].n1;
    }
    CHECKF(n_pf > 0 && n_bad == 0, "generate: %d prefetch tasks, %d bad records", n_pf, n_bad);
    for (int i = 0; i < pre->n_tasks; i++) CHECK(pre->tasks[i].op != SLM_T_PREFETCH); /* prefill: none */
    char why[160];
    CHECKF(!slm_program_check_schedule(gen, why, sizeof why), "%s", why);
    /* the dump: one prefetch line per task, with its distance */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    slm_program_dump_tasks(gen, f);
    fclose(f);
    int lines = 0, found = 0;
    for (const char *p = text; (p = strstr(p, " prefetch ")); p++) {
        lines++;
        int idx = (int)strtol(p - 7 > text ? p - 7 : text, NULL, 10), d = -1, to = -1;
        const char *q = strstr(p, "for="), *qd = strstr(p, "distance=");
        if (q && qd && sscanf(q, "for=%d", &to) == 1 && sscanf(qd, "distance=%d", &d) == 1 && idx >= 0 &&
            idx < gen->n_tasks && gen->tasks[idx].op == SLM_T_PREFETCH && gen->tasks[idx].a == d && gen->tasks[idx].c == to)
            found++;
    }
    CHECKF(lines == n_pf && found == n_pf, "dump: %d prefetch lines, %d matching, %d tasks", lines, found, n_pf);
    CHECK(strstr(text, "producers=") && strstr(text, "consumers="));
    free(text);
    rig_close(&r);
}

/* Decode tiles (compiler/lower.c matmul_bounds): with a 4 KiB budget the
 * stories260K matrices get big tiles and a tail of small ones; every
 * matmul's tiles cover its columns once, in order; each stage of the
 * generate program runs its biggest panels first; and the logits are those
 * of the default tiling bit for bit, on 2 threads under both schedules. */
static void test_decode_tail_tiles(void) {
    rig r;
    slm_compile_options o = rig_opts(16, 32);
    o.tile_kb = 4;
    if (!rig_open_opts(&r, M("stories260K.bin"), o)) return;
    const slm_program *gen = slm_largest(&r.c, SLM_PROG_GENERATE);
    int n_bad = 0, n_tail = 0, n_mm = 0;
    uint64_t prev = UINT64_MAX;
    for (int i = 0; i < gen->n_tasks; i++) {
        const slm_task *t = &gen->tasks[i];
        if (t->op == SLM_T_BARRIER) {
            prev = UINT64_MAX;
            continue;
        }
        if (t->op != SLM_T_MATMUL) continue;
        const uint64_t rb = slm_row_bytes(t->wtype, (uint64_t)t->k), panel = rb * (uint64_t)(t->n1 - t->n0);
        n_bad += panel > prev; /* biggest first within the stage */
        prev = panel;
        n_tail += panel <= 2048 + rb * 15; /* half the budget, rounded up to 16 columns */
        if (t->n0 != 0) continue;
        /* the tiles of this matmul (same weights, same destination): columns 0..n once */
        n_mm++;
        int covered = 0;
        for (int want = 0, guard = 0; want < t->n && guard < gen->n_tasks; guard++) {
            int found = 0;
            for (int j = i; j < gen->n_tasks && gen->tasks[j].op != SLM_T_BARRIER; j++) {
                const slm_task *u = &gen->tasks[j];
                if (u->op == SLM_T_MATMUL && u->p[SLM_REF_SRC1] == t->p[SLM_REF_SRC1] &&
                    u->ref[SLM_REF_DST].off == t->ref[SLM_REF_DST].off && u->n0 == want) {
                    want = u->n1;
                    covered += u->n1 - u->n0;
                    found = 1;
                    break;
                }
            }
            if (!found) break;
        }
        n_bad += covered != t->n;
    }
    CHECKF(n_mm > 0 && n_bad == 0, "generate: %d matmuls, %d bad tiles or orders", n_mm, n_bad);
    CHECKF(n_tail > n_mm, "generate: %d small tail tiles for %d matmuls", n_tail, n_mm);
    rig_close(&r);
    enum { V = 512 };
    float *a = calloc((size_t)(STEPS + 1) * V, sizeof(float)), *b = calloc((size_t)(STEPS + 1) * V, sizeof(float));
    int va = 0, vb = 0;
    for (int sch = SLM_SCHEDULE_RENDEZVOUS; sch <= SLM_SCHEDULE_COUNTED; sch++)
        if (a && b && run_logits_kb(M("stories260K.bin"), 2, sch, 4, 0, a, &va) &&
            run_logits_kb(M("stories260K.bin"), 2, sch, 0, 0, b, &vb)) {
            CHECK(va == V && vb == V);
            CHECKF(memcmp(a, b, sizeof(float) * (size_t)(STEPS + 1) * V) == 0, "schedule %d: tail tiles change the logits",
                   sch);
        }
    free(a);
    free(b);
}

/* Stream prefetch: every matmul of a decode program carries the distance
 * (a = SLM_STREAM_PREFETCH, shown by the dump), prefill matmuls none;
 * prefetch_off drops it and the PREFETCH tasks; the logits do not change
 * (prefetch moves no data a kernel computes with). */
static int count_stream(const slm_program *p, int *n_mm, int *n_pf) {
    int n = 0;
    *n_mm = *n_pf = 0;
    for (int i = 0; i < p->n_tasks; i++) {
        *n_mm += p->tasks[i].op == SLM_T_MATMUL;
        *n_pf += p->tasks[i].op == SLM_T_PREFETCH;
        n += p->tasks[i].op == SLM_T_MATMUL && p->tasks[i].a == SLM_STREAM_PREFETCH;
    }
    return n;
}

static void test_stream_prefetch(void) {
    rig r;
    slm_compile_options o = rig_opts(16, 32);
    if (!rig_open_opts(&r, M("stories260K.bin"), o)) return;
    int n_mm = 0, n_pf = 0;
    const slm_program *gen = slm_largest(&r.c, SLM_PROG_GENERATE), *pre = slm_largest(&r.c, SLM_PROG_PREFILL);
    const int on = count_stream(gen, &n_mm, &n_pf);
    CHECKF(on > 0 && on == n_mm && n_pf > 0, "generate: %d of %d matmuls streaming, %d prefetch tasks", on, n_mm, n_pf);
    CHECKF(count_stream(pre, &n_mm, &n_pf) == 0 && n_mm > 0, "prefill: streaming matmuls");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    slm_program_dump_tasks(gen, f);
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "stream-prefetch=%d", SLM_STREAM_PREFETCH);
    int shown = 0;
    for (const char *q = text; (q = strstr(q, want)); q++) shown++;
    CHECKF(shown == on, "dump: %d of %d matmuls show %s", shown, on, want);
    free(text);
    rig_close(&r);
    o.prefetch_off = 1;
    if (!rig_open_opts(&r, M("stories260K.bin"), o)) return;
    gen = slm_largest(&r.c, SLM_PROG_GENERATE);
    const int off = count_stream(gen, &n_mm, &n_pf);
    CHECKF(off == 0 && n_pf == 0 && n_mm > 0, "prefetch off: %d of %d matmuls streaming, %d prefetch tasks", off, n_mm, n_pf);
    rig_close(&r);
}

/* ---- hostile blobs ------------------------------------------------------- */

/* The bytes of section `name` in an ELF image. */
static uint8_t *section(uint8_t *img, size_t n, const char *prefix, uint64_t *size) {
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    if (eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > n) return NULL;
    Elf64_Shdr sh[512];
    if (eh.e_shnum > 512) return NULL;
    memcpy(sh, img + eh.e_shoff, eh.e_shnum * sizeof *sh);
    const char *shstr = (const char *)img + sh[eh.e_shstrndx].sh_offset;
    for (int i = 1; i < eh.e_shnum; i++)
        if (!strncmp(shstr + sh[i].sh_name, prefix, strlen(prefix))) {
            *size = sh[i].sh_size;
            return img + sh[i].sh_offset;
        }
    return NULL;
}

/* Patch the 32-bit field at `off` of the first task record of kind op in
 * the generate program by `delta`; the blob (no checksum) must be refused
 * naming `want`. */
static void refused_when(const uint8_t *img, size_t n, int op, int off, int32_t delta, int byte, const char *want) {
    uint8_t *w = malloc(n);
    memcpy(w, img, n);
    uint64_t size = 0;
    uint8_t *t = section(w, n, ".slm.tasks.generate", &size);
    CHECK(t != NULL && size % 160 == 0);
    int done = 0;
    for (uint64_t i = 0; t && i < size / 160 && !done; i++) {
        uint8_t *rec = t + i * 160;
        if (rec[0] != op) continue;
        if (byte) {
            rec[off] = (uint8_t)(rec[off] + delta);
        } else {
            int32_t v;
            memcpy(&v, rec + off, 4);
            v += delta;
            memcpy(rec + off, &v, 4);
        }
        done = 1;
    }
    CHECKF(done, "no task of kind %d", op);
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok = NULL;
    slm_err err = {0};
    slm_status s = slm_blob_open_mem(&b, w, n, "hostile.blob", SLM_BLOB_NO_CHECKSUM, &c, &tok, &err);
    CHECKF(s != SLM_OK && strstr(err.msg, want), "%s: %s", want, s ? err.msg : "accepted");
    if (!s) {
        slm_tok_free(tok);
        slm_compiled_free(&c);
    }
    free(w);
}

static void test_hostile_counts(void) {
    char blob[512];
    snprintf(blob, sizeof blob, "%s/s260k.blob", g_tmp);
    char *argv[] = {"staticlm", "compile", "-m", M("stories260K.bin"), "-z", M("tok512.bin"), "-o", blob, NULL};
    char *o = NULL, *e = NULL;
    CHECKF(t_run_capture(g_tmp, SLM_CLI_PATH, argv, &o, &e) == 0, "compile: %s", e ? e : "");
    free(o);
    free(e);
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(blob, &n);
    CHECK(img != NULL);
    if (!img) return;
    { /* pristine: loads without the checksum too */
        slm_blob b;
        slm_compiled c;
        slm_tokenizer *tok = NULL;
        slm_err err = {0};
        CHECKF(slm_blob_open_mem(&b, img, n, "ok.blob", SLM_BLOB_NO_CHECKSUM, &c, &tok, &err) == SLM_OK, "%s", err.msg);
        slm_tok_free(tok);
        slm_compiled_free(&c);
    }
    /* task record: op 0, count 4, a 28, b 32, c 36, lane 152 */
    refused_when(img, n, SLM_T_BARRIER, 28, 1, 0, "producers");
    refused_when(img, n, SLM_T_BARRIER, 28, -1, 0, "producers");
    refused_when(img, n, SLM_T_BARRIER, 32, 1, 0, "consumers");
    refused_when(img, n, SLM_T_BARRIER, 4, 1, 0, "count");
    refused_when(img, n, SLM_T_PREFETCH, 28, 1, 0, "distance");
    refused_when(img, n, SLM_T_PREFETCH, 36, -1, 0, "prefetch");
    refused_when(img, n, SLM_T_MATMUL, 152, 1, 1, "lane");
    refused_when(img, n, SLM_T_MATMUL, 159, 1, 1, "scale f2"); /* bytes 156..159: f2, 0 without flag 0x1000 */
    refused_when(img, n, SLM_T_MATMUL, 155, 1, 1, "tiles"); /* a decode task carries no tile plan */
    refused_when(img, n, SLM_T_MATMUL, 28, 32, 0, "stream prefetch"); /* not a multiple of 64 */
    refused_when(img, n, SLM_T_MATMUL, 28, SLM_STREAM_PREFETCH_MAX, 0, "stream prefetch");
    /* the options: a blob compiled with prefetch refuses --prefetch off, and the reverse */
    slm_options op = slm_default_options();
    op.prefetch = SLM_PREFETCH_OFF;
    slm_engine *en = NULL;
    CHECK(slm_load(&en, blob, &op) == SLM_ERR_ARG && strstr(slm_last_error(en), "--prefetch off"));
    slm_free(en);
    free(img);
    unlink(blob);
}

/* ---- attention row parts -------------------------------------------------- */

/* KV rows row r attends to, as the executor counts them (exec.c attn_range). */
static uint64_t keys_of(const slm_task *t, const int32_t *cp, int r) {
    const int last = cp[r], base = t->k > 0 ? last - last % t->k : 0;
    int first = t->window > 0 && last + 1 > t->window ? last + 1 - t->window : 0;
    if (first < base) first = base;
    return (uint64_t)(last - first + 1);
}

/* slm_attn_part_rows: the parts of a task partition its rows in order, and
 * each holds its share of the work within one row's: causal after 0 or 300
 * rows of context, a window, one row per sequence (batch regions), every
 * row count from 1 (more parts than rows: some parts empty). Not a part
 * (parts 0 or 1, or a part past the last): all rows. */
static void test_attention_part_rows(void) {
    static const int counts[] = {1, 2, 5, 63, 64, 100, 512};
    static const int ctxs[] = {0, 300};
    int32_t cp[512];
    int checked = 0;
    for (int parts = 2; parts <= 9; parts++)
        for (size_t ni = 0; ni < sizeof counts / sizeof counts[0]; ni++)
            for (size_t ci = 0; ci < 2; ci++)
                for (int kind = 0; kind < 3; kind++) { /* causal, window 37, batch regions */
                    const int n = counts[ni], begin = kind == 2 ? 0 : 3, end = begin + n;
                    if (end > 512) continue;
                    slm_task t;
                    memset(&t, 0, sizeof t);
                    t.op = SLM_T_ATTENTION;
                    t.k = kind == 2 ? 1024 : 4096;
                    t.window = kind == 1 ? 37 : 0;
                    for (int r = 0; r < end; r++)
                        cp[r] = kind == 2 ? r * 1024 + (r * 97 + ctxs[ci]) % 1024 : ctxs[ci] + r;
                    uint64_t total = 0, most = 0;
                    for (int r = begin; r < end; r++) {
                        const uint64_t w = keys_of(&t, cp, r);
                        total += w;
                        most = w > most ? w : most;
                    }
                    int at = begin;
                    for (int p = 0; p < parts; p++) {
                        t.tiles[0] = (uint8_t)p;
                        t.tiles[1] = (uint8_t)parts;
                        int b, e;
                        slm_attn_part_rows(&t, cp, begin, end, &b, &e);
                        CHECKF(b == at && e >= b && e <= end, "parts %d n %d kind %d: part %d is [%d, %d) after %d",
                               parts, n, kind, p, b, e, at);
                        uint64_t w = 0;
                        for (int r = b; r < e; r++) w += keys_of(&t, cp, r);
                        CHECKF(w * (uint64_t)parts <= total + most * (uint64_t)parts,
                               "parts %d n %d kind %d: part %d holds %llu of %llu", parts, n, kind, p,
                               (unsigned long long)w, (unsigned long long)total);
                        at = e;
                        checked++;
                    }
                    CHECKF(at == end, "parts %d n %d kind %d: the parts end at %d, not %d", parts, n, kind, at, end);
                }
    CHECK(checked > 1000);
    slm_task t;
    memset(&t, 0, sizeof t);
    t.op = SLM_T_ATTENTION;
    t.k = 4096;
    for (int r = 0; r < 100; r++) cp[r] = r;
    static const uint8_t whole[][2] = {{0, 0}, {0, 1}, {2, 2}, {5, 3}};
    for (int i = 0; i < 4; i++) {
        t.tiles[0] = whole[i][0];
        t.tiles[1] = whole[i][1];
        int b = -1, e = -1;
        slm_attn_part_rows(&t, cp, 10, 90, &b, &e);
        CHECKF(b == 10 && e == 90, "tiles {%u, %u}: [%d, %d)", whole[i][0], whole[i][1], b, e);
    }
}

/* The compiler cuts prefill attention of >= 64 rows into row parts (the
 * dump shows them; decode and 16-row programs have none), and a prompt
 * through them gives the logits of the same prompt in 16-row chunks (no
 * parts) bit for bit: each row's attention is its own (f16 and f32 caches,
 * head_dim 64 on the avx512 block entry where the CPU has it). */
static void test_attention_parts_engine(void) {
    char path[400], blob[400];
    snprintf(path, sizeof path, "%s/parts.gguf", g_tmp);
    snprintf(blob, sizeof blob, "%s/parts.blob", g_tmp);
    const int vocab = 320;
    if (!amx_synth(path, "q8_0", "--dim 512 --heads 8 --kv-heads 2", vocab, 3)) return;
    char *argv[] = {"staticlm", "compile", "-m", path, "--max-prompt-len", "64", "--dump-tasks", "-o", blob, NULL};
    char *out = NULL;
    CHECK(t_run_capture(g_tmp, SLM_CLI_PATH, argv, &out, NULL) == 0);
    if (out) {
        /* 8 heads, 2 KV groups: 2 tiles of one group x 2 parts of the 64 rows */
        const char *gen = strstr(out, "generate");
        const char *p1 = strstr(out, "rows=part1/2"), *p2 = strstr(out, "rows=part2/2");
        CHECKF(p1 && p2 && (!gen || p2 < gen), "no row parts in the 64-row prefill dump");
        CHECKF(gen && !strstr(gen, "rows=part"), "a decode task carries a row part");
    }
    free(out);
    /* hostile parts: the prefill's first attention task with a part past the last, one part, a
       third byte; a decode task (one row) with parts: refused, naming the field */
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(blob, &n);
    uint64_t size = 0;
    uint8_t *sec = img ? section(img, n, ".slm.tasks.prefill.64", &size) : NULL;
    uint8_t *att = NULL;
    for (uint64_t i = 0; sec && i < size / 160 && !att; i++)
        if (sec[i * 160] == SLM_T_ATTENTION) att = sec + i * 160;
    CHECKF(att && att[154] == 2, "no attention task with parts in the 64-row prefill");
    static const uint8_t bad[][3] = {{2, 2, 0}, {0, 1, 0}, {0, 2, 1}};
    for (int bi = 0; att && bi < 3; bi++) {
        uint8_t keep[3];
        memcpy(keep, att + 153, 3);
        memcpy(att + 153, bad[bi], 3);
        slm_blob b;
        slm_compiled c;
        slm_tokenizer *tok = NULL;
        slm_err err = {0};
        const slm_status s = slm_blob_open_mem(&b, img, n, "parts.blob", SLM_BLOB_NO_CHECKSUM, &c, &tok, &err);
        CHECKF(s != SLM_OK && strstr(err.msg, "row part"), "tiles {%u, %u, %u}: %s", bad[bi][0], bad[bi][1], bad[bi][2],
               s ? err.msg : "accepted");
        if (!s) {
            slm_tok_free(tok);
            slm_compiled_free(&c);
        }
        memcpy(att + 153, keep, 3);
    }
    if (img) refused_when(img, n, SLM_T_ATTENTION, 154, 2, 1, "row part");
    free(img);
    unlink(blob);
    const char *sets[] = {"avx512", "scalar"};
    for (int si = 0; si < 2; si++)
        for (int kv = SLM_KV_F32; kv <= SLM_KV_F16; kv++) {
            float a[320], b[320];
            if (!amx_prefill_logits(path, sets[si], 64, kv, 60, a, vocab) ||
                !amx_prefill_logits(path, sets[si], 16, kv, 60, b, vocab))
                continue;
            CHECKF(!memcmp(a, b, sizeof a), "%s kv %d: 60 tokens through row parts differ from 16-row chunks", sets[si], kv);
        }
}

/* slm_attn_part_keys: the runs of a row's KV rows partition [first, last]
 * in order, each of n / parts or one more rows (empty ones when fewer). */
static void test_key_parts_split(void) {
    for (int n = 0; n <= 40; n++)
        for (int parts = 2; parts <= 8; parts++) {
            const int first = 7, last = first + n - 1;
            int next = first, ok = 1;
            for (int p = 0; p < parts; p++) {
                int b, e;
                slm_attn_part_keys(first, last, p, parts, &b, &e);
                ok &= b == next && e - b >= n / parts && e - b <= n / parts + 1;
                next = e;
            }
            CHECKF(ok && next == last + 1, "%d rows in %d parts", n, parts);
        }
}

/* Logits of a 20-token prefill and then of each of `steps` decode steps of
 * the model at path (tokenizer tok, or its own) with a KV capacity of 64 +
 * resp rows, under kernel set `set` and KV type kv, into
 * out[(steps + 1) * vocab]. */
static int key_parts_logits(const char *path, const char *tok, const char *set, int resp, int kv, int steps, float *out,
                            int vocab) {
    if (!slm_kernels_select(set)) return 0;
    slm_options opt = slm_default_options();
    opt.tokenizer_path = tok;
    opt.max_prompt_len = 64, opt.min_response_len = resp, opt.n_threads = 2, opt.kv_type = kv;
    slm_engine *e = NULL;
    int ok = slm_load(&e, path, &opt) == SLM_OK;
    CHECKF(ok, "%s", slm_last_error(e));
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = i == 0 ? 1 : 3 + (i * 37) % (vocab - 3);
    const float *lg = NULL;
    ok = ok && slm_prefill(e, ids, 20, &lg) == SLM_OK;
    if (ok) memcpy(out, lg, sizeof(float) * vocab);
    for (int s = 0; ok && s < steps; s++) {
        ok = slm_decode(e, 3 + (s * 53) % (vocab - 3), &lg) == SLM_OK;
        if (ok) memcpy(out + (size_t)(s + 1) * vocab, lg, sizeof(float) * vocab);
    }
    CHECKF(ok, "%s: %s", set, slm_last_error(e));
    slm_free(e);
    slm_kernels_select(NULL);
    return ok;
}

/* Decode attention in key parts (capacity >= 256): the dump shows the parts
 * and their merge; decode logits within float rounding of the same steps
 * through tasks of heads (a capacity under 256), for every kernel set and
 * KV type; a blob whose key parts or merge are wrong is refused. */
static void test_key_parts_engine(void) {
    char blob[400], synth[400];
    snprintf(blob, sizeof blob, "%s/keys.blob", g_tmp);
    snprintf(synth, sizeof synth, "%s/keys.gguf", g_tmp);
    char *argv[] = {"staticlm", "compile", "-m", M("stories260K.bin"), "-z", M("tok512.bin"), "--max-prompt-len", "64",
                    "--min-response-len", "448", "--dump-tasks", "-o", blob, NULL};
    char *out = NULL;
    CHECK(t_run_capture(g_tmp, SLM_CLI_PATH, argv, &out, NULL) == 0);
    const char *gen = out ? strstr(out, "program generate") : NULL;
    CHECKF(gen && strstr(gen, "keys=part4/4") && strstr(gen, "attn_merge") && strstr(gen, "parts=4"),
           "no key parts / merge in the decode dump of capacity 512");
    CHECKF(out && (!gen || !strstr(out, "keys=part") || strstr(out, "keys=part") > gen), "a prefill task carries key parts");
    free(out);
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(blob, &n);
    if (img) {
        refused_when(img, n, SLM_T_ATTENTION, 153, 4, 1, "key parts");      /* part 4 of 4 */
        refused_when(img, n, SLM_T_ATTN_MERGE, 154, 1, 1, "beyond arena");  /* 5 parts: beyond the partials */
        refused_when(img, n, SLM_T_ATTN_MERGE, 153, 1, 1, "not {0, parts"); /* a part byte */
    }
    free(img);
    unlink(blob);
    /* stories260K (head_dim 8: the AVX2 and scalar loops) and a head_dim 64 model (the
       AVX-512 decode entry), groups of 4 */
    const int have_synth = amx_synth(synth, "f32", "--dim 512 --heads 8 --kv-heads 2", 320, 5); /* f32: no int8 rounding to flip */
    const struct { const char *path, *tok; int vocab, kv_max; } models[] = {
        {M("stories260K.bin"), M("tok512.bin"), 512, SLM_KV_F16}, {synth, NULL, 320, SLM_KV_Q8_0}};
    enum { STEPS_K = 150, VOC = 512 };
    float *a = malloc(sizeof(float) * (STEPS_K + 1) * VOC), *b = malloc(sizeof(float) * (STEPS_K + 1) * VOC);
    const char *sets[] = {"avx512", "avx2", "scalar"};
    for (int mi = 0; mi < 2 && a && b; mi++)
        for (int si = 0; si < 3 && (mi == 0 || have_synth); si++)
            for (int kv = SLM_KV_F32; kv <= models[mi].kv_max; kv++) {
                const int V = models[mi].vocab;
                if (!key_parts_logits(models[mi].path, models[mi].tok, sets[si], 448, kv, STEPS_K, a, V) ||
                    !key_parts_logits(models[mi].path, models[mi].tok, sets[si], 128, kv, STEPS_K, b, V))
                    continue;
                double worst = 0, amax = 0;
                for (int s = 0; s <= STEPS_K; s++) {
                    const double d = amx_logit_diff(a + (size_t)s * V, b + (size_t)s * V, V, &amax);
                    if (d > worst) worst = d;
                }
                /* the sums' order differs: float rounding, carried through 150 steps of KV */
                const double tol = mi == 0 ? 1e-3 : 1e-4; /* f16 weights, 5 layers / f32 weights, 2 layers */
                CHECKF(worst < tol, "model %d %s kv %d: key parts vs heads: %g of max |logit|", mi, sets[si], kv, worst);
                CHECKF(memcmp(a, b, sizeof(float) * V) == 0, "model %d %s kv %d: the prefill logits differ", mi, sets[si], kv);
                if (mi == 1 && si == 0) printf("  key parts vs heads (head_dim 64, avx512, kv %d): %.2g\n", kv, worst);
            }
    free(a);
    free(b);
    unlink(synth);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm_test_schedule.XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    T_RUN(test_same_logits_stories260k);
    T_RUN(test_same_logits_gguf_q8_0);
    T_RUN(test_prefetch_tasks);
    T_RUN(test_decode_tail_tiles);
    T_RUN(test_stream_prefetch);
    T_RUN(test_hostile_counts);
    T_RUN(test_attention_part_rows);
    T_RUN(test_attention_parts_engine);
    T_RUN(test_key_parts_split);
    T_RUN(test_key_parts_engine);
    char f[300];
    snprintf(f, sizeof f, "%s/cmd.out", g_tmp);
    unlink(f);
    snprintf(f, sizeof f, "%s/cmd.err", g_tmp);
    unlink(f);
    rmdir(g_tmp);
    T_DONE();
}
