"""The table printers and number formats on fixed rows."""

import math
import unittest

from libprofbench.table import fmt_int, med, render_md, render_text

HEAD = ["config", "reps", "median wall s"]
ROWS = [["base", "3", "0.125"], ["fi: libprof full call trace", "3", "1.5"]]


class TableTests(unittest.TestCase):
    def test_text_first_column_left_the_others_right(self):
        self.assertEqual(render_text(HEAD, ROWS), "\n".join([
            "config                       reps  median wall s",
            "---------------------------  ----  -------------",
            "base                            3          0.125",
            "fi: libprof full call trace     3            1.5"]))

    def test_text_header_only(self):
        self.assertEqual(render_text(["a", "bb"], []), "a  bb\n-  --")

    def test_markdown(self):
        self.assertEqual(render_md(HEAD, ROWS), "\n".join([
            "| config | reps | median wall s |",
            "|---|---|---|",
            "| base | 3 | 0.125 |",
            "| fi: libprof full call trace | 3 | 1.5 |"]))

    def test_numbers(self):
        self.assertEqual(fmt_int(1234567.4), "1,234,567")
        self.assertEqual(fmt_int(999.5), "1,000")
        self.assertEqual(fmt_int(0), "0")
        self.assertEqual(med([3, 1, 2]), 2)
        self.assertEqual(med([4, 1, 2, 3]), 2.5)
        self.assertTrue(math.isnan(med([])))


if __name__ == "__main__":
    unittest.main()
