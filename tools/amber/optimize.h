/* SHADER_OPTIMIZATION through SPIRV-Tools' spirv-opt (optimize.c). */
#ifndef VF_AMBER_OPTIMIZE_H
#define VF_AMBER_OPTIMIZE_H

#include "compile.h"

typedef enum { AM_OPT_OK, AM_OPT_FAILED, AM_OPT_UNAVAILABLE } am_opt_result;

/* Runs pl's pass flags over module m for target env (AM_ENV_*), replacing
   m's words. FAILED: msg has spirv-opt's message (an unknown pass, an
   invalid result); UNAVAILABLE: no spirv-opt to run (msg says so). */
am_opt_result am_optimize(uint32_t env, const am_pipeline *pl, am_spirv *m, char *msg, size_t msg_len);

#endif
