// Test program, built with plain -O2: GCC then often tail-calls __cyg_profile_func_exit after
// the epilogue, so the exit hook runs with the caller's frame. Recursion must still count as
// one primitive call. visit() runs on a complete binary tree of depth 10 (1023 nodes), so it
// is called 2047 times (1023 nodes + 1024 empty children), 1 of them primitive.
#include <cstdio>

struct Node {
    Node* left;
    Node* right;
    int value;
};

static Node g_nodes[1023];

__attribute__((noinline)) void visit(const Node* n, long* sum) {
    if (!n) return;
    *sum += n->value;
    visit(n->left, sum);
    visit(n->right, sum);
}

int main() {
    for (int i = 0; i < 1023; ++i) {
        g_nodes[i].value = i;
        g_nodes[i].left = 2 * i + 1 < 1023 ? &g_nodes[2 * i + 1] : nullptr;
        g_nodes[i].right = 2 * i + 2 < 1023 ? &g_nodes[2 * i + 2] : nullptr;
    }
    long sum = 0;
    visit(&g_nodes[0], &sum);
    std::printf("%ld\n", sum);
    return 0;
}
