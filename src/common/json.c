/* cJSON's allocation hooks set to the library's allocator (common/json.h). */
#include "json.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#include <pthread.h>

#include "common.h"

static void set_hooks(void) {
    /* with these hooks cJSON reallocates by malloc + copy + free: every byte
     * it holds goes through slm_malloc / slm_xfree */
    cJSON_Hooks h = {slm_malloc, slm_xfree};
    cJSON_InitHooks(&h);
}

void slm_json_init_hooks(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, set_hooks);
}
#else
typedef int slm_json_unused; /* ISO C: a translation unit declares something */
#endif
