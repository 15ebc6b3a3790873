// Indirect calls through a table of function pointers and a callback argument.
#include <stdio.h>

typedef int (*op_fn)(int, int);

__attribute__((noinline)) int op_add(int a, int b) { return a + b; }
__attribute__((noinline)) int op_sub(int a, int b) { return a - b; }
__attribute__((noinline)) int op_mul(int a, int b) { return a * b; }
__attribute__((noinline)) int op_xor(int a, int b) { return a ^ b; }

static op_fn table[4] = {op_add, op_sub, op_mul, op_xor};

__attribute__((noinline)) int apply(op_fn f, int a, int b) { return f(a, b); }

int main(int argc, char **argv) {
  (void)argv;
  int acc = argc;
  for (int i = 0; i < 60000; i++) {
    op_fn f = table[(i * 7 + (i >> 3)) & 3];
    acc = apply(f, acc, i) & 0xffff;
  }
  printf("%d\n", acc);
  return 0;
}
