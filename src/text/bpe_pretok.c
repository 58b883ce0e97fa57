/* Pre-tokenizers of the byte-level BPE tokenizer: the regex lists of the
 * named GGUF pre-tokenizers (tokenizer.ggml.pre), compiling regexes with
 * PCRE2, and splitting text into pre-tokens with them.
 *
 * Facts taken from llama.cpp (src/llama-vocab.cpp, src/unicode.cpp; MIT):
 * the regex list per tokenizer.ggml.pre, and which pre types ignore merges
 * (a pre-token that is itself a token is emitted whole) and add BOS.
 *
 * Regexes run through PCRE2 in UTF + UCP mode (true Unicode categories, as
 * Hugging Face tokenizers use), not through llama.cpp's category-collapsing
 * std::regex. Each regex splits every piece of the previous step into its
 * matches and the gaps between them (HF "Isolated"); empty matches are
 * ignored. The subject of a match is the piece alone (lookarounds and $ see
 * the piece's ends), as in llama.cpp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "text/bpe_internal.h"

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_PORO " ?[^(\\s|.,!?…。，、।۔،)]+"
#define RE_GPT4O "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_CONTR "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_CONTR "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const slm_bpe_pre k_pre[] = {
    {"default", 0, 0, 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", 1, 1, 0,
     {RE_LLAMA3}},
    {"dbrx|smaug-bpe", 0, 0, 0, {RE_LLAMA3}},
    {"glm4|chatglm-bpe", 0, 0, 1, {RE_LLAMA3}},
    {"deepseek-llm", 0, 0, 0,
     {
      "[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
      "\\s+$",
      "[一-龥ࠀ-一가-퟿]+",
      "\\p{N}+",
     }},
    {"deepseek-coder", 0, 0, 0,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
    {"deepseek-v3|hunyuan-dense|joyai-llm", 0, 0, 0,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"falcon", 0, 0, 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2", 0, 0, 0,
     {"\\p{N}", RE_GPT2}},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|mpt|"
     "olmo|jais|trillion|granite-docling|exaone4|jina-v1-en|jina-v2-code|roberta-bpe",
     0, 0, 0, {RE_GPT2}},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|stablelm2|hunyuan|solar-open|megrez|grok-2", 0, 0, 0,
     {RE_QWEN2}},
    {"qwen35", 0, 0, 0, {RE_QWEN35}},
    {"poro-chat|bloom|gpt3-finnish", 0, 0, 0, {RE_PORO}},
    {"viking", 0, 0, 0, {RE_PORO, "\\p{N}"}},
    {"tekken", 1, 1, 0, {RE_TEKKEN}},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", 0, 0, 0, {RE_GPT4O}},
    {"seed-coder", 0, 0, 0,
     {RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe|bailingmoe2|llada-moe", 0, 0, 0,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
};

static int name_in_list(const char *list, const char *s, size_t n) {
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, s, n) == 0) return 1;
        if (!e) return 0;
        p = e + 1;
    }
}

const slm_bpe_pre *slm_bpe__find_pre(const char *s, size_t n) {
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
        if (name_in_list(k_pre[i].names, s, n)) return &k_pre[i];
    return NULL;
}

slm_status slm_bpe__add_regex(slm_bpe *t, const char *re, size_t n, const char *name, slm_err *err) {
    if (t->n_regex >= BPE_MAX_REGEX)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer regexes", name, BPE_MAX_REGEX);
    if (n > BPE_MAX_REGEX_LEN || memchr(re, 0, n))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: pre-tokenizer regex %d is too long or holds NUL", name,
                        t->n_regex);
    char *c = slm_malloc(n + 1);
    if (!c) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    memcpy(c, re, n);
    c[n] = 0;
    t->regex[t->n_regex++] = c;
    return SLM_OK;
}

slm_status slm_bpe__set_pre(slm_bpe *t, const slm_bpe_pre *p, const char *pname, size_t pn, const char *name,
                            slm_err *err) {
    snprintf(t->pre_name, sizeof t->pre_name, "%.*s", (int)(pn < 63 ? pn : 63), pname);
    t->ignore_merges = p->ignore_merges;
    for (int i = 0; i < 7 && p->re[i]; i++) {
        slm_status s = slm_bpe__add_regex(t, p->re[i], strlen(p->re[i]), name, err);
        if (s) return s;
    }
    return SLM_OK;
}

slm_status slm_bpe__add_pre(slm_bpe *t, const char *pre, const char *name, slm_err *err) {
    const slm_bpe_pre *p = slm_bpe__find_pre(pre, strlen(pre));
    if (!p) return slm_errf(err, SLM_ERR_INTERNAL, "%s: no pre-tokenizer '%s'", name, pre);
    for (int i = 0; i < 7 && p->re[i]; i++) {
        slm_status s = slm_bpe__add_regex(t, p->re[i], strlen(p->re[i]), name, err);
        if (s) return s;
    }
    return SLM_OK;
}

/* ---- PCRE2 ---------------------------------------------------------------- */

static void *pcre_alloc(size_t n, void *ud) { (void)ud; return slm_malloc(n); }
static void pcre_free(void *p, void *ud) { (void)ud; slm_xfree(p); }

slm_status slm_bpe__compile_regexes(slm_bpe *t, const char *name, slm_err *err) {
    if (t->n_regex == 0) return SLM_OK;
    t->gctx = pcre2_general_context_create(pcre_alloc, pcre_free, NULL);
    if (!t->gctx) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (regex)", name);
    pcre2_compile_context *cc = pcre2_compile_context_create(t->gctx);
    if (!cc) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (regex)", name);
    for (int i = 0; i < t->n_regex; i++) {
        int code;
        PCRE2_SIZE eoff;
        t->re[i] = pcre2_compile((PCRE2_SPTR)t->regex[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
                                 &code, &eoff, cc);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            pcre2_compile_context_free(cc);
            if (code == PCRE2_ERROR_HEAP_FAILED)
                return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory compiling pre-tokenizer regex %d", name, i);
            return slm_errf(err, SLM_ERR_FORMAT, "%s: pre-tokenizer regex %d '%.64s' at offset %zu: %s", name, i,
                            t->regex[i], (size_t)eoff, (const char *)msg);
        }
        (void)pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE); /* interpreter if no JIT */
    }
    pcre2_compile_context_free(cc);
    return SLM_OK;
}

static int pieces_add(slm_bpe_pieces *p, int32_t s, int32_t e) {
    if (s >= e) return 1;
    if (p->n == p->cap) {
        int nc = p->cap ? p->cap * 2 : 64;
        int32_t *na = slm_realloc(p->a, (size_t)nc * 2 * sizeof *na);
        if (!na) return 0;
        p->a = na;
        p->cap = nc;
    }
    p->a[2 * p->n] = s;
    p->a[2 * p->n + 1] = e;
    p->n++;
    return 1;
}

/* ---- bounded matching ------------------------------------------------------
 * A tokenizer.json brings its own regexes, and a client its text, so each
 * pcre2_match call runs under limits sized to the piece it splits (match
 * steps, backtracking depth, heap for backtracking frames; the JIT stack),
 * and the whole text under a budget of CPU time (bpe.h). Hitting any of
 * them is an error (SLM_TOK_EBUDGET): the split would otherwise silently
 * differ. The budget is time rather than a step count because PCRE2
 * reports no step count: per-call limits stop exponential backtracking
 * within one call, the clock stops work spread over many calls (a
 * lookahead that rescans the rest of the text at every position). */

#define PRETOK_MATCH_BASE 100000u     /* match() calls of one pcre2_match, plus */
#define PRETOK_MATCH_PER_BYTE 1000u   /* ... per byte of the piece */
#define PRETOK_MATCH_MAX 10000000u    /* PCRE2's default */
#define PRETOK_DEPTH_BASE 10000u
#define PRETOK_DEPTH_PER_BYTE 16u
#define PRETOK_HEAP_BASE_KIB 4096u    /* backtracking frames (interpreter), KiB */
#define PRETOK_HEAP_PER_4_BYTES 1u    /* KiB per 4 bytes of the piece */
#define PRETOK_HEAP_MAX_KIB (1u << 20)
#define PRETOK_JIT_STACK_MIN (64u << 10)
#define PRETOK_JIT_STACK_MAX (64u << 20)

/* CPU time of this thread (load on the machine does not eat the budget);
 * the monotonic clock where that is missing. Not cheap (a system call on
 * some hosts), so read every PRETOK_CLOCK_EVERY matches. */
static uint64_t now_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void slm_bpe__budget_init(slm_bpe_budget *b, size_t n) {
    b->allowed_ns = (uint64_t)SLM_BPE_PRETOK_BASE_MS * 1000000u + (uint64_t)n * SLM_BPE_PRETOK_NS_PER_BYTE;
    b->spent_ns = 0;
}

/* The clock of one pretokenize call, read every PRETOK_CLOCK_EVERY
 * matches: between two reads, each match is bounded by its match limit
 * (exponential backtracking) or by the piece it scans (a rescanning
 * lookahead), so the overshoot is a few such matches. */
#define PRETOK_CLOCK_EVERY 32

typedef struct clock_run {
    uint64_t start_ns, left_ns; /* this call's start, the budget left then */
    unsigned calls;
} clock_run;

static int over_budget(clock_run *c) {
    if (++c->calls % PRETOK_CLOCK_EVERY) return 0;
    return now_ns() - c->start_ns > c->left_ns;
}

static uint32_t limit_for(uint64_t base, uint64_t per_byte, uint64_t n, uint64_t max) {
    uint64_t v = base + per_byte * n;
    return (uint32_t)(v < max ? v : max);
}

/* the per-call limits for a piece of n bytes */
static void set_limits(pcre2_match_context *mc, size_t n) {
    pcre2_set_match_limit(mc, limit_for(PRETOK_MATCH_BASE, PRETOK_MATCH_PER_BYTE, n, PRETOK_MATCH_MAX));
    pcre2_set_depth_limit(mc, limit_for(PRETOK_DEPTH_BASE, PRETOK_DEPTH_PER_BYTE, n, PRETOK_MATCH_MAX));
    pcre2_set_heap_limit(mc, limit_for(PRETOK_HEAP_BASE_KIB, PRETOK_HEAP_PER_4_BYTES, n / 4, PRETOK_HEAP_MAX_KIB));
}

typedef struct matcher {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
} matcher;

static void matcher_free(matcher *m) {
    if (m->md) pcre2_match_data_free(m->md);
    if (m->mc) pcre2_match_context_free(m->mc);
    if (m->js) pcre2_jit_stack_free(m->js);
}

/* match data, a match context and a JIT stack sized to a text of n bytes */
static int matcher_init(matcher *m, const slm_bpe *t, size_t n) {
    memset(m, 0, sizeof *m);
    m->md = pcre2_match_data_create(1, t->gctx);
    m->mc = pcre2_match_context_create(t->gctx);
    if (!m->md || !m->mc) return 0;
    size_t js = (size_t)limit_for(PRETOK_JIT_STACK_MIN, 64, n, PRETOK_JIT_STACK_MAX);
    m->js = pcre2_jit_stack_create(PRETOK_JIT_STACK_MIN, js, t->gctx);
    if (!m->js) return 0;
    pcre2_jit_stack_assign(m->mc, NULL, m->js);
    return 1;
}

/* Split each piece of cur with regex r into nxt. */
static int split_pieces(const slm_bpe *t, int r, const char *text, const slm_bpe_pieces *cur, slm_bpe_pieces *nxt,
                        matcher *m, clock_run *clk) {
    nxt->n = 0;
    for (int p = 0; p < cur->n; p++) {
        int32_t ps = cur->a[2 * p], pe = cur->a[2 * p + 1];
        PCRE2_SPTR subj = (PCRE2_SPTR)text + ps;
        PCRE2_SIZE slen = (PCRE2_SIZE)(pe - ps), pos = 0, last = 0;
        set_limits(m->mc, slen);
        while (pos <= slen) {
            int rc = pcre2_match(t->re[r], subj, slen, pos, PCRE2_NO_UTF_CHECK, m->md, m->mc);
            if (rc == PCRE2_ERROR_NOMEMORY) return SLM_TOK_ENOMEM;
            if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) return SLM_TOK_EBUDGET; /* a limit */
            if (over_budget(clk)) return SLM_TOK_EBUDGET;
            if (rc < 0) break; /* no match: the rest is one piece */
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
            PCRE2_SIZE ms = ov[0], me = ov[1];
            if (me <= ms) { /* empty match: step one character */
                if (ms >= slen) break;
                pos = ms + 1;
                while (pos < slen && (subj[pos] & 0xc0) == 0x80) pos++;
                continue;
            }
            if (!pieces_add(nxt, ps + (int32_t)last, ps + (int32_t)ms) ||
                !pieces_add(nxt, ps + (int32_t)ms, ps + (int32_t)me))
                return SLM_TOK_ENOMEM;
            last = pos = me;
        }
        if (!pieces_add(nxt, ps + (int32_t)last, pe)) return SLM_TOK_ENOMEM;
    }
    return 0;
}

/* Pre-tokenize text[0, n) (valid UTF-8): see bpe_internal.h. */
int slm_bpe__pretokenize(const slm_bpe *t, const char *text, int n, slm_bpe_pieces *out, slm_bpe_budget *b) {
    slm_bpe_pieces cur = {0}, nxt = {0};
    matcher m = {0};
    int rc = 0;
    *out = cur;
    if (b->spent_ns >= b->allowed_ns) return SLM_TOK_EBUDGET;
    clock_run clk = {now_ns(), b->allowed_ns - b->spent_ns, 0};
    if (!pieces_add(&cur, 0, n)) return SLM_TOK_ENOMEM;
    if (t->n_regex && !matcher_init(&m, t, (size_t)n)) rc = SLM_TOK_ENOMEM;
    for (int r = 0; !rc && r < t->n_regex; r++) {
        rc = split_pieces(t, r, text, &cur, &nxt, &m, &clk);
        slm_bpe_pieces tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    matcher_free(&m);
    slm_xfree(nxt.a);
    b->spent_ns += now_ns() - clk.start_ns;
    if (!rc && b->spent_ns > b->allowed_ns) rc = SLM_TOK_EBUDGET;
    if (rc) {
        slm_xfree(cur.a);
        return rc;
    }
    *out = cur;
    return 0;
}

/* ---- load-time probe ------------------------------------------------------
 * A tokenizer.json's regexes are tried at load on texts of PROBE_BYTES of
 * one repeated unit each (letters, spaces, digits, newlines, punctuation,
 * CJK, a sentence), one regex at a time, under PROBE_NS of CPU time each:
 * ordinary pre-tokenizers take a few ms at most; a regex that backtracks
 * catastrophically or rescans the text at every position takes far longer
 * already at this size and is refused by name. Texts the probe misses are
 * still bounded at encode time. */
#define PROBE_BYTES (32u << 10)
#define PROBE_NS 25000000u /* 25 ms */

slm_status slm_bpe__probe_regexes(const slm_bpe *t, const char *name, slm_err *err) {
    static const char *const unit[] = {"a", " ", "7", "\n", " \n", ".", "a ", "aA1 ", "\xe4\xb8\xad",
                                       "Hello, world! 42\n"};
    static const char *const unit_name[] = {"a", "spaces", "7", "newlines", "space-newline", ".", "a-space",
                                            "aA1-space", "CJK", "a sentence"};
    if (t->n_regex == 0) return SLM_OK;
    char *text = slm_malloc(PROBE_BYTES);
    slm_bpe_pieces cur = {0}, nxt = {0};
    matcher m = {0};
    slm_status st = SLM_OK;
    if (!text || !pieces_add(&cur, 0, 1) || !matcher_init(&m, t, PROBE_BYTES)) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory probing the pre-tokenizer", name);
        goto done;
    }
    for (size_t u = 0; u < sizeof unit / sizeof unit[0] && !st; u++) {
        size_t ul = strlen(unit[u]), n = 0;
        while (n + ul <= PROBE_BYTES) {
            memcpy(text + n, unit[u], ul);
            n += ul;
        }
        cur.a[0] = 0;
        cur.a[1] = (int32_t)n;
        cur.n = 1;
        for (int r = 0; r < t->n_regex && !st; r++) {
            clock_run clk = {now_ns(), PROBE_NS, 0};
            int rc = split_pieces(t, r, text, &cur, &nxt, &m, &clk);
            if (!rc && now_ns() - clk.start_ns > PROBE_NS) rc = SLM_TOK_EBUDGET;
            if (rc == SLM_TOK_ENOMEM)
                st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory probing the pre-tokenizer", name);
            else if (rc)
                st = slm_errf(err, SLM_ERR_UNSUPPORTED,
                              "%s: pre-tokenizer regex %d '%.80s' exceeds its work limits on %zu bytes of %s "
                              "(catastrophic backtracking or rescanning): refused",
                              name, r, t->regex[r], n, unit_name[u]);
        }
    }
done:
    matcher_free(&m);
    slm_xfree(cur.a);
    slm_xfree(nxt.a);
    slm_xfree(text);
    return st;
}
