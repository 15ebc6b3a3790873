// IP-sampling case: a hot loop with inlined helpers, for --leading-ip-only.
#include <stdio.h>
#include <stdlib.h>

static inline unsigned mix(unsigned x) {
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  return x ^ (x >> 15);
}

static inline unsigned step(unsigned acc, unsigned i) {
  if (i % 3 == 0)
    return acc + mix(i);
  return acc ^ mix(acc + i);
}

__attribute__((noinline)) unsigned hash_range(unsigned n) {
  unsigned acc = 0;
  for (unsigned i = 0; i < n; i++)
    acc = step(acc, i);
  return acc;
}

__attribute__((noinline)) unsigned sum_squares(unsigned n) {
  unsigned s = 0;
  for (unsigned i = 0; i < n; i++)
    s += i * i;
  return s;
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 200;
  unsigned total = 0;
  for (unsigned r = 0; r < rounds; r++) {
    total += hash_range(100000 + r);
    total += sum_squares(total & 0xffff) + (unsigned)r;
  }
  printf("%u\n", total);
  return 0;
}
