/* staticlm embed: the embedding of each text, like llama.cpp's
 * llama-embedding: texts split at a separator (default a newline), each
 * run through the model's embedding programs, pooled (--pooling, default
 * the model file's), normalized (--embd-normalize, default Euclidean), and
 * printed as text (with a cosine similarity matrix for several texts), a
 * JSON array or an OpenAI-style JSON list. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: staticlm embed -m MODEL (-p TEXT | -f FILE) [options]\n"
            "\n"
            "Prints the embedding of each text: the final norm's hidden states of its tokens,\n"
            "pooled into one vector (as llama.cpp's llama-embedding). Several texts run in one\n"
            "call (embed.BxS programs: one text in each region of S rows), but for a model\n"
            "with recurrent layers (qwen35), which runs them one at a time.\n"
            "\n"
            "  -m, --model PATH          GGUF, llama2.c .bin, Hugging Face folder, or a blob\n"
            "                            compiled with its embedding programs (an encoder's\n"
            "                            always; a decoder's: compile --embeddings)\n"
            "  -z, --tokenizer PATH      llama2.c tokenizer.bin\n"
            "  -p, --prompt TEXT         the texts, split at the separator\n"
            "  -f, --file PATH           read them from a file instead (not with -p)\n"
            "      --embd-separator S    what separates the texts (default a newline; \"\\n\" is one)\n"
            "      --cls-separator S     pooling rank: what separates a text's query from its\n"
            "                            document (default a tab; \"\\t\" is one)\n"
            "      --pooling P           none | mean | cls | last | rank (default: the model file's\n"
            "                            pooling_type; none when it has none); rank: a reranker's\n"
            "                            scores of \"query<TAB>document\" texts (its rerank template,\n"
            "                            or a cross-encoder's [CLS] query [SEP] document [SEP])\n"
            "      --embd-normalize N    -1 none, 0 max absolute value to 32760, 1 taxicab,\n"
            "                            2 Euclidean (default), N > 2 the N-norm\n"
            "      --embd-output-format F  text (default) | array | json | json+ (json with the\n"
            "                            cosine similarity matrix)\n"
            "      --max-prompt-len L    rows of the largest embedding program (default 1024)\n"
            "      --min-response-len R  KV rows beyond them (default 128); a text may be up to\n"
            "                            L + R tokens (chunks of L), clamped to the context length\n"
            SLM_CLI_KV_TYPE_HELP SLM_CLI_WEIGHT_TYPE_HELP
            "      --cache-dir DIR       compile into DIR on the first start (a blob with the\n"
            "                            embedding programs), map it on the next ones\n"
            "      --max-memory MB       memory budget (default 75%% of RAM; -1 no limit)\n"
            "  -t, --threads N           worker threads (default: all cores)\n"
            "      --kernels NAME        scalar | avx2 | avx512 | amx (default: the best supported)\n"
            SLM_CLI_TRACE_HELP
            "  -v, --verbose             notes on stderr\n"
            "  -h, --help                this text\n");
}

typedef struct embed_args {
    const char *model, *tok, *prompt, *file, *sep, *kernels, *format, *cls_sep;
    int pooling, normalize, threads, verbose;
    int rank; /* pooling rank: scores of query / document pairs */
    slm_options opt;
} embed_args;

/* 1 ok, 0 bad (message printed), 2 help */
static int parse(int argc, char **argv, embed_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return 2;
        if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) { a->verbose = 1; continue; }
        const int tr = slm_cli_trace_opt(argc, argv, &i); /* the calls by program: embed.BxS, embed.R */
        if (tr < 0) return 0;
        if (tr) continue;
        const int known = !strcmp(o, "-m") || !strcmp(o, "--model") || !strcmp(o, "-z") || !strcmp(o, "--tokenizer") ||
                          !strcmp(o, "-p") || !strcmp(o, "--prompt") || !strcmp(o, "-f") || !strcmp(o, "--file") ||
                          !strcmp(o, "--embd-separator") || !strcmp(o, "--pooling") || !strcmp(o, "--embd-normalize") ||
                          !strcmp(o, "--embd-output-format") || !strcmp(o, "--max-prompt-len") ||
                          !strcmp(o, "--min-response-len") || !strcmp(o, "--max-memory") || !strcmp(o, "-t") ||
                          !strcmp(o, "--threads") || !strcmp(o, "--kernels") || !strcmp(o, "--kv-type") ||
                          !strcmp(o, "--weight-type") || !strcmp(o, "--cls-separator") || !strcmp(o, "--cache-dir");
        if (!known) {
            fprintf(stderr, "staticlm: unknown option '%s' (see staticlm embed --help)\n", o);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "staticlm: %s needs a value\n", o);
            return 0;
        }
        i++;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "-z") || !strcmp(o, "--tokenizer")) a->tok = v;
        else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) a->prompt = v;
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) a->file = v;
        else if (!strcmp(o, "--embd-separator")) a->sep = !strcmp(v, "\\n") ? "\n" : v;
        else if (!strcmp(o, "--cls-separator")) a->cls_sep = !strcmp(v, "\\t") ? "\t" : v;
        else if (!strcmp(o, "--kernels")) a->kernels = v;
        else if (!strcmp(o, "--cache-dir")) a->opt.cache_dir = v;
        else if (!strcmp(o, "--kv-type")) {
            if (!slm_cli_parse_kv_type(v, o, &a->opt.kv_type)) return 0;
        }
        else if (!strcmp(o, "--weight-type")) {
            if (!slm_cli_parse_weight_type(v, o, &a->opt.weight_type)) return 0;
        }
        else if (!strcmp(o, "--pooling")) {
            if ((a->pooling = slm_pooling_parse(v)) < SLM_POOLING_NONE) {
                fprintf(stderr, "staticlm: --pooling expects none, mean, cls, last or rank, got '%s'\n", v);
                return 0;
            }
        } else if (!strcmp(o, "--embd-output-format")) {
            if (strcmp(v, "text") && strcmp(v, "array") && strcmp(v, "json") && strcmp(v, "json+")) {
                fprintf(stderr, "staticlm: --embd-output-format expects text, array, json or json+, got '%s'\n", v);
                return 0;
            }
            a->format = v;
        } else {
            int n, lo = 0, hi = 1 << 20, *dst = &n;
            if (!strcmp(o, "--embd-normalize")) lo = -1, hi = 64, dst = &a->normalize;
            else if (!strcmp(o, "--max-prompt-len")) lo = 1, dst = &a->opt.max_prompt_len;
            else if (!strcmp(o, "--min-response-len")) dst = &a->opt.min_response_len;
            else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) hi = 1024, dst = &a->threads;
            else lo = -1, hi = 1 << 30; /* --max-memory */
            if (!slm_cli_parse_int(v, o, lo, hi, dst)) return 0;
            if (dst == &n) a->opt.max_memory_mb = n;
        }
    }
    if (!a->prompt && !a->file) {
        fprintf(stderr, "staticlm: embed needs the texts: -p TEXT or -f FILE\n");
        return 0;
    }
    if (a->prompt && a->file) {
        fprintf(stderr, "staticlm: -p and -f both give the texts: one of them\n");
        return 0;
    }
    if (!a->sep[0] || !a->cls_sep[0]) {
        fprintf(stderr, "staticlm: --embd-separator and --cls-separator must not be empty\n");
        return 0;
    }
    return 1;
}

static double cosine(const float *x, const float *y, int n) {
    double xy = 0, xx = 0, yy = 0;
    for (int i = 0; i < n; i++) xy += (double)x[i] * y[i], xx += (double)x[i] * x[i], yy += (double)y[i] * y[i];
    return xx > 0 && yy > 0 ? xy / sqrt(xx * yy) : 0.0;
}

static void print_vec(const float *v, int n, int normalize) {
    for (int i = 0; i < n; i++) printf(normalize == 0 ? "%s%.0f" : "%s%.6f", i ? " " : "", v[i]);
}

static void print_json_vec(const float *v, int n) {
    printf("[");
    for (int i = 0; i < n; i++) printf("%s%.9g", i ? "," : "", v[i]);
    printf("]");
}

/* Print nv vectors of dim (texts[k] names vector k's text; for pooling none
 * the vectors are tokens, owner[k] their text). */
static void print_all(const embed_args *a, const float *v, int nv, int dim, char **texts, const int *owner) {
    const char *fmt = a->format ? a->format : "text";
    if (!strcmp(fmt, "text") && a->rank) { /* as llama-embedding: the scores, the first the relevance */
        for (int k = 0; k < nv; k++) {
            printf("rerank score %d:", k);
            for (int i = 0; i < dim; i++) printf(" %.6f", v[(size_t)k * dim + i]);
            printf("\n");
        }
        return;
    }
    if (!strcmp(fmt, "text")) {
        for (int k = 0; k < nv; k++) {
            printf("embedding %d%s", k, owner ? " (text " : ": ");
            if (owner) printf("%d): ", owner[k]);
            print_vec(v + (size_t)k * (size_t)dim, dim, a->normalize);
            printf("\n");
        }
        if (nv > 1 && !owner) {
            printf("\ncosine similarity matrix:\n\n");
            for (int i = 0; i < nv; i++) {
                for (int j = 0; j < nv; j++) printf("%6.2f ", cosine(v + (size_t)i * dim, v + (size_t)j * dim, dim));
                printf("%.20s\n", texts[i]);
            }
        }
        return;
    }
    if (!strcmp(fmt, "array")) {
        printf("[");
        for (int k = 0; k < nv; k++) {
            if (k) printf(",");
            print_json_vec(v + (size_t)k * (size_t)dim, dim);
        }
        printf("]\n");
        return;
    }
    printf("{\"object\":\"list\",\"data\":[");
    for (int k = 0; k < nv; k++) {
        printf("%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", k ? "," : "", k);
        print_json_vec(v + (size_t)k * (size_t)dim, dim);
        printf("}");
    }
    printf("]");
    if (!strcmp(fmt, "json+")) {
        printf(",\"cosineSimilarity\":[");
        for (int i = 0; i < nv; i++) {
            printf("%s[", i ? "," : "");
            for (int j = 0; j < nv; j++) printf("%s%.6f", j ? "," : "", cosine(v + (size_t)i * dim, v + (size_t)j * dim, dim));
            printf("]");
        }
        printf("]");
    }
    printf("}\n");
}

/* Every text tokenized, embedded in one slm_session_embed_batch, its
 * vectors (pooling none: one a token, owner[] its text) normalized into
 * *vecs; 0 ok, else 1 (message printed). */
static int embed_all(const embed_args *a, slm_engine *e, slm_session *s, char **texts, int n_texts, int pooling,
                     int dim, float **vecs, int **owner, int *nv) {
    int rc = 1, total = 0;
    int32_t **ids = slm_calloc((size_t)n_texts, sizeof *ids);
    int *n = slm_calloc((size_t)n_texts, sizeof *n);
    float **out = slm_calloc((size_t)n_texts, sizeof *out);
    size_t *cap = slm_calloc((size_t)n_texts, sizeof *cap);
    if (!ids || !n || !out || !cap) goto oom;
    for (int t = 0; t < n_texts; t++) {
        int k = slm_embed_tokenize(e, texts[t], NULL, 0);
        if (k < 1) {
            fprintf(stderr, "staticlm: text %d: %s\n", t,
                    k == 0 ? "no tokens" : k == -2 ? "longer than max_prompt_bytes" : k == -3 ? "the tokenizer's work "
                    "limits exceeded" : "out of memory");
            goto fail;
        }
        if (!(ids[t] = slm_malloc((size_t)k * sizeof **ids))) goto oom;
        n[t] = slm_embed_tokenize(e, texts[t], ids[t], k);
        total += pooling == SLM_POOLING_NONE ? n[t] : 1;
    }
    if (!(*vecs = slm_malloc((size_t)total * (size_t)dim * sizeof(float))) || !(*owner = slm_malloc((size_t)total * sizeof(int))))
        goto oom;
    for (int t = 0, at = 0; t < n_texts; t++) {
        const int rows = pooling == SLM_POOLING_NONE ? n[t] : 1;
        out[t] = *vecs + (size_t)at * (size_t)dim;
        cap[t] = (size_t)rows * (size_t)dim;
        for (int r = 0; r < rows; r++) (*owner)[at + r] = t;
        at += rows;
    }
    if (slm_session_embed_batch(s, n_texts, (const int32_t *const *)ids, n, pooling, out, cap)) {
        fprintf(stderr, "staticlm: %s\n", slm_session_error(s));
        goto fail;
    }
    for (int v = 0; v < total; v++) slm_embed_normalize(*vecs + (size_t)v * (size_t)dim, dim, a->normalize);
    for (int t = 0; a->verbose && t < n_texts; t++) fprintf(stderr, "embed: text %d: %d tokens\n", t, n[t]);
    *nv = total;
    rc = 0;
    goto fail;
oom:
    fprintf(stderr, "staticlm: out of memory\n");
fail:
    for (int t = 0; ids && t < n_texts; t++) slm_xfree(ids[t]);
    slm_xfree(ids);
    slm_xfree(n);
    slm_xfree(out);
    slm_xfree(cap);
    return rc;
}

int slm_cli_embed(int argc, char **argv) {
    embed_args a;
    memset(&a, 0, sizeof a);
    a.opt = slm_default_options();
    a.sep = "\n";
    a.cls_sep = "\t";
    a.pooling = SLM_POOLING_DEFAULT;
    a.normalize = 2;
    int r = parse(argc, argv, &a);
    if (r != 1) {
        usage(r == 2 ? stdout : stderr);
        return r == 2 ? 0 : 2;
    }
    size_t text_len = 0;
    const char *why = "out of memory";
    char *text = a.file ? slm_cli_read_file(a.file, (size_t)1 << 30, &text_len, &why) : strdup(a.prompt);
    if (!text) {
        fprintf(stderr, "staticlm: %s: cannot read it: %s\n", a.file ? a.file : "-p", why);
        return 1;
    }
    /* the texts: split at the separator; a trailing empty text (a file's last newline) dropped */
    int n_texts = 0, cap_texts = 16;
    char **texts = slm_malloc((size_t)cap_texts * sizeof *texts);
    const size_t sl = strlen(a.sep);
    for (char *p = text; texts;) {
        char *q = strstr(p, a.sep);
        if (q) *q = 0;
        if (q || p[0]) {
            if (n_texts == cap_texts) {
                char **nt = slm_realloc(texts, (size_t)(cap_texts *= 2) * sizeof *texts);
                if (!nt) slm_xfree(texts);
                texts = nt;
                if (!texts) break;
            }
            texts[n_texts++] = p;
        }
        if (!q) break;
        p = q + sl;
    }
    int rc = 1;
    slm_engine *e = NULL;
    slm_session *s = NULL;
    float *vecs = NULL;
    int *owner = NULL;
    if (!texts) {
        fprintf(stderr, "staticlm: out of memory\n");
        goto out;
    }
    if (n_texts == 0) {
        fprintf(stderr, "staticlm: no text to embed\n");
        goto out;
    }
    if (!slm_cli_trace_begin()) goto out;
    a.opt.embeddings = 1;
    a.opt.verbose = a.verbose;
    a.opt.n_threads = a.threads;
    if (!(e = slm_cli_open(&a.model, &a.tok, a.kernels, &a.opt))) goto out;
    if (slm_session_new(e, NULL, &s)) {
        fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
        goto out;
    }
    slm_info in;
    slm_get_info(e, &in);
    const int pooling = a.pooling == SLM_POOLING_DEFAULT ? slm_model_pooling(e) : a.pooling;
    const int rank = a.rank = pooling == SLM_POOLING_RANK;
    const int dim = rank ? slm_model_rank_outputs(e) : in.dim; /* a vector's width: a reranker's, its scores */
    if (!dim) {
        fprintf(stderr, "staticlm: pooling rank needs a reranker's classifier head (cls.weight, cls.output.weight), which %s "
                        "has not\n", a.model);
        goto out;
    }
    if (a.verbose)
        fprintf(stderr, "embed: %d text(s), dim %d, pooling %s%s, normalize %d, up to %d tokens a text\n", n_texts,
                dim, slm_pooling_name(pooling), a.pooling == SLM_POOLING_DEFAULT ? " (the model's)" : "",
                a.normalize, in.kv_capacity);
    int nv = 0;
    if (!rank) { /* every text at once: packed into the batch programs */
        if (embed_all(&a, e, s, texts, n_texts, pooling, dim, &vecs, &owner, &nv)) goto out;
    } else { /* "query<TAB>document" pairs, all at once: a cross-encoder packs them into its batch programs */
        const char **q = slm_calloc((size_t)n_texts, sizeof *q), **d = slm_calloc((size_t)n_texts, sizeof *d);
        float **o = slm_calloc((size_t)n_texts, sizeof *o);
        size_t *caps = slm_calloc((size_t)n_texts, sizeof *caps);
        int *n_tok = slm_calloc((size_t)n_texts, sizeof *n_tok), bad = 0;
        vecs = slm_malloc((size_t)n_texts * (size_t)dim * sizeof(float));
        for (int t = 0; vecs && q && d && o && caps && n_tok && t < n_texts && !bad; t++) {
            char *sep = strstr(texts[t], a.cls_sep);
            if (!sep) {
                fprintf(stderr, "staticlm: text %d: no query / document separator (--cls-separator)\n", t);
                bad = 1;
                break;
            }
            *sep = 0; /* query, then document */
            q[t] = texts[t], d[t] = sep + strlen(a.cls_sep), o[t] = vecs + (size_t)t * dim, caps[t] = (size_t)dim;
        }
        if (!bad && vecs && q && d && o && caps && n_tok) {
            if (slm_session_rerank_batch(s, n_texts, q, d, o, caps, n_tok)) { /* scores as they are */
                fprintf(stderr, "staticlm: %s\n", slm_session_error(s));
                bad = 1;
            } else {
                nv = n_texts;
                for (int t = 0; a.verbose && t < n_texts; t++) fprintf(stderr, "embed: text %d: %d tokens\n", t, n_tok[t]);
            }
        }
        slm_xfree(q);
        slm_xfree(d);
        slm_xfree(o);
        slm_xfree(caps);
        slm_xfree(n_tok);
        if (bad) goto out;
    }
    if (!vecs || (!rank && !owner) || nv == 0) {
        fprintf(stderr, "staticlm: out of memory\n");
        goto out;
    }
    print_all(&a, vecs, nv, dim, texts, pooling == SLM_POOLING_NONE ? owner : NULL);
    rc = 0;
out:
    slm_session_free(s);
    slm_free(e);
    slm_xfree(vecs);
    slm_xfree(owner);
    slm_xfree(texts);
    free(text);
    return rc;
}
