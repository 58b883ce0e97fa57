/* engine/ internals shared by engine.c (loading, the stop set, the KV
 * slots, tokenizing feeds, the raw runtime calls) and session.c (sessions
 * and the generation loop, above engine.c: it calls down, never back).
 * Not part of the public API. */
#ifndef SLM_ENGINE_INTERNAL_H
#define SLM_ENGINE_INTERNAL_H

#include "blob/blob.h"
#include "common/common.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "runtime/prefix_cache.h"
#include "runtime/runtime.h"
#include "text/grammar.h"
#include "text/tokenizer.h"
#include "staticlm.h"

#define SLM_MAX_STOP_IDS 16

struct slm_engine {
    slm_err err;            /* the last error, with its message */
    slm_options opt;
    slm_model_file model;   /* the source model (not from a blob) */
    slm_blob blob;          /* the mapped blob (from_blob) */
    int from_blob;
    slm_model_config cfg;   /* of whichever was loaded */
    const void *weights;    /* what SLM_SPACE_WEIGHTS offsets are relative to */
    slm_tokenizer *tok;
    slm_compiled comp;
    slm_runtime rt;
    int loaded;
    char cache_dir_buf[1024];
    char tok_path_buf[1024];
    char note[SLM_ERRLEN + 2048]; /* what cache mode did */
    slm_engine *draft;      /* speculative decoding: the draft model's engine */
    slm_prefix_cache pc;    /* KV rows of earlier prompts' prefixes */
    int32_t stop_ids[SLM_MAX_STOP_IDS]; /* the stop set: EOS, BOS, EOT, the model's end ids */
    int n_stop_ids;
    int n_slots;            /* sessions at once (--parallel M): slots 0..M-1 are KV regions 0..M-1 */
    int *slot_used;         /* [n_slots] 1 = a session holds that slot's KV region */
    struct slm_session *draft_owner; /* the session that drives the draft */
    struct slm_chat_tok *ctok; /* special-token and continuation tokenizer (lazy) */
    slm_gvocab *gvocab;     /* the vocabulary's texts for grammar masks (grammar.c; at the first grammar) */
    int pooling;            /* the model file's pooling_type (slm_pooling) */
    int add_eos;            /* tokenizer.ggml.add_eos_token of a non-BPE vocabulary (embeddings) */
    struct {                /* llama.cpp's add_bos/add_eos/add_sep of the vocabulary and its separator (-1: none): */
        int add_bos, add_eos, add_sep, sep; /* rerank prompts without a template (embed.c) */
    } sp;
    slm_fim_tokens fim;     /* fill-in-the-middle tokens (fim.c; -1: none) */
    float *cls1_w, *cls1_b, *cls_norm; /* a reranker's dense layer [n_cls1][dim], its bias and norm [n_cls1] (embed.c) */
    int n_cls1;             /* 0: none */
    float *cls_w, *cls_b;   /* its output layer [n_cls][n_cls1 or dim], bias [n_cls]; NULL: the dense layer's values */
    int n_cls;              /* scores (0: not a reranker) */
    int cls_pool;           /* the rows the classifier reads (SLM_POOLING_MEAN, _CLS, _LAST); 0: the arch's */
    struct slm_dense_layer {   /* sentence-transformers' Dense modules after pooling, in order (embed.c): */
        float *w, *b;          /* [out][in], [out] (NULL: no bias) */
        int in, out, act;      /* widths; SLM_DENSE_IDENTITY or _TANH after w x + b */
    } dense[SLM_MAX_DENSE];
    int n_dense;               /* 0: none; the last one's out is dim */
};

/* engine.c: the KV regions sessions hold, and tokenizing their feeds */
int slm_engine_claim_slot(slm_engine *e);
void slm_engine_release_slot(slm_engine *e, int slot);
/* Tokenize text by SLM_FEED_* flags into a slm_malloc'd array; -1 on failure. */
int slm_engine_tokenize(slm_engine *e, const char *text, int flags, int32_t **ids);
/* embed.c: at load, the embedding keys (default pooling, add_eos, an
 * encoder refused) and a reranker's classifier; freed with the engine. */
slm_status slm_engine_embed_init(slm_engine *e, const char *path);
void slm_engine_embed_free(slm_engine *e);
/* embed.c: what a blob with embedding programs keeps of the above (.slm.embed). */
void slm_engine_embed_record(const slm_engine *e, slm_blob_embed *r);
/* fim.c: the FIM tokens, by the GGUF's keys or their texts (at load,
 * before the stop set, which takes pad, rep and sep). */
void slm_engine_fim_detect(slm_engine *e);
/* session.c for embed.c: a session's engine, its error, its runtime
 * (selected on its slot) */
slm_engine *slm_session_engine(slm_session *s);
slm_err *slm_session_err(slm_session *s);
slm_runtime *slm_session_rt(slm_session *s);
/* sampler.c: logits -> the sampling distribution (temperature, top-k,
 * top-p applied; excluded tokens 0), a draw from a distribution, a uniform
 * float in [0, 1) from the generator slm_sample uses. */
void slm_sample_dist(float *logits, int n, const slm_sampling *s, void *scratch);
int slm_sample_from(const float *p, int n, uint64_t *rng);
/* The log-sum-exp of x[0..n) (double), and the n_top largest into top
 * (ids and their log-probabilities x - lse), largest first, ties lower id
 * first. NaN logits count as -inf. */
double slm_logprobs_top(const float *x, int n, int n_top, slm_logprob *top);
float slm_random_f32(uint64_t *rng);

/* gsample.c: sampling under a GBNF grammar (a session's slm_sampling.grammar;
 * tokens: its grammar_tokens).
 * new compiles the text (and prepares e's vocabulary once); sample draws a
 * token from the adjusted logits (modified) that the grammar allows after
 * prev (*tok = -1: the grammar is complete and no stop token may end it;
 * *masked += 1 when the whole vocabulary had to be masked);
 * accept advances the grammar by a token sampled so. */
typedef struct slm_gsamp slm_gsamp;
slm_status slm_gsamp_new(slm_engine *e, const char *text, const char *tokens, slm_gsamp **out, slm_err *err);
void slm_gsamp_free(slm_gsamp *gs);
void slm_gsamp_reset(slm_gsamp *gs);
slm_status slm_gsamp_sample(slm_gsamp *gs, const slm_engine *e, float *logits, const slm_sampling *s, uint64_t *rng,
                            void *scratch, int prev, int ignore_eos, int *tok, int *masked, slm_err *err);
slm_status slm_gsamp_accept(slm_gsamp *gs, const slm_engine *e, int prev, int id, slm_err *err);

#endif
