/* text/chat_tok — tokenizing rendered conversations, shared by
 * `staticlm chat` (engine/chat.c), `staticlm serve` (server/) and the
 * sessions' text feeds (engine/engine.c: SLM_FEED_SPECIAL, continuations).
 *
 * Over a slm_tokenizer: the text forms of BOS / EOS and a piece -> id map.
 * BOS / EOS text inside a rendering becomes those ids (a leading BOS text
 * becomes the BOS), and continuation text is tokenized without
 * SentencePiece's dummy-prefix space. Bytes that come from messages
 * (slm_tmpl_render_mask's mask) never yield BOS, EOS or another special
 * token. */
#ifndef SLM_CHAT_TOK_H
#define SLM_CHAT_TOK_H

#include <stdint.h>

#include "common/common.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

typedef struct slm_chat_tok slm_chat_tok;
/* tok is not owned and must outlive the result (the map is built on first
 * use); NULL tok: no vocabulary (ids 0, texts ""). NULL when out of memory. */
slm_chat_tok *slm_chat_tok_new(const slm_tokenizer *tok);
void slm_chat_tok_free(slm_chat_tok *t);
const char *slm_chat_tok_bos_text(const slm_chat_tok *t);
const char *slm_chat_tok_eos_text(const slm_chat_tok *t);
/* Tokenize: start = 1 for a whole prompt (BOS first, as slm_tok_encode with
 * add_bos), 0 for text that continues what the KV already holds. Returns the
 * count and a slm_malloc'd array in *ids (slm_xfree), or -1. */
int slm_chat_tokenize(slm_chat_tok *t, const char *text, int start, int32_t **ids);
/* The same; special = 0 leaves BOS/EOS text as text. */
int slm_chat_tokenize_ex(slm_chat_tok *t, const char *text, int start, int special, int32_t **ids);
/* As slm_chat_tokenize; text's bytes marked in plain (slm_chat_render_mask's
 * mask, NULL: none) never yield BOS, EOS or another special token: a
 * message holding "</s>" or "<|im_end|>" is text. */
int slm_chat_tokenize_masked(slm_chat_tok *t, const char *text, const uint8_t *plain, int start, int32_t **ids);
/* Render msgs with template vars for this vocabulary (bos/eos text). slm_xfree. */
char *slm_chat_render(const slm_tmpl *tm, const slm_chat_tok *t, const slm_chat_msg *msgs, int n,
                      int add_generation_prompt, slm_err *err);
/* ... and *mask (slm_xfree; NULL when no byte comes from a message): the
 * bytes derived from messages (slm_tmpl_render_mask), for
 * slm_chat_tokenize_masked. */
char *slm_chat_render_mask(const slm_tmpl *tm, const slm_chat_tok *t, const slm_chat_msg *msgs, int n,
                           int add_generation_prompt, uint8_t **mask, slm_err *err);

#endif
