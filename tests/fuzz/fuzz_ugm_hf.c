/* libFuzzer target for a Hugging Face folder's Unigram tokenizer.json
 * (text/ugm_hf.c). The first input byte picks what the rest is:
 *  0: a tokenizer.json: refused cleanly (a message naming the file) or
 *     loaded, and then a fixed text and the input's own bytes encode with
 *     every id in range;
 *  1: a tokenizer_config.json beside a fixed small tokenizer.json: the
 *     same, its special names and flags read from the input;
 *  2: base64: the strict decoder's count agrees with a decode into a buffer
 *     of exactly that size (ASan checks the writes), a rejected input
 *     names an offset within it.
 * Built and run by tests/fuzz/run.sh (from the repository's root).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe.h"
#include "text/ugm.h"

static const char SMALL[] =
    "{\"added_tokens\": [{\"id\": 0, \"content\": \"<s>\", \"special\": true}, {\"id\": 2, \"content\": \"</s>\", "
    "\"special\": true}, {\"id\": 3, \"content\": \"<unk>\", \"special\": true}], \"normalizer\": {\"type\": "
    "\"Sequence\", \"normalizers\": [{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"AAAAAAA=\"}, {\"type\": "
    "\"Replace\", \"pattern\": {\"Regex\": \" {2,}\"}, \"content\": \" \"}]}, \"pre_tokenizer\": {\"type\": "
    "\"Metaspace\", \"replacement\": \"\xe2\x96\x81\", \"prepend_scheme\": \"always\"}, \"post_processor\": {\"type\": "
    "\"RobertaProcessing\", \"sep\": [\"</s>\", 2], \"cls\": [\"<s>\", 0]}, \"model\": {\"type\": \"Unigram\", "
    "\"unk_id\": 3, \"vocab\": [[\"<s>\", 0], [\"<pad>\", 0], [\"</s>\", 0], [\"<unk>\", 0], [\"\xe2\x96\x81\", -2], "
    "[\"a\", -3], [\"\xe2\x96\x81" "ab\", -1], [\"b\", -3.5]]}}";

static void use(slm_ugm *u, const uint8_t *data, size_t size) {
    static const char text[] = "ab a  b <s> \xc3\xa9";
    int32_t ids[256];
    const int n = slm_ugm_encode(u, text, sizeof text - 1, NULL, 1, 1, 1, ids, 256);
    if (n < 0 && n != SLM_TOK_EBUDGET) abort();
    for (int i = 0; i < n && i < 256; i++)
        if (ids[i] < 0 || ids[i] >= slm_ugm_vocab_size(u)) abort();
    const int m = slm_ugm_encode(u, (const char *)data, size, NULL, 1, 1, 0, ids, 256);
    for (int i = 0; i < m && i < 256; i++)
        if (ids[i] < 0 || ids[i] >= slm_ugm_vocab_size(u)) abort();
    slm_ugm_free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int mode = data[0] % 3;
    data++, size--;
    slm_ugm *u = NULL;
    slm_err err = {0};
    slm_ugm_hf info;
    if (mode == 0 || mode == 1) {
        const slm_status st = mode == 0
            ? slm_ugm_load_hf_json_mem(&u, (const char *)data, size, NULL, 0, 16, "tokenizer.json", &info, &err)
            : slm_ugm_load_hf_json_mem(&u, SMALL, sizeof SMALL - 1, (const char *)data, size, 0, "tokenizer.json", &info, &err);
        if (st != SLM_OK) {
            if (u || !strstr(err.msg, "tokenizer.json")) abort();
            return 0;
        }
        if (!u) abort();
        use(u, data, size);
        return 0;
    }
    size_t bad = 0;
    const size_t n = slm_b64_decode((const char *)data, size, NULL, &bad);
    if (bad != SIZE_MAX) {
        if (n || bad > size) abort();
        return 0;
    }
    if (n > size / 4 * 3 || n + 2 < size / 4 * 3) abort(); /* 3 bytes a quad, less 0..2 of padding */
    uint8_t *out = malloc(n ? n : 1);
    size_t bad2 = 0;
    if (!out) return 0;
    if (slm_b64_decode((const char *)data, size, out, &bad2) != n || bad2 != SIZE_MAX) abort();
    free(out);
    return 0;
}
