/* format/hf.h — what the two halves of the Hugging Face loader share
 * (private to format/hf.c and format/hf_config.c).
 *
 * hf_config.c reads config.json into an slm_model_config plus what only the
 * loader needs (slm_hf_info); hf.c maps the safetensors, names the tensors
 * as GGUF does and converts what must change into its anonymous area.
 */
#ifndef SLM_FORMAT_HF_H
#define SLM_FORMAT_HF_H

#include "format/model.h"

/* What config.json says beyond slm_model_config. */
typedef struct slm_hf_info {
    float *vecs;         /* slm_malloc'd: rope_freqs.weight (c->rope_freqs: head_dim/2 values), or
                            LongRoPE's long then short factors (c->rope_long: rope_dims/2 each) */
    int n_vecs;          /* floats at vecs */
    int norm_plus_one;   /* gemma: RMSNorm gains stored as w, applied as 1 + w */
    int multimodal;      /* gemma3 ConditionalGeneration: text tensors under language_model. prefixes,
                            vision tensors ignored */
    int fused;           /* phi3: self_attn.qkv_proj and mlp.gate_up_proj */
    int vocab_from_embed;/* vocab_size absent (gemma3 text_config): the embedding's rows */
} slm_hf_info;

/* config.json (len bytes; `name` for messages) -> c and *info. On failure
 * info->vecs is NULL. */
slm_status slm_hf_config(slm_model_config *c, slm_hf_info *info, const char *json, size_t len, const char *name,
                         slm_err *err);

/* A string for messages: printable ASCII, at most 40 bytes (then "..."). */
const char *slm_hf_pstr(const char *s, char *buf, size_t cap);

#endif
