#!/usr/bin/env bash
# atomic_writes.sh — every output file is written atomically (issue 9).
#
# Library and CLI code must create files only through loom_write_file_atomic
# (base/fileio.c: temp file + fsync + rename), so that a crash, a full disk
# or a bad input never leaves a partial file. This test scans the sources of
# graph/, costs/, solver/, planner/ and gpu/ for every other way to create
# or write a file (test programs under */tests/ excepted) — fopen/freopen/fdopen with a write or append mode,
# open/openat with O_WRONLY/O_RDWR/O_CREAT, creat, mkstemp, GLPK's own
# writers — and fails on any use outside the allowed places:
#
#   base/fileio.c       the atomic writer itself
#   solver/ilp_glpk.c    glp_write_lp into a temporary from loom_fileio_reserve_tmp, then rename
#
# tests/test_atomic_write.c checks the behaviour; this checks coverage.
# usage: bash tests/atomic_writes.sh [path/to/loom]   (from the repo root)
set -u
allowed='^(graph/fileio\.c|solver/ilp_glpk\.c):'
pattern='\b(fopen|freopen|fdopen)\s*\([^;]*,\s*"[^"]*[wa+][^"]*"\s*[,)]|\bopen(at)?\s*\([^;]*O_(WRONLY|RDWR|CREAT)|\bcreat\s*\(|\bmkstemps?\s*\(|\bglp_(write|print)_[a-z]+\s*\('
hits=$(grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
           "$pattern" graph costs solver planner gpu 2>/dev/null | grep -vE "$allowed" |
       grep -v '^[a-z]*/tests/')
n_writers=$(grep -rlE 'loom_write_file_atomic\s*\(' graph costs solver planner gpu 2>/dev/null | wc -l)
if [ -n "$hits" ]; then
    echo "FAIL: files written without loom_write_file_atomic:" >&2
    echo "$hits" >&2
    exit 1
fi
# The allowed exception must stay atomic: GLPK writes a temporary, then rename.
if grep -qE 'glp_write_lp' solver/ilp_glpk.c && ! grep -qE 'rename\s*\(tmp' solver/ilp_glpk.c; then
    echo "FAIL: solver/ilp_glpk.c writes the LP file without temp + rename" >&2
    exit 1
fi
echo "atomic_writes: no direct file writes; $n_writers source files write through loom_write_file_atomic"
