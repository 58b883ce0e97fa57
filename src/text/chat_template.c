/* text/chat_template — a Jinja subset interpreter for chat templates (see
 * chat_template.h): the public entry points and the built-in templates.
 * The interpreter itself is split along its seams (jinja_internal.h):
 * jinja_lex.c, jinja_parse.c, jinja_value.c, jinja_eval.c, jinja_filters.c.
 */
#include "text/chat_template.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "text/jinja_internal.h"

/* ---- parsing ---------------------------------------------------------------- */

/* lex + parse; NULL after an error (longjmp lands here, nothing else). */
static node *parse_protected(P *p) {
    if (setjmp(p->jb)) return NULL;
    jx_lex(p, p->src);
    return jp_body(p, NULL, NULL);
}

slm_tmpl *slm_tmpl_parse(const char *src, slm_err *err) {
    slm_errf(err, SLM_OK, "%s", "");
    if (!src) src = "";
    slm_tmpl *t = slm_calloc(1, sizeof *t);
    P *p = slm_calloc(1, sizeof *p);
    if (!t || !p) {
        slm_xfree(t);
        slm_xfree(p);
        slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->ar = &t->ar;
    p->err = err;
    p->src = src;
    t->body = parse_protected(p);
    slm_xfree(p->t);
    slm_xfree(p);
    if (t->body && !(t->src = slm_strdup(src))) {
        t->body = NULL;
        slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    if (!t->body) {
        jv_arena_free(&t->ar);
        slm_xfree(t);
        return NULL;
    }
    return t;
}

void slm_tmpl_free(slm_tmpl *t) {
    if (!t) return;
    jv_arena_free(&t->ar);
    slm_xfree(t->src);
    slm_xfree(t);
}

const char *slm_tmpl_source(const slm_tmpl *t) { return t && t->src ? t->src : ""; }

/* ---- rendering ------------------------------------------------------------ */

char *slm_tmpl_render(const slm_tmpl *t, const slm_chat_msg *msgs, int n_msgs, const slm_tmpl_vars *vars,
                      slm_err *err) {
    return slm_tmpl_render_mask(t, msgs, n_msgs, vars, NULL, err);
}

char *slm_tmpl_render_mask(const slm_tmpl *t, const slm_chat_msg *msgs, int n_msgs, const slm_tmpl_vars *vars,
                           uint8_t **mask, slm_err *err) {
    if (mask) *mask = NULL;
    slm_errf(err, SLM_OK, "%s", "");
    if (!t || n_msgs < 0 || (n_msgs > 0 && !msgs)) {
        slm_errf(err, SLM_ERR_ARG, "bad arguments");
        return NULL;
    }
    R *r = slm_calloc(1, sizeof *r);
    if (!r) {
        slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    r->err = err;
    r->vars = vars;
    r->msgs = msgs;
    r->n_msgs = n_msgs;
    r->tm = t;
    char *out = je_render(r);
    if (out && mask && r->om) {
        /* r->om covers [ocap] >= the text; NULL when nothing was tainted */
        *mask = r->om;
        r->om = NULL;
    }
    slm_xfree(r->om);
    for (int i = 0; i < r->nsaved; i++) {
        slm_xfree(r->saved[i].p);
        slm_xfree(r->saved[i].m);
    }
    jv_arena_free(&r->ar);
    slm_xfree(r);
    return out;
}

/* ---- built-in templates --------------------------------------------------- */

static const struct {
    const char *name, *src;
} builtins[] = {
    {"chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
     "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
     "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
     "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
     "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
     "{% endfor %}"},
    {"zephyr",
     "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + "
     "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
     "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
     "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"},
    {"llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
     "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
     "{% endif %}"},
};

const char *slm_tmpl_builtin(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(builtins[i].name, name)) return builtins[i].src;
    return NULL;
}

const char *slm_tmpl_builtin_names(void) { return "chatml, llama2, zephyr, llama3"; }
