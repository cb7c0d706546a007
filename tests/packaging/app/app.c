/* Packaging test program in C: twice() is called exactly 7 times. */
#include <stdio.h>

__attribute__((noinline)) int twice(int x) { return 2 * x; }

int main(void) {
    int s = 0;
    for (int i = 0; i < 7; ++i) s += twice(i);
    printf("%d\n", s);
    return 0;
}
