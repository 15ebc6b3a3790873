// Next version of ../tail_chain.c (profgen remap measurement): a counter call (st_count) added
// to st_even, lines inserted in st_odd, st_done renamed st_finish, main's setup rewritten.
#include <stdio.h>

long st_even(const unsigned char *p, long n, long acc);
long st_odd(const unsigned char *p, long n, long acc);

static long transitions;

__attribute__((noinline)) void st_count(long n) { transitions += n & 1; }

__attribute__((noinline)) long st_finish(long acc) { return acc * 3 + 1; }

__attribute__((noinline)) long st_even(const unsigned char *p, long n, long acc) {
  if (n == 0)
    return st_finish(acc);
  st_count(n);
  if (*p & 1)
    return st_odd(p + 1, n - 1, acc + *p);
  return st_even(p + 1, n - 1, acc ^ *p);
}

__attribute__((noinline)) long st_odd(const unsigned char *p, long n, long acc) {
  if (n == 0)
    return st_finish(acc);
  long v = *p;
  if (v > 250)
    acc += 1;
  if (v % 3 == 0)
    return st_even(p + 1, n - 1, acc * 5 + v);
  return st_odd(p + 1, n - 1, acc - v);
}

int main(void) {
  static unsigned char buf[4096];
  for (int i = 0; i < 4096; i++) buf[i] = (unsigned char)(i * 37 + (i >> 3));
  long s = 0;
  for (int r = 0; r < 60; r++)
    s += st_even(buf + r, 2000, r);
  printf("%ld %ld\n", s, transitions);
  return 0;
}
