/* Open a model by what the path holds: a folder (Hugging Face), a GGUF
 * file (by magic), else a llama2.c checkpoint; then validate it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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

