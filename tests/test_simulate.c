/* staticlm simulate: profiles refused with the key named, the simulator's
 * arithmetic on a hand-made program (exact times), and the CLI on
 * stories260K writing a trace that parses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "t.h"
#include "run_cmd.h"
#include "common/common.h"
#include "common/dtype.h"
#include "program/simulate.h"
#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

static const char *k_good =
    "{\"name\":\"toy\",\"estimate\":true,\"transfer\":{\"gbps\":1},"
    "\"matrix\":{\"units\":2,\"gops\":{\"default\":1,\"q4_0\":4}},"
    "\"vector\":{\"units\":1,\"gflops\":0.5},\"scratchpad_bytes\":0,\"tiles_in_flight\":1,"
    "\"launch_ns\":100,\"barrier_ns\":1000}";

#ifdef SLM_HAVE_CJSON
/* Replace the first `from` in k_good by `to` and parse it: the status, the message in err. */
static slm_status parse_edit(const char *from, const char *to, slm_err *err) {
    char buf[1024];
    const char *at = strstr(k_good, from);
    if (!at) return SLM_OK + 99;
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - k_good), k_good, to, at + strlen(from));
    slm_sim_profile p;
    memset(err, 0, sizeof *err);
    return slm_sim_profile_parse(&p, buf, "edit.json", err);
}

static void expect_refused(const char *from, const char *to, const char *key) {
    slm_err err;
    slm_status s = parse_edit(from, to, &err);
    CHECKF(s != SLM_OK && strstr(err.msg, "edit.json") && strstr(err.msg, key), "%s -> %s: status %d, '%s'", from,
           to, (int)s, err.msg);
}

static void test_profile_parse(void) {
    slm_sim_profile p;
    slm_err err;
    memset(&err, 0, sizeof err);
    CHECK(slm_sim_profile_parse(&p, k_good, "good.json", &err) == SLM_OK);
    CHECK(!strcmp(p.name, "toy") && p.estimate == 1 && p.xfer_gbps == 1.0 && p.matrix_units == 2);
    CHECK(p.matrix_gops[SLM_Q4_0] == 4.0 && p.matrix_default_gops == 1.0 && p.tiles_in_flight == 1);
    {
        slm_err e2;
        CHECK(parse_edit("\"q4_0\":4", "\"attention\":3", &e2) == SLM_OK);
    }
    CHECK(slm_sim_rate(&p, SLM_LANE_MATRIX, SLM_Q4_0_R16) == 4.0); /* repacked: the base type's rate */
    CHECK(slm_sim_rate(&p, SLM_LANE_MATRIX, SLM_Q8_0) == 1.0);
    expect_refused("\"gbps\":1", "\"gbs\":1", "transfer.gbs");               /* a typo */
    expect_refused("\"gbps\":1", "\"cache_gbps\":1", "transfer.gbps");       /* missing */
    expect_refused("\"gbps\":1", "\"gbps\":0", "transfer.gbps");             /* out of range */
    expect_refused("\"gbps\":1", "\"gbps\":\"fast\"", "transfer.gbps");      /* not a number */
    expect_refused("\"q4_0\":4", "\"q9_9\":4", "matrix.gops.q9_9");          /* not a type */
    expect_refused("\"default\":1,", "", "matrix.gops.default");             /* no default rate */
    expect_refused("\"tiles_in_flight\":1", "\"tiles_in_flight\":0", "tiles_in_flight");
    expect_refused("\"tiles_in_flight\":1", "\"tiles_in_flight\":1.5", "tiles_in_flight");
    expect_refused("\"launch_ns\":100,", "", "launch_ns");
    expect_refused("\"name\":\"toy\",", "", "name");
    expect_refused("\"estimate\":true", "\"estimate\":1", "estimate");
    expect_refused("\"units\":1,", "\"units\":1,\"shared_with_matrix\":true,", "vector.units");
    expect_refused("{\"name\"", "{\"colour\":1,\"name\"", "colour");
    expect_refused("\"launch_ns\"", "\"activation_bytes\":9,\"launch_ns\"", "activation_bytes");
    memset(&err, 0, sizeof err);
    CHECK(slm_sim_profile_parse(&p, "{\"name\":", "broken.json", &err) == SLM_ERR_FORMAT &&
          strstr(err.msg, "broken.json") && strstr(err.msg, "not valid JSON"));
    memset(&err, 0, sizeof err);
    CHECK(slm_sim_profile_load(&p, "/nonexistent/x.json", &err) != SLM_OK && strstr(err.msg, "x.json"));
    /* the bundled profiles parse */
    CHECK(slm_sim_profile_load(&p, SLM_TESTS_DIR "/../profiles/cpu-host.json", &err) == SLM_OK && !p.estimate);
    CHECK(slm_sim_profile_load(&p, SLM_TESTS_DIR "/../profiles/npu-lunar-lake.json", &err) == SLM_OK && p.estimate &&
          p.static_rows);
}
#endif

/* The toy profile as a struct (so the arithmetic tests run without cJSON). */
static void toy(slm_sim_profile *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "toy");
    p->xfer_gbps = 1.0; /* 1 byte per ns */
    p->matrix_units = 2;
    p->matrix_default_gops = 2.0; /* 1 op per ns per unit */
    p->vector_units = 1;
    p->vector_gflops = 0.5;
    p->tiles_in_flight = 1;
    p->launch_ns = 100;
    p->barrier_ns = 1000;
}

static slm_task mm(int n0, int n1) {
    slm_task t;
    memset(&t, 0, sizeof t);
    t.op = SLM_T_MATMUL;
    t.lane = SLM_LANE_MATRIX;
    t.wtype = SLM_F32;
    t.n = 64, t.k = 16, t.n0 = n0, t.n1 = n1, t.m = 4, t.layer = 0;
    t.ref[SLM_REF_SRC0].space = SLM_SPACE_ARENA;
    t.ref[SLM_REF_SRC0].off = 256;
    t.ref[SLM_REF_SRC1].space = SLM_SPACE_WEIGHTS;
    t.ref[SLM_REF_DST].space = SLM_SPACE_ARENA;
    return t;
}

/* Two f32 matmul tiles (2816 bytes, 4096 ops each), a barrier, an add
 * (3072 bytes, 256 flops). Hand-computed: stage 0 ends at 9828 ns, the
 * barrier at 10828, the add's transfer at 13900, its compute at 14512. */
static void test_arithmetic(void) {
    slm_sim_profile p;
    toy(&p);
    slm_task t[4];
    t[0] = mm(0, 32);
    t[1] = mm(32, 64);
    memset(&t[2], 0, sizeof t[2]);
    t[2].op = SLM_T_BARRIER;
    t[2].count = 2;
    memset(&t[3], 0, sizeof t[3]);
    t[3].op = SLM_T_ADD;
    t[3].n = 64;
    slm_program prog;
    memset(&prog, 0, sizeof prog);
    snprintf(prog.name, sizeof prog.name, "toy.4");
    prog.kind = SLM_PROG_PREFILL;
    prog.rows = 4;
    prog.kv_capacity = 16;
    prog.tasks = t;
    prog.n_tasks = 4;
    slm_sim_cost c;
    slm_sim_task_cost(&p, &prog, &t[0], 4, 0, 16, &c);
    CHECKF(c.bytes_read == 2304 && c.bytes_written == 512 && c.ops == 4096 && c.pieces == 1,
           "matmul cost %llu %llu %g %d", (unsigned long long)c.bytes_read, (unsigned long long)c.bytes_written, c.ops,
           c.pieces);
    slm_sim_result r;
    slm_sim_run(&p, &prog, 4, 0, &r, NULL);
    CHECKF(fabs(r.ns - 14512.0) < 1e-6, "wall %g ns, want 14512", r.ns);
    CHECK(r.stages == 2 && r.tasks == 3 && r.bytes == 2 * 2816 + 3072);
    CHECK(fabs(r.busy_ns[SLM_LANE_MATRIX] - 2 * 4196.0) < 1e-6 && fabs(r.busy_ns[SLM_LANE_VECTOR] - 612.0) < 1e-6);
    CHECK(!strcmp(slm_sim_bound(&r), "transfer"));
    /* padding rows skipped: 2 valid rows halve the ops */
    slm_sim_task_cost(&p, &prog, &t[0], 2, 0, 16, &c);
    CHECK(c.ops == 2048);
    /* a static-shape device computes all 4 rows whatever the data */
    p.static_rows = 1;
    slm_sim_task_cost(&p, &prog, &t[0], 2, 0, 16, &c);
    CHECK(c.ops == 4096);
    p.static_rows = 0;
    /* one unit, two tiles in flight: the second tile's transfer (its
     * activations kept: 2560 bytes) overlaps the first's compute */
    p.matrix_units = 1;
    p.matrix_default_gops = 1.0;
    p.tiles_in_flight = 2;
    prog.n_tasks = 2;
    slm_sim_run(&p, &prog, 4, 0, &r, NULL);
    CHECKF(fabs(r.ns - 11208.0) < 1e-6, "double-buffered wall %g ns, want 11208", r.ns);
    CHECK(!strcmp(slm_sim_bound(&r), "matrix"));
    /* without overlap: 2816 + 4196 + 2560 + 4196 */
    p.tiles_in_flight = 1;
    slm_sim_run(&p, &prog, 4, 0, &r, NULL);
    CHECKF(fabs(r.ns - 13768.0) < 1e-6, "serial wall %g ns, want 13768", r.ns);
    /* a scratchpad of 2 KiB: each tile (2304 + 512 bytes) is cut into 2 pieces (2 launches) */
    p.scratch_bytes = 2048;
    slm_sim_task_cost(&p, &prog, &t[0], 4, 0, 16, &c);
    CHECK(c.pieces == 2 && c.bytes_read == 2304);
}

/* Attention: 2 query heads of one KV head (head_dim 8), 4 rows from depth 3:
 * they attend to 4, 5, 6, 7 rows: 2 heads x 22 rows x (4 x 8 + 5) flops. */
static void test_attention_cost(void) {
    slm_sim_profile p;
    toy(&p);
    slm_task t;
    memset(&t, 0, sizeof t);
    t.op = SLM_T_ATTENTION;
    t.a = 2, t.b = 1, t.c = 8, t.n0 = 0, t.n1 = 2, t.k = 16, t.n = 16;
    slm_program prog;
    memset(&prog, 0, sizeof prog);
    prog.rows = 4;
    prog.kv_capacity = 16;
    slm_sim_cost c;
    slm_sim_task_cost(&p, &prog, &t, 4, 3, 16, &c);
    CHECKF(c.ops == 2.0 * 22 * 37 && c.bytes_read == 7 * 8 * 4 * 2 + 7 * 4 + 4 * 2 * 8 * 4 && c.bytes_written == 256,
           "attention %g ops, %llu read", c.ops, (unsigned long long)c.bytes_read);
    t.lane = slm_task_lane(t.op); /* as the compiler sets it */
    CHECK(slm_sim_lane_of(&t) == SLM_LANE_MATRIX);
    t.lane = SLM_LANE_VECTOR; /* the record decides */
    CHECK(slm_sim_lane_of(&t) == SLM_LANE_VECTOR);
    p.activation_bytes = 2; /* f16 activations and KV: half the bytes */
    slm_sim_task_cost(&p, &prog, &t, 4, 3, 16, &c);
    CHECK(c.bytes_read == 7 * 8 * 2 * 2 + 7 * 4 + 4 * 2 * 8 * 2 && c.bytes_written == 128);
    p.activation_bytes = 0;
    p.static_rows = 1; /* every row over the whole capacity */
    slm_sim_task_cost(&p, &prog, &t, 4, 3, 16, &c);
    CHECK(c.ops == 2.0 * 4 * 16 * 37);
    t.op = SLM_T_COPY_ROW;
    t.lane = slm_task_lane(t.op);
    CHECK(slm_sim_lane_of(&t) == SLM_LANE_TRANSFER);
    t.op = SLM_T_PREFETCH; /* a hint: not charged */
    CHECK(slm_sim_lane_of(&t) == SLM_LANE_COUNT);
}

#ifdef SLM_HAVE_CJSON
static void test_cli(void) {
    char dir[] = "/tmp/slm_simulate_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char trace[300], bad[300];
    snprintf(trace, sizeof trace, "%s/sim.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    const char *model = SLM_TESTS_DIR "/../models/stories260K.bin";
    char *out = NULL, *errs = NULL;
    char *const a1[] = {"staticlm", "simulate", "-m", (char *)model, "--device", "cpu-host", "--prompt-len", "40",
                        "--gen", "6", "--max-prompt-len", "16", "--batch", "2", "--trace", trace, NULL};
    int rc = t_run_capture(dir, SLM_CLI_PATH, a1, &out, &errs);
    CHECKF(rc == 0, "rc %d: %s", rc, errs ? errs : "");
    CHECK(out && strstr(out, "time to first token") && strstr(out, "3 call(s) of prefill.16") &&
          strstr(out, "time per output token") && strstr(out, "| generate.") &&
          strstr(out, "batch of 2 sequences (batch.2)"));
    free(out);
    free(errs);
    char *js = t_read_file(trace, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECK(root != NULL);
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    int tasks = 0, transfers = 0, chunks = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"), *c = cJSON_GetObjectItemCaseSensitive(e, "cat");
        if (!cJSON_IsString(n) || !cJSON_IsString(c)) continue;
        if (!strcmp(c->valuestring, "task") && !strcmp(n->valuestring, "matmul")) tasks++;
        if (!strcmp(n->valuestring, "transfer")) transfers++;
        if (!strcmp(n->valuestring, "prefill_chunk")) chunks++;
    }
    CHECKF(tasks > 0 && transfers > 0 && chunks == 3, "trace: %d matmul, %d transfer, %d chunks", tasks, transfers,
           chunks);
    cJSON_Delete(root);
    free(js);
    /* the trace command reads it back */
    char svg[300];
    snprintf(svg, sizeof svg, "%s/sim.svg", dir);
    char *const a2[] = {"staticlm", "trace", trace, "--svg", svg, NULL};
    rc = t_run_capture(dir, SLM_CLI_PATH, a2, &out, NULL);
    CHECK(rc == 0 && out && strstr(out, "matmul"));
    free(out);
    /* the NPU estimate is labelled; the sweep names a best length */
    char *const a3[] = {"staticlm", "simulate", "-m", (char *)model, "--device", "npu-lunar-lake", "--sweep",
                        "max_prompt_len", "--prompt-lens", "10,40", "--sweep-at", "16,64", NULL};
    rc = t_run_capture(dir, SLM_CLI_PATH, a3, &out, NULL);
    CHECK(rc == 0 && out && strstr(out, "ESTIMATE") && strstr(out, "best: max_prompt_len"));
    free(out);
    /* a bad profile: refused, the key named */
    FILE *f = fopen(bad, "w");
    if (f) {
        fputs("{\"name\":\"x\",\"transfer\":{\"gbps\":-1}}", f);
        fclose(f);
    }
    char *const a4[] = {"staticlm", "simulate", "-m", (char *)model, "--device", bad, NULL};
    rc = t_run_capture(dir, SLM_CLI_PATH, a4, NULL, &errs);
    CHECK(rc == 1 && errs && strstr(errs, "bad.json") && strstr(errs, "transfer.gbps"));
    free(errs);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}
#endif

int main(void) {
#ifdef SLM_HAVE_CJSON
    T_RUN(test_profile_parse);
#endif
    T_RUN(test_arithmetic);
    T_RUN(test_attention_cost);
#ifdef SLM_HAVE_CJSON
    T_RUN(test_cli);
#endif
    T_DONE();
}
