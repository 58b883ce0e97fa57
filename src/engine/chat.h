/* engine/chat — conversations on the KV cache, shared by `staticlm chat`
 * and `staticlm serve`.
 *
 * A conversation keeps the text its KV rows stand for. Each turn renders the
 * whole history with the chat template; when that text starts with the text
 * already in the KV, only the rest is tokenized and prefilled (in chunks of at
 * most max_prompt_len) onto the stored rows. Otherwise (a template that
 * rewrites earlier turns, or after /load) the KV is reset and the whole
 * history is prefilled. When the history does not fit the KV capacity, the
 * overflow policy applies: "truncate" drops the oldest turns (keeping the
 * system prompt) and re-prefills; "error" refuses the turn, naming the
 * tokens needed and the capacity. Built on the public API, with the
 * engine's tokenizer (engine/engine.h) for text/chat_tok.h.
 */
#ifndef SLM_CHAT_H
#define SLM_CHAT_H

#include <stdint.h>

#include "common/common.h"
#include "text/chat_template.h"
#include "text/reasoning.h"
#include "text/toolcall.h"
#include "staticlm.h"

/* ---- template choice ------------------------------------------------------ */

/* Open the chat template: `override` is a built-in name (chatml, llama2,
 * zephyr, llama3) or a file; NULL = the model's tokenizer.chat_template, or
 * ChatML when it has none. A template that fails to load or parse falls back
 * to ChatML; `note` (if non-NULL) then says why ("warning: ..."), and is
 * otherwise set to a description ("model's chat template"). Never NULL
 * unless out of memory. */
slm_tmpl *slm_chat_template_open(slm_engine *e, const char *override, char *note, size_t notecap);
/* What --reasoning-format auto means for e with tm (slm_reason_detect on
 * the vocabulary and the template's source): SLM_REASON_NONE, _DEEPSEEK or
 * _HARMONY. */
int slm_chat_reasoning_auto(const slm_engine *e, const slm_tmpl *tm);
/* The tool call format of e with tm (slm_tool_detect on the vocabulary and
 * the template's source): SLM_TOOL_NONE when it shows none. */
int slm_chat_tool_auto(const slm_engine *e, const slm_tmpl *tm);

/* ---- conversations ------------------------------------------------------- */

typedef struct slm_chat_cfg {
    slm_overflow on_overflow; /* applied to whole messages before a turn */
    slm_sampling samp;
    int n_predict;      /* most tokens per reply (0 = until EOS or capacity) */
    int reserve;        /* KV rows that must stay free for the reply when a
                           turn starts (0 = min(n_predict, min_response_len), at least 1) */
    int reasoning;      /* SLM_REASON_* (text/reasoning.h): how a reply splits into
                           reasoning and answer; AUTO = slm_chat_reasoning_auto */
    const char *const *kwargs; /* [n_kwargs] JSON objects for the template
                           (slm_tmpl_vars.kwargs); the caller's, outliving the chat */
    int n_kwargs;
    /* Tools (text/toolcall.h; the caller's, outliving the chat): an OpenAI
     * tools array (JSON text) the template renders as its variable tools;
     * NULL: none. tool_choice SLM_TOOL_CHOICE_*: AUTO, each reply's calls
     * are parsed in the model's format (slm_chat_tool_auto); NONE, the tools
     * are rendered and replies not parsed; REQUIRED / NAMED, the reply to
     * each user message is calls to tool_fns[0..n_tool_fns) (slm_tools_parse)
     * under a grammar, and the replies after tool results are AUTO's.
     * one_tool_call: a reply's calls after its first are dropped (the
     * grammar allows one): OpenAI's parallel_tool_calls false. */
    const char *tools;
    int tool_choice;
    const slm_tool_fn *tool_fns;
    int n_tool_fns;
    int one_tool_call;
} slm_chat_cfg;

typedef struct slm_chat_stats {
    int turn;           /* 1-based */
    int kept;           /* KV rows reused from earlier turns */
    int prefilled;      /* tokens prefilled this turn (cached ones included) */
    int cached;         /* of those, restored from the prefix cache */
    int n_stored;       /* KV rows after the prefill */
    int n_generated;
    int dropped;        /* messages dropped by the truncate policy */
    int full;           /* 1: the whole history was (re)prefilled */
    int cut;            /* 1: the reply stopped at the KV capacity */
    int n_calls;        /* tool calls the reply made (slm_chat_calls) */
    double ttft_ms, prefill_ms, decode_ms;
} slm_chat_stats;

typedef struct slm_chat slm_chat;

/* The chat owns neither e nor tm; both must outlive it. It takes a session
 * (a KV slot) of e: NULL when none is free or out of memory. */
slm_chat *slm_chat_new(slm_engine *e, const slm_tmpl *tm, const slm_chat_cfg *cfg);
void slm_chat_free(slm_chat *c);
/* Its session (statistics). */
slm_session *slm_chat_session(slm_chat *c);

/* Append a message without running anything (system prompt, /load). */
int slm_chat_add(slm_chat *c, const char *role, const char *content);
/* ... with every field of m copied (tool_calls, tool_call_id, name). */
int slm_chat_add_msg(slm_chat *c, const slm_chat_msg *m);
/* A tool's result: a message of role "tool" answering the call call_id of
 * function name (either may be NULL), for the template's tool role. */
int slm_chat_add_tool(slm_chat *c, const char *call_id, const char *name, const char *content);
/* ... with the reasoning before it (NULL: none; the template decides what
 * becomes of message.reasoning_content). */
int slm_chat_add_ex(slm_chat *c, const char *role, const char *content, const char *reasoning);
/* The reasoning format in use (AUTO resolved). */
int slm_chat_reasoning(const slm_chat *c);
/* Where the reply's text goes, split (slm_reason_out: reasoning or answer),
 * as it is generated; NULL: nowhere. The answer is stored as the assistant
 * message's content, the reasoning as its reasoning_content (format none:
 * the whole reply is content, as generated). */
void slm_chat_on_text(slm_chat *c, slm_reason_out fn, void *ud);
/* Each turn's rendered prompt (the whole history the KV is to stand for)
 * and the grammar of a forced reply (NULL: none), before the prefill. */
typedef void (*slm_chat_prompt_fn)(void *ud, const char *prompt, const char *grammar);
void slm_chat_on_prompt(slm_chat *c, slm_chat_prompt_fn fn, void *ud);
/* The tool call format replies are parsed in (SLM_TOOL_NONE: no tools, or
 * tool_choice none), and the calls of the last reply [slm_chat_n_calls]
 * (ids unique within the chat), valid until the next turn or clear. The
 * assistant message holds them as its tool_calls (slm_tool_calls_json);
 * the answer text apart from them is its content. */
int slm_chat_tool_format(const slm_chat *c);
int slm_chat_n_calls(const slm_chat *c);
const slm_tool_call *slm_chat_calls(const slm_chat *c);
/* Forget the conversation (keep_system: keep a leading system message) and
 * reset the KV cache. */
void slm_chat_clear(slm_chat *c, int keep_system);
int slm_chat_count(const slm_chat *c);
const slm_chat_msg *slm_chat_messages(const slm_chat *c);

/* Run one turn: add the user message, prefill what is new, generate the
 * reply (cb gets each piece; return non-zero to stop) and add it. On an
 * error the user message is removed again and err says why; SLM_ERR_CAPACITY
 * when the history does not fit (error policy, or a message too long even
 * alone). Notes (truncation) go to `note` when non-NULL. user NULL: reply
 * to the history as it is (after the tool messages that answer the last
 * reply's calls); SLM_ERR_ARG when it ends with the assistant's message. */
slm_status slm_chat_turn(slm_chat *c, const char *user, slm_piece_cb cb, void *ud, slm_chat_stats *st,
                         slm_err *err, char *note, size_t notecap);

/* Prefill the history (if needed) and time the first token of the next
 * reply for `user`, once keeping the KV and once re-prefilling everything.
 * For `staticlm chat --bench`: leaves the conversation unchanged. */
slm_status slm_chat_bench_ttft(slm_chat *c, const char *user, int reps, double *kept_ms, double *full_ms,
                               int *n_new, int *n_full, slm_err *err);

#endif
