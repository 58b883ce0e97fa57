/* text/chat_template — a Jinja subset interpreter for chat templates.
 *
 * Renders the `tokenizer.chat_template` of a model (or a named classic form)
 * the way Hugging Face's apply_chat_template does: Jinja2 with trim_blocks and
 * lstrip_blocks, loop controls, and the globals raise_exception, namespace,
 * range and strftime_now. Supported: {{ }}, {% if/elif/else %}, {% for %}
 * (tuple unpacking, `if` filter, else, loop.*), {% set %} (also ns.attr and
 * block form), {% macro %} / call, {% break/continue %}, comments, whitespace
 * control, literals (strings, numbers, lists, dicts), attribute / item /
 * slice access, arithmetic, ~, comparisons, in, and/or/not, a if c else b,
 * tests (defined, none, string, mapping, ...), the common filters and string
 * / dict methods.
 *
 * Templates are untrusted input (GGUF metadata): parsing and rendering never
 * crash; integer arithmetic is checked; memory, output size and nesting
 * depth are bounded; every operation is charged to one budget before it is
 * done (strings and lists by the bytes / elements touched), and a render
 * also stops at a wall-clock limit or when the caller cancels it.
 */
#ifndef SLM_CHAT_TEMPLATE_H
#define SLM_CHAT_TEMPLATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

typedef struct slm_chat_msg {
    const char *role;
    const char *content;
    /* NULL: the message has no such field (undefined in the template); else
     * the reasoning that came before an assistant's answer, as
     * message.reasoning_content (most templates drop it) */
    const char *reasoning_content;
    /* Tool calling, each NULL when the message has no such field (undefined
     * in the template), as Hugging Face's apply_chat_template passes them:
     * tool_calls, a JSON array (text) of {"id", "type": "function",
     * "function": {"name", "arguments"}} that becomes message.tool_calls
     * (an assistant's calls; arguments an object, as the templates expect);
     * tool_call_id and name, a tool message's (role "tool") answer to a
     * call. Their strings are tainted like content. */
    const char *tool_calls;
    const char *tool_call_id;
    const char *name;
} slm_chat_msg;

typedef struct slm_tmpl slm_tmpl;

/* Parse template source. Returns NULL on a syntax error or an unsupported
 * construct, with err (if non-NULL) set: SLM_ERR_FORMAT and a message
 * ("line 3: unsupported tag 'foo'"), or SLM_ERR_NOMEM. */
slm_tmpl *slm_tmpl_parse(const char *src, slm_err *err);
void slm_tmpl_free(slm_tmpl *t);

#define SLM_TMPL_BUDGET (1ull << 28) /* cost units: 32 per expression, 16 per element, 1 per byte */
#define SLM_TMPL_TIME_MS 5000u       /* the render thread's CPU time per render */

/* Variables and limits of one render (all optional: zero = default). */
typedef struct slm_tmpl_vars {
    const char *bos_token; /* default "" */
    const char *eos_token; /* default "" */
    int add_generation_prompt;
    const char *date_string; /* if set: strftime_now returns this (tests) */
    uint64_t budget;         /* cost units; 0 = SLM_TMPL_BUDGET */
    unsigned time_limit_ms;  /* 0 = SLM_TMPL_TIME_MS */
    /* Cancellation, read during the render (every 65536 budget units): a
     * non-zero flag, or cancel_fn(cancel_ud) returning non-zero, stops it with
     * SLM_ERR_CAPACITY "template rendering cancelled" (a server whose client
     * left). The flag may be set from any thread; cancel_fn runs on the
     * rendering thread and may take a lock. */
    const _Atomic int *cancel;
    int (*cancel_fn)(void *cancel_ud);
    void *cancel_ud;
    /* Extra variables (chat_template_kwargs): n_kwargs JSON objects whose
     * members become globals, a later object overriding an earlier one
     * ({"enable_thinking": false}). Their strings are tainted like message
     * content. A malformed one, or one setting messages,
     * add_generation_prompt, bos_token, eos_token, tools or documents, fails
     * the render (SLM_ERR_ARG). */
    const char *const *kwargs;
    int n_kwargs;
    /* NULL: tools is none; else a JSON array (text) of the functions the
     * model may call, [{"type": "function", "function": {"name",
     * "description", "parameters"}}], the variable tools (tainted). A
     * malformed one fails the render (SLM_ERR_ARG). */
    const char *tools;
} slm_tmpl_vars;

/* 1 when json is an object slm_tmpl_vars.kwargs accepts; else 0 with err
 * (if non-NULL) saying why ("chat template kwargs: expected ':' at byte 7"). */
int slm_tmpl_kwargs_check(const char *json, slm_err *err);

/* Render messages. Returns a slm_malloc'd (slm_xfree) NUL-terminated string,
 * or NULL with err (if non-NULL) set: SLM_ERR_ARG "template raised: ..." for
 * raise_exception, SLM_ERR_CAPACITY when a limit is reached, SLM_ERR_FORMAT
 * for an error in the template ("line 4: ..."), SLM_ERR_NOMEM. */
char *slm_tmpl_render(const slm_tmpl *t, const slm_chat_msg *msgs, int n_msgs,
                      const slm_tmpl_vars *vars, slm_err *err);

/* Render as slm_tmpl_render, and say which output bytes derive from the
 * messages' strings (role, content): *mask (slm_malloc'd, at least
 * strlen(result) bytes, 1 = derived from a message) or NULL when none is.
 * Taint is conservative: a byte built by a filter, method, slice or
 * repr from a message string is tainted; concatenation keeps it per byte;
 * template literals, bos_token / eos_token stay clean. Only untainted bytes
 * may be tokenized with special-token parsing (slm_tok_encode_masked). */
char *slm_tmpl_render_mask(const slm_tmpl *t, const slm_chat_msg *msgs, int n_msgs,
                           const slm_tmpl_vars *vars, uint8_t **mask, slm_err *err);

/* The text t was parsed from. */
const char *slm_tmpl_source(const slm_tmpl *t);

/* The source of a built-in template by name: "chatml", "llama2", "zephyr",
 * "llama3"; NULL if unknown. */
const char *slm_tmpl_builtin(const char *name);
/* The names, comma-separated, for messages. */
const char *slm_tmpl_builtin_names(void);

#endif
