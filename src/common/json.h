/* common/json.h — cJSON's heap through the library's allocator.
 * Every file that parses or builds JSON with cJSON calls slm_json_init_hooks
 * first (it installs slm_malloc / slm_xfree as cJSON's hooks once, thread
 * safe), so that cJSON_free / cJSON_Delete and slm_xfree agree. */
#ifndef SLM_JSON_H
#define SLM_JSON_H

#ifdef SLM_HAVE_CJSON
void slm_json_init_hooks(void);
#endif

#endif
