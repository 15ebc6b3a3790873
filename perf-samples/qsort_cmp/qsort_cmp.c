// libc's qsort calls a comparator that ends in a tail jump to a helper; between sorts a loop
// refills the array through calls into libc (rand).
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int order(int a, int b) { return (a > b) - (a < b); }

__attribute__((noinline)) int by_value(const void *a, const void *b) {
  return order(*(const int *)a, *(const int *)b);
}

int main(void) {
  static int v[1024];
  long s = 0;
  srand(7);
  for (int r = 0; r < 6; r++) {
    for (int i = 0; i < 1024; i++)
      v[i] = rand() % 10000;
    qsort(v, 1024, sizeof v[0], by_value);
    for (int i = 0; i < 1024; i += 16)
      s += (long)v[i] * (i + r);
  }
  printf("%ld\n", s);
  return 0;
}
