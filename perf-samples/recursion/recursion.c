// Direct recursion (fib) and mutual recursion (is_even / is_odd).
#include <stdio.h>

__attribute__((noinline)) int fib(int n) {
  if (n < 2)
    return n;
  return fib(n - 1) + fib(n - 2);
}

int is_odd(unsigned n);

__attribute__((noinline)) int is_even(unsigned n) {
  if (n == 0)
    return 1;
  return is_odd(n - 1);
}

__attribute__((noinline)) int is_odd(unsigned n) {
  if (n == 0)
    return 0;
  return is_even(n - 1);
}

int main(void) {
  long s = 0;
  for (int i = 0; i < 12; i++)
    s += fib(18);
  for (unsigned i = 0; i < 3000; i++)
    s += is_even(i % 97);
  printf("%ld\n", s);
  return 0;
}
