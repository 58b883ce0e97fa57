/* The keys of a small llama GGUF a test writes (test_dtype_quants,
 * test_quantize): sizes as given, RoPE base 10000, RMS epsilon 1e-5. */
#ifndef SLM_T_GGUF_LLAMA_H
#define SLM_T_GGUF_LLAMA_H

#include "format/gguf.h"

static inline void t_gguf_llama_keys(slm_gguf_writer *w, int dim, int hid, int layers, int heads, int kv_heads, int ctx) {
    slm_gguf_set_str(w, "general.architecture", "llama");
    slm_gguf_set_u32(w, "llama.embedding_length", (uint32_t)dim);
    slm_gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)hid);
    slm_gguf_set_u32(w, "llama.block_count", (uint32_t)layers);
    slm_gguf_set_u32(w, "llama.attention.head_count", (uint32_t)heads);
    slm_gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)kv_heads);
    slm_gguf_set_u32(w, "llama.context_length", (uint32_t)ctx);
    slm_gguf_set_f32(w, "llama.rope.freq_base", 10000.0f);
    slm_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
}

#endif
