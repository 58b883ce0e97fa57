/* Outside CI: staticlm's logits on the folder tools/qwen35_hf_ref.py wrote, against its
 * ref.bin (max |diff| over the range of the reference logits, worst of the 20 positions). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/compiler.h"
#include "format/model.h"
#include "runtime/runtime.h"
int main(int argc, char **argv) {
    const char *dir = argv[1];
    char p[512];
    int32_t ids[20];
    float *ref = malloc(20 * 160 * 4);
    snprintf(p, sizeof p, "%s/ids.bin", dir);
    FILE *f = fopen(p, "rb"); if (fread(ids, 4, 20, f) != 20) return 1; fclose(f);
    snprintf(p, sizeof p, "%s/ref.bin", dir);
    f = fopen(p, "rb"); if (fread(ref, 4, 20 * 160, f) != 20 * 160) return 1; fclose(f);
    slm_model_file m; slm_compiled c; slm_runtime rt; slm_err err = {0};
    memset(&c, 0, sizeof c);
    slm_compile_options o; memset(&o, 0, sizeof o); o.max_prompt_len = 8; o.min_response_len = 32;
    if (slm_model_open(&m, dir, &err) || slm_model_repack(&m, &err) || slm_compile(&c, &m, &o, &err) ||
        slm_rt_init(&rt, &c, m.map.data, 1, &err)) { printf("error: %s\n", err.msg); return 1; }
    double worst = 0;
    if (slm_rt_prefill(&rt, ids, 1, &err)) { printf("%s\n", err.msg); return 1; }
    for (int t = 0; t < 20; t++) {
        if (t && slm_rt_decode(&rt, ids[t], &err)) { printf("%s\n", err.msg); return 1; }
        double md = 0, mn = 1e30, mx = -1e30;
        for (int i = 0; i < 160; i++) {
            const double r = ref[t * 160 + i];
            md = fmax(md, fabs(rt.logits[i] - r)); mn = fmin(mn, r); mx = fmax(mx, r);
        }
        worst = fmax(worst, md / (mx - mn));
    }
    printf("%s: arch %s, vh %d kh %d: max |diff| / range over 20 positions = %.3g\n", dir, m.cfg.arch, m.cfg.ssm_v_heads,
           m.cfg.ssm_k_heads, worst);
    return 0;
}
