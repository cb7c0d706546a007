/* Test program: C functions whose names are also Itanium type codes (`f` is float, `i` is int,
 * `Ss` is std::string). Their names must be shown as written. Each is called 3 times. */
__attribute__((noinline)) int f(int x) { return x + 1; }
__attribute__((noinline)) int i(int x) { return f(x) * 2; }
__attribute__((noinline)) int Ss(int x) { return i(x) - 1; }

int main(void) {
    volatile int s = 0;
    for (int k = 0; k < 3; ++k) s += Ss(k);
    return s == 9 ? 0 : 1;
}
