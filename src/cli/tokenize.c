/* staticlm tokenize: print the token ids of a text, space-separated on one
 * line (like llama.cpp's tokenize tool with --ids).
 *
 * The vocabulary comes from a GGUF file (a model or a vocab-only file; read
 * with the GGUF reader directly, no tensors needed): tokenizer.ggml.model
 * "gpt2" uses the byte-level BPE tokenizer, "llama" the SentencePiece one,
 * "bert" the WordPiece one, "t5" the Unigram one.
 * A Hugging Face tokenizer.json works too, and a llama2.c model with its
 * tokenizer.bin (-z).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "format/gguf.h"
#include "format/model.h"
#include "text/bpe.h"
#include "text/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: staticlm tokenize -m MODEL|VOCAB.gguf|tokenizer.json -p TEXT [--no-bos] [--special]\n"
            "       staticlm tokenize [-m MODEL.bin] -z tokenizer.bin -p TEXT [--no-bos]\n"
            "\n"
            "Prints the token ids of TEXT, space-separated, on one line.\n"
            "\n"
            "  -m, --model PATH       GGUF model or vocab-only GGUF (tokenizer.ggml.model gpt2, llama, bert or t5),\n"
            "                         a Hugging Face tokenizer.json, or a llama2.c model (with -z)\n"
            "  -z, --tokenizer PATH   llama2.c tokenizer.bin\n"
            "  -p, --prompt TEXT      the text to tokenize\n"
            "  -f, --file PATH        read the text from a file instead (not with -p)\n"
            "      --no-bos           leave out BOS (and EOS where the vocabulary adds one; for bert [CLS] and [SEP];\n"
            "                         t5 adds BOS and EOS as its add_bos_token and add_eos_token ask, and only\n"
            "                         when add_bos_token is set, as llama-tokenize)\n"
            "      --special          let special-token text (e.g. <|endoftext|>) match special tokens;\n"
            "                         for SentencePiece vocabularies user-defined tokens always match\n"
            "                         and control tokens never do, so it has no effect there; for bert\n"
            "                         [CLS], [SEP], ... in the text match only with it, and for t5 <s>, </s>, ...\n"
            "  -h, --help             this text\n");
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static void print_ids(const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
}

static int run_bpe(const slm_bpe *t, const char *text, size_t len, int add_special, int special) {
    int n = slm_bpe_encode(t, text, len, add_special, add_special, special, NULL, 0);
    if (n < 0) {
        fprintf(stderr, "staticlm: %s\n", slm_tok_encode_error(n));
        return 1;
    }
    int32_t *ids = slm_malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "staticlm: out of memory\n");
        return 1;
    }
    n = slm_bpe_encode(t, text, len, add_special, add_special, special, ids, n);
    print_ids(ids, n);
    slm_xfree(ids);
    return 0;
}

/* SentencePiece (add_eos 0) or WordPiece (add_eos = add_bos: [CLS] ... [SEP]);
 * plain: NULL, or every byte marked so that no special-token text matches. */
static int run_spm(const slm_tokenizer *t, const char *text, int add_bos, int add_eos, const uint8_t *plain) {
    int n = slm_tok_encode_masked(t, text, plain, add_bos, add_eos, NULL, 0);
    if (n < 0) {
        fprintf(stderr, "staticlm: %s\n", slm_tok_encode_error(n));
        return 1;
    }
    int32_t *ids = slm_malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "staticlm: out of memory\n");
        return 1;
    }
    n = slm_tok_encode_masked(t, text, plain, add_bos, add_eos, ids, n);
    print_ids(ids, n);
    slm_xfree(ids);
    return 0;
}

/* vocab_size of a model file, read by the model loader (which checks the
 * header); -1 with the loader's message printed when it cannot. */
static int model_vocab(const char *path) {
    slm_model_file m;
    memset(&m, 0, sizeof m);
    slm_err err = {0};
    int v = -1;
    if (slm_model_open(&m, path, &err)) fprintf(stderr, "staticlm: %s\n", err.msg);
    else v = m.cfg.vocab_size;
    slm_model_close(&m);
    return v;
}

/* Number of records in a tokenizer.bin (when no model gives vocab_size). */
static int llama2c_tok_count(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int32_t maxlen;
    int n = 0;
    if (fread(&maxlen, 4, 1, f) == 1) {
        for (;;) {
            float sc;
            int32_t len;
            if (fread(&sc, 4, 1, f) != 1 || fread(&len, 4, 1, f) != 1 || len < 0 ||
                fseek(f, len, SEEK_CUR) != 0)
                break;
            n++;
            if (n >= (1 << 24)) break;
        }
    }
    fclose(f);
    return n > 0 ? n : -1;
}

int slm_cli_tokenize(int argc, char **argv) {
    const char *model = NULL, *tokp = NULL, *prompt = NULL, *file = NULL;
    int no_bos = 0, special = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(o, "--no-bos")) { no_bos = 1; continue; }
        if (!strcmp(o, "--special")) { special = 1; continue; }
        const char **dst = !strcmp(o, "-m") || !strcmp(o, "--model")       ? &model
                           : !strcmp(o, "-z") || !strcmp(o, "--tokenizer") ? &tokp
                           : !strcmp(o, "-p") || !strcmp(o, "--prompt")    ? &prompt
                           : !strcmp(o, "-f") || !strcmp(o, "--file")      ? &file
                                                                             : NULL;
        if (!dst) {
            fprintf(stderr, "staticlm: unknown option '%s' (see staticlm tokenize --help)\n", o);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "staticlm: %s needs a value\n", o);
            return 2;
        }
        *dst = v;
        i++;
    }
    if ((!model && !tokp) || (!prompt && !file)) {
        usage(stderr);
        return 2;
    }
    if (prompt && file) {
        fprintf(stderr, "staticlm: -p and -f both give the text: one of them\n");
        return 2;
    }
    char *fbuf = NULL;
    size_t len = prompt ? strlen(prompt) : 0;
    if (file) {
        slm_map fm;
        slm_err fe = {0};
        if (slm_map_file(&fm, file, &fe)) {
            fprintf(stderr, "staticlm: %s\n", fe.msg);
            return 1;
        }
        fbuf = slm_malloc((size_t)fm.size + 1);
        if (!fbuf) {
            slm_unmap(&fm);
            return 1;
        }
        memcpy(fbuf, fm.data, (size_t)fm.size);
        fbuf[fm.size] = 0;
        len = (size_t)fm.size;
        prompt = fbuf;
        slm_unmap(&fm);
    }
    slm_err err = {0};
    int rc = 1;
    if (tokp) { /* llama2.c tokenizer.bin */
        int nv = model ? model_vocab(model) : llama2c_tok_count(tokp);
        slm_tokenizer *t = NULL;
        if (nv < 0) fprintf(stderr, "staticlm: cannot tell the vocabulary size (from %s)\n", model ? model : tokp);
        else if (slm_tok_load_llama2c(&t, tokp, nv, &err)) fprintf(stderr, "staticlm: %s\n", err.msg);
        else rc = run_spm(t, prompt, !no_bos, 0, NULL);
        slm_tok_free(t);
    } else if (ends_with(model, ".json")) {
        slm_bpe *t = NULL;
        if (slm_bpe_load_hf_json(&t, model, &err)) fprintf(stderr, "staticlm: %s\n", err.msg);
        else rc = run_bpe(t, prompt, len, !no_bos, special);
        slm_bpe_free(t);
    } else {
        slm_map m;
        slm_gguf *g = NULL;
        slm_gguf_str kind;
        if (slm_map_file(&m, model, &err)) {
            fprintf(stderr, "staticlm: %s\n", err.msg);
        } else {
            if (slm_gguf_open(&g, m.data, m.size, slm_basename(model), &err)) {
                fprintf(stderr, "staticlm: %s\n", err.msg);
            } else if (!slm_gguf_get_str(g, "tokenizer.ggml.model", &kind)) {
                fprintf(stderr, "staticlm: %s: no tokenizer.ggml.model\n", slm_basename(model));
            } else if (slm_gguf_str_eq(kind, "gpt2")) {
                slm_bpe *t = NULL;
                if (slm_bpe_load_gguf(&t, g, slm_basename(model), &err)) fprintf(stderr, "staticlm: %s\n", err.msg);
                else rc = run_bpe(t, prompt, len, !no_bos, special);
                slm_bpe_free(t);
            } else if (slm_gguf_str_eq(kind, "llama")) {
                slm_tokenizer *t = NULL;
                int add_bos = 1;
                slm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos);
                if (slm_tok_load_gguf(&t, g, slm_basename(model), &err)) fprintf(stderr, "staticlm: %s\n", err.msg);
                else rc = run_spm(t, prompt, add_bos && !no_bos, 0, NULL);
                slm_tok_free(t);
            } else if (slm_gguf_str_eq(kind, "bert")) {
                slm_tokenizer *t = NULL;
                uint8_t *plain = special ? NULL : slm_malloc(len + 1);
                if (plain) memset(plain, 1, len + 1);
                if (!special && !plain) fprintf(stderr, "staticlm: out of memory\n");
                else if (slm_tok_load_gguf(&t, g, slm_basename(model), &err)) fprintf(stderr, "staticlm: %s\n", err.msg);
                else rc = run_spm(t, prompt, !no_bos, !no_bos, plain);
                slm_tok_free(t);
                slm_xfree(plain);
            } else if (slm_gguf_str_eq(kind, "t5")) { /* Unigram: BOS / EOS as llama-tokenize (add_special = add_bos) */
                slm_tokenizer *t = NULL;
                int add_bos = 0;
                slm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos);
                uint8_t *plain = special ? NULL : slm_malloc(len + 1);
                if (plain) memset(plain, 1, len + 1);
                if (!special && !plain) fprintf(stderr, "staticlm: out of memory\n");
                else if (slm_tok_load_gguf(&t, g, slm_basename(model), &err)) fprintf(stderr, "staticlm: %s\n", err.msg);
                else rc = run_spm(t, prompt, add_bos && !no_bos, add_bos && !no_bos, plain);
                slm_tok_free(t);
                slm_xfree(plain);
            } else {
                fprintf(stderr, "staticlm: %s: tokenizer.ggml.model '%.*s' is not supported (gpt2, llama, bert, t5)\n",
                        slm_basename(model), (int)(kind.len > 64 ? 64 : kind.len), kind.s);
            }
            slm_gguf_close(g);
            slm_unmap(&m);
        }
    }
    slm_xfree(fbuf);
    return rc;
}
