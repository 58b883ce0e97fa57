/* libFuzzer target for the server's request parsing (src/server/request.c):
 * the input's first byte picks the endpoint (chat or completions), the rest
 * is the request body (any bytes: invalid JSON, trailing bytes, NULs, deep
 * nesting, huge numbers). A parse either fails with a 400/500 error that
 * names a code and a message, or gives a request within its limits: at most
 * SRV_MAX_STOP non-empty stop strings of at most SRV_STOP_LEN bytes, a
 * known role for every message, a prompt or messages for its endpoint,
 * sampling values in range, n in 1..SRV_MAX_CHOICES, a grammar
 * (response_format, json_schema, grammar) only when it compiled; a choice's
 * copy (srv_request_share) borrows all but the grammar and frees alone. Also the UTF-8 helpers on the same bytes:
 * srv_utf8_clean gives valid UTF-8, srv_utf8_complete never grows.
 * First byte & 6 = 2 or 4: an embedding request instead (/v1/embeddings,
 * llama-server's /embedding; src/server/embed_parse.c): refused with a
 * 400/500 and a message, or at least one and at most SRV_EMBED_MAX_INPUTS
 * inputs, each a text from the body or ids within the vocabulary.
 * First byte & 6 = 6: llama-server's /infill (src/server/infill_parse.c):
 * refused with a 400/500 naming a field, or a prefix and a suffix (texts
 * from the body, ids within the vocabulary), extra chunks each with a
 * filename and a text, and a completion request whose prompt is a text.
 * First byte & 14 = 8: a rerank request (/v1/rerank): a query and
 * 1..SRV_EMBED_MAX_INPUTS documents, top_n among them.
 * tests/fuzz/run.sh builds it with the sources named on the next line.
 * fuzz-sources: src/server/request.c src/server/embed_parse.c src/server/infill_parse.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "common/common.h"
#include "server/embed.h"
#include "server/infill.h"
#include "server/request.h"

#define CHECK(c) \
    do {         \
        if (!(c)) abort(); \
    } while (0)

/* 1 when s[0..n) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        if (len == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0))) return 0;
        if (len == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))) return 0;
        i += len;
    }
    return 1;
}

#ifdef SLM_HAVE_CJSON
/* An embedding request (oai: /v1/embeddings): vocabulary 512, width 64, pooling mean. */
static void embed_one(const char *body, size_t len, int oai) {
    srv_embed *m = NULL;
    srv_error e;
    if (srv_embed_parse(body, len, oai, 512, 64, 1, &m, &e)) {
        CHECK(m && m->oai == oai && m->n_in >= 1 && m->n_in <= SRV_EMBED_MAX_INPUTS);
        CHECK(m->normalize >= -1 && m->normalize <= 64 && m->pooling == 1 && (m->base64 == 0 || m->base64 == 1));
        for (int i = 0; i < m->n_in; i++) {
            CHECK(!m->text[i] != !m->ids[i]); /* a text or ids */
            CHECK(!m->text[i] || strlen(m->text[i]) <= len);
            CHECK(!m->ids[i] || (m->n_ids[i] >= 1 && (size_t)m->n_ids[i] <= len));
            for (int k = 0; m->ids[i] && k < m->n_ids[i]; k++) CHECK(m->ids[i][k] >= 0 && m->ids[i][k] < 512);
            CHECK(!m->vec[i] && !m->n_vec[i]);
        }
        srv_embed_free(m);
    } else {
        CHECK(!m && (e.status == 400 || e.status == 500) && e.type && e.msg[0]);
    }
}

static void rerank_one(const char *body, size_t len) {
    srv_embed *m = NULL;
    srv_error e;
    if (srv_rerank_parse(body, len, &m, &e)) {
        CHECK(m && m->rerank && m->query && strlen(m->query) <= len && m->n_in >= 1 && m->n_in <= SRV_EMBED_MAX_INPUTS);
        CHECK(m->top_n >= 1 && m->top_n <= m->n_in && (m->return_text == 0 || (m->return_text == 1 && m->tei)));
        for (int i = 0; i < m->n_in; i++) CHECK(m->text[i] && strlen(m->text[i]) <= len && !m->ids[i]);
        srv_embed_free(m);
    } else {
        CHECK(!m && (e.status == 400 || e.status == 500) && e.type && e.msg[0]);
    }
}

/* An /infill request: vocabulary 512. */
static void infill_one(const char *body, size_t len) {
    srv_infill f;
    srv_request q;
    srv_error e;
    if (srv_infill_parse(body, len, 512, NULL, &f, &q, &e)) {
        const srv_infill_input *in[2] = {&f.prefix, &f.suffix};
        for (int k = 0; k < 2; k++) {
            CHECK(in[k]->n >= 0 && (size_t)in[k]->n <= len && (!in[k]->n || in[k]->seg));
            for (int i = 0; i < in[k]->n; i++)
                CHECK(in[k]->seg[i].text ? strlen(in[k]->seg[i].text) <= len
                                         : in[k]->seg[i].id >= 0 && in[k]->seg[i].id < 512);
        }
        CHECK(f.n_extra >= 0 && (size_t)f.n_extra <= len);
        for (int i = 0; i < f.n_extra; i++)
            CHECK(f.extra_name[i] && f.extra_text[i] && strlen(f.extra_text[i]) <= len &&
                  (strlen(f.extra_name[i]) <= len || !strcmp(f.extra_name[i], "tmp")));
        CHECK(!q.chat && q.prompt && !q.prompt_ids && strlen(q.prompt) <= len && q.n >= 1 && q.n <= SRV_MAX_CHOICES);
        srv_infill_free(&f);
        srv_request_free(&q);
        CHECK(!f.prefix.seg && !f.suffix.seg && !f.n_extra && !q.prompt);
    } else {
        CHECK((e.status == 400 || e.status == 500) && e.type && e.msg[0]);
        CHECK(!f.prefix.seg && !f.suffix.seg && !f.extra_name && !q.prompt && !q.nstop);
    }
}
#endif

static inline int known_role(const char *r) {
    return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") || !strcmp(r, "tool");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int chat = data[0] & 1;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

#ifdef SLM_HAVE_CJSON /* without cJSON there is no parser (and no server) */
    if ((data[0] & 14) == 8) {
        rerank_one(body, len);
        return 0;
    }
    if ((data[0] & 6) == 6) {
        infill_one(body, len);
        return 0;
    }
    if ((data[0] & 6) == 2 || (data[0] & 6) == 4) {
        embed_one(body, len, (data[0] & 6) == 2);
        return 0;
    }
    srv_request q;
    srv_error e;
    if (srv_request_parse(body, len, chat, NULL, &q, &e)) {
        CHECK(q.chat == chat);
        CHECK(q.nstop >= 0 && q.nstop <= SRV_MAX_STOP);
        for (int i = 0; i < q.nstop; i++) {
            size_t l = strlen(q.stop[i]);
            CHECK(l > 0 && l <= SRV_STOP_LEN);
        }
        CHECK(q.max_tokens >= 0 && q.max_tokens <= 1000000000);
        CHECK(q.samp.temperature >= 0 && q.samp.temperature <= 2);
        CHECK(q.samp.top_p >= 0 && q.samp.top_p <= 1);
        CHECK(q.samp.top_k >= 0);
        CHECK(q.samp.min_p >= 0 && q.samp.min_p <= 1 && q.samp.repeat_penalty >= 0 && q.samp.repeat_last_n >= -1);
        CHECK(fabsf(q.samp.presence_penalty) <= 2 && fabsf(q.samp.frequency_penalty) <= 2);
        CHECK(q.samp.n_logit_bias >= 0 && q.samp.n_logit_bias <= SLM_MAX_LOGIT_BIAS);
        for (int i = 0; i < q.samp.n_logit_bias; i++)
            CHECK(q.samp.logit_bias[i].token >= 0 && fabsf(q.samp.logit_bias[i].bias) <= 100);
        CHECK(!q.include_usage || q.include_usage == 1);
        CHECK((q.logprobs == 0 || q.logprobs == 1) && q.top_logprobs >= 0 && q.top_logprobs <= SLM_MAX_TOP_LOGPROBS);
        CHECK(q.logprobs || !q.top_logprobs);
        CHECK(q.ignore_eos == 0 || q.ignore_eos == 1);
        CHECK(q.samp.grammar == q.grammar); /* a request's grammar (checked), or none (no server default here) */
        CHECK(q.tool_choice == SLM_TOOL_CHOICE_AUTO || q.tool_choice == SLM_TOOL_CHOICE_NONE);
        CHECK(q.parallel_tool_calls == 0 || q.parallel_tool_calls == 1);
        if (chat) {
            CHECK(q.nmsgs >= 1 && q.nmsgs <= SRV_MAX_MESSAGES && q.msgs && !q.prompt);
            for (int i = 0; i < q.nmsgs; i++) {
                CHECK(known_role(q.msgs[i].role));
                CHECK(strlen(q.msgs[i].content) <= len); /* contents come from the body */
                CHECK(!q.msgs[i].tool_calls || q.msgs[i].tool_calls[0] == '['); /* a JSON array */
                CHECK(!q.msgs[i].tool_call_id || strlen(q.msgs[i].tool_call_id) <= len);
            }
            CHECK(!q.tools || q.tools[0] == '[');
        } else {
            CHECK(!q.prompt != !q.prompt_ids && !q.msgs && q.nmsgs == 0 && !q.tools); /* text or ids */
            CHECK(!q.prompt || strlen(q.prompt) <= len);
            CHECK(!q.prompt_ids || (q.n_prompt_ids >= 1 && q.n_prompt_ids <= SRV_MAX_PROMPT_IDS));
            for (int i = 0; i < q.n_prompt_ids; i++) CHECK(q.prompt_ids[i] >= 0);
        }
        CHECK(q.n >= 1 && q.n <= SRV_MAX_CHOICES && !q.borrowed);
        srv_request c; /* another choice's copy: borrows all but the grammar */
        if (srv_request_share(&q, &c)) {
            CHECK(c.borrowed && c.msgs == q.msgs && c.prompt == q.prompt && c.nstop == q.nstop);
            CHECK(!q.grammar ? !c.grammar : c.grammar != q.grammar && !strcmp(c.grammar, q.grammar) && c.samp.grammar == c.grammar);
            srv_request_free(&c);
            CHECK(!c.msgs && !c.grammar && !c.nstop);
        }
        srv_request_free(&q);
        CHECK(!q.msgs && !q.prompt && !q.prompt_ids && !q.nstop && !q.grammar);
    } else {
        CHECK(e.status == 400 || e.status == 500);
        CHECK(e.type && e.msg[0]);
        CHECK(e.status == 500 || e.code);
        CHECK(!q.msgs && !q.prompt && !q.nstop && !q.nmsgs);
    }
#else
    (void)chat;
#endif

    char *clean = srv_utf8_clean(body, len);
    if (clean) {
        CHECK(valid_utf8((const unsigned char *)clean, strlen(clean)));
        slm_xfree(clean);
    }
    size_t k = srv_utf8_complete(body, len);
    CHECK(k <= len && (len - k) < 4);
    return 0;
}
