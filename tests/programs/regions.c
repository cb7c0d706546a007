/* Test program: the C API. "parse" is entered 4 times, "inner" 4 times inside it, and
 * "outer_loop" once around all of them; "tiny", a function on one line, 3 times after them. */
#include <prof/prof.h>
#include <stdio.h>

static volatile long sink;

static void parse(int i) {
    PROF_REGION_BEGIN("parse");
    for (int k = 0; k < 1000; ++k) sink += k * i;
    PROF_REGION_BEGIN("inner");
    for (int k = 0; k < 100; ++k) sink += k;
    PROF_REGION_END();
    PROF_REGION_END();
}

static void tiny(void) { PROF_REGION_BEGIN("tiny"); sink += 1; PROF_REGION_END(); } /* { */

int main(void) {
    PROF_REGION_BEGIN("outer_loop");
    for (int i = 0; i < 4; ++i) parse(i);
    PROF_REGION_END();
    for (int i = 0; i < 3; ++i) tiny();
    printf("%s\n", prof_is_tracing() ? "tracing" : "not tracing");
    return 0;
}
