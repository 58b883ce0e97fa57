/* A portable emulation of the AMX tile operations (Intel SDM, AMX chapter
 * pseudo-code): 8 tile registers of 16 rows x 64 bytes per thread, the
 * palette-1 configuration, TILELOADD / TILESTORED / TILEZERO, TDPBSSD,
 * TDPBSUD, TDPBUSD, TDPBUUD and TDPBF16PS. The AMX kernels' body is
 * written once against macros that map to these or to the intrinsics
 * (kernels_amx.c), so their layout and scale handling are tested on any
 * machine. A configuration or shape the hardware would fault on
 * (#GP / #UD) aborts. */
#ifndef SLM_AMX_EMU_H
#define SLM_AMX_EMU_H

#include <stddef.h>
#include <stdint.h>

/* LDTILECFG: palette 0 releases (all tiles unconfigured), palette 1
 * configures and zeroes every tile. */
void slm_amx_emu_ldtilecfg(const void *cfg64);
/* TILERELEASE */
void slm_amx_emu_release(void);
/* TILELOADD t, [base + stride * row]: rows x colsb bytes; the rest zero */
void slm_amx_emu_loadd(int t, const void *base, size_t stride);
/* TILESTORED [base + stride * row], t: rows x colsb bytes */
void slm_amx_emu_stored(int t, void *base, size_t stride);
/* TILEZERO t */
void slm_amx_emu_zero(int t);
/* TDPB{S,U}{S,U}D c, a, b: c[m][n] += sum_k sum_i a[m][4k+i] * b[k][4n+i],
 * a's bytes signed when sa, b's when sb; 32-bit wrap-around */
void slm_amx_emu_dpb(int c, int a, int b, int sa, int sb);
/* TDPBF16PS c, a, b: fp32 c[m][n] += a.bf16[m][2k] b.bf16[k][2n] + a[2k+1] b[2n+1],
 * inputs denormals as zero, each sum rounded to nearest even and flushed
 * to zero when denormal */
void slm_amx_emu_dpbf16ps(int c, int a, int b);

#endif
