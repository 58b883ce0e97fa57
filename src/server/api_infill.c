/* server/api_infill.c — llama-server's POST /infill: fill in the middle for
 * code models (the editors' plugins llama.vscode and llama.vim call it).
 * The request is a completion's (n_predict, temperature, stop, stream,
 * seed, ...: /completion's fields, answered in /completion's form, streamed
 * too) plus input_prefix, input_suffix, input_extra [{filename, text}] and
 * prompt (the start of the middle, optional). The prompt is laid out in
 * token ids as llama-server's format_prompt_infill does:
 *
 *   [extra] [BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID
 *
 * where extra, the repository-level context, is FIM_REP "myproject\n",
 * then for each input_extra chunk FIM_SEP filename "\n" and its text, then
 * FIM_SEP "filename\n" (without FIM_REP / FIM_SEP: each chunk after
 * "\n\n--- snippet ---\n\n"); BOS only where the vocabulary adds it; with
 * --spm-infill the suffix part comes first: [extra] [BOS] FIM_SUF suffix
 * FIM_PRE prefix prompt FIM_MID. The pieces are tokenized as plain text
 * (control-token text stays text), the prompt with control tokens parsed.
 *
 * The budget, llama-server's with our sizes: its batch is our prefill rows
 * (max_prompt_len, at most the KV capacity), its context our KV capacity.
 * The prefix keeps its last 3/4 x batch tokens, the suffix its first
 * batch/4 - 2 - (prompt tokens) (none when that is below 0); the extra
 * context keeps its last capacity - batch - 2 x n_predict tokens (n_predict
 * the request's, -1 when unset, as llama-server's default), and never so
 * many that the prompt leaves no row for the reply. A model without
 * FIM_PRE, FIM_SUF or FIM_MID: 501, as llama-server. */
#include "server/api.h"

#ifdef SLM_HAVE_SERVE

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "server/infill.h"

typedef struct ids {
    int32_t *v;
    int n, cap;
    int oom;
} ids;

static void push(ids *t, const int32_t *v, int n) {
    if (t->oom || n <= 0) return;
    if (t->n + n > t->cap) {
        int nc = t->cap ? t->cap : 256;
        while (nc < t->n + n) nc *= 2;
        int32_t *p = slm_realloc(t->v, (size_t)nc * sizeof *p);
        if (!p) {
            t->oom = 1;
            return;
        }
        t->v = p;
        t->cap = nc;
    }
    memcpy(t->v + t->n, v, (size_t)n * sizeof *v);
    t->n += n;
}

static void push1(ids *t, int32_t id) { push(t, &id, 1); }

/* Append text's tokens (no BOS; special: control-token text parsed, else
 * plain text) to t. 0 with *e when the tokenizer refused it (param: the field). */
static int tok(srv_api *a, const char *text, int special, ids *t, const char *param, srv_error *e) {
    const size_t len = strlen(text);
    if (!len) return 1;
    unsigned char *plain = special ? NULL : slm_malloc(len + 1);
    int n = -1;
    if (plain || special) {
        if (plain) memset(plain, 1, len + 1);
        n = slm_tokenize_masked(a->e, text, plain, 0, NULL, 0);
    }
    int32_t *v = n > 0 ? slm_malloc((size_t)n * sizeof *v) : NULL;
    if (v) slm_tokenize_masked(a->e, text, plain, 0, v, n);
    slm_xfree(plain);
    if (n < 0 || (n > 0 && !v)) {
        slm_xfree(v);
        e->status = n == -2 || n == -3 ? 400 : 500;
        e->type = e->status == 400 ? "invalid_request_error" : "server_error";
        e->code = e->status == 400 ? "invalid_value" : NULL;
        snprintf(e->param, sizeof e->param, "%s", param);
        snprintf(e->msg, sizeof e->msg, "%s",
                 n == -2   ? "the text is longer than the tokenizer takes (max_prompt_bytes)"
                 : n == -3 ? "the tokenizer's pre-tokenizer exceeded its work limits on this text"
                           : "out of memory");
        return 0;
    }
    push(t, v, n);
    slm_xfree(v);
    return 1;
}

/* input_prefix / input_suffix: its texts as plain text, its ids as given. */
static int tok_input(srv_api *a, const srv_infill_input *in, ids *t, const char *param, srv_error *e) {
    for (int i = 0; i < in->n; i++) {
        if (!in->seg[i].text) push1(t, in->seg[i].id);
        else if (!tok(a, in->seg[i].text, 0, t, param, e)) return 0;
    }
    return 1;
}

/* text + "\n" as plain text */
static int tok_line(srv_api *a, const char *text, ids *t, const char *param, srv_error *e) {
    const size_t l = strlen(text);
    char *s = slm_malloc(l + 2);
    if (!s) {
        t->oom = 1;
        return 1;
    }
    memcpy(s, text, l);
    memcpy(s + l, "\n", 2);
    const int ok = tok(a, s, 0, t, param, e);
    slm_xfree(s);
    return ok;
}

/* The repository-level context before the FIM part. */
static int extra_tokens(srv_api *a, const slm_fim_tokens *fim, const srv_infill *f, ids *x, srv_error *e) {
    if (fim->rep >= 0) {
        push1(x, fim->rep);
        if (!tok(a, "myproject\n", 0, x, "input_extra", e)) return 0;
    }
    for (int i = 0; i < f->n_extra; i++) {
        char param[48];
        snprintf(param, sizeof param, "input_extra[%d]", i);
        if (fim->sep >= 0) {
            push1(x, fim->sep);
            if (!tok_line(a, f->extra_name[i], x, param, e)) return 0;
        } else if (!tok(a, "\n\n--- snippet ---\n\n", 0, x, param, e)) {
            return 0;
        }
        if (!tok(a, f->extra_text[i], 0, x, param, e)) return 0;
    }
    if (fim->sep >= 0) {
        push1(x, fim->sep);
        if (!tok(a, "filename\n", 0, x, "input_extra", e)) return 0;
    }
    return 1;
}

static int min_i(long long x, long long y) { return (int)(x < y ? x : y); }

/* The prompt's ids into *out (slm_malloc'd) [*n]; 0 with *e. */
static int build(srv_api *a, const slm_fim_tokens *fim, const srv_infill *f, const srv_request *q, int32_t **out, int *n,
                 srv_error *e) {
    ids pre = {0}, suf = {0}, prm = {0}, x = {0}, all = {0};
    int ok = tok_input(a, &f->prefix, &pre, "input_prefix", e) && tok_input(a, &f->suffix, &suf, "input_suffix", e) &&
             tok(a, q->prompt ? q->prompt : "", 1, &prm, "prompt", e) && extra_tokens(a, fim, f, &x, e);
    if (ok) {
        const int cap = slm_capacity(a->e);
        const int batch = a->info.max_prompt_len > 0 && a->info.max_prompt_len < cap ? a->info.max_prompt_len : cap;
        const long long n_predict = q->max_tokens_set ? q->max_tokens : -1;
        const int n_pre = min_i(pre.n, 3LL * (batch / 4));
        int n_suf = min_i(suf.n, batch / 4 - (2LL + prm.n));
        if (n_suf < 0) n_suf = 0;
        int32_t bos = -1;
        const int add_bos = slm_tokenize(a->e, "", 1, &bos, 1) == 1;
        const int fim_len = add_bos + 1 + n_pre + prm.n + 1 + n_suf + 1;
        int n_x = min_i(x.n, (long long)cap - batch - 2 * n_predict);
        n_x = min_i(n_x, (long long)cap - 1 - fim_len); /* a row left for the reply */
        if (n_x < 0) n_x = 0;
        push(&all, x.v + x.n - n_x, n_x); /* the extra context's end */
        if (add_bos) push1(&all, bos);
        for (int part = 0; part < 2; part++) {
            if ((part == 0) != (a->spm_infill != 0)) { /* the prefix part */
                push1(&all, fim->pre);
                push(&all, pre.v + pre.n - n_pre, n_pre); /* the prefix's end */
                push(&all, prm.v, prm.n);
            } else {
                push1(&all, fim->suf);
                push(&all, suf.v, n_suf); /* the suffix's start */
            }
        }
        push1(&all, fim->mid);
        if (all.oom || pre.oom || suf.oom || prm.oom || x.oom) {
            ok = 0;
            e->status = 500;
            e->type = "server_error";
            e->code = NULL;
            e->param[0] = 0;
            snprintf(e->msg, sizeof e->msg, "out of memory");
        }
    }
    slm_xfree(pre.v);
    slm_xfree(suf.v);
    slm_xfree(prm.v);
    slm_xfree(x.v);
    if (!ok) {
        slm_xfree(all.v);
        return 0;
    }
    *out = all.v;
    *n = all.n;
    return 1;
}

int api_infill(srv_api *a, srv_req *r) {
    slm_fim_tokens fim;
    if (!slm_fim_get(a->e, &fim)) { /* as llama-server answers it */
        return http_send_error(r, 501, "not_supported_error", NULL, "not_supported",
                               "Infill is not supported by this model: %s%s%s", fim.pre < 0 ? "prefix token is missing. " : "",
                               fim.suf < 0 ? "suffix token is missing. " : "",
                               fim.mid < 0 ? "middle token is missing. " : "")
                   ? HTTP_DONE
                   : HTTP_DROP;
    }
    if (r->too_big)
        return http_send_error(r, 413, "invalid_request_error", NULL, "request_too_large", "the request body exceeds %u bytes",
                               HTTP_BODY_LIMIT)
                   ? HTTP_DONE
                   : HTTP_DROP;
    job *j = slm_calloc(1, sizeof *j);
    if (!j) return http_send_error(r, 500, "server_error", NULL, NULL, "out of memory") ? HTTP_DONE : HTTP_DROP;
    srv_infill f;
    srv_error e;
    int32_t *v = NULL;
    int n = 0;
    int ok = srv_infill_parse(r->body, r->len, a->info.vocab_size, &a->samp, &f, &j->q, &e);
    if (ok) {
        ok = build(a, &fim, &f, &j->q, &v, &n, &e);
        srv_infill_free(&f);
    }
    if (!ok) {
        srv_request_free(&j->q);
        slm_xfree(j);
        ok = http_send_error(r, e.status, e.type, e.param[0] ? e.param : NULL, e.code, "%s", e.msg);
        return ok ? HTTP_DONE : HTTP_DROP;
    }
    slm_xfree(j->q.prompt); /* now in the ids */
    j->q.prompt = NULL;
    j->q.prompt_ids = v;
    j->q.n_prompt_ids = n;
    if (a->verbose) fprintf(stderr, "serve: /infill: a prompt of %d tokens\n", n);
    return srv_completion_submit(a, r, j, 1);
}

#endif /* SLM_HAVE_SERVE */
