// Two threads: the main thread and a worker run different loops concurrently.
#include <pthread.h>
#include <stdio.h>

static long results[2];

__attribute__((noinline)) long collatz_steps(long n) {
  long steps = 0;
  while (n != 1) {
    n = (n & 1) ? 3 * n + 1 : n / 2;
    steps++;
  }
  return steps;
}

__attribute__((noinline)) long sum_squares(long n) {
  long s = 0;
  for (long i = 0; i < n; i++)
    s += i * i % 7;
  return s;
}

static void *worker(void *arg) {
  (void)arg;
  long s = 0;
  for (long i = 1; i < 2500; i++)
    s += collatz_steps(i);
  results[1] = s;
  return NULL;
}

int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  long s = 0;
  for (int i = 0; i < 150; i++)
    s += sum_squares(1000 + i);
  results[0] = s;
  pthread_join(t, NULL);
  printf("%ld %ld\n", results[0], results[1]);
  return 0;
}
