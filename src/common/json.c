/* cJSON's allocation hooks set to the library's allocator (common/json.h). */
#include "json.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#include <pthread.h>

#include "common.h"

static _Thread_local int t_oom; /* an allocation failed since slm_json_oom_clear */

static void *json_malloc(size_t n) {
    void *p = slm_malloc(n);
    if (!p) t_oom = 1;
    return p;
}

void slm_json_oom_clear(void) { t_oom = 0; }
int slm_json_oom(void) { return t_oom; }

static void set_hooks(void) {
    /* with these hooks cJSON reallocates by malloc + copy + free: every byte
     * it holds goes through slm_malloc / slm_xfree */
    cJSON_Hooks h = {json_malloc, slm_xfree};
    cJSON_InitHooks(&h);
}

void slm_json_init_hooks(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, set_hooks);
}
#else
typedef int slm_json_unused; /* ISO C: a translation unit declares something */
#endif
