/*
 * glibc_2_17.h - force-included (`-include`) into every source file of the
 * library built for the wheel (`make dist`), never into the development build.
 *
 * Linking against a recent glibc records the newest version of each symbol
 * (expf@GLIBC_2.27, pthread_once@GLIBC_2.34, fstat@GLIBC_2.33, ...), which
 * would make the wheel require that glibc. The directives below bind the same
 * functions to the versions glibc 2.17 already exports, so `auditwheel repair`
 * can tag the wheel manylinux_2_17 (manylinux2014). A directive for a symbol
 * the library does not use adds nothing to it.
 */
#ifndef PYEXEC_COMPAT_GLIBC_2_17_H
#define PYEXEC_COMPAT_GLIBC_2_17_H

#include <sys/stat.h> /* also defines __GLIBC__ */

/* The oldest version of every symbol is GLIBC_2.2.5 on x86-64 and GLIBC_2.17
 * on aarch64 (glibc's first release for it); PX_STAT_VER is <sys/stat.h>'s
 * old _STAT_VER there (see fstat below). */
#if defined(__x86_64__) && defined(__GLIBC__)
#define PX_GLIBC_BASE "GLIBC_2.2.5"
#define PX_STAT_VER 1
#elif defined(__aarch64__) && defined(__GLIBC__)
#define PX_GLIBC_BASE "GLIBC_2.17"
#define PX_STAT_VER 0
#endif

#ifdef PX_GLIBC_BASE
#define PX_SYMVER(sym) __asm__(".symver " #sym "," #sym "@" PX_GLIBC_BASE)

/* libm: new implementations got new versions in glibc 2.27 / 2.29; the old
 * versions compute the same results and also set errno. */
PX_SYMVER(exp);
PX_SYMVER(exp2);
PX_SYMVER(log);
PX_SYMVER(log2);
PX_SYMVER(pow);
PX_SYMVER(expf);
PX_SYMVER(exp2f);
PX_SYMVER(logf);
PX_SYMVER(log2f);
PX_SYMVER(powf);
PX_SYMVER(hypot);
PX_SYMVER(hypotf);
PX_SYMVER(lgamma);
PX_SYMVER(lgammaf);

/* libc: memcpy got a new version in 2.14 on x86-64; libpthread's functions moved into
 * libc in 2.34 (the old versions stay available in both). */
PX_SYMVER(memcpy);
PX_SYMVER(pthread_once);
PX_SYMVER(pthread_create);
PX_SYMVER(pthread_join);
PX_SYMVER(pthread_detach);
PX_SYMVER(pthread_key_create);
PX_SYMVER(pthread_key_delete);
PX_SYMVER(pthread_getspecific);
PX_SYMVER(pthread_setspecific);
PX_SYMVER(pthread_mutex_trylock);
PX_SYMVER(pthread_mutexattr_init);
PX_SYMVER(pthread_mutexattr_settype);
PX_SYMVER(pthread_mutexattr_destroy);
PX_SYMVER(pthread_attr_setstacksize);

/* fstat became a libc symbol in 2.33; before, <sys/stat.h> turned it into
 * __fxstat(_STAT_VER, ...), _STAT_VER being 1 on x86-64 and 0 on aarch64
 * (whose struct stat is the kernel's). */
extern int __fxstat(int ver, int fd, struct stat *buf);
PX_SYMVER(__fxstat);
#define fstat(fd, buf) __fxstat(PX_STAT_VER, (fd), (buf))

#endif
#endif /* PYEXEC_COMPAT_GLIBC_2_17_H */
