/* Fill in the middle: slm_fim_get finds a code model's FIM tokens by their
 * texts (StarCoder's vocabulary: <fim_prefix> 1, <fim_middle> 2,
 * <fim_suffix> 3, <fim_pad> 4, <file_sep> 6; the file names no FIM keys);
 * pad and the file separator join the stop set, as in llama.cpp; a model
 * without them has none. Small files from `staticlm synth`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "staticlm.h"
#include "t.h"
#include "t_engine.h"
#include "run_cmd.h"

static char dir[256];

static slm_engine *load(const char *model, const char *tok) {
    slm_options o = slm_default_options();
    o.tokenizer_path = tok;
    o.max_prompt_len = 16;
    o.min_response_len = 16;
    return t_load(model, &o);
}

static int is_stop(slm_engine *e, int id) {
    int32_t ids[16];
    const int n = slm_stop_tokens(e, ids, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (ids[i] == id) return 1;
    return 0;
}

static void test_starcoder_vocab(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/sc.gguf", dir);
    char *argv[] = {"staticlm", "synth", "--shape", "custom", "--type", "f16", "--vocab-file",
                    T_SHARED("vocab/ggml-vocab-starcoder.gguf"), "-o", path, NULL};
    char *out = NULL, *er = NULL;
    CHECKF(t_run_capture(dir, SLM_CLI_PATH, argv, &out, &er) == 0, "%s", er ? er : "");
    free(out);
    free(er);
    slm_engine *e = load(path, NULL);
    CHECK(e != NULL);
    if (!e) return;
    slm_fim_tokens f;
    CHECK(slm_fim_get(e, &f) == 1);
    CHECK(f.pre == 1 && f.mid == 2 && f.suf == 3 && f.pad == 4 && f.sep == 6);
    CHECK(!strcmp(slm_token_piece(e, -1, f.pre), "<fim_prefix>"));
    CHECK(is_stop(e, f.pad) && is_stop(e, f.sep) && !is_stop(e, f.pre) && !is_stop(e, f.mid));
    slm_free(e);
}

static void test_none(void) {
    slm_engine *e = load(T_SHARED("models/stories260K.bin"), T_SHARED("models/tok512.bin"));
    CHECK(e != NULL);
    if (!e) return;
    slm_fim_tokens f;
    CHECK(slm_fim_get(e, &f) == 0);
    CHECK(f.pre == -1 && f.suf == -1 && f.mid == -1 && f.pad == -1 && f.rep == -1 && f.sep == -1);
    slm_free(e);
    CHECK(slm_fim_get(NULL, &f) == 0 && f.pre == -1);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_test_fim_%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) return 1;
    T_RUN(test_starcoder_vocab);
    T_RUN(test_none);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    T_DONE();
}
