// Benchmark workload for scripts/bench: varied, data-dependent control flow (hashing, an LZ77
// matcher, a small bytecode interpreter with indirect calls, recursion, sorting) so that most
// LBR stacks of a recording are distinct.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng = 12345;
static inline uint32_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return rng;
}

static inline uint32_t hash4(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return (v * 2654435761u) >> 18;
}

__attribute__((noinline)) size_t lz_compress(const uint8_t *in, size_t n, uint8_t *out) {
  static uint32_t table[1 << 14];
  memset(table, 0, sizeof table);
  size_t o = 0, i = 0;
  while (i + 4 < n) {
    uint32_t h = hash4(in + i);
    uint32_t cand = table[h];
    table[h] = (uint32_t)i;
    size_t len = 0;
    if (cand < i && i - cand < 65535)
      while (i + len < n && len < 255 && in[cand + len] == in[i + len])
        len++;
    if (len >= 4) {
      out[o++] = 0xff;
      out[o++] = (uint8_t)len;
      out[o++] = (uint8_t)((i - cand) & 0xff);
      i += len;
    } else {
      out[o++] = in[i++];
    }
  }
  return o;
}

typedef int64_t (*op_fn)(int64_t, int64_t);
static int64_t op_add(int64_t a, int64_t b) { return a + b; }
static int64_t op_sub(int64_t a, int64_t b) { return a - b; }
static int64_t op_mul(int64_t a, int64_t b) { return a * (b | 1); }
static int64_t op_xor(int64_t a, int64_t b) { return a ^ b; }
static int64_t op_shr(int64_t a, int64_t b) { return a >> (b & 7); }
static op_fn ops[] = {op_add, op_sub, op_mul, op_xor, op_shr};

__attribute__((noinline)) int64_t interpret(const uint8_t *code, size_t n, int64_t acc) {
  for (size_t pc = 0; pc < n; pc++) {
    uint8_t c = code[pc];
    switch (c & 7) {
    case 0: case 1: case 2: case 3: case 4:
      acc = ops[c & 7](acc, c >> 3);
      break;
    case 5:
      if (acc & 1) pc += c >> 5;
      break;
    case 6:
      acc = (acc << 1) | (acc < 0);
      break;
    default:
      acc += pc;
    }
  }
  return acc;
}

__attribute__((noinline)) uint64_t tree_sum(const uint32_t *v, size_t lo, size_t hi) {
  if (hi - lo < 16) {
    uint64_t s = 0;
    for (size_t i = lo; i < hi; i++)
      s += v[i] & 1 ? v[i] : v[i] >> 1;
    return s;
  }
  size_t mid = lo + (hi - lo) / 2;
  return tree_sum(v, lo, mid) + tree_sum(v, mid, hi);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 10;
  size_t n = 1 << 16;
  uint8_t *buf = malloc(n), *out = malloc(3 * n);
  uint32_t *vals = malloc(n * sizeof *vals);
  uint64_t total = 0;
  for (int r = 0; r < rounds; r++) {
    for (size_t i = 0; i < n; i++)
      buf[i] = (next_rand() % 7 == 0) ? (uint8_t)next_rand() : (uint8_t)"abcabcabd"[i % 9];
    total += lz_compress(buf, n, out);
    total += (uint64_t)interpret(buf, n / 4, r);
    for (size_t i = 0; i < n / 8; i++)
      vals[i] = next_rand();
    qsort(vals, n / 8, sizeof *vals, cmp_u32);
    total += tree_sum(vals, 0, n / 8);
  }
  printf("%llu\n", (unsigned long long)total);
  return 0;
}
