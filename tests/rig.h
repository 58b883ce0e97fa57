/* A model opened, compiled and given a runtime through the internal API,
 * for tests that drive the runtime directly. Include after t.h. */
#ifndef SLM_TEST_RIG_H
#define SLM_TEST_RIG_H

#include "blob/blob.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "runtime/runtime.h"
#include "text/tokenizer.h"

typedef struct rig {
    slm_model_file m;
    slm_compiled c;
    slm_runtime rt;
    int ok;
} rig;

/* Open path (repacking its weights as the engine does), compile with o,
 * start a one-thread runtime. 1 on success. */
static inline int rig_open_opts(rig *r, const char *path, slm_compile_options o) {
    memset(r, 0, sizeof *r);
    slm_err err = {0};
    if (slm_model_open(&r->m, path, &err) || slm_model_repack(&r->m, &err) || slm_compile(&r->c, &r->m, &o, &err) ||
        slm_rt_init(&r->rt, &r->c, r->m.map.data, 1, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        slm_compiled_free(&r->c);
        slm_model_close(&r->m);
        return 0;
    }
    return r->ok = 1;
}

static inline slm_compile_options rig_opts(int mpl, int mrl) {
    slm_compile_options o;
    memset(&o, 0, sizeof o);
    o.max_prompt_len = mpl;
    o.min_response_len = mrl;
    return o;
}

static inline int rig_open(rig *r, const char *path, int mpl, int mrl) {
    return rig_open_opts(r, path, rig_opts(mpl, mrl));
}

static inline void rig_close(rig *r) {
    if (r->ok) slm_rt_free(&r->rt);
    slm_compiled_free(&r->c);
    slm_model_close(&r->m);
    r->ok = 0;
}

/* The rig's programs and weights as a blob at path (with the llama2.c
 * tokenizer tok_path of vocab tokens), opened again and run beside the rig:
 * a prefill of ids[0..prefill) then decode steps up to ids[n - 1], the
 * logits bit for bit each step, and the config, KV type and RoPE tables'
 * layout as compiled (CHECKs naming `what`). 1 when the blob opened; the
 * file stays for the caller. */
static inline int rig_blob_trip(rig *r, const char *what, const char *tok_path, int vocab, const char *path, const int32_t *ids,
                                int prefill, int n) {
    slm_err err = {0};
    slm_tokenizer *tok = NULL, *tok2 = NULL;
    slm_blob_ident id;
    memset(&id, 0, sizeof id);
    slm_blob_ident_seal(&id);
    slm_blob b;
    slm_compiled c2;
    memset(&b, 0, sizeof b);
    memset(&c2, 0, sizeof c2);
    int ok = slm_tok_load_llama2c(&tok, tok_path, vocab, &err) == SLM_OK &&
             slm_blob_write(path, &r->c, &r->m, tok, &id, NULL, NULL, &err) == SLM_OK &&
             slm_blob_open(&b, path, 0, &c2, &tok2, &err) == SLM_OK;
    CHECKF(ok, "%s: blob: %s", what, err.msg);
    if (ok) {
        CHECKF(!memcmp(&c2.cfg, &r->c.cfg, sizeof c2.cfg) && c2.opt.kv_type == r->c.opt.kv_type &&
                   c2.consts.rope_pairs_swa == r->c.consts.rope_pairs_swa,
               "%s: the blob's config differs from the compiled one", what);
        slm_runtime rt2;
        if (slm_rt_init(&rt2, &c2, b.weights, 1, &err) == SLM_OK) {
            int same = slm_rt_prefill(&r->rt, ids, prefill, &err) == SLM_OK && slm_rt_prefill(&rt2, ids, prefill, &err) == SLM_OK;
            for (int p = prefill; same && p <= n; p++) {
                same = !memcmp(r->rt.logits, rt2.logits, sizeof(float) * (size_t)vocab);
                if (same && p < n) same = !slm_rt_decode(&r->rt, ids[p], &err) && !slm_rt_decode(&rt2, ids[p], &err);
            }
            CHECKF(same, "%s: the blob's logits differ from the model file's", what);
            slm_rt_free(&rt2);
        } else {
            CHECKF(0, "%s: runtime on the blob: %s", what, err.msg);
        }
        slm_blob_close(&b);
    }
    slm_compiled_free(&c2);
    slm_tok_free(tok);
    slm_tok_free(tok2);
    return ok;
}

#endif
