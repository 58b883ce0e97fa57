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
            return slm_errf(err, SLM_ERR_FORMAT, "%s: pre-tokenizer regex %d at offset %zu: %s", name,
                            i, (size_t)eoff, (const char *)msg);
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

/* Pre-tokenize text[0, n) (valid UTF-8): see bpe_internal.h. */
slm_status slm_bpe__pretokenize(const slm_bpe *t, const char *text, int n, slm_bpe_pieces *out) {
    slm_bpe_pieces cur = {0}, nxt = {0};
    pcre2_match_data *md = NULL;
    *out = cur;
    if (!pieces_add(&cur, 0, n)) return SLM_ERR_NOMEM;
    if (t->n_regex && !(md = pcre2_match_data_create(1, t->gctx))) goto oom;
    for (int r = 0; r < t->n_regex; r++) {
        nxt.n = 0;
        for (int p = 0; p < cur.n; p++) {
            int32_t ps = cur.a[2 * p], pe = cur.a[2 * p + 1];
            PCRE2_SPTR subj = (PCRE2_SPTR)text + ps;
            PCRE2_SIZE slen = (PCRE2_SIZE)(pe - ps), pos = 0, last = 0;
            while (pos <= slen) {
                int rc = pcre2_match(t->re[r], subj, slen, pos, PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc < 0) break; /* no match (or a limit hit): the rest is one piece */
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                PCRE2_SIZE ms = ov[0], me = ov[1];
                if (me <= ms) { /* empty match: step one character */
                    if (ms >= slen) break;
                    pos = ms + 1;
                    while (pos < slen && (subj[pos] & 0xc0) == 0x80) pos++;
                    continue;
                }
                if (!pieces_add(&nxt, ps + (int32_t)last, ps + (int32_t)ms) ||
                    !pieces_add(&nxt, ps + (int32_t)ms, ps + (int32_t)me))
                    goto oom;
                last = pos = me;
            }
            if (!pieces_add(&nxt, ps + (int32_t)last, pe)) goto oom;
        }
        slm_bpe_pieces tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    if (md) pcre2_match_data_free(md);
    slm_xfree(nxt.a);
    *out = cur;
    return SLM_OK;
oom:
    if (md) pcre2_match_data_free(md);
    slm_xfree(cur.a);
    slm_xfree(nxt.a);
    return SLM_ERR_NOMEM;
}
