/* staticlm bench end to end on stories260K: the jsonl fields, -d
 * (llama-bench's n_depth: the tests run with D tokens already cached), the
 * time to first token (--ttft), the vector units' int8 peak and the model
 * column's type name. */
#include "t.h"

#include "common/cpu.h"
#include "device/kernels.h"

#define BENCH SLM_CLI_PATH " bench -m " T_SHARED("models/stories260K.bin") " -z " T_SHARED("models/tok512.bin") \
                           " -r 1 --no-profile --bw-mib 0 -t 1 "

static void test_depth(void) {
    int rc = system(BENCH "-p 8 -n 4 -d 20 -o jsonl > bench_d.jsonl 2>/dev/null");
    CHECK(rc == 0);
    char *j = t_read_file("bench_d.jsonl", NULL);
    CHECK(j != NULL);
    if (j) {
        /* one line per test, each with n_depth */
        const char *pp = strstr(j, "\"n_prompt\": 8, \"n_gen\": 0, \"n_depth\": 20");
        const char *tg = strstr(j, "\"n_prompt\": 0, \"n_gen\": 4, \"n_depth\": 20");
        CHECK(pp != NULL && tg != NULL && pp < tg);
        CHECK(strstr(j, "\"avg_ts\": 0.000000") == NULL);
    }
    free(j);
    rc = system(BENCH "-p 8 -n 4 -d 20 > bench_d.md 2>/dev/null");
    CHECK(rc == 0);
    char *md = t_read_file("bench_d.md", NULL);
    CHECK(md && strstr(md, "| pp8 @ d20 |") && strstr(md, "| tg4 @ d20 |"));
    free(md);
    /* without -d: depth 0, and llama-bench's plain test names */
    rc = system(BENCH "-p 8 -n 4 -o jsonl > bench_d.jsonl 2>/dev/null");
    j = t_read_file("bench_d.jsonl", NULL);
    CHECK(rc == 0 && j && strstr(j, "\"n_depth\": 0") && !strstr(j, "\"n_depth\": 20"));
    free(j);
    /* a depth beyond the model's context is refused */
    rc = system(BENCH "-p 8 -n 4 -d 100000 > /dev/null 2>&1");
    CHECK(rc != 0);
    remove("bench_d.jsonl");
    remove("bench_d.md");
}

/* Time to first token: a prompt of --ttft tokens (clamped to the KV
 * capacity, stories260K's 512) in chunks of the prefill program; 0 skips. */
static void test_ttft(void) {
    int rc = system(BENCH "-p 64 -n 4 --ttft 300 > bench_t.md 2>/dev/null");
    char *md = t_read_file("bench_t.md", NULL);
    CHECKF(rc == 0 && md && strstr(md, "time to first token of a 300-token prompt: ") &&
               strstr(md, "(5 prefill calls of up to 64 rows"),
           "%s", md ? md : "(no output)");
    free(md);
    rc = system(BENCH "-p 8 -n 4 -o jsonl > bench_t.jsonl 2>bench_t.err");
    char *j = t_read_file("bench_t.jsonl", NULL), *err = t_read_file("bench_t.err", NULL);
    CHECK(rc == 0 && j && strstr(j, "\"ttft_n_prompt\": 512, \"ttft_ms\": ") && !strstr(j, "\"ttft_ms\": 0.000"));
    CHECK(err && strstr(err, "a 1000-token prompt does not fit the KV capacity 512"));
    free(j), free(err);
    static const char *const skip[] = {BENCH "-p 8 -n 4 --ttft 0 > bench_t.md 2>/dev/null",
                                       BENCH "-p 0 -n 4 --ttft 300 > bench_t.md 2>bench_t.err"};
    for (int i = 0; i < 2; i++) {
        rc = system(skip[i]);
        md = t_read_file("bench_t.md", NULL);
        CHECKF(rc == 0 && md && !strstr(md, "time to first token"), "%s", skip[i]);
        free(md);
        if (i == 1) { /* asked for and not done: said so */
            char *e = t_read_file("bench_t.err", NULL);
            CHECK(e && strstr(e, "--ttft 300 needs a prefill program: skipped with -p 0"));
            free(e);
        }
    }
    remove("bench_t.md"), remove("bench_t.jsonl"), remove("bench_t.err");
}

/* The AVX-512 VNNI int8 peak: measured (between 10 Gops/s and 100 Tops/s a
 * core) where the CPU has it, 0 at once where not; bench reports it with
 * prefill as a share of it, and not without a prefill test. */
static void test_vnni_peak(void) {
    const slm_cpu *c = slm_cpu_features();
    const int vnni = c->avx512f && c->avx512bw && c->avx512vl && c->avx512vnni;
    const double p = slm_vnni_int8_peak(0.02);
    fprintf(stderr, "  VNNI int8 peak: %.3g ops/s per core%s\n", p, vnni ? "" : " (no AVX-512 VNNI here)");
    CHECK(vnni ? p > 1e10 && p < 1e14 : p == 0);
    int rc = system(BENCH "-p 8 -n 0 -o jsonl > bench_v.jsonl 2>/dev/null");
    char *j = t_read_file("bench_v.jsonl", NULL);
    CHECK(rc == 0 && j && strstr(j, "\"vnni_int8_peak_ops\": "));
    if (j && strstr(j, "\"vnni_int8_peak_ops\": ")) {
        const double v = atof(strstr(j, "\"vnni_int8_peak_ops\": ") + strlen("\"vnni_int8_peak_ops\": "));
        CHECK(vnni ? v > 1e10 : v == 0);
    }
    free(j);
    rc = system(BENCH "-p 8 -n 0 > bench_v.md 2>/dev/null");
    char *md = t_read_file("bench_v.md", NULL);
    CHECK(rc == 0 && md);
    if (md && vnni) CHECK(strstr(md, "int8 dot products (AVX-512 VNNI): ") && strstr(md, "pp8 does "));
    if (md && !vnni) CHECK(!strstr(md, "AVX-512 VNNI"));
    free(md);
    rc = system(BENCH "-p 0 -n 2 > bench_v.md 2>/dev/null");
    md = t_read_file("bench_v.md", NULL);
    CHECK(rc == 0 && md && !strstr(md, "AVX-512 VNNI"));
    free(md);
    remove("bench_v.jsonl"), remove("bench_v.md");
}

/* The model column names the file's type as llama-quantize wrote it
 * (general.file_type), as llama-bench does: a small Q4_K_M file has every
 * matrix in the Q5_0 fallback (widths below 256), so the largest type alone
 * would say Q5_0. */
static void test_file_type_name(void) {
    int rc = system(SLM_CLI_PATH " synth --shape custom --type q4_k_m -o bench_f.gguf --vocab-file "
                    T_SHARED("vocab/ggml-vocab-llama-spm.gguf") " > /dev/null 2>&1");
    CHECK(rc == 0);
    rc = system(SLM_CLI_PATH " bench -m bench_f.gguf -p 4 -n 0 -r 1 --no-profile --bw-mib 0 --ttft 0 -t 1 "
                             "> bench_f.md 2>/dev/null");
    char *md = t_read_file("bench_f.md", NULL);
    CHECKF(rc == 0 && md && strstr(md, "| bench_f.gguf Q4_K_M |") && strstr(md, "q5_0 x"), "%s",
           md ? md : "(no output)");
    free(md);
    /* a blob compiled from it keeps the name (.slm.meta holds general.file_type) */
    rc = system(SLM_CLI_PATH " compile -m bench_f.gguf --max-prompt-len 8 --min-response-len 8 -o bench_f.blob "
                             "> /dev/null 2>&1");
    CHECK(rc == 0);
    rc = system(SLM_CLI_PATH " bench -m bench_f.blob -p 4 -n 0 -r 1 --no-profile --bw-mib 0 --ttft 0 -t 1 "
                             "> bench_f.md 2>/dev/null");
    md = t_read_file("bench_f.md", NULL);
    CHECKF(rc == 0 && md && strstr(md, "| bench_f.blob Q4_K_M |"), "%s", md ? md : "(no output)");
    free(md);
    remove("bench_f.gguf"), remove("bench_f.blob"), remove("bench_f.md");
}

int main(void) {
    T_RUN(test_file_type_name);
    T_RUN(test_depth);
    T_RUN(test_vnni_peak);
    T_RUN(test_ttft);
    T_DONE();
}
