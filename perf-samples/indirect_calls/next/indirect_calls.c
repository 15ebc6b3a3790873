// Next version of ../indirect_calls.c (profgen remap measurement): apply renamed dispatch (body
// unchanged), a block and a call (mix) inserted in main's loop, op_mul's body changed.
#include <stdio.h>

typedef int (*op_fn)(int, int);

__attribute__((noinline)) int op_add(int a, int b) { return a + b; }
__attribute__((noinline)) int op_sub(int a, int b) { return a - b; }
__attribute__((noinline)) int op_mul(int a, int b) {
  if (b == 0)
    return a;
  return a * b;
}
__attribute__((noinline)) int op_xor(int a, int b) { return a ^ b; }

static op_fn table[4] = {op_add, op_sub, op_mul, op_xor};

__attribute__((noinline)) int dispatch(op_fn f, int a, int b) { return f(a, b); }

__attribute__((noinline)) int mix(int x) { return (x * 2654435761u) >> 7; }

int main(int argc, char **argv) {
  (void)argv;
  int acc = argc;
  for (int i = 0; i < 60000; i++) {
    if ((i & 1023) == 7)
      acc ^= mix(i);
    op_fn f = table[(i * 7 + (i >> 3)) & 3];
    acc = dispatch(f, acc, i) & 0xffff;
  }
  printf("%d\n", acc);
  return 0;
}
