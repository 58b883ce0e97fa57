/* The sampling options run, chat and serve share (cli/cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "text/grammar.h"

/* The grammar text --grammar-file or --json-schema made (the sampling points
 * at it for the life of the process; --grammar points at its argument). */
static char *grammar_owned;

/* A whole file (at most SLM_GRAMMAR_MAX_TEXT bytes) into a NUL-terminated
 * slm_malloc'd buffer; NULL after a message. */
static char *read_text(const char *path, const char *opt) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "staticlm: %s: cannot open '%s': %s\n", opt, path, strerror(errno));
        return NULL;
    }
    char *buf = slm_malloc(SLM_GRAMMAR_MAX_TEXT + 1);
    size_t n = buf ? fread(buf, 1, SLM_GRAMMAR_MAX_TEXT + 1, f) : 0;
    const int bad = !buf || ferror(f) || n > SLM_GRAMMAR_MAX_TEXT;
    fclose(f);
    if (bad) {
        fprintf(stderr, "staticlm: %s: '%s': %s\n", opt, path,
                !buf ? "out of memory" : n > SLM_GRAMMAR_MAX_TEXT ? "larger than 1 MiB" : "read error");
        slm_xfree(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* --grammar TEXT, --grammar-file FILE, --json-schema JSON|@FILE: the text is
 * compiled here, so that a bad one is refused before the model loads. */
static int parse_grammar(int which, const char *v, slm_sampling *s) {
    static const char *const names[] = {"--grammar", "--grammar-file", "--json-schema"};
    const char *o = names[which];
    if (s->grammar) {
        fprintf(stderr, "staticlm: %s: a grammar is already given (--grammar, --grammar-file, --json-schema: one of them)\n", o);
        return 0;
    }
    char *text = NULL;
    slm_err err = {0};
    if (which == 1 && !(text = read_text(v, o))) return 0;
    if (which == 2) {
        char *schema = v[0] == '@' ? read_text(v + 1, o) : NULL;
        if (v[0] == '@' && !schema) return 0;
        const char *js = schema ? schema : v;
        slm_status st = slm_json_schema_to_grammar(js, strlen(js), &text, &err);
        slm_xfree(schema);
        if (st) {
            fprintf(stderr, "staticlm: %s: %s\n", o, err.msg);
            return 0;
        }
    }
    const char *g = text ? text : v;
    slm_grammar *compiled = NULL;
    if (slm_grammar_compile(g, strlen(g), &compiled, &err)) {
        fprintf(stderr, "staticlm: %s: %s\n", o, err.msg);
        slm_xfree(text);
        return 0;
    }
    slm_grammar_free(compiled);
    slm_xfree(grammar_owned);
    grammar_owned = text;
    s->grammar = g;
    return 1;
}

/* --logit-bias TOKEN(+|-)BIAS, as llama.cpp's: 15043+1, 15043-100. */
static int parse_bias(const char *v, slm_sampling *s) {
    char *end;
    errno = 0;
    const long id = strtol(v, &end, 10);
    if (errno || end == v || id < 0 || id > 1 << 24 || (*end != '+' && *end != '-')) {
        fprintf(stderr, "staticlm: --logit-bias expects TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1), got '%s'\n", v);
        return 0;
    }
    const char *b = end;
    errno = 0;
    const double bias = strtod(b, &end);
    if (errno || end == b + 1 || *end || !(bias >= -100.0 && bias <= 100.0)) {
        fprintf(stderr, "staticlm: --logit-bias: the bias in '%s' must be a number in [-100, 100]\n", v);
        return 0;
    }
    if (s->n_logit_bias >= SLM_MAX_LOGIT_BIAS) {
        fprintf(stderr, "staticlm: --logit-bias: at most %d tokens\n", SLM_MAX_LOGIT_BIAS);
        return 0;
    }
    s->logit_bias[s->n_logit_bias++] = (slm_logit_bias){(int32_t)id, (float)bias};
    return 1;
}

static const char *const known[] = {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                                    "--repeat-last-n", "--presence-penalty", "--frequency-penalty", "--logit-bias",
                                    "--grammar", "--grammar-file", "--json-schema"};
enum { N_KNOWN = sizeof known / sizeof known[0] };
/* Bit k: known[k] was given (the model's recommended value then gives way). */
static unsigned given;

void slm_cli_sampling_mark(const char *opt) {
    for (unsigned k = 0; k < N_KNOWN; k++)
        if (!strcmp(opt, known[k])) given |= 1u << k;
}

int slm_cli_sampling_opt(slm_sampling *s, int argc, char **argv, int *i) {
    const char *o = argv[*i];
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(o, known[k])) k++;
    if (k == sizeof known / sizeof known[0]) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "staticlm: %s needs a value\n", o);
        return -1;
    }
    const char *v = argv[++*i];
    int ok;
    switch (k) {
    case 0: ok = slm_cli_parse_float(v, o, 0.0f, 100.0f, &s->temperature); break;
    case 1: ok = slm_cli_parse_int(v, o, 0, 1 << 24, &s->top_k); break;
    case 2: ok = slm_cli_parse_float(v, o, 0.0f, 1.0f, &s->top_p); break;
    case 3: ok = slm_cli_parse_float(v, o, 0.0f, 1.0f, &s->min_p); break;
    case 4: ok = slm_cli_parse_float(v, o, 0.0f, 10.0f, &s->repeat_penalty); break;
    case 5: ok = slm_cli_parse_int(v, o, -1, 1 << 24, &s->repeat_last_n); break;
    case 6: ok = slm_cli_parse_float(v, o, -2.0f, 2.0f, &s->presence_penalty); break;
    case 7: ok = slm_cli_parse_float(v, o, -2.0f, 2.0f, &s->frequency_penalty); break;
    case 8: ok = parse_bias(v, s); break;
    default: ok = parse_grammar((int)k - 9, v, s); break;
    }
    if (ok) given |= 1u << k;
    return ok ? 1 : -1;
}

/* The model file's recommended sampling (general.sampling.*: convert_hf_to_gguf.py writes them from
 * generation_config.json) for the options not given, as llama.cpp's common_init_sampler_from_model:
 * temp, top_k, top_p, min_p, penalty_repeat, penalty_last_n; a value that does not parse or is out of
 * the option's range is ignored with a note. */
static void from_model(slm_sampling *s, slm_engine *e, int verbose) {
    static const struct { const char *key; int opt, integer; double lo, hi; } k_keys[] = {
        {"general.sampling.temp", 0, 0, 0, 100},           {"general.sampling.top_k", 1, 1, 0, 1 << 24},
        {"general.sampling.top_p", 2, 0, 0, 1},            {"general.sampling.min_p", 3, 0, 0, 1},
        {"general.sampling.penalty_repeat", 4, 0, 0, 10},  {"general.sampling.penalty_last_n", 5, 1, -1, 1 << 24},
    };
    char line[256] = "", v[64];
    size_t n = 0;
    for (size_t i = 0; i < sizeof k_keys / sizeof k_keys[0]; i++) {
        if (given & (1u << k_keys[i].opt) || slm_model_meta(e, k_keys[i].key, v, sizeof v) < 0) continue;
        char *end;
        errno = 0;
        const double x = strtod(v, &end);
        if (end == v || *end || errno || !(x >= k_keys[i].lo && x <= k_keys[i].hi) || (k_keys[i].integer && x != (int)x)) {
            fprintf(stderr, "staticlm: note: the model's %s '%s' is not a value %s takes; ignored\n", k_keys[i].key, v,
                    known[k_keys[i].opt]);
            continue;
        }
        switch (k_keys[i].opt) {
        case 0: s->temperature = (float)x; break;
        case 1: s->top_k = (int)x; break;
        case 2: s->top_p = (float)x; break;
        case 3: s->min_p = (float)x; break;
        case 4: s->repeat_penalty = (float)x; break;
        default: s->repeat_last_n = (int)x; break;
        }
        if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, " %s %s", known[k_keys[i].opt], v);
    }
    if (verbose && n) fprintf(stderr, "sampling: the model file's recommended values (general.sampling.*):%s\n", line);
    static const char *const other[] = {"general.sampling.mirostat", "general.sampling.xtc_probability",
                                        "general.sampling.sequence"};
    for (size_t i = 0; verbose && i < sizeof other / sizeof other[0]; i++)
        if (slm_model_meta(e, other[i], v, sizeof v) >= 0)
            fprintf(stderr, "sampling: the model file's %s '%s' is not applied (staticlm has no such sampler stage)\n",
                    other[i], v);
}

void slm_cli_sampling_init(slm_sampling *s, float temperature) {
    memset(s, 0, sizeof *s);
    s->temperature = temperature;
    s->top_p = 0.9f;
    s->repeat_penalty = 1.0f;
    s->repeat_last_n = 64;
}

int slm_cli_sampling_check(slm_sampling *s, slm_engine *e, int verbose) {
    from_model(s, e, verbose);
    slm_info in;
    slm_get_info(e, &in);
    for (int i = 0; i < s->n_logit_bias; i++)
        if (s->logit_bias[i].token >= in.vocab_size) {
            fprintf(stderr, "staticlm: --logit-bias names token %d; the vocabulary has %d\n", (int)s->logit_bias[i].token,
                    in.vocab_size);
            return 0;
        }
    return 1;
}
