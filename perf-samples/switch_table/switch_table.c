// A dense switch compiled to a jump table, driven by a small bytecode interpreter.
#include <stdio.h>

__attribute__((noinline)) long run(const unsigned char *code, int len, long acc) {
  for (int pc = 0; pc < len; pc++) {
    switch (code[pc]) {
    case 0: acc += 1; break;
    case 1: acc -= 3; break;
    case 2: acc *= 3; break;
    case 3: acc ^= 0x5a5a; break;
    case 4: acc >>= 1; break;
    case 5: acc += pc; break;
    case 6: acc = acc * 7 + 1; break;
    case 7: acc -= pc * 2; break;
    default: acc = ~acc; break;
    }
  }
  return acc;
}

int main(void) {
  unsigned char code[256];
  for (int i = 0; i < 256; i++)
    code[i] = (unsigned char)((i * 37 + (i >> 2)) % 9);
  long acc = 1;
  for (int rep = 0; rep < 600; rep++)
    acc = run(code, 256, acc) & 0xffffff;
  printf("%ld\n", acc);
  return 0;
}
