/* common/json.h — cJSON's heap through the library's allocator.
 * Every file that parses or builds JSON with cJSON calls slm_json_init_hooks
 * first (it installs slm_malloc / slm_xfree as cJSON's hooks once, thread
 * safe), so that cJSON_free / cJSON_Delete and slm_xfree agree. */
#ifndef SLM_JSON_H
#define SLM_JSON_H

#ifdef SLM_HAVE_CJSON
void slm_json_init_hooks(void);
/* cJSON reports a failed allocation as a syntax error: clear the flag before
 * a parse, and after a failed one slm_json_oom() says 1 when an allocation
 * of this thread failed meanwhile (out of memory, not invalid JSON). */
void slm_json_oom_clear(void);
int slm_json_oom(void);
#endif

#endif
