/* text/reasoning — thinking apart from the answer, streaming (reasoning.h).
 *
 * A small state machine over the bytes. Each state has the tags it knows
 * and a destination for other bytes; a byte that may begin one of its tags
 * waits in hold[] until the tag is complete (the state changes, the tag is
 * dropped) or cannot be (the held bytes go on to the destination).
 */
#include "text/reasoning.h"

#include <string.h>

/* states: deepseek's, harmony's, and none's single one */
enum { D_START, D_THINK, D_ANSWER, H_BODY, H_ROLE, H_CHAN, N_ALL, G_BODY, G_CHAN, G_THINK };
/* tags */
enum { T_THINK, T_ENDTHINK, T_CHANNEL, T_START, T_END, T_RETURN, T_CALL, T_MESSAGE, T_CONSTRAIN, T_G4OPEN, T_G4CLOSE,
       T_NONE = -1 };
static const char *const tag_text[] = {"<think>", "</think>", "<|channel|>", "<|start|>", "<|end|>", "<|return|>",
                                       "<|call|>", "<|message|>", "<|constrain|>", "<|channel>", "<channel|>"};
/* where a state's other bytes go: a kind, or dropped (the role after
 * <|start|>), or into chan[] (the channel name) */
enum { TO_DROP = -1, TO_CHAN = -2 };

static const int *state_tags(int state) {
    static const int d_start[] = {T_THINK, T_NONE}, d_think[] = {T_ENDTHINK, T_NONE}, none[] = {T_NONE};
    static const int h_body[] = {T_CHANNEL, T_START, T_END, T_RETURN, T_CALL, T_MESSAGE, T_NONE};
    static const int h_role[] = {T_CHANNEL, T_MESSAGE, T_NONE}, h_chan[] = {T_MESSAGE, T_CONSTRAIN, T_NONE};
    static const int g_body[] = {T_G4OPEN, T_G4CLOSE, T_NONE}, g_think[] = {T_G4CLOSE, T_NONE};
    switch (state) {
    case G_BODY: return g_body;
    case G_CHAN:
    case G_THINK: return g_think;
    case D_START: return d_start;
    case D_THINK: return d_think;
    case H_BODY: return h_body;
    case H_ROLE: return h_role;
    case H_CHAN: return h_chan;
    default: return none;
    }
}

static int dest(const slm_reason *r) {
    switch (r->state) {
    case D_THINK: return SLM_REASON_THINK;
    case H_BODY: return r->kind;
    case H_ROLE: return TO_DROP;
    case H_CHAN:
    case G_CHAN: return TO_CHAN;
    case G_THINK: return SLM_REASON_THINK;
    default: return SLM_REASON_ANSWER;
    }
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int slm_reason_format_parse(const char *s) {
    static const char *const names[] = {"none", "deepseek", "harmony", "auto", "gemma4"};
    for (int i = 0; s && i < 5; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *slm_reason_format_name(int fmt) {
    static const char *const names[] = {"none", "deepseek", "harmony", "auto", "gemma4"};
    return fmt >= 0 && fmt < 5 ? names[fmt] : "?";
}

int slm_reason_detect(const slm_tokenizer *tok, const char *tmpl_src) {
    int channel = 0, think = 0, endthink = 0, g4 = 0, g4end = 0;
    const int n = tok ? slm_tok_vocab_size(tok) : 0;
    for (int id = 0; id < n; id++) {
        const char *s = slm_tok_str(tok, id);
        if (!s || s[0] != '<') continue;
        channel |= !strcmp(s, "<|channel|>");
        think |= !strcmp(s, "<think>");
        endthink |= !strcmp(s, "</think>");
        g4 |= !strcmp(s, "<|channel>");
        g4end |= !strcmp(s, "<channel|>");
    }
    g4 &= g4end;
    if (tmpl_src) {
        channel |= strstr(tmpl_src, "<|channel|>") != NULL;
        g4 |= strstr(tmpl_src, "<|channel>thought") != NULL;
        const int t = strstr(tmpl_src, "<think>") || strstr(tmpl_src, "</think>");
        think |= t;
        endthink |= t;
    }
    if (g4) return SLM_REASON_GEMMA4;
    if (channel) return SLM_REASON_HARMONY;
    return think && endthink ? SLM_REASON_DEEPSEEK : SLM_REASON_NONE;
}

/* ---- output: white space trimmed where the format says ------------------- */

static void put(slm_reason *r, int kind, const char *s, size_t n) {
    if (r->lead[kind]) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return;
        r->lead[kind] = 0;
        if (r->state == D_START) r->state = D_ANSWER; /* the reply does not think */
    }
    if (kind == SLM_REASON_ANSWER || r->fmt == SLM_REASON_NONE) {
        r->out(r->ud, kind, s, n);
        return;
    }
    size_t body = n; /* reasoning: its trailing white space waits in ws[] */
    while (body && is_ws(s[body - 1])) body--;
    if (body) {
        if (r->nws) r->out(r->ud, kind, r->ws, r->nws);
        r->nws = 0;
        r->out(r->ud, kind, s, body);
        r->think_any = 1;
    }
    s += body;
    n -= body;
    /* a long run: all but its last sizeof ws bytes go out, wherever the pieces were cut */
    const size_t excess = r->nws + n > sizeof r->ws ? r->nws + n - sizeof r->ws : 0;
    const size_t from_ws = excess < r->nws ? excess : r->nws;
    if (from_ws) {
        r->out(r->ud, kind, r->ws, from_ws);
        memmove(r->ws, r->ws + from_ws, r->nws - from_ws);
        r->nws -= from_ws;
    }
    if (excess > from_ws) {
        r->out(r->ud, kind, s, excess - from_ws);
        s += excess - from_ws;
        n -= excess - from_ws;
    }
    memcpy(r->ws + r->nws, s, n);
    r->nws += n;
}

static void route(slm_reason *r, const char *s, size_t n) {
    int d = dest(r);
    if (d == TO_DROP) return;
    if (d == TO_CHAN && r->state == G_CHAN) { /* gemma4: the channel's name ends at its newline */
        const char *nl = memchr(s, '\n', n);
        const size_t k = nl ? (size_t)(nl - s) : n;
        size_t c = sizeof r->chan - 1 - r->nchan;
        if (c > k) c = k;
        memcpy(r->chan + r->nchan, s, c);
        r->nchan += c;
        r->chan[r->nchan] = 0;
        if (!nl) return;
        r->state = G_THINK; /* every channel is the model's thinking ("thought") */
        if (n > k + 1) route(r, nl + 1, n - k - 1);
        return;
    }
    if (d == TO_CHAN) {
        size_t k = sizeof r->chan - 1 - r->nchan;
        if (k > n) k = n;
        memcpy(r->chan + r->nchan, s, k);
        r->nchan += k;
        r->chan[r->nchan] = 0;
        return;
    }
    put(r, d, s, n);
}

/* A reasoning section ended: its trailing white space goes, and the next
 * one (harmony) starts after a blank line. */
static void end_think(slm_reason *r) {
    r->nws = 0;
    if (r->think_any) {
        memcpy(r->ws, "\n\n", 2);
        r->nws = 2;
    }
    r->lead[SLM_REASON_THINK] = 1;
}

static int channel_kind(const char *name) {
    return !strncmp(name, "analysis", 8) || !strncmp(name, "commentary", 10) ? SLM_REASON_THINK : SLM_REASON_ANSWER;
}

static void on_tag(slm_reason *r, int t) {
    if (r->state == G_BODY || r->state == G_CHAN || r->state == G_THINK) {
        if (t == T_G4OPEN) { /* a channel: its name, then the thinking */
            r->state = G_CHAN;
            r->nchan = 0;
            r->chan[0] = 0;
        } else { /* <channel|>: the thinking ends (a stray one in the answer is dropped) */
            if (r->state != G_BODY) end_think(r);
            r->state = G_BODY;
        }
        return;
    }
    if (r->state == D_START) {
        r->state = D_THINK;
        return;
    }
    if (r->state == D_THINK) {
        end_think(r);
        r->state = D_ANSWER;
        return;
    }
    if (r->state == H_BODY && r->kind == SLM_REASON_THINK && t != T_MESSAGE) end_think(r);
    if (t == T_CHANNEL) {
        r->state = H_CHAN;
        r->nchan = 0;
        r->chan[0] = 0;
    } else if (t == T_START) {
        r->state = H_ROLE;
    } else if (t == T_MESSAGE) {
        if (r->state == H_CHAN) r->kind = channel_kind(r->chan);
        if (r->state == H_ROLE) r->kind = SLM_REASON_ANSWER;
        r->state = H_BODY;
    } else if (t != T_CONSTRAIN) { /* <|end|>, <|return|>, <|call|>: text outside a message is content */
        r->kind = SLM_REASON_ANSWER;
        r->state = H_BODY;
    }
}

/* The tag hold[] is, T_NONE - 1 when it is only a tag's beginning, T_NONE
 * when it cannot become one. */
static int match(const slm_reason *r) {
    int prefix = 0;
    for (const int *t = state_tags(r->state); *t != T_NONE; t++) {
        size_t len = strlen(tag_text[*t]);
        if (r->nhold <= len && !memcmp(r->hold, tag_text[*t], r->nhold)) {
            if (r->nhold == len) return *t;
            prefix = 1;
        }
    }
    return prefix ? T_NONE - 1 : T_NONE;
}

/* After a byte joined hold[]: act on a whole tag, or let go of the bytes
 * that can no longer begin one. */
static void settle(slm_reason *r) {
    while (r->nhold) {
        int t = match(r);
        if (t >= 0) {
            r->nhold = 0;
            on_tag(r, t);
            return;
        }
        if (t != T_NONE) return;
        size_t k = 1;
        while (k < r->nhold && r->hold[k] != '<') k++;
        route(r, r->hold, k);
        memmove(r->hold, r->hold + k, r->nhold - k);
        r->nhold -= k;
    }
}

void slm_reason_feed(slm_reason *r, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (r->nhold == 0 && s[i] != '<') {
            size_t j = i;
            while (j < n && s[j] != '<') j++;
            route(r, s + i, j - i);
            i = j;
            continue;
        }
        r->hold[r->nhold++] = s[i++];
        settle(r);
    }
}

void slm_reason_finish(slm_reason *r) {
    if (r->nhold) route(r, r->hold, r->nhold);
    r->nhold = 0;
    r->nws = 0;
}

/* ---- start ------------------------------------------------------------------ */

/* Whether prompt ends with tag, white space after it allowed. */
static int ends_with_tag(const char *prompt, const char *tag, size_t *at) {
    size_t n = prompt ? strlen(prompt) : 0, tl = strlen(tag);
    while (n && is_ws(prompt[n - 1])) n--;
    if (n < tl || memcmp(prompt + n - tl, tag, tl)) return 0;
    if (at) *at = n - tl;
    return 1;
}

/* harmony: a prompt that already opened a message (...<|channel|>analysis<|message|>) */
static void harmony_start(slm_reason *r, const char *prompt) {
    size_t at;
    if (!ends_with_tag(prompt, "<|message|>", &at)) return;
    const char *c = NULL;
    for (const char *p = prompt; (p = strstr(p, "<|channel|>")) && (size_t)(p - prompt) < at; p++) c = p;
    if (!c) return;
    c += strlen("<|channel|>");
    if (memchr(c, '<', (size_t)(prompt + at - c))) return;
    size_t nl = (size_t)(prompt + at - c) < sizeof r->chan - 1 ? (size_t)(prompt + at - c) : sizeof r->chan - 1;
    memcpy(r->chan, c, nl);
    r->chan[nl] = 0;
    r->kind = channel_kind(r->chan);
}

void slm_reason_init(slm_reason *r, int fmt, const char *prompt, slm_reason_out out, void *ud) {
    memset(r, 0, sizeof *r);
    r->fmt = fmt == SLM_REASON_DEEPSEEK || fmt == SLM_REASON_HARMONY || fmt == SLM_REASON_GEMMA4 ? fmt : SLM_REASON_NONE;
    r->out = out;
    r->ud = ud;
    r->kind = SLM_REASON_ANSWER;
    r->state = N_ALL;
    if (r->fmt == SLM_REASON_NONE) return;
    r->lead[0] = r->lead[1] = 1;
    if (r->fmt == SLM_REASON_DEEPSEEK) {
        r->state = ends_with_tag(prompt, "<think>", NULL) ? D_THINK : D_START;
    } else if (r->fmt == SLM_REASON_GEMMA4) { /* a prompt that opened the thought channel (and did not close it) */
        r->state = ends_with_tag(prompt, "<|channel>thought", NULL) ? G_THINK : G_BODY;
    } else {
        r->state = H_BODY;
        harmony_start(r, prompt);
    }
}
