// The main program calls into libshapes.so (PLT calls into a shared library).
#include <stdio.h>

long rect_area(int w, int h);
long tri_area(int b, int h);

int main(void) {
  long s = 0;
  for (int i = 0; i < 40000; i++)
    s += (i & 1) ? rect_area(i % 1200, 7) : tri_area(i % 900, 5);
  printf("%ld\n", s);
  return 0;
}
