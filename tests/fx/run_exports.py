"""run_exports.py JOBS OUTDIR — runs several tools/fx_export.py invocations
in one Python process (importing torch takes seconds; tests/fx_export.sh
needs a dozen exports). JOBS has one job per line, "NAME ARGS..." (shell
quoting); job NAME writes OUTDIR/NAME.rc (the exit status) and
OUTDIR/NAME.err (what it printed on stderr). The job name "unit" runs
tests/fx/test_loomfx.py instead."""

import contextlib
import io
import os
import shlex
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, HERE)

import fx_export      # noqa: E402
import test_loomfx    # noqa: E402


def run(name, args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
        try:
            rc = test_loomfx.main() if name == "unit" else fx_export.main(args)
        except SystemExit as e:        # argparse usage errors
            rc = e.code if isinstance(e.code, int) else 2
        except Exception:              # an exporter bug: report it, fail the job
            traceback.print_exc()
            rc = 3
    return rc, err.getvalue()


def main(jobs, outdir):
    with open(jobs) as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    for ln in lines:
        words = shlex.split(ln)
        rc, err = run(words[0], words[1:])
        with open(os.path.join(outdir, words[0] + ".rc"), "w") as f:
            f.write("%d\n" % rc)
        with open(os.path.join(outdir, words[0] + ".err"), "w") as f:
            f.write(err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
