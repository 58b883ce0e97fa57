/* Reasoning apart from the answer (text/reasoning.h): every format fed the
 * same replies whole, byte by byte and split at every one and every two
 * points; a prompt that opens <think>; thinking cut off at the end; text
 * that only looks like a tag's start; auto detection from a vocabulary
 * (tokenizer.json with Qwen3's and gpt-oss's added tokens) and from a
 * template; and how those added tokens decode (as their text). */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text/reasoning.h"
#include "text/tokenizer.h"
#include "t.h"

typedef struct got {
    char s[2][1024];
    size_t n[2];
    int calls;
} got;

static void collect(void *ud, int kind, const char *s, size_t n) {
    got *g = ud;
    CHECK(kind == SLM_REASON_ANSWER || kind == SLM_REASON_THINK);
    CHECK(n > 0);
    if (g->n[kind] + n < sizeof g->s[kind]) {
        memcpy(g->s[kind] + g->n[kind], s, n);
        g->n[kind] += n;
        g->s[kind][g->n[kind]] = 0;
    }
    g->calls++;
}

/* Feed text in pieces cut at a and b (0 < a <= b <= n; a == n: whole). */
static void run_split(int fmt, const char *prompt, const char *text, size_t a, size_t b, got *g) {
    slm_reason r;
    memset(g, 0, sizeof *g);
    slm_reason_init(&r, fmt, prompt, collect, g);
    size_t n = strlen(text);
    slm_reason_feed(&r, text, a);
    slm_reason_feed(&r, text + a, b - a);
    slm_reason_feed(&r, text + b, n - b);
    slm_reason_finish(&r);
}

static int same(const got *g, const char *think, const char *answer) {
    return !strcmp(g->s[SLM_REASON_THINK], think) && !strcmp(g->s[SLM_REASON_ANSWER], answer);
}

/* Whole, byte by byte, and at every one and two split points: the same result. */
static void expect(int fmt, const char *prompt, const char *text, const char *think, const char *answer) {
    size_t n = strlen(text);
    got g;
    int bad = 0;
    for (size_t a = 0; a <= n && bad < 3; a++)
        for (size_t b = a; b <= n && bad < 3; b++) {
            run_split(fmt, prompt, text, a, b, &g);
            if (!same(&g, think, answer)) {
                bad++;
                CHECKF(0, "%s, split at %zu and %zu of [%s]: think [%s] answer [%s], want [%s] [%s]",
                       slm_reason_format_name(fmt), a, b, text, g.s[1], g.s[0], think, answer);
            }
        }
    slm_reason r;
    memset(&g, 0, sizeof g);
    slm_reason_init(&r, fmt, prompt, collect, &g);
    for (size_t i = 0; i < n; i++) slm_reason_feed(&r, text + i, 1);
    slm_reason_finish(&r);
    CHECKF(same(&g, think, answer), "byte by byte [%s]: think [%s] answer [%s]", text, g.s[1], g.s[0]);
}

static void test_deepseek(void) {
    expect(SLM_REASON_DEEPSEEK, "<|im_start|>assistant\n", "<think>\nLet me see: 2 < 3.\n</think>\n\nThe answer is 4.",
           "Let me see: 2 < 3.", "The answer is 4.");
    /* the prompt opened the thinking (DeepSeek-R1 distills, some Qwen3 templates) */
    expect(SLM_REASON_DEEPSEEK, "<｜Assistant｜><think>\n", "I reason.\n\nStill.\n</think>\n\nDone <b>.",
           "I reason.\n\nStill.", "Done <b>.");
    /* no thinking at all: the answer, a late <think> stays text */
    expect(SLM_REASON_DEEPSEEK, NULL, "\nHello <think> there", "", "Hello <think> there");
    /* Qwen3 with enable_thinking=false: the prompt closed an empty block */
    expect(SLM_REASON_DEEPSEEK, "<|im_start|>assistant\n<think>\n\n</think>\n\n", "Hi.", "", "Hi.");
    /* cut off while thinking: all of it is reasoning, a held "</thi" too */
    expect(SLM_REASON_DEEPSEEK, NULL, "<think>still going </thi", "still going </thi", "");
    expect(SLM_REASON_DEEPSEEK, "x<think>", "a < b", "a < b", "");
    /* only a tag's beginning: released as the answer at the end */
    expect(SLM_REASON_DEEPSEEK, NULL, "<thi", "", "<thi");
    expect(SLM_REASON_DEEPSEEK, NULL, "a < b", "", "a < b");
    expect(SLM_REASON_DEEPSEEK, NULL, "<<think>x</think>y", "", "<<think>x</think>y");
    /* a run of white space longer than the splitter holds back: the same at every cut */
    char text[256], think[256];
    snprintf(text, sizeof text, "a%100sb%90s</think>c", "", "");
    snprintf(think, sizeof think, "a%100sb%26s", "", ""); /* 90 - 64 trailing spaces let go */
    expect(SLM_REASON_DEEPSEEK, "<think>", text, think, "c");
}

static const char HARMONY[] =
    "<|channel|>analysis<|message|>User asks 1+1. Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is 2 <3.<|return|>";

static void test_harmony(void) {
    expect(SLM_REASON_HARMONY, "<|start|>assistant", HARMONY, "User asks 1+1. Easy.", "It is 2 <3.");
    /* commentary is reasoning too; the header's recipient and <|constrain|> go */
    expect(SLM_REASON_HARMONY, NULL,
           "<|channel|>analysis<|message|>Call f. <|end|><|start|>assistant<|channel|>commentary to=functions.f "
           "<|constrain|>json<|message|>{\"x\":1}<|call|>",
           "Call f.\n\n{\"x\":1}", "");
    /* text outside any message is the answer; a lone '<' at the end is released */
    expect(SLM_REASON_HARMONY, NULL, "plain a <", "", "plain a <");
    expect(SLM_REASON_HARMONY, NULL, "a < b <|x|> c", "", "a < b <|x|> c");
    /* cut off in the analysis */
    expect(SLM_REASON_HARMONY, NULL, "<|channel|>analysis<|message|>thinking <|en", "thinking <|en", "");
    /* a prompt that already opened the analysis message */
    expect(SLM_REASON_HARMONY, "<|start|>assistant<|channel|>analysis<|message|>", "hmm<|end|>"
           "<|start|>assistant<|channel|>final<|message|>ok", "hmm", "ok");
}

/* Gemma 4: <|channel>thought\n...<channel|> */
static void test_gemma4(void) {
    const int G = SLM_REASON_GEMMA4;
    expect(G, "<|turn>model\n", "<|channel>thought\nIs 2 < 3? Yes.\n<channel|>It is <b>yes</b>.", "Is 2 < 3? Yes.",
           "It is <b>yes</b>.");
    /* thinking off: the prompt closed an empty channel; a trailing empty channel and a stray close dropped */
    expect(G, "<|turn>model\n<|channel>thought\n<channel|>", "Hi.<|channel>thought\n<channel|><channel|>", "", "Hi.");
    /* a prompt that opened the channel; a reply cut inside it is all reasoning */
    expect(G, "<|turn>model\n<|channel>thought\n", "step one\n<channel|>\nDone.", "step one", "Done.");
    expect(G, NULL, "<|channel>thought\nstill <chan", "still <chan", "");
    /* two thoughts joined by a blank line; other markers are text */
    expect(G, NULL, "<|channel>thought\na<channel|>x <|chan y<|channel>thought\nb<channel|>z", "a\n\nb", "x <|chan yz");
    expect(G, NULL, "a < b <|x|> c", "", "a < b <|x|> c");
}

static void test_none(void) {
    expect(SLM_REASON_NONE, "x<think>", "<think>\n a </think>\n b ", "", "<think>\n a </think>\n b ");
    expect(SLM_REASON_NONE, NULL, HARMONY, "", HARMONY);
}

/* Bytes that cannot begin a tag are not held: what comes out before the end. */
static void test_hold_only_tags(void) {
    got g;
    slm_reason r;
    memset(&g, 0, sizeof g);
    slm_reason_init(&r, SLM_REASON_DEEPSEEK, NULL, collect, &g);
    slm_reason_feed(&r, "<thi", 4);
    CHECK(g.calls == 0); /* may still be <think> */
    slm_reason_feed(&r, "nk>Hm", 5);
    CHECK(!strcmp(g.s[SLM_REASON_THINK], "Hm"));
    slm_reason_feed(&r, " </", 3);
    CHECK(!strcmp(g.s[SLM_REASON_THINK], "Hm")); /* a space (trimmed at the end) and a tag's start wait */
    slm_reason_feed(&r, "b>", 2);
    CHECK(!strcmp(g.s[SLM_REASON_THINK], "Hm </b>"));
    slm_reason_feed(&r, "</think>Yes", 11);
    CHECK(!strcmp(g.s[SLM_REASON_ANSWER], "Yes"));
    slm_reason_feed(&r, " <", 2);
    CHECK(!strcmp(g.s[SLM_REASON_ANSWER], "Yes <")); /* after the thinking nothing is a tag */
    slm_reason_finish(&r);
}

static void test_names(void) {
    CHECK(slm_reason_format_parse("none") == SLM_REASON_NONE);
    CHECK(slm_reason_format_parse("deepseek") == SLM_REASON_DEEPSEEK);
    CHECK(slm_reason_format_parse("harmony") == SLM_REASON_HARMONY);
    CHECK(slm_reason_format_parse("auto") == SLM_REASON_AUTO);
    CHECK(slm_reason_format_parse("Deepseek") == -1 && slm_reason_format_parse("") == -1 && slm_reason_format_parse(NULL) == -1);
    CHECK(!strcmp(slm_reason_format_name(SLM_REASON_HARMONY), "harmony"));
    CHECK(slm_reason_detect(NULL, "{{ '<|im_start|>' }}") == SLM_REASON_NONE);
    CHECK(slm_reason_detect(NULL, "{% if '</think>' in content %}") == SLM_REASON_DEEPSEEK);
    CHECK(slm_reason_detect(NULL, "{{ '<|start|>assistant<|channel|>final<|message|>' }}") == SLM_REASON_HARMONY);
    CHECK(slm_reason_detect(NULL, NULL) == SLM_REASON_NONE);
    CHECK(slm_reason_format_parse("gemma4") == SLM_REASON_GEMMA4 && !strcmp(slm_reason_format_name(SLM_REASON_GEMMA4), "gemma4"));
    CHECK(slm_reason_detect(NULL, "{{- '<|turn>model\\n' -}}{{- '<|channel>thought\\n<channel|>' -}}") == SLM_REASON_GEMMA4);
}

/* A byte-level tokenizer.json with the added tokens as Qwen3 (<think> and
 * </think> not special) and gpt-oss (<|channel|>... special) declare them. */
static slm_tokenizer *load_vocab(const char *dir, const char *added) {
    char path[512], *js = malloc(1 << 14), *o = js;
    o += sprintf(o, "{\"added_tokens\": [%s], \"normalizer\": null,"
                    "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
                    "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {", added);
    for (int c = 33; c < 127; c++) /* printable ASCII: the byte chars are the bytes */
        o += sprintf(o, "%s\"%s%c\": %d", c > 33 ? ", " : "", c == '"' || c == '\\' ? "\\" : "", c, c - 33);
    o += sprintf(o, "}, \"merges\": []}}");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(t_write_file(path, js, strlen(js)));
    free(js);
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    CHECKF(slm_tok_load_hf_json(&t, path, &err) == SLM_OK, "%s", err.msg);
    unlink(path);
    return t;
}

static void test_vocab(void) {
    char dir[] = "/tmp/slm_test_reasoning.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    slm_tokenizer *q = load_vocab(dir, "{\"id\": 94, \"content\": \"<|im_end|>\", \"special\": true},"
                                       "{\"id\": 95, \"content\": \"<think>\", \"special\": false},"
                                       "{\"id\": 96, \"content\": \"</think>\", \"special\": false}");
    slm_tokenizer *h = load_vocab(dir, "{\"id\": 94, \"content\": \"<|return|>\", \"special\": true},"
                                       "{\"id\": 95, \"content\": \"<|channel|>\", \"special\": true},"
                                       "{\"id\": 96, \"content\": \"<|message|>\", \"special\": true}");
    rmdir(dir);
    if (!q || !h) return;
    CHECK(slm_reason_detect(q, NULL) == SLM_REASON_DEEPSEEK);
    CHECK(slm_reason_detect(h, NULL) == SLM_REASON_HARMONY);
    /* generated added tokens decode to their text, which the parser reads */
    CHECK(!strcmp(slm_tok_decode(q, 40, 95), "<think>") && !strcmp(slm_tok_decode(q, 95, 96), "</think>"));
    CHECK(!strcmp(slm_tok_decode(h, 40, 95), "<|channel|>") && !strcmp(slm_tok_decode(h, 95, 96), "<|message|>"));
    got g;
    slm_reason r;
    memset(&g, 0, sizeof g);
    slm_reason_init(&r, SLM_REASON_HARMONY, NULL, collect, &g);
    const int ids[] = {95, 'a' - 33, 'n' - 33, 'a' - 33, 'l' - 33, 'y' - 33, 's' - 33, 'i' - 33, 's' - 33, 96, 'H' - 33, 'm' - 33};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        const char *p = slm_tok_decode(h, i ? ids[i - 1] : -1, ids[i]);
        slm_reason_feed(&r, p, strlen(p));
    }
    slm_reason_finish(&r);
    CHECK(same(&g, "Hm", ""));
    slm_tok_free(q);
    slm_tok_free(h);
}

int main(void) {
    T_RUN(test_deepseek);
    T_RUN(test_harmony);
    T_RUN(test_gemma4);
    T_RUN(test_none);
    T_RUN(test_hold_only_tags);
    T_RUN(test_names);
    T_RUN(test_vocab);
    T_DONE();
}
