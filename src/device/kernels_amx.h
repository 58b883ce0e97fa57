/* The AMX kernel set (kernels_amx.c; docs/amx.md): prefill matrix
 * multiplies of the repacked quantized types on AMX-INT8 tiles and of BF16
 * matrices on AMX-BF16 tiles, everything else (decode and F16 included)
 * on the AVX-512 set. */
#ifndef SLM_KERNELS_AMX_H
#define SLM_KERNELS_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "device/kernels.h"

/* The set; NULL when not compiled (not x86-64 gcc/clang). Runs only where
 * slm_cpu_features() has amx_tile, amx_int8 and amx_os (kernels_select.c). */
const slm_kernel_set *slm_kernels_amx(void);
/* The amx set with its tile kernel on the emulation ("amx-emu": slow; for
 * tests of the whole engine on the tile path where there is no AMX); runs
 * where the AVX-512 set does; NULL when not compiled. */
const slm_kernel_set *slm_kernels_amx_emu(void);
/* 1 if the amx set's int8 tile path takes weights of type t (at rows > 1; BF16 has its own) */
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
/* The BF16 tile kernel (TDPBF16PS) compiled against the emulation: any
 * machine; for tests. mm as for a set's matmul, wtype SLM_BF16 (weights
 * [n][k] row-major, any k), rows >= 1, scratch of
 * slm_matmul_scratch_bytes(SLM_BF16, k, max(rows, 2)) bytes: the
 * activations rounded to bf16 there, fp32 accumulation. */
void slm_amx_matmul_bf16_emu(const slm_mm *mm);
/* The BF16 kernel's VNNI-2 B tile: elements k0 .. k0+31 of the 16 weight
 * rows (output columns) at grp, wrow bytes apart, as 16 rows of 64 bytes:
 * bt[32 r + 2 c + e] = W[c][k0 + 2 r + e]; zero for columns outside
 * [c0, c1) (never read) and elements at or past k. Plain C (the emulated
 * kernel's) and AVX-512 (the hardware kernel's: a dword transpose; on a
 * CPU with the AVX-512 set; the plain C one where it is not compiled). */
void slm_amx_bf16_unpack(const void *grp, uint64_t wrow, int c0, int c1, int k, int k0, uint16_t bt[512]);
void slm_amx_bf16_unpack_avx512(const void *grp, uint64_t wrow, int c0, int c1, int k, int k0, uint16_t bt[512]);
/* Float rows (x + i * ldx, k each) as three bf16 pieces into xb
 * [3][rows][kpad], kpad = k rounded up to 32, the tail zero: plane 0 the
 * value rounded to nearest even, planes 1 and 2 the residuals rounded the
 * same way, so p0 + p1 + p2 = x exactly for finite x (infinities, NaN and
 * values whose p0 overflows: p0 alone). Plain C and AVX-512 (same bits). */
void slm_amx_bf16_act(const float *x, size_t ldx, int rows, int k, uint16_t *xb);
void slm_amx_bf16_act_avx512(const float *x, size_t ldx, int rows, int k, uint16_t *xb);
/* The matrix engine's measured int8 peak, operations (2 per multiply-add)
 * per second on one core: a dependent chain of TDPBUSD on each of the 4
 * accumulator tiles for about `seconds`. 0 where there is no AMX. */
double slm_amx_int8_peak(double seconds);

#endif
