"""Unit tests of libprofbench (run by ctest: bench: unit)."""
