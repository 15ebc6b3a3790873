// Tail calls: dispatch() jumps (not calls) to its handlers; step() tail-calls finish().
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) int finish(int x) {
  sink = x;
  return x ^ 0x55;
}

__attribute__((noinline)) int step_a(int x) { return finish(x * 7 + 3); }
__attribute__((noinline)) int step_b(int x) { return finish(x - 11); }
__attribute__((noinline)) int step_c(int x) {
  for (int i = 0; i < 3; i++)
    x = x * 5 + i;
  return finish(x);
}

__attribute__((noinline)) int dispatch(int x) {
  if (x % 5 == 0)
    return step_a(x);
  if (x % 3 == 0)
    return step_b(x);
  return step_c(x);
}

int main(void) {
  long s = 0;
  for (int i = 0; i < 60000; i++)
    s += dispatch(i);
  printf("%ld\n", s);
  return 0;
}
