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

/* x86-64 only: there the oldest version of every symbol is GLIBC_2.2.5. */
#if defined(__x86_64__) && defined(__GLIBC__)

/* libm: new implementations got new versions in glibc 2.27 / 2.29; the old
 * versions compute the same results and also set errno. */
__asm__(".symver exp,exp@GLIBC_2.2.5");
__asm__(".symver exp2,exp2@GLIBC_2.2.5");
__asm__(".symver log,log@GLIBC_2.2.5");
__asm__(".symver log2,log2@GLIBC_2.2.5");
__asm__(".symver pow,pow@GLIBC_2.2.5");
__asm__(".symver expf,expf@GLIBC_2.2.5");
__asm__(".symver exp2f,exp2f@GLIBC_2.2.5");
__asm__(".symver logf,logf@GLIBC_2.2.5");
__asm__(".symver log2f,log2f@GLIBC_2.2.5");
__asm__(".symver powf,powf@GLIBC_2.2.5");
__asm__(".symver hypot,hypot@GLIBC_2.2.5");
__asm__(".symver hypotf,hypotf@GLIBC_2.2.5");
__asm__(".symver lgamma,lgamma@GLIBC_2.2.5");
__asm__(".symver lgammaf,lgammaf@GLIBC_2.2.5");

/* libc: memcpy got a new version in 2.14; libpthread's functions moved into
 * libc in 2.34 (the old versions stay available in both). */
__asm__(".symver memcpy,memcpy@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_create,pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_join,pthread_join@GLIBC_2.2.5");
__asm__(".symver pthread_detach,pthread_detach@GLIBC_2.2.5");
__asm__(".symver pthread_key_create,pthread_key_create@GLIBC_2.2.5");
__asm__(".symver pthread_key_delete,pthread_key_delete@GLIBC_2.2.5");
__asm__(".symver pthread_getspecific,pthread_getspecific@GLIBC_2.2.5");
__asm__(".symver pthread_setspecific,pthread_setspecific@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_settype,pthread_mutexattr_settype@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@GLIBC_2.2.5");
__asm__(".symver pthread_attr_setstacksize,pthread_attr_setstacksize@GLIBC_2.2.5");

/* fstat became a libc symbol in 2.33; before, <sys/stat.h> turned it into
 * __fxstat(_STAT_VER, ...), _STAT_VER being 1 on x86-64. */
extern int __fxstat(int ver, int fd, struct stat *buf);
__asm__(".symver __fxstat,__fxstat@GLIBC_2.2.5");
#define fstat(fd, buf) __fxstat(1, (fd), (buf))

#endif
#endif /* PYEXEC_COMPAT_GLIBC_2_17_H */
