// Inlining chains: main -> compute (noinline) -> stage3 -> stage2 -> stage1 (always inlined).
#include <stdio.h>

static inline __attribute__((always_inline)) int stage1(int x) {
  if (x & 1)
    return x * 3 + 1;
  return x / 2;
}

static inline __attribute__((always_inline)) int stage2(int x) {
  int r = stage1(x);
  if (r > 1000)
    r = stage1(r) - 7;
  return r;
}

static inline __attribute__((always_inline)) int stage3(int x) {
  int s = 0;
  for (int i = 0; i < 4; i++)
    s += stage2(x + i);
  return s;
}

__attribute__((noinline)) long compute(int n) {
  long total = 0;
  for (int i = 0; i < n; i++)
    total += stage3(i);
  return total;
}

int main(void) {
  long t = 0;
  for (int rep = 0; rep < 40; rep++)
    t += compute(2000 + rep);
  printf("%ld\n", t);
  return 0;
}
