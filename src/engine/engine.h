/* engine/engine.h — what engine/ offers the code above it in this tree
 * (engine/chat.c, server/) beyond the public API (include/staticlm.h):
 * the engine's internal objects, for the layers below that take them. */
#ifndef SLM_ENGINE_H
#define SLM_ENGINE_H

#include "text/tokenizer.h"
#include "staticlm.h"

/* The tokenizer of a loaded engine (for slm_chat_tok_new, text/chat_tok.h),
 * valid until the engine is freed; NULL when e is NULL or not loaded. */
const slm_tokenizer *slm_engine_tokenizer(const slm_engine *e);

#endif
