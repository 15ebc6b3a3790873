// C++: virtual calls through a base class, a function template instantiated twice, and a
// lambda passed to a template (inlined).
#include <cstdio>

struct Shape {
  virtual ~Shape() = default;
  virtual long area(long scale) const = 0;
};

struct Square : Shape {
  long side;
  explicit Square(long s) : side(s) {}
  long area(long scale) const override { return side * side * scale; }
};

struct Triangle : Shape {
  long base, height;
  Triangle(long b, long h) : base(b), height(h) {}
  long area(long scale) const override {
    long s = 0;
    for (long i = 0; i < 3; i++)
      s += base * height * scale / 2 + i;
    return s / 3;
  }
};

template <typename T> __attribute__((noinline)) T accumulate(const T *v, int n) {
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

__attribute__((noinline)) long total_area(Shape *const *shapes, int n, long scale) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += shapes[i]->area(scale);
  return s;
}

int main() {
  Square sq1(3), sq2(5);
  Triangle tr1(4, 6), tr2(7, 2);
  Shape *shapes[6] = {&sq1, &tr1, &sq2, &tr2, &tr1, &sq1};
  int ints[64];
  long longs[64];
  for (int i = 0; i < 64; i++) {
    ints[i] = i * 7;
    longs[i] = i * 13L;
  }
  long r = repeat(8000, [&](int i) { return total_area(shapes, 6, i & 15); });
  r += repeat(600, [&](int i) { return accumulate(ints, 64) + accumulate(longs, 64) + i; });
  std::printf("%ld\n", r);
  return 0;
}
