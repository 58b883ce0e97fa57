/* Shared by the CLI commands: number options parsed whole, range-checked and
 * refused with a message naming the option; reading a whole file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/cpu.h"
#include "common/trace.h"
#include "device/kernels.h"
#include "format/model.h"

int slm_cli_parse_int(const char *s, const char *opt, int lo, int hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "staticlm: %s expects an integer in [%d, %d], got '%s'\n", opt, lo, hi, s ? s : "(nothing)");
        return 0;
    }
    *out = (int)v;
    return 1;
}

int slm_cli_parse_schedule(const char *s, int *out) {
    if (s && !strcmp(s, "rendezvous")) *out = SLM_SCHEDULE_RENDEZVOUS;
    else if (s && !strcmp(s, "counted")) *out = SLM_SCHEDULE_COUNTED;
    else {
        fprintf(stderr, "staticlm: --schedule expects rendezvous or counted, got '%s'\n", s ? s : "(nothing)");
        return 0;
    }
    return 1;
}

const char *slm_cli_schedule_name(int schedule) {
    return schedule == SLM_SCHEDULE_COUNTED ? "counted" : "rendezvous";
}

int slm_cli_parse_kv_type(const char *s, const char *opt, int *out) {
    const int k = slm_kv_type_parse(s);
    if (k < 0) {
        fprintf(stderr, "staticlm: %s expects f32, f16 or q8_0, got '%s'\n", opt, s ? s : "(nothing)");
        return 0;
    }
    *out = k;
    return 1;
}

int slm_cli_parse_weight_type(const char *s, const char *opt, int *out) {
    const int k = slm_weight_type_parse(s);
    if (k < 0) {
        fprintf(stderr, "staticlm: %s expects one of %s (either case), got '%s'\n", opt, SLM_WEIGHT_TYPE_NAMES,
                s ? s : "(nothing)");
        return 0;
    }
    *out = k;
    return 1;
}

int slm_cli_parse_prefetch(const char *s, const char *opt, int *out) {
    if (s && !strcmp(s, "on")) *out = SLM_PREFETCH_ON;
    else if (s && !strcmp(s, "off")) *out = SLM_PREFETCH_OFF;
    else {
        fprintf(stderr, "staticlm: %s expects on or off, got '%s'\n", opt, s ? s : "(nothing)");
        return 0;
    }
    return 1;
}

int slm_cli_parse_float(const char *s, const char *opt, float lo, float hi, float *out) {
    char *end = NULL;
    errno = 0;
    float v = s ? strtof(s, &end) : 0.0f;
    if (!s || errno || *end || end == s || !(v >= lo && v <= hi)) {
        fprintf(stderr, "staticlm: %s expects a number in [%g, %g], got '%s'\n", opt, lo, hi, s ? s : "(nothing)");
        return 0;
    }
    *out = v;
    return 1;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

const char *slm_cli_tokenizer_beside(const char *model) {
    static char buf[1100];
    struct stat st;
    size_t n = strlen(model);
    if ((n > 5 && !strcmp(model + n - 5, ".gguf")) || (stat(model, &st) == 0 && S_ISDIR(st.st_mode))) return NULL;
    /* a blob carries its tokenizer (and refuses another) */
    FILE *f = fopen(model, "rb");
    if (f) {
        unsigned char m[4] = {0};
        const int elf = fread(m, 1, 4, f) == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
        fclose(f);
        if (elf) return NULL;
    }
    const char *slash = strrchr(model, '/');
    int dirlen = slash ? (int)(slash - model) + 1 : 0;
    snprintf(buf, sizeof buf, "%.*stokenizer.bin", dirlen, model);
    if (file_exists(buf)) return NULL; /* the library finds it */
    snprintf(buf, sizeof buf, "%.*stok512.bin", dirlen, model);
    return file_exists(buf) ? buf : NULL;
}

slm_engine *slm_cli_open(const char **model, const char **tok, const char *kernels, slm_options *opt) {
    if (!*model) {
        static const char *const dirs[] = {"models", "../shared/models"};
        static char mbuf[256], tbuf[256];
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && !*model; i++) {
            snprintf(mbuf, sizeof mbuf, "%s/stories260K.bin", dirs[i]);
            snprintf(tbuf, sizeof tbuf, "%s/tok512.bin", dirs[i]);
            if (file_exists(mbuf) && file_exists(tbuf)) {
                *model = mbuf;
                if (!*tok) *tok = tbuf;
            }
        }
        if (!*model) {
            fprintf(stderr,
                    "staticlm: no model given and the default model was not found.\n"
                    "Looked for stories260K.bin and tok512.bin in ./models and ../shared/models.\n"
                    "Download both from karpathy's tinyllamas collection on Hugging Face\n"
                    "(huggingface.co/karpathy/tinyllamas, folder stories260K) into ./models,\n"
                    "or pass -m MODEL [-z TOKENIZER].\n");
            return NULL;
        }
    }
    if (!*tok) *tok = slm_cli_tokenizer_beside(*model);
    if (kernels && !slm_kernels_select(kernels)) {
        fprintf(stderr, "staticlm: kernels '%s' are not available on this CPU (scalar, avx2, avx512, amx)\n", kernels);
        return NULL;
    }
    if (kernels && opt->verbose && !strcmp(kernels, "amx") && strcmp(slm_kernels_active()->name, "amx"))
        fprintf(stderr, "staticlm: no AMX (%s): kernels %s\n", slm_cpu_features()->amx_why, slm_kernels_active()->name);
    opt->tokenizer_path = *tok;
    slm_engine *e = NULL;
    if (slm_load(&e, *model, opt)) {
        fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
        slm_free(e);
        return NULL;
    }
    return e;
}

/* ---- --trace FILE, --trace-mb N (run, chat, bench, serve) ---------------- */

static const char *g_trace_path;
static int g_trace_mb;

int slm_cli_trace_opt(int argc, char **argv, int *i) {
    const char *o = argv[*i];
    if (strcmp(o, "--trace") && strcmp(o, "--trace-mb")) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "staticlm: %s needs a value\n", o);
        return -1;
    }
    const char *v = argv[++*i];
    if (!strcmp(o, "--trace")) g_trace_path = v;
    else if (!slm_cli_parse_int(v, o, 1, 1 << 16, &g_trace_mb)) return -1;
    return 1;
}

static void trace_end(void) {
    uint64_t n = 0, dropped = 0;
    slm_err err = {0};
    if (slm_trace_stop(&n, &dropped, &err)) {
        fprintf(stderr, "staticlm: %s\n", err.msg);
        return;
    }
    fprintf(stderr, "trace: %llu events written to %s", (unsigned long long)n, g_trace_path);
    if (dropped)
        fprintf(stderr, " (%llu dropped: the buffer was full; raise --trace-mb)", (unsigned long long)dropped);
    fprintf(stderr, "; staticlm trace %s --svg OUT.svg draws it\n", g_trace_path);
}

int slm_cli_trace_begin(void) {
    if (!g_trace_path) return 1;
    slm_err err = {0};
    if (slm_trace_start(g_trace_path, g_trace_mb, &err)) {
        fprintf(stderr, "staticlm: %s\n", err.msg);
        return 0;
    }
    slm_trace_name_thread("main");
    atexit(trace_end); /* every way out of main writes the file */
    return 1;
}

char *slm_cli_read_file(const char *path, size_t limit, size_t *len, const char **why) {
    FILE *f = fopen(path, "rb");
    if (!f) { *why = strerror(errno); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap > limit) { free(buf); buf = NULL; *why = "too large"; break; }
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); buf = NULL; *why = "out of memory"; break; }
            buf = b;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        if (!k) break;
        n += k;
    }
    if (buf && ferror(f)) { free(buf); buf = NULL; *why = strerror(errno); }
    if (!buf && *why == NULL) *why = "out of memory";
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    *len = n;
    return buf;
}
