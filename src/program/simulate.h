/* program/simulate.h — replay a program's task list on a parameterised
 * accelerator (docs/simulate.md).
 *
 * The device is three lanes: transfer (DMA: every byte a task reads or
 * writes, one shared stream at the lane's bandwidth), matrix (the DPU:
 * matmul tiles, at a rate per weight type) and vector (the SHAVEs: norms,
 * RoPE, attention, embedding, adds). A lane has `units` engines that work
 * in parallel; the transfer lane serves one request at a time. Each task is
 * a transfer (its bytes) followed by a compute slice (its launch cost plus
 * its operations at the lane's rate) on one unit of its lane; a unit keeps
 * `tiles_in_flight` buffers, so the transfer of its next tile may run while
 * it computes the current one (double buffering at 2, none at 1). A tile
 * whose bytes do not fit a buffer (scratchpad / tiles_in_flight) is split
 * into pieces that each pay a launch and reload the operand they share.
 * A barrier waits for every task of its stage and costs `barrier_ns`.
 * Everything is arithmetic on the task records: no weights are read.
 */
#ifndef SLM_PROGRAM_SIMULATE_H
#define SLM_PROGRAM_SIMULATE_H

#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "common/dtype.h"
#include "program/program.h"

/* Lanes: slm_lane of program/task.h (each task record names its own). */

#define SLM_SIM_MAX_UNITS 64

/* A device profile (a JSON file in profiles/; keys in docs/simulate.md). Rates are
 * the lane's total; a lane's units share it evenly. */
typedef struct slm_sim_profile {
    char name[64];
    char description[256];
    int estimate;                  /* 1: built from published figures, not measured here */
    double xfer_gbps;              /* transfer lane bandwidth, GB/s (= bytes per ns) */
    double cache_gbps;             /* bandwidth when a call's weight bytes fit cache_bytes (0: none) */
    uint64_t cache_bytes;
    int matrix_units, vector_units;
    int shared_units;              /* 1: matrix and vector work run on the same units (CPU cores) */
    double matrix_gops[SLM_DTYPE_COUNT]; /* per base weight type (0: use matrix_default_gops) */
    double matrix_default_gops;
    double matrix_attention_gops;  /* attention tasks on the matrix lane (0: the default rate) */
    double vector_gflops;
    uint64_t scratch_bytes;        /* per unit */
    int tiles_in_flight;           /* buffers per unit: 1 = no overlap, 2 = double buffering */
    double launch_ns;              /* per task (and per piece of a split tile) */
    double barrier_ns;             /* per barrier */
    double call_ns;                /* per program call (binding, the runtime's own work) */
    int activation_bytes;          /* bytes per activation / KV element (0: 4, the engine's f32) */
    int static_rows;               /* 1: padding rows and masked KV rows are computed (static
                                      shapes on the device); 0: skipped (the CPU executor) */
} slm_sim_profile;

/* Parse a profile from JSON text; `file` names it in errors (every error
 * names the file and the key). */
slm_status slm_sim_profile_parse(slm_sim_profile *p, const char *json, const char *file, slm_err *err);
/* Read and parse a profile file. */
slm_status slm_sim_profile_load(slm_sim_profile *p, const char *path, slm_err *err);
/* A lane's total rate for a task in operations per ns (0 for the transfer
 * lane); each of its units runs at rate / units. */
double slm_sim_rate(const slm_sim_profile *p, slm_lane lane, uint32_t wtype);

/* The lane a task runs on: the record's own (set by the compiler); the one
 * place the simulator asks. BARRIER, NOP and PREFETCH: SLM_LANE_COUNT (not
 * charged: the matrix task that reads the weights pays their transfer).
 * COPY_ROW: the transfer lane alone. */
slm_lane slm_sim_lane_of(const slm_task *t);

/* One task's cost for a call with `rows` valid input rows whose first is at
 * KV position `depth0` (row r at depth0 + r). */
typedef struct slm_sim_cost {
    uint64_t bytes_read, bytes_written; /* activations + weights + KV (+ reloads of split pieces) */
    double ops;                         /* 2*rows*n*k for a matmul; flops for vector work */
    int pieces;                         /* scratchpad pieces (1 when the tile fits) */
    uint64_t shared_bytes;              /* bytes a unit keeps between tasks of the same input */
} slm_sim_cost;
void slm_sim_task_cost(const slm_sim_profile *p, const slm_program *prog, const slm_task *t, int rows, int depth0,
                       int kv_cap, slm_sim_cost *c);

/* What one program call took. */
typedef struct slm_sim_result {
    double ns;                          /* wall time of the call */
    double busy_ns[SLM_LANE_COUNT];     /* time each lane was busy (summed over its units) */
    double bound_ns[SLM_LANE_COUNT];    /* the wall time of the stages each lane bounds */
    double overhead_ns;                 /* ... and of those launches and barriers bound */
    double barrier_ns, launch_ns;
    uint64_t bytes;
    double ops[SLM_LANE_COUNT];
    double matrix_ops_by_type[SLM_DTYPE_COUNT]; /* matrix ops per base weight type */
    int stages, tasks;
} slm_sim_result;

/* Trace output: events appended to a Chrome trace (docs/trace.md) at time
 * offset t0_ns; tids: 0 = the runtime's slices, 1 = transfer, then the
 * matrix units, then the vector units (not when shared). NULL: no trace. */
typedef struct slm_sim_trace {
    FILE *f;
    double t0_ns;
    uint64_t events;
} slm_sim_trace;
void slm_sim_trace_open(slm_sim_trace *tr, FILE *f, const slm_sim_profile *p);
void slm_sim_trace_slice(slm_sim_trace *tr, const char *name, const char *prog, double t0_ns, double dur_ns,
                         int rows, int position);
void slm_sim_trace_close(slm_sim_trace *tr);

/* Simulate one call of prog with `rows` valid input rows (the prefill rows
 * of a chunk, 1 for decode) at KV depth depth0. static_rows profiles run all
 * of prog->rows and all KV rows of the capacity. */
void slm_sim_run(const slm_sim_profile *p, const slm_program *prog, int rows, int depth0, slm_sim_result *r,
                 slm_sim_trace *tr);

/* The lane that bounds a result ("transfer", "matrix", "vector", or
 * "overhead" when launches and barriers take the most). */
const char *slm_sim_bound(const slm_sim_result *r);

#endif
