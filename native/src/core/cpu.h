/*
 * cpu.h - the CPU features the kernels choose their SIMD paths by, read once
 * per process (private). One place for every run-time choice: a kernel asks
 * px_cpu()->avx2 (or ->dotprod ...) instead of querying the CPU itself.
 * And the thread's floating-point mode (denormal handling), read and set.
 */
#ifndef PX_CPU_H
#define PX_CPU_H

#include <stdbool.h>
#include <stdint.h>

typedef struct px_cpu_features {
  /* x86-64 (__builtin_cpu_supports: CPUID plus the OS's saved register state) */
  bool avx2, fma;
  bool f16c;    /* VCVTPH2PS / VCVTPS2PH (CPUID 1 ECX bit 29, with the OS's AVX state) */
  bool avx512f, avx512bw, avx512vl, avx512vnni;
  bool avx512vbmi; /* VPERMB / VPERMI2B byte permutes */
  bool avxvnni; /* the VEX-encoded VNNI of Alder Lake and later */
  bool avx512fp16; /* float16 arithmetic in 512-bit registers (Sapphire Rapids and later) */
  /* AArch64 (getauxval(AT_HWCAP / AT_HWCAP2), what the kernel reports) */
  bool asimd;   /* Advanced SIMD (NEON): part of every AArch64 CPU */
  bool dotprod; /* SDOT / UDOT (HWCAP_ASIMDDP, Armv8.2 optional, 8.4 mandatory) */
  bool fp16;    /* half-precision arithmetic in scalar and vector (FPHP + ASIMDHP) */
  bool i8mm;    /* SMMLA / USDOT int8 matrix multiply (HWCAP2_I8MM) */
  bool sve;     /* Scalable Vector Extension */
} px_cpu_features;

/* This machine's features, computed on the first call (thread-safe) and
 * constant afterwards. Every flag is false on other architectures. */
const px_cpu_features *px_cpu(void);

/* The calling thread's floating-point control word (x86 MXCSR, AArch64
 * FPCR; 0 elsewhere), and setting it: the thread pool runs a job's chunks
 * under the control word of the thread that started it. */
uint64_t px_fp_mode(void);
void px_fp_set_mode(uint64_t mode);
/* Denormals off on this thread, as XNNPACK runs its operators: results
 * below the smallest normal float are flushed to zero, and such inputs read
 * as zero (x86 FTZ and DAZ; AArch64 FZ). Returns the previous word, for
 * px_fp_set_mode. */
uint64_t px_fp_flush_denormals(void);

#endif /* PX_CPU_H */
