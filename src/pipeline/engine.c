/* The engine: the public API over the layers (format -> compiler ->
 * device -> runtime), plus the generation loop. */
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "common/common.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "pipeline/tokenizer.h"
#include "runtime/runtime.h"

struct slm_engine {
    slm_err err;            /* the last error, with its message */
    slm_options opt;
    slm_model_file model;
    slm_tokenizer *tok;
    slm_compiled comp;
    slm_runtime rt;
    void *sample_scratch;   /* slm_sample_scratch_size(vocab) bytes */
    int loaded;
};

slm_options slm_default_options(void) {
    slm_options o;
    memset(&o, 0, sizeof o);
    o.max_prompt_len = 1024;
    o.min_response_len = 128;
    return o;
}

const char *slm_last_error(const slm_engine *e) {
    if (!e) return "out of memory";
    return e->err.msg[0] ? e->err.msg : slm_status_str(e->err.status);
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static slm_status load_tokenizer(slm_engine *e) {
    const slm_options *o = &e->opt;
    if (o->tokenizer_path)
        return slm_tok_load_llama2c(&e->tok, o->tokenizer_path, e->model.cfg.vocab_size, &e->err);
    if (e->model.gguf) return slm_tok_load_gguf(&e->tok, e->model.gguf, slm_basename(e->model.path), &e->err);
    /* llama2.c: tokenizer.bin beside the model */
    char path[1100];
    const char *slash = strrchr(e->model.path, '/');
    int dirlen = slash ? (int)(slash - e->model.path) + 1 : 0;
    snprintf(path, sizeof path, "%.*stokenizer.bin", dirlen, e->model.path);
    if (!file_exists(path))
        return slm_errf(&e->err, SLM_ERR_ARG, "%s: a llama2.c model needs a tokenizer: pass -z tokenizer.bin",
                        slm_basename(e->model.path));
    return slm_tok_load_llama2c(&e->tok, path, e->model.cfg.vocab_size, &e->err);
}

slm_status slm_load(slm_engine **out, const char *model_path, const slm_options *opt) {
    slm_engine *e = slm_calloc(1, sizeof *e);
    *out = e;
    if (!e) return SLM_ERR_NOMEM;
    e->opt = opt ? *opt : slm_default_options();
    if (!model_path) return slm_errf(&e->err, SLM_ERR_ARG, "no model path");
    slm_status s;
    if ((s = slm_model_open(&e->model, model_path, &e->err))) return s;
    if ((s = load_tokenizer(e))) return s;
    if (slm_tok_vocab_size(e->tok) != e->model.cfg.vocab_size)
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: tokenizer has %d tokens but the model's vocabulary is %d",
                        slm_basename(model_path), slm_tok_vocab_size(e->tok), e->model.cfg.vocab_size);
    slm_compile_options co;
    memset(&co, 0, sizeof co);
    co.max_prompt_len = e->opt.max_prompt_len > 0 ? e->opt.max_prompt_len : 1024;
    co.min_response_len = e->opt.min_response_len >= 0 ? e->opt.min_response_len : 128;
    if ((s = slm_compile(&e->comp, &e->model, &co, &e->err))) return s;
    if (e->opt.verbose && (co.max_prompt_len != e->comp.opt.max_prompt_len ||
                           co.min_response_len != e->comp.opt.min_response_len))
        fprintf(stderr, "note: clamped to the model's context length %d: max_prompt_len %d, min_response_len %d\n",
                e->model.cfg.context_len, e->comp.opt.max_prompt_len, e->comp.opt.min_response_len);
    if ((s = slm_rt_init(&e->rt, &e->comp, e->model.map.data, e->opt.n_threads, &e->err))) return s;
    e->sample_scratch = slm_malloc(slm_sample_scratch_size(e->model.cfg.vocab_size));
    if (!e->sample_scratch) return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
    e->loaded = 1;
    return SLM_OK;
}

void slm_free(slm_engine *e) {
    if (!e) return;
    slm_xfree(e->sample_scratch);
    slm_rt_free(&e->rt);
    slm_compiled_free(&e->comp);
    slm_tok_free(e->tok);
    slm_model_close(&e->model);
    slm_xfree(e);
}

void slm_get_info(const slm_engine *e, slm_info *info) {
    memset(info, 0, sizeof *info);
    if (!e || !e->loaded) return;
    const slm_model_config *c = &e->model.cfg;
    info->dim = c->dim;
    info->hidden_dim = c->hidden_dim;
    info->n_layers = c->n_layers;
    info->n_heads = c->n_heads;
    info->n_kv_heads = c->n_kv_heads;
    info->head_dim = c->head_dim;
    info->vocab_size = c->vocab_size;
    info->context_len = c->context_len;
    info->max_prompt_len = e->comp.opt.max_prompt_len;
    info->min_response_len = e->comp.opt.min_response_len;
    info->kv_capacity = e->comp.kv_capacity;
    info->bos_id = slm_tok_bos(e->tok);
    info->eos_id = slm_tok_eos(e->tok);
    uint64_t w = 0;
    for (int i = 0; i < e->model.n_tensors; i++) w += e->model.tensors[i].nbytes;
    info->weight_bytes = (size_t)w;
    info->kv_bytes = (size_t)e->rt.kv_bytes;
    info->arena_bytes = (size_t)e->rt.arena_bytes;
    info->prefill_tasks = slm_largest((slm_compiled *)&e->comp, SLM_PROG_PREFILL)->n_tasks;
    info->generate_tasks = slm_largest((slm_compiled *)&e->comp, SLM_PROG_GENERATE)->n_tasks;
}

long slm_model_meta(const slm_engine *e, const char *key, char *buf, size_t cap) {
    if (!e || !e->loaded || !key || !e->model.gguf) return -1;
    slm_gguf_str v;
    if (!slm_gguf_get_str(e->model.gguf, key, &v)) return -1;
    if (buf && cap) {
        size_t n = v.len < cap - 1 ? (size_t)v.len : cap - 1;
        memcpy(buf, v.s, n);
        buf[n] = 0;
    }
    return (long)v.len;
}

int slm_tokenize(slm_engine *e, const char *text, int add_bos, int32_t *ids, int cap) {
    if (!e || !e->loaded || !text) return -1;
    return slm_tok_encode(e->tok, text, add_bos, 0, ids, cap);
}

const char *slm_token_piece(const slm_engine *e, int prev, int id) {
    if (!e || !e->loaded) return "";
    return slm_tok_decode(e->tok, prev, id);
}

int slm_piece_printable(const char *piece) {
    if (!piece || !piece[0]) return 0;
    if (piece[1] == '\0') {
        unsigned char b = (unsigned char)piece[0];
        /* run.c's safe_printf: a lone byte prints only if printable or space */
        return (b >= 0x20 && b < 0x7f) || b == ' ' || (b >= '\t' && b <= '\r');
    }
    return 1;
}

void slm_reset(slm_engine *e) {
    if (e && e->loaded) slm_rt_reset(&e->rt);
}

int slm_num_stored(const slm_engine *e) { return e && e->loaded ? e->rt.num_stored : 0; }
int slm_capacity(const slm_engine *e) { return e && e->loaded ? e->rt.cap : 0; }

slm_status slm_prefill(slm_engine *e, const int32_t *ids, int n, const float **logits) {
    if (!e || !e->loaded) return SLM_ERR_ARG;
    slm_status s = slm_rt_prefill(&e->rt, ids, n, &e->err);
    if (logits) *logits = s ? NULL : e->rt.logits;
    return s;
}

slm_status slm_decode(slm_engine *e, int32_t id, const float **logits) {
    if (!e || !e->loaded) return SLM_ERR_ARG;
    slm_status s = slm_rt_decode(&e->rt, id, &e->err);
    if (logits) *logits = s ? NULL : e->rt.logits;
    return s;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

slm_status slm_generate(slm_engine *e, const char *prompt, int n_generate, const slm_sampling *sp,
                        int ignore_eos, slm_piece_cb cb, void *ud, slm_gen_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!e || !e->loaded) return SLM_ERR_ARG;
    if (!prompt) prompt = "";
    slm_sampling greedy = {0};
    if (!sp) sp = &greedy;
    const int T = slm_largest(&e->comp, SLM_PROG_PREFILL)->rows;
    /* encode once to count, then into a buffer of that size */
    int n = slm_tok_encode(e->tok, prompt, 1, 0, NULL, 0);
    if (n < 0) return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory encoding the prompt");
    if (n > T)
        return slm_errf(&e->err, SLM_ERR_CAPACITY,
                        "prompt is %d tokens but max_prompt_len is %d: raise --max-prompt-len (up to the "
                        "context length %d)", n, T, e->model.cfg.context_len);
    int32_t *ids = slm_malloc((size_t)n * sizeof(int32_t));
    if (!ids) return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
    slm_tok_encode(e->tok, prompt, 1, 0, ids, n);
    slm_status s = SLM_OK;
    int stop = 0;
    for (int i = 1; i < n && !stop; i++)
        if (cb) stop = cb(ud, ids[i], slm_tok_decode(e->tok, ids[i - 1], ids[i]), 1);
    if (stats) stats->n_prompt = n;

    slm_rt_reset(&e->rt);
    const int bos = slm_tok_bos(e->tok), eos = slm_tok_eos(e->tok);
    const int V = e->model.cfg.vocab_size;
    uint64_t rng = sp->seed ? sp->seed : 0x5eed5eedull;
    double t0 = now_ms();
    if (!stop) s = slm_rt_prefill(&e->rt, ids, n, &e->err);
    double t1 = now_ms();
    if (stats) stats->prefill_ms = t1 - t0;
    int prev = ids[n - 1];
    slm_xfree(ids);
    for (int g = 0; g < n_generate && !s && !stop; g++) {
        if (g > 0 && (s = slm_rt_decode(&e->rt, prev, &e->err))) break;
        int next = slm_sample(e->rt.logits, V, sp, &rng, e->sample_scratch);
        if (!ignore_eos && (next == eos || next == bos)) break;
        if (stats) stats->n_generated++;
        if (cb) stop = cb(ud, next, slm_tok_decode(e->tok, prev, next), 0);
        prev = next;
    }
    if (stats) stats->decode_ms = now_ms() - t1;
    return s;
}

slm_status slm_dump(slm_engine *e, const char *what, void *file) {
    FILE *f = file;
    if (!e || !e->loaded) return SLM_ERR_ARG;
    if (!strcmp(what, "ir")) {
        slm_graph_dump(&e->comp.stateful, f);
    } else if (!strcmp(what, "ir-lowered")) {
        for (int i = 0; i < e->comp.n_progs; i++) slm_graph_dump(&e->comp.progs[i].graph, f);
    } else if (!strcmp(what, "tasks")) {
        for (int i = 0; i < e->comp.n_progs; i++) slm_program_dump_tasks(&e->comp.progs[i], f);
    } else if (!strcmp(what, "io")) {
        for (int i = 0; i < e->comp.n_progs; i++) slm_program_dump_io(&e->comp.progs[i], f);
    } else {
        return slm_errf(&e->err, SLM_ERR_ARG, "unknown dump '%s' (ir, ir-lowered, tasks, io)", what);
    }
    return SLM_OK;
}
