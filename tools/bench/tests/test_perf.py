"""The perf-script parser on fixed `perf script -F comm,pid,tid,period,ip,sym,dso` text."""

import io
import tempfile
import unittest

from libprofbench import perf

# Two samples of one process and one of another; the second sample's leaf is an inlined
# function (perf script --inline gives it the address of its physical frame); the third has a
# header without a period and a line that is no frame.
SCRIPT = """\
sqlite_mix 4242/4242    1001001 
\tffffffff816207aa unlink_anon_vmas ([kernel.kallsyms])
\t55d0c0a01234 sqlite3VdbeExec.part.0 (/tmp/w/build-gcc/sqlite_mix)
\t7f1e2d3c4b5a __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)

sqlite_mix 4242/4243    2002002 
\t55d0c0a05678 btreeNext (/tmp/w/build-gcc/sqlite_mix)
\t55d0c0a05678 sqlite3BtreeNext (/tmp/w/build-gcc/sqlite_mix)
\tffffffffffffffff [unknown] ([unknown])

other 77/77 
\tnot a frame line
\t401000 main (/usr/bin/other)
"""


class ParseTests(unittest.TestCase):
    def test_samples_in_order_with_every_field(self):
        samples = perf.parse(io.StringIO(SCRIPT))
        self.assertEqual(len(samples), 3)
        first, second, third = samples
        self.assertEqual(first.comm, "sqlite_mix")
        self.assertEqual(first.pid, 4242)
        self.assertEqual(first.period, 1001001.0)
        self.assertEqual(first.frames, [
            (0xffffffff816207aa, "unlink_anon_vmas", "[kernel.kallsyms]"),
            (0x55d0c0a01234, "sqlite3VdbeExec.part.0", "/tmp/w/build-gcc/sqlite_mix"),
            (0x7f1e2d3c4b5a, "__libc_start_call_main", "/usr/lib/x86_64-linux-gnu/libc.so.6")])
        self.assertEqual(second.period, 2002002.0)
        self.assertEqual([f[1] for f in second.frames], ["btreeNext", "sqlite3BtreeNext", "[unknown]"])
        self.assertEqual(second.frames[0][0], second.frames[1][0])  # inlined: one address
        self.assertEqual(second.frames[2][0], perf.END_OF_CHAIN)
        # No period: 1.0; a line that is no frame is passed over.
        self.assertEqual((third.comm, third.pid, third.period), ("other", 77, 1.0))
        self.assertEqual(third.frames, [(0x401000, "main", "/usr/bin/other")])

    def test_pid_filter(self):
        self.assertEqual([s.pid for s in perf.parse(io.StringIO(SCRIPT), pid=4242)], [4242, 4242])
        self.assertEqual([s.comm for s in perf.parse(io.StringIO(SCRIPT), pid=77)], ["other"])
        self.assertEqual(perf.parse(io.StringIO(SCRIPT), pid=1), [])

    def test_last_sample_without_trailing_blank_line(self):
        samples = perf.parse(io.StringIO("a 1/1 5\n\t10 f (x)"))
        self.assertEqual(samples, [perf.Sample("a", 1, 5.0, [(0x10, "f", "x")])])

    def test_read_from_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(SCRIPT)
            f.flush()
            self.assertEqual(perf.read(f.name, pid=77)[0].frames[0][1], "main")

    def test_kernel_frames(self):
        self.assertTrue(perf.is_kernel((0xffffffff816207aa, "x", "[kernel.kallsyms]")))
        self.assertFalse(perf.is_kernel((0x55d0c0a01234, "x", "a.out")))
        self.assertFalse(perf.is_kernel((perf.END_OF_CHAIN, "[unknown]", "[unknown]")))


if __name__ == "__main__":
    unittest.main()
