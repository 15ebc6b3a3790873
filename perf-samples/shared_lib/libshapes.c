// Shared library called from shared_lib.c: area computations with an internal helper.
static int clamp(int v) { return v < 0 ? 0 : (v > 1000 ? 1000 : v); }

__attribute__((noinline)) long rect_area(int w, int h) { return (long)clamp(w) * clamp(h); }

long tri_area(int b, int h) {
  long s = 0;
  for (int i = 0; i < 3; i++)
    s += rect_area(b + i, h) / 2;
  return s / 3;
}
