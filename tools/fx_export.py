#!/usr/bin/python3
"""fx_export.py — any PyTorch model in: trace it with torch.fx and write a
loom graph (loom-graph/1 JSON) that `loom inspect` and `loom plan` read.

  /usr/bin/python3 tools/fx_export.py tests/fx/tiny_llama.py:TinyLlama \\
      --kwargs '{"layers": 2}' --input input_ids=int64[2,128] \\
      --input labels=int64[2,128] -o llama.json

MODEL is `package.module:Name` (importable) or `path/to/file.py:Name`; Name
is an nn.Module class, or a function returning a module, called with the
--kwargs JSON object. The model is built on the meta device (no weight is
allocated) and traced with example inputs of the given shapes (meta tensors
too). The graph holds the training forward pass (dropout active) unless
--eval is given. See docs/fx-export.md for what maps to what.

Exit status: 0 written; 1 the model could not be traced or uses calls loom
cannot represent (each listed with its source location and module path;
nothing is written); 2 usage error.
"""

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PROG = "fx_export"

_DTYPES = {
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "bool": "bool",
    "bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
    "half": "float16", "fp32": "float32", "float32": "float32", "float": "float32",
}
_LOOM_DTYPES = ("bf16", "fp16", "fp32", "fp8")


class UsageError(Exception):
    pass


def parse_input(spec):
    """NAME=DTYPE[SIZES]: sizes are ints, or name=int to name the dim
    ("x=bf16[b=2,s=128,h=64]"). Returns (name, dtype, sizes, dim names)."""
    m = re.fullmatch(r"([A-Za-z_]\w*)=(\w+)\[([^\]]*)\]", spec.strip())
    if not m:
        raise UsageError("--input %r: expected NAME=DTYPE[SIZE,...], e.g. input_ids=int64[2,128]"
                         % spec)
    name, dt, body = m.groups()
    if dt not in _DTYPES:
        raise UsageError("--input %s: unknown dtype %r (expected one of %s)"
                         % (name, dt, ", ".join(sorted(_DTYPES))))
    sizes, names = [], []
    for part in [p.strip() for p in body.split(",") if p.strip()]:
        dm = re.fullmatch(r"(?:([A-Za-z]\w{0,6})=)?(\d+)", part)
        if not dm or int(dm.group(2)) < 1:
            raise UsageError("--input %s: size %r is not a positive integer (or name=size)"
                             % (name, part))
        names.append(dm.group(1))
        sizes.append(int(dm.group(2)))
    return name, _DTYPES[dt], sizes, names


def default_roles(dtype, names):
    """Dim roles of an input: given names win; otherwise [b, s] for token ids,
    [b, s, h] for embeddings fed directly."""
    from loomfx.lower import PRIO
    rank = len(names)
    guess = ["b", "s"] + (["h"] if dtype not in ("int64", "int32", "bool") else [])
    roles = []
    for i, n in enumerate(names):
        if n:
            roles.append((n, PRIO["user"]))
        elif i < len(guess) and i < rank:
            roles.append((guess[i], PRIO[guess[i]]))
        else:
            roles.append(None)
    return roles


def load_target(spec):
    """Resolves MODEL to the class or factory it names."""
    if ":" not in spec:
        raise UsageError("MODEL %r: expected module:Name or path/file.py:Name" % spec)
    where, attr = spec.rsplit(":", 1)
    if where.endswith(".py") or os.sep in where:
        if not os.path.isfile(where):
            raise UsageError("MODEL %r: no such file %s" % (spec, where))
        modname = "_loomfx_user_" + re.sub(r"\W", "_", os.path.basename(where)[:-3])
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        s = importlib.util.spec_from_file_location(modname, where)
        mod = importlib.util.module_from_spec(s)
        sys.modules[modname] = mod
        s.loader.exec_module(mod)
    else:
        sys.path.insert(0, os.getcwd())
        try:
            mod = importlib.import_module(where)
        except ModuleNotFoundError as e:
            if e.name and (where == e.name or where.startswith(e.name + ".")):
                raise UsageError("MODEL %r: no module named %r (run from the directory that "
                                 "holds it, or give path/to/file.py:Name)" % (spec, e.name))
            raise
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError("MODEL %r: %s has no attribute %r" % (spec, where, part))
        obj = getattr(obj, part)
    return obj


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="package.module:Name or path/to/file.py:Name")
    ap.add_argument("--kwargs", default="{}", help="constructor keyword arguments (JSON object)")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=DTYPE[SIZES]",
                    help="an example input of forward(), e.g. input_ids=int64[8,2048] (repeat)")
    ap.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    ap.add_argument("--name", help="graph name (default: the model's class name)")
    ap.add_argument("--dtype", default="bf16", choices=_LOOM_DTYPES,
                    help="dtype of weights and activations in the graph (default bf16)")
    ap.add_argument("--blocks", help="module path of the repeated blocks (default: detected)")
    ap.add_argument("--fuse-attention", action="store_true",
                    help="plan unfused attention (softmax(q kᵀ) v) as one fused attention op")
    ap.add_argument("--eval", action="store_true", help="trace in eval mode (no dropout)")
    try:
        a = ap.parse_args(argv)
        return run(a)
    except UsageError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 2


def run(a):
    try:
        kwargs = json.loads(a.kwargs)
    except ValueError as e:
        raise UsageError("--kwargs: not JSON: %s" % e)
    if not isinstance(kwargs, dict):
        raise UsageError("--kwargs: expected a JSON object")
    inputs = [parse_input(s) for s in a.input]
    if not inputs:
        raise UsageError("give the example inputs with --input NAME=DTYPE[SIZES]")

    import torch
    from loomfx.emit import EmitError, build, dumps, write_atomic
    from loomfx.lower import Lowerer
    from loomfx.trace import meta_device, prune, trace_module
    from loomfx.handlers import is_norm_module

    try:
        target = load_target(a.model)
        with meta_device():
            model = target(**kwargs)
    except UsageError:
        raise
    except Exception as e:  # the user's module or constructor failed
        print("%s: cannot build %s: %s: %s%s" % (PROG, a.model, type(e).__name__, e,
                                                 _trace_location(e)), file=sys.stderr)
        return 1
    if not isinstance(model, torch.nn.Module):
        raise UsageError("MODEL %s did not give an nn.Module (got %s)"
                         % (a.model, type(model).__name__))
    model.train(not a.eval)

    sig = inspect.signature(model.forward)
    given = {n for n, _, _, _ in inputs}
    for n in given:
        if n not in sig.parameters:
            raise UsageError("--input %s: forward() has no argument %r (it takes %s)"
                             % (n, n, ", ".join(sig.parameters)))
    metas, roles, concrete = {}, {}, {}
    spec = {n: (dt, sz, nm) for n, dt, sz, nm in inputs}
    for pname, p in sig.parameters.items():
        if pname in spec:
            dt, sz, nm = spec[pname]
            metas[pname] = torch.empty(sz, dtype=getattr(torch, dt), device="meta")
            roles[pname] = default_roles(dt, nm)
        elif p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        elif p.default is not inspect.Parameter.empty:
            concrete[pname] = p.default
        else:
            raise UsageError("forward() argument %r has no default: give it with --input" % pname)

    leaf = tuple({type(m) for m in model.modules() if is_norm_module(m)
                  and not type(m).__module__.startswith("torch.nn")})
    try:
        graph = trace_module(model, metas, concrete, leaf_classes=leaf)
    except Exception as e:  # torch.fx raises many kinds (TraceError, TypeError, ...)
        where = _trace_location(e)
        print("%s: cannot trace %s: %s: %s%s" % (PROG, a.model, type(e).__name__, e, where),
              file=sys.stderr)
        return 1
    prune(graph)

    L = Lowerer(graph, model, roles, fuse_attention=a.fuse_attention).run()
    if L.problems:
        report_problems(a.model, L.problems)
        return 1
    try:
        doc = build(L, a.name or type(model).__name__, a.dtype, a.blocks)
    except EmitError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    write_atomic(a.output, dumps(doc))
    return 0


def report_problems(model, problems):
    """One line per distinct (call, source line, reason), with the module
    paths where it happens (a problem inside a block repeats per block)."""
    groups = {}
    for p in problems:
        groups.setdefault((p["call"], p["where"], p["why"]), []).append(p["module"])
    print("%s: %s uses %d call%s that loom cannot represent (nothing written):"
          % (PROG, model, len(groups), "" if len(groups) == 1 else "s"), file=sys.stderr)
    for (call, where, why), mods in groups.items():
        more = " (+%d more)" % (len(mods) - 3) if len(mods) > 3 else ""
        print("  %s at %s, module %s%s: %s" % (call, where, ", ".join(mods[:3]), more, why),
              file=sys.stderr)


def _trace_location(e):
    """" at file:line" of the innermost model frame in the traceback."""
    from loomfx.trace import _HERE, _TORCH
    tb, where = e.__traceback__, ""
    while tb is not None:
        fn = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not fn.startswith(_TORCH) and not fn.startswith(_HERE) and \
                fn != os.path.abspath(__file__):
            where = " (at %s:%d, in %s)" % (tb.tb_frame.f_code.co_filename, tb.tb_lineno,
                                           tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return where


if __name__ == "__main__":
    sys.exit(main())
