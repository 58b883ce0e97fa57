/* text/reasoning — a model's thinking apart from its answer, as the text
 * streams out (llama.cpp's --reasoning-format).
 *
 * Generated text is fed in pieces as they come; each byte goes to one of two
 * destinations, SLM_REASON_THINK (reasoning) or SLM_REASON_ANSWER (content),
 * through the caller's callback. Only bytes that may still begin a tag (a
 * "<thi" waiting for its "nk>") are held back; finish releases them where
 * the text was going. The formats:
 *   none      everything is content (the text as generated);
 *   deepseek  <think>...</think> at the start of the reply (Qwen3, SmolLM3,
 *             DeepSeek-R1 distills, EXAONE 4). A prompt that ends in
 *             <think> (and white space) starts inside the thinking; a reply
 *             that ends before </think> is all reasoning;
 *   harmony   gpt-oss: <|channel|>NAME<|message|>TEXT<|end|>, messages after
 *             <|start|>assistant; channels analysis and commentary are
 *             reasoning, final (and text outside any message) content. The
 *             markers themselves are dropped;
 *   gemma4    Gemma 4: <|channel>thought\nTEXT<channel|> is reasoning
 *             (any channel name; it ends at its newline), the rest content;
 *             a stray <channel|> is dropped. A prompt that ends in
 *             <|channel>thought starts inside the thinking; one that ends
 *             in the empty <|channel>thought\n<channel|> (thinking off)
 *             does not.
 * In deepseek, harmony and gemma4, reasoning loses its leading and trailing white
 * space (held until more reasoning follows), separate reasoning messages
 * are joined by a blank line, and the answer loses its leading white space.
 * Fixed size: no allocation.
 */
#ifndef SLM_REASONING_H
#define SLM_REASONING_H

#include <stddef.h>

#include "text/tokenizer.h"

enum { SLM_REASON_NONE, SLM_REASON_DEEPSEEK, SLM_REASON_HARMONY, SLM_REASON_AUTO, SLM_REASON_GEMMA4 };
enum { SLM_REASON_ANSWER = 0, SLM_REASON_THINK = 1 };

#define SLM_REASON_FORMATS "none, deepseek, harmony, gemma4, auto"

/* "none", "deepseek", "harmony", "auto", "gemma4" -> SLM_REASON_*; -1 for anything else. */
int slm_reason_format_parse(const char *s);
const char *slm_reason_format_name(int fmt);
/* What auto means for a model: gemma4 when its vocabulary has <|channel> and
 * <channel|> or its template writes <|channel>thought; harmony when its vocabulary or template has
 * <|channel|>, deepseek when the vocabulary has <think> and </think> or the
 * template mentions <think> or </think>, else none. tok and tmpl_src may be
 * NULL. */
int slm_reason_detect(const slm_tokenizer *tok, const char *tmpl_src);

/* kind: SLM_REASON_THINK or SLM_REASON_ANSWER; s[0..n), n > 0. */
typedef void (*slm_reason_out)(void *ud, int kind, const char *s, size_t n);

typedef struct slm_reason {
    int fmt;            /* SLM_REASON_NONE, _DEEPSEEK, _HARMONY or _GEMMA4 */
    int state;          /* where the parser is (reasoning.c) */
    int kind;           /* harmony: where the current message goes */
    char hold[16];      /* [nhold] bytes that may begin a tag */
    size_t nhold;
    char chan[16];      /* harmony: the channel name being read [nchan] */
    size_t nchan;
    char ws[64];        /* [nws] white space at the end of the reasoning so far */
    size_t nws;
    int lead[2];        /* per kind: drop leading white space */
    int think_any;      /* reasoning has been emitted */
    slm_reason_out out;
    void *ud;
} slm_reason;

/* fmt: SLM_REASON_NONE, _DEEPSEEK, _HARMONY or _GEMMA4 (resolve auto first);
 * prompt: the rendered prompt the reply continues (NULL: none), which tells
 * whether the reply starts inside the thinking. */
void slm_reason_init(slm_reason *r, int fmt, const char *prompt, slm_reason_out out, void *ud);
void slm_reason_feed(slm_reason *r, const char *s, size_t n);
/* End of the reply: release what is held. */
void slm_reason_finish(slm_reason *r);

#endif
