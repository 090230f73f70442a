"""test_loomfx.py — unit tests of the exporter's internals (tools/loomfx),
run by tests/fx_export.sh with /usr/bin/python3. Plain asserts with both
values printed; exits 1 on the first failure.

Covers the atom algebra (refinement, common refinement, uneven splits),
views (reshape/permute keep axis identity), the --input parser, layer
assignment and the JSON text (one item per line, stable order)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

import fx_export                                   # noqa: E402
from loomfx.dims import Algebra, DimError, Namer   # noqa: E402
from loomfx.emit import assign_layers, dumps       # noqa: E402
from loomfx.values import POp, Store, Val          # noqa: E402

FAILS = []


def check(cond, what, got=None, want=None):
    if not cond:
        FAILS.append("%s: got %r, want %r" % (what, got, want))


def sizes(alg, atoms):
    return [alg.find(a).size for a in alg.leaves_of(atoms)]


def test_refine_and_unify():
    alg = Algebra()
    a = alg.new(768)
    alg.cut([a], [12])
    check(sizes(alg, [a]) == [12, 64], "cut 768 at 12", sizes(alg, [a]), [12, 64])
    b = alg.new(768)
    alg.cut([b], [24])
    alg.unify(a, b)
    # the common refinement of [12, 64] and [24, 32] is [12, 2, 32]
    check(sizes(alg, [a]) == [12, 2, 32], "common refinement", sizes(alg, [a]), [12, 2, 32])
    check(alg.leaves(a) == alg.leaves(b), "unified leaves are shared")
    c = alg.new(10)
    try:
        alg.cut([c], [4])
        check(False, "cutting 10 at 4 must fail")
    except DimError:
        pass
    try:
        alg.unify(alg.new(3), alg.new(4))
        check(False, "unifying sizes 3 and 4 must fail")
    except DimError:
        pass


def test_views():
    alg = Algebra()
    st = Store(alg)
    b, s, x = alg.new(2), alg.new(5), alg.new(12)
    t = st.tensor([b, s, x])
    v = Val(t, [[(0,)], [(1,)], [(2,)]], (2, 5, 12))
    w = st.reshape(v, (2, 5, 3, 4))
    check(w.entries == [[(0,)], [(1,)], [(2, 0)], [(2, 1)]], "split view entries", w.entries)
    p = st.permute(w, [0, 2, 1, 3])
    back = st.reshape(st.permute(p, [0, 2, 1, 3]), (10, 12))
    # the 12-axis stays refined: the merged view lists both halves
    check(back.entries == [[(0,), (1,)], [(2, 0), (2, 1)]], "merge back", back.entries)
    check(len(st.stored_leaves(t)) == 4, "storage refined in place", st.stored_leaves(t))
    namer = Namer(alg)
    alg.set_role(alg.leaves(x)[0], "heads", 60)
    names = [namer.name(st.atom_at(t, q)) for q in st.stored_leaves(t)]
    check(names == ["d", "d2", "heads", "d3"], "names by role then size", names)


def test_parse_input():
    n, dt, sz, names = fx_export.parse_input("x=bf16[b=2,s=128,h=64]")
    check((n, dt, sz, names) == ("x", "bfloat16", [2, 128, 64], ["b", "s", "h"]), "parse",
          (n, dt, sz, names))
    for bad in ("x=bf16[2,0]", "x=bf17[2]", "x[2]", "x=int64[2,-1]"):
        try:
            fx_export.parse_input(bad)
            check(False, "parse_input(%r) must fail" % bad)
        except fx_export.UsageError:
            pass


def test_layers():
    import torch.nn as nn
    root = nn.Module()
    root.embed = nn.Linear(2, 2)
    root.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(3))
    root.head = nn.Linear(2, 2)
    mods = ["embed", "layers.0", "layers.1", "", "layers.2", "head"]
    ops = []
    for i, m in enumerate(mods):
        o = POp(i, "einsum", None, m, "?")
        ops.append(o)
    path, n = assign_layers(ops, root)
    got = [o.layer for o in ops]
    check((path, n) == ("layers", 3), "block container", (path, n))
    # a top-level op between blocks joins the block before it
    check(got == [0, 1, 2, 2, 3, 4], "layer indices", got, [0, 1, 2, 2, 3, 4])


def test_dumps():
    doc = {"format": "loom-graph/1", "name": "m", "dtype": "bf16", "model": {"layers": 1},
           "tensors": [{"name": "x", "dims": ["b"], "shape": [2]}],
           "ops": [{"name": "o", "kind": "softmax", "layer": 0, "inputs": ["x"],
                    "outputs": ["y"]}]}
    text = dumps(doc)
    check(text == dumps(doc), "deterministic")
    lines = text.splitlines()
    check(lines[6] == '    {"name": "x", "dims": ["b"], "shape": [2]}', "tensor line", lines[6])
    import json
    check(json.loads(text) == doc, "round trip")


def main():
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
    for f in FAILS:
        print("FAIL " + f)
    print("test_loomfx: %d failure%s" % (len(FAILS), "" if len(FAILS) == 1 else "s"))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
