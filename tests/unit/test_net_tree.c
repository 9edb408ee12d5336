/* Tree channels across hosts (collectives/tree.c): for many hosts x ranks-per-host layouts,
 * both trees are trees (one root, every rank reaches it, parent and child links agree, at most
 * three children), ranks of a host form a chain below its lowest rank, and with 3+ hosts the
 * two trees put different hosts at the root's children. */
#include <string.h>

#include "check.h"
#include "collectives/tree.h"

static void check_layout(int nnodes, int ppn) {
  int n = nnodes * ppn, r2n[64], up[2][64], down[2][64][WEFT_TREE_MAX_DOWN];
  for (int r = 0; r < n; r++) r2n[r] = r / ppn;
  for (int t = 0; t < 2; t++) {
    int roots = 0;
    for (int r = 0; r < n; r++) {
      weft_tree_links(n, r2n, nnodes, r, t, &up[t][r], down[t][r]);
      roots += up[t][r] < 0;
      if (r % ppn) EXPECT_EQ_INT(up[t][r], r - 1); /* chain inside the host */
    }
    EXPECT_EQ_INT(roots, 1);
    for (int r = 0; r < n; r++) {
      for (int i = 0; i < WEFT_TREE_MAX_DOWN; i++) {
        int c = down[t][r][i];
        if (c >= 0)
          EXPECT_MSG(up[t][c] == r, "%dx%d tree %d: child %d of %d has parent %d", nnodes, ppn, t, c, r,
                     up[t][c]);
      }
      if (up[t][r] >= 0) {
        int found = 0;
        for (int i = 0; i < WEFT_TREE_MAX_DOWN; i++) found |= down[t][up[t][r]][i] == r;
        EXPECT_MSG(found, "%dx%d tree %d: %d not among its parent's children", nnodes, ppn, t, r);
      }
      int hops = 0, x = r;
      while (x >= 0 && hops <= n) x = up[t][x], hops++;
      EXPECT_MSG(hops <= n, "%dx%d tree %d: rank %d does not reach the root", nnodes, ppn, t, r);
    }
  }
  if (nnodes >= 3) {
    int differ = 0;
    for (int r = 0; r < n; r++) differ |= up[0][r] != up[1][r];
    EXPECT_MSG(differ, "%dx%d: both trees are the same", nnodes, ppn);
  }
}

int main(void) {
  static const int shapes[][2] = {{1, 1}, {1, 4}, {2, 1}, {2, 2}, {3, 1},
                                  {4, 2}, {5, 1}, {7, 3}, {8, 1}, {16, 4}};
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) check_layout(shapes[i][0], shapes[i][1]);
  return test_finish("test_net_tree");
}
