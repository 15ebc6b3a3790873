// Next version of ../cpp_virtual.cpp (profgen remap measurement): lines inserted in
// Triangle::area and total_area, a call added (scale_of), Square moved below Triangle, a line
// removed from main, and accumulate renamed sum_mod11.
#include <cstdio>

struct Shape {
  virtual ~Shape() = default;
  virtual long area(long scale) const = 0;
};

struct Triangle : Shape {
  long base, height;
  Triangle(long b, long h) : base(b), height(h) {}
  long area(long scale) const override {
    long s = 0;
    long half = base * height / 2;
    for (long i = 0; i < 3; i++)
      s += half * scale + i;
    return s / 3;
  }
};

struct Square : Shape {
  long side;
  explicit Square(long s) : side(s) {}
  long area(long scale) const override { return side * side * scale; }
};

template <typename T> __attribute__((noinline)) T sum_mod11(const T *v, int n) {
  T s = 0;
  for (int i = 0; i < n; i++)
    s += v[i] % 11;
  return s;
}

template <typename F> long repeat(int n, F f) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += f(i);
  return s;
}

__attribute__((noinline)) long scale_of(long i) { return (i & 15) + (i >> 9); }

__attribute__((noinline)) long total_area(Shape *const *shapes, int n, long scale) {
  long s = 0;
  long k = scale_of(scale);
  if (k > 100)
    return 0;
  for (int i = 0; i < n; i++)
    s += shapes[i]->area(k);
  return s;
}

int main() {
  Square sq1(3), sq2(5);
  Triangle tr1(4, 6), tr2(7, 2);
  Shape *shapes[6] = {&sq1, &tr1, &sq2, &tr2, &tr1, &sq1};
  int ints[64];
  long longs[64];
  for (int i = 0; i < 64; i++)
    ints[i] = i * 7, longs[i] = i * 13L;
  long r = repeat(8000, [&](int i) { return total_area(shapes, 6, i); });
  r += repeat(600, [&](int i) { return sum_mod11(ints, 64) + sum_mod11(longs, 64) + i; });
  std::printf("%ld\n", r);
  return 0;
}
