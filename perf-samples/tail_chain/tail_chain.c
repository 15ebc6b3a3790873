// Mutual recursion compiled to tail jumps: the states of a small scanner jump to each other
// (self-recursion becomes a loop), and the last state tail-calls a finisher.
#include <stdio.h>

long st_even(const unsigned char *p, long n, long acc);
long st_odd(const unsigned char *p, long n, long acc);

__attribute__((noinline)) long st_done(long acc) { return acc * 3 + 1; }

__attribute__((noinline)) long st_even(const unsigned char *p, long n, long acc) {
  if (n == 0)
    return st_done(acc);
  if (*p & 1)
    return st_odd(p + 1, n - 1, acc + *p);
  return st_even(p + 1, n - 1, acc ^ *p);
}

__attribute__((noinline)) long st_odd(const unsigned char *p, long n, long acc) {
  if (n == 0)
    return st_done(acc);
  if (*p % 3 == 0)
    return st_even(p + 1, n - 1, acc * 5 + *p);
  return st_odd(p + 1, n - 1, acc - *p);
}

int main(void) {
  static unsigned char buf[4096];
  for (int i = 0; i < 4096; i++)
    buf[i] = (unsigned char)(i * 37 + (i >> 3));
  long s = 0;
  for (int r = 0; r < 60; r++)
    s += st_even(buf + r, 2000, r);
  printf("%ld\n", s);
  return 0;
}
