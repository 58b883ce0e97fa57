/* The tile operations the AMX kernel bodies are written against
 * (kernels_amx_body.h, kernels_amx_bf16_body.h, attention_amx_body.h):
 *   AMX_ATTR, AMX_NAME(x)            the functions' attributes and names
 *   T_CFG(cfg) T_RELEASE()           LDTILECFG, TILERELEASE
 *   T_LOAD(t, p, stride)             TILELOADD (t a constant)
 *   T_ZERO(t) T_STORE(t, p, stride)  TILEZERO, TILESTORED
 *   T_DPBSSD(c, a, b)                TDPBSSD (int8 x int8 into int32)
 *   T_DPBF(c, a, b)                  TDPBF16PS (bf16 x bf16 into fp32)
 * Included with AMX_OPS_EMU defined: on the portable emulation
 * (device/amx_emu.h), names emu_*; without: on gcc's intrinsics under the
 * AMX target (x86-64, gcc >= 11 or clang; <immintrin.h> included first),
 * names hw_*. Included with AMX_OPS_DONE defined: all undefined again, so
 * a file can compile its bodies both ways. No include guard on purpose. */
#if defined(AMX_OPS_DONE)
#undef AMX_ATTR
#undef AMX_NAME
#undef T_CFG
#undef T_RELEASE
#undef T_LOAD
#undef T_ZERO
#undef T_STORE
#undef T_DPBSSD
#undef T_DPBF
#undef AMX_BARRIER
#undef AMX_OPS_DONE
#elif defined(AMX_OPS_EMU)
#define AMX_ATTR
#define AMX_NAME(x) emu_##x
#define T_CFG(cfg) slm_amx_emu_ldtilecfg(cfg)
#define T_RELEASE() slm_amx_emu_release()
#define T_LOAD(t, p, s) slm_amx_emu_loadd(t, p, s)
#define T_ZERO(t) slm_amx_emu_zero(t)
#define T_STORE(t, p, s) slm_amx_emu_stored(t, p, s)
#define T_DPBSSD(c, a, b) slm_amx_emu_dpb(c, a, b, 1, 1)
#define T_DPBF(c, a, b) slm_amx_emu_dpbf16ps(c, a, b)
#undef AMX_OPS_EMU
#else
/* every AMX machine (Sapphire Rapids on) has these */
#define AMX_ATTR                                                                                                       \
    __attribute__((target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")))
#define AMX_NAME(x) hw_##x
/* gcc 12's _tile_loadd and _tile_loadconfig do not tell the compiler they
 * read memory (tileloadd takes its address in a register; ldtilecfg names 8
 * of its 64 bytes): without the barrier, the stores that build a tile's
 * buffer or the configuration could be sunk past them or dropped as dead.
 * (gcc's tilestored clobbers memory itself.) */
#define AMX_BARRIER() __asm__ volatile("" ::: "memory")
#define T_CFG(cfg)                                                                                                     \
    do {                                                                                                               \
        AMX_BARRIER();                                                                                                 \
        _tile_loadconfig(cfg);                                                                                         \
    } while (0)
#define T_RELEASE() _tile_release()
#define T_LOAD(t, p, s)                                                                                                \
    do {                                                                                                               \
        AMX_BARRIER();                                                                                                 \
        _tile_loadd(t, p, s);                                                                                          \
    } while (0)
#define T_ZERO(t) _tile_zero(t)
#define T_STORE(t, p, s) _tile_stored(t, p, s)
#define T_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#define T_DPBF(c, a, b) _tile_dpbf16ps(c, a, b)
#endif
