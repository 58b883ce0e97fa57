/* Open a model by what the path holds: a folder (Hugging Face), a GGUF
 * file (by magic), else a llama2.c checkpoint; then validate it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/hf.h"
#include "format/model.h"

slm_status slm_model_open(slm_model_file *m, const char *path, slm_err *err) {
    slm_status s;
    memset(m, 0, sizeof *m);
    if (!path) return slm_errf(err, SLM_ERR_ARG, "model: NULL path");
    if (strlen(path) >= sizeof m->path)
        return slm_errf(err, SLM_ERR_ARG, "%s: path too long (%zu bytes, at most %zu)", slm_basename(path),
                        strlen(path), sizeof m->path - 1);
    memcpy(m->path, path, strlen(path) + 1);
    struct stat st; /* hf: a folder is a Hugging Face model (config.json + safetensors) */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) s = slm_hf_model_load(m, err);
    else if ((s = slm_map_file(&m->map, path, err))) return s;
    else if (m->map.size >= 4 && memcmp(m->map.data, "GGUF", 4) == 0) s = slm_gguf_model_load(m, err);
    else s = slm_llama2c_load(m, err);
    if (s) goto fail_close_model;
    if ((s = slm_model_validate(m, err))) goto fail_close_model;
    return SLM_OK;

fail_close_model:
    slm_model_close(m);
    return s;
}

int slm_model_peek_encoder(const char *path) {
    struct stat st;
    slm_err err = {0};
    if (!path || stat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) { /* the architecture as config.json gives it */
        char cfg[4200], *json = NULL;
        size_t len = 0;
        if (snprintf(cfg, sizeof cfg, "%s/config.json", path) >= (int)sizeof cfg ||
            slm_hf_read_small(cfg, "config.json", 1, &json, &len, &err) || !json)
            return 0;
        slm_model_config c;
        float *freqs = NULL;
        const int enc = slm_hf_parse_config(&c, &freqs, json, len, "config.json", &err) == SLM_OK && c.encoder != 0;
        slm_xfree(freqs);
        slm_xfree(json);
        return enc;
    }
    slm_map map;
    memset(&map, 0, sizeof map);
    if (slm_map_file(&map, path, &err)) return 0;
    int enc = 0;
    slm_gguf *g = NULL;
    if (map.size >= 4 && memcmp(map.data, "GGUF", 4) == 0 && slm_gguf_open(&g, map.data, map.size, slm_basename(path), &err) == SLM_OK) {
        slm_gguf_str a;
        char A[64];
        if (slm_gguf_get_str(g, "general.architecture", &a) && a.len < sizeof A) {
            memcpy(A, a.s, a.len);
            A[a.len] = 0;
            enc = slm_gguf_bert_family(A) || !strcmp(A, "gemma-embedding"); /* gguf_model.c's encoders */
        }
        slm_gguf_close(g);
    }
    slm_unmap(&map);
    return enc;
}
