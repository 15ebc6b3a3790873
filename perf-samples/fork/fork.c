// fork(): parent and child run different functions; the parent waits for the child.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long parent_work(int n) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (i % 3 == 0) ? i : -i / 2;
  return s;
}

__attribute__((noinline)) long child_work(int n) {
  long s = 1;
  for (int i = 1; i < n; i++)
    s = (s * 31 + i) % 1000003;
  return s;
}

int main(void) {
  pid_t pid = fork();
  if (pid == 0) {
    long s = 0;
    for (int r = 0; r < 100; r++)
      s += child_work(2000 + r);
    printf("child %ld\n", s);
    return 0;
  }
  long s = 0;
  for (int r = 0; r < 100; r++)
    s += parent_work(2000 + r);
  waitpid(pid, NULL, 0);
  printf("parent %ld\n", s);
  return 0;
}
