/* The AMX kernel set (kernels_amx.c; docs/amx.md): prefill matrix
 * multiplies of the repacked quantized types on AMX-INT8 tiles, everything
 * else (decode included) on the AVX-512 set. */
#ifndef SLM_KERNELS_AMX_H
#define SLM_KERNELS_AMX_H

#include <stdint.h>

#include "device/kernels.h"

/* The set; NULL when not compiled (not x86-64 gcc/clang). Runs only where
 * slm_cpu_features() has amx_tile, amx_int8 and amx_os (kernels_select.c). */
const slm_kernel_set *slm_kernels_amx(void);
/* The amx set with its tile kernel on the emulation ("amx-emu": slow; for
 * tests of the whole engine on the tile path where there is no AMX); runs
 * where the AVX-512 set does; NULL when not compiled. */
const slm_kernel_set *slm_kernels_amx_emu(void);
/* 1 if the amx set's tile path takes weights of type t (at rows > 1) */
int slm_amx_type(uint32_t t);
/* The same tile kernel compiled against the portable tile emulation
 * (device/amx_emu.h): any machine; for tests. mm as for a set's matmul,
 * wtype one of slm_amx_type, rows >= 1. */
void slm_amx_matmul_emu(const slm_mm *mm);
/* Block b of the r16 group at grp (16 columns, k elements) as the
 * kernel's signed VNNI-4 B tile (byte 64 v + 4 c + e: element 4v + e of
 * column c) with its scales (value = wd[e / 16][c] * code + wm[c]): the
 * hardware path's unpacking (AVX-512, every type of slm_amx_type); for
 * tests, on a CPU with the AVX-512 set. */
void slm_amx_unpack_avx512(uint32_t t, const void *grp, int k, int b, int8_t bt[512], float wd[2][16], float wm[16]);
/* The matrix engine's measured int8 peak, operations (2 per multiply-add)
 * per second on one core: a dependent chain of TDPBUSD on each of the 4
 * accumulator tiles for about `seconds`. 0 where there is no AMX. */
double slm_amx_int8_peak(double seconds);

#endif
