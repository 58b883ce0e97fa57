/* libFuzzer target for the blob loader (src/blob/blob_read.c): every input
 * is either refused with a message that names the file, or validated; a
 * validated blob is then bound and run for one prefill and one decode step
 * on one thread (with embedding programs: one text, then two through the
 * batch ones; with batch programs: a prefill in each of its KV regions and
 * a batch step of each size), so the validator's promise (no task reads or writes
 * outside its buffers) is checked by ASan. The checksum is skipped
 * (SLM_BLOB_NO_CHECKSUM), otherwise nearly every mutation would stop there.
 * Built and run by tests/fuzz/run.sh; by hand:
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L \
 *     -D_DEFAULT_SOURCE -Iinclude -Isrc tests/fuzz/fuzz_blob.c $(library sources) -lm -lpthread
 *   ./fuzz_blob -max_total_time=60 CORPUS_DIR   (seed: staticlm compile -o of a small model)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "blob/blob.h"
#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The rows an embedding program hands over: read, so ASan sees them. */
static volatile float g_sink;
static void take_rows(void *ud, const float *rows, int first, int n_rows, int dim) {
    (void)ud, (void)first;
    for (int i = 0; i < n_rows * dim; i++) g_sink += rows[i];
}
static void take_text(void *ud, int text, const float *rows, int n_rows, int dim) { take_rows(ud, rows, text, n_rows, dim); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok = NULL;
    slm_err err = {0};
    slm_status s = slm_blob_open_mem(&b, data, size, "fuzz.blob", SLM_BLOB_NO_CHECKSUM, &c, &tok, &err);
    if (s) {
        if (!err.msg[0] || !strstr(err.msg, "fuzz.blob")) {
            fprintf(stderr, "refused without naming the file: '%s'\n", err.msg);
            __builtin_trap();
        }
        return 0;
    }
    /* small models only: the KV cache and arena of a fuzzed config could be huge */
    uint64_t kv = (uint64_t)c.cfg.n_layers * 2 * (uint64_t)c.n_seqs * (uint64_t)c.kv_capacity *
                  (uint64_t)c.cfg.n_kv_heads * (uint64_t)c.cfg.head_dim * 4;
    uint64_t arena = 0;
    for (int i = 0; i < c.n_progs; i++)
        if (c.progs[i].arena_bytes > arena) arena = c.progs[i].arena_bytes;
    if (kv < (64u << 20) && arena < (64u << 20) && (uint64_t)c.cfg.vocab_size * c.kv_capacity < (64u << 20)) {
        slm_runtime rt;
        if (c.n_seqs <= 8 && slm_rt_init_seqs(&rt, &c, b.weights, 1, c.n_seqs, 0, &err) == SLM_OK) {
            int32_t ids[8] = {1 % c.cfg.vocab_size, 2 % c.cfg.vocab_size, 3 % c.cfg.vocab_size};
            if (slm_largest(&c, SLM_PROG_EMBED)) { /* embedding programs: one text, then two in regions */
                (void)slm_rt_embed(&rt, ids, 3, take_rows, NULL, &err);
                const int32_t *texts[2] = {ids, ids + 1};
                const int n[2] = {3, 2};
                if (slm_rt_embed_region_max(&rt) >= 3) (void)slm_rt_embed_batch(&rt, 2, texts, n, take_text, NULL, &err);
            }
            if (slm_largest(&c, SLM_PROG_GENERATE) && slm_rt_prefill(&rt, ids, 3, &err) == SLM_OK)
                (void)slm_rt_decode(&rt, ids[0], &err);
            if (c.n_seqs > 1) { /* the batch programs: every region holds a prompt, then each batch size */
                int seqs[8];
                const float *lg;
                for (int q = 0; q < c.n_seqs; q++) {
                    seqs[q] = q;
                    ids[q] = ids[0];
                    slm_rt_select(&rt, q);
                    (void)slm_rt_prefill(&rt, ids, 3, &err);
                }
                for (int k = 2; k <= c.n_seqs; k++) (void)slm_rt_decode_batch(&rt, seqs, ids, k, &lg, &err);
            }
            slm_rt_free(&rt);
        }
    }
    slm_tok_free(tok);
    slm_compiled_free(&c);
    return 0;
}
