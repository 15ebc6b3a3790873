/* A program with a real start-up phase, for start-up function ordering (`profgen order`).
 *
 * 512 functions of ~300 bytes each (~150 KiB of .text, named f000..f777 in octal). Start-up
 * runs 160 of them once each, in an order scattered over the binary, the way module
 * initialisers, option tables and constructors run; then a steady phase loops over 8 of them.
 * With the default link order start-up touches nearly every page of .text; ordered, a third.
 */
#include <stdio.h>

typedef unsigned long (*fn_t)(unsigned long);

#define STEP(n, k) x = (x ^ (x >> ((k) + 3))) * (0x9e3779b97f4a7c15ul + (n) * 2 + (k));
#define F(n)                                                                                  \
  __attribute__((noinline)) unsigned long f##n(unsigned long x) {                             \
    _Pragma("clang loop unroll(disable)") for (int i = 0; i < 3; i++) {                       \
      STEP(n, 1) STEP(n, 2) STEP(n, 3) STEP(n, 4) STEP(n, 5) STEP(n, 6)                       \
      STEP(n, 7) STEP(n, 8) STEP(n, 9) STEP(n, 10) STEP(n, 11) STEP(n, 12)                    \
    }                                                                                         \
    return x + (n);                                                                           \
  }
#define T(n) f##n,

/* Octal digits only: the names double as valid (octal) integer constants. */
#define X8(M, p) M(p##0) M(p##1) M(p##2) M(p##3) M(p##4) M(p##5) M(p##6) M(p##7)
#define X64(M, p) X8(M, p##0) X8(M, p##1) X8(M, p##2) X8(M, p##3) \
                  X8(M, p##4) X8(M, p##5) X8(M, p##6) X8(M, p##7)
#define X512(M, p) X64(M, p##0) X64(M, p##1) X64(M, p##2) X64(M, p##3) \
                   X64(M, p##4) X64(M, p##5) X64(M, p##6) X64(M, p##7)

X512(F, )

static const fn_t table[512] = {X512(T, )};

/* 389 is odd, so i -> (389 i + 17) mod 512 visits distinct functions all over .text. */
static unsigned pick(unsigned i) { return (i * 389u + 17u) % 512u; }

int main(int argc, char **argv) {
  (void)argv;
  unsigned long x = (unsigned long)argc;
  for (unsigned i = 0; i < 160; i++)
    x = table[pick(i)](x);
  for (unsigned r = 0; r < 300; r++)
    for (unsigned j = 0; j < 8; j++)
      x = table[pick(j * 31)](x);
  printf("%lu\n", x % 1000);
  return 0;
}
