/* `noop` is inlined into `work` and leaves no instructions, only its pseudo probe. */
static inline __attribute__((always_inline)) void noop(int x) { (void)x; }
static inline __attribute__((always_inline)) int add1(int x) { return x * 3 + 1; }
__attribute__((noinline)) int work(int x) {
  noop(x);
  return add1(x);
}
int main(int argc, char **argv) {
  (void)argv;
  int s = 0;
  for (int i = 0; i < 300000; i++) s += work(i + argc);
  return s & 1;
}
