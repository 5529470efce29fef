/*
 * cpu.c - px_cpu(): the CPU features behind every run-time kernel choice,
 * read once per process; px_fp_*: the thread's floating-point mode.
 */
#include "core/cpu.h"

#include <pthread.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <xmmintrin.h>
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
/* The bits are the Linux kernel's ABI (arch/arm64/include/uapi/asm/hwcap.h);
 * spelled out for C libraries whose headers predate them. */
#ifndef AT_HWCAP2
#define AT_HWCAP2 26
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1UL << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1UL << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1UL << 22)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

static px_cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;
static int features_ready; /* set (release) once features is written */

static void detect(void) {
  px_cpu_features f;
  memset(&f, 0, sizeof f);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
  /* AVX-VNNI: CPUID leaf 7 subleaf 1, EAX bit 4 (read directly: not every
   * compiler's __builtin_cpu_supports knows the name); its registers are the
   * AVX ones, whose OS support the avx2 check already includes */
  unsigned int a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) f.f16c = __builtin_cpu_supports("avx") && (c & (1u << 29)) != 0;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avxvnni = f.avx2 && (a & (1u << 4)) != 0;
  /* AVX512-FP16: leaf 7 subleaf 0, EDX bit 23; its registers are AVX-512's,
   * whose OS support the avx512f check already includes */
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) f.avx512fp16 = f.avx512f && (d & (1u << 23)) != 0;
#elif defined(__aarch64__)
  f.asimd = true; /* mandatory in AArch64; the compiler already relies on it */
#if defined(__linux__)
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
  f.fp16 = (hw & HWCAP_FPHP) != 0 && (hw & HWCAP_ASIMDHP) != 0;
  f.sve = (hw & HWCAP_SVE) != 0;
  f.i8mm = (hw2 & HWCAP2_I8MM) != 0;
#endif
#endif
  features = f;
  __atomic_store_n(&features_ready, 1, __ATOMIC_RELEASE);
}

/* Kernels ask per call (some per row): after the first call this is one
 * acquire load, not a call into the C library. */
const px_cpu_features *px_cpu(void) {
  if (!__atomic_load_n(&features_ready, __ATOMIC_ACQUIRE)) pthread_once(&features_once, detect);
  return &features;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
uint64_t px_fp_mode(void) { return _mm_getcsr(); }
void px_fp_set_mode(uint64_t mode) { _mm_setcsr((unsigned)mode); }
uint64_t px_fp_flush_denormals(void) {
  const uint64_t old = px_fp_mode();
  px_fp_set_mode(old | 0x8000u /* FTZ */ | 0x0040u /* DAZ */);
  return old;
}
#elif defined(__aarch64__)
uint64_t px_fp_mode(void) {
  uint64_t v;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
  return v;
}
void px_fp_set_mode(uint64_t mode) { __asm__ __volatile__("msr fpcr, %0" : : "r"(mode)); }
uint64_t px_fp_flush_denormals(void) {
  const uint64_t old = px_fp_mode();
  px_fp_set_mode(old | (UINT64_C(1) << 24) /* FZ */);
  return old;
}
#else
uint64_t px_fp_mode(void) { return 0; }
void px_fp_set_mode(uint64_t mode) { (void)mode; }
uint64_t px_fp_flush_denormals(void) { return 0; }
#endif
