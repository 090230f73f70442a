"""dims.py — naming the dims of a traced model: an algebra of "atoms".

A loom tensor's dims carry names (b, s, h, heads, dh, f, v, ...) that say
what each axis *is*, so that sharding a name shards the same axis
everywhere. PyTorch shapes carry only sizes. We recover the names by
following how axes flow through the traced program:

* An *atom* is one logical axis with a size. Every axis of every tensor is a
  product of atoms (a [b, s, 768] activation is three atoms; after
  `.view(b, s, 12, 64)` the 768-atom is *refined* into a 12-atom and a
  64-atom, and that refinement is seen by every tensor holding the 768-atom,
  which is how q_proj's weight becomes [h, heads, dh]).
* Ops *unify* atoms that must be the same axis: the two operands of an add,
  the contracted dims of a matmul, a Linear's input dim and its weight's
  input dim. Unification is union-find; two unified atoms with different
  refinements are refined to their common refinement (a boundary of either
  becomes a boundary of both), so [12, 64] and [24, 32] over 768 meet as
  [12, 2, 32].
* Roles (b, s, h, heads, ...) are attached to atoms by the lowering pass
  from structural evidence (an input's batch axis, an embedding's width, an
  attention's head axis, ...); a role with higher priority wins when atoms
  are unified. Names are given at the end: the role name, suffixed 2, 3, ...
  when atoms of one role have different sizes.

A tensor's storage is a list of *slots*, one per stored axis, each holding
an atom. A position inside a tensor is a path (slot index, child index, ...)
following refinements; expanding a path yields the leaf positions it covers.
Paths, not atoms, identify axes inside a tensor, so a tensor may hold one
atom twice (a square [h, h] weight, or [s, s] attention scores).

Sizes are plain ints (elements); size-1 axes hold no atom at all.
"""


class DimError(Exception):
    """Two axes that the program forces to be equal cannot be (sizes or
    refinements disagree). The message names both."""


class Atom:
    __slots__ = ("id", "size", "parent", "children", "role", "prio", "alias_of")

    def __init__(self, aid, size, role=None, prio=0):
        self.id = aid
        self.size = size
        self.parent = None        # union-find parent (None = root)
        self.children = None      # refinement: list of atoms, outermost first
        self.role = role
        self.prio = prio
        self.alias_of = None      # same axis under another name (attention's t)


class Algebra:
    def __init__(self):
        self.atoms = []

    def new(self, size, role=None, prio=0):
        a = Atom(len(self.atoms), int(size), role, prio)
        self.atoms.append(a)
        return a

    def find(self, a):
        root = a
        while root.parent is not None:
            root = root.parent
        while a.parent is not None:      # path compression
            a.parent, a = root, a.parent
        return root

    def set_role(self, a, role, prio):
        r = self.find(a)
        if r.children:
            return
        if r.role is None or prio > r.prio:
            r.role, r.prio = role, prio

    def leaves(self, a):
        """The leaf atoms (roots, unrefined) that atom a is the product of."""
        r = self.find(a)
        if not r.children:
            return [r]
        out = []
        for c in r.children:
            out.extend(self.leaves(c))
        return out

    def leaves_of(self, atoms):
        out = []
        for a in atoms:
            out.extend(self.leaves(a))
        return out

    # --- refinement -----------------------------------------------------------
    def _split(self, a, outer):
        """Refines leaf a (a root without children) into [outer, size/outer]."""
        r = self.find(a)
        assert not r.children and 1 < outer < r.size and r.size % outer == 0
        c1 = self.new(outer)
        c2 = self.new(r.size // outer)
        r.children = [c1, c2]
        return r

    def cut(self, atoms, boundaries):
        """Refines the atoms (outermost first) so that each cumulative product
        in `boundaries` falls between two leaves. Raises DimError when a
        boundary cannot (it would split an atom unevenly)."""
        for bnd in sorted(set(boundaries)):
            while True:
                cum = 1
                done = True
                for leaf in self.leaves_of(atoms):
                    lo, hi = cum, cum * leaf.size
                    if lo < bnd < hi:
                        if bnd % lo or leaf.size % (bnd // lo):
                            raise DimError("cannot split an axis of size %d at %d (sizes %s)"
                                           % (leaf.size, bnd // lo, self.sizes(atoms)))
                        self._split(leaf, bnd // lo)
                        done = False
                        break
                    cum = hi
                if done:
                    break

    def sizes(self, atoms):
        return [self.find(a).size for a in atoms]

    @staticmethod
    def cumprods(sizes):
        out, c = [], 1
        for n in sizes:
            c *= n
            out.append(c)
        return out

    # --- unification ------------------------------------------------------------
    def unify(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra is rb:
            return
        if ra.size != rb.size:
            raise DimError("an axis of size %d meets one of size %d" % (ra.size, rb.size))
        if ra.children and rb.children:
            self.unify_lists(ra.children, rb.children)
        elif rb.children:
            ra.children = rb.children
        if rb.role is not None and (ra.role is None or rb.prio > ra.prio):
            ra.role, ra.prio = rb.role, rb.prio
        rb.parent = ra

    def unify_lists(self, xs, ys):
        """Unifies two products of atoms over the same total size."""
        sx, sy = self.sizes(self.leaves_of(xs)), self.sizes(self.leaves_of(ys))
        px, py = _prod(sx), _prod(sy)
        if px != py:
            raise DimError("axes of sizes %s (=%d) and %s (=%d) must be equal" % (sx, px, sy, py))
        bounds = self.cumprods(sx)[:-1] + self.cumprods(sy)[:-1]
        self.cut(xs, bounds)
        self.cut(ys, bounds)
        lx, ly = self.leaves_of(xs), self.leaves_of(ys)
        assert len(lx) == len(ly)
        for a, b in zip(lx, ly):
            self.unify(a, b)

    def alias(self, a, role, prio):
        """A new atom standing for the same axis as a under another role (the
        key sequence t of attention, a renamed view of s). Lowering inserts a
        free view where an alias meets its origin; were they unified instead,
        they would simply become one axis with one name."""
        r = self.find(a)
        n = self.new(r.size, role, prio)
        n.alias_of = r
        return n


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


class Namer:
    """Gives each leaf atom its final dim name: the role, suffixed with 2, 3,
    ... for a second, third size of the same role (in order of first use);
    atoms without a role are "d", "d2", ...; names fit loom's 7 characters."""

    def __init__(self, alg):
        self.alg = alg
        self.by_role = {}     # role -> {size: name}

    def name(self, atom):
        r = self.alg.find(atom)
        role = r.role or "d"
        sizes = self.by_role.setdefault(role, {})
        if r.size not in sizes:
            k = len(sizes)
            sizes[r.size] = role if k == 0 else ("%s%d" % (role, k + 1))[:7]
        return sizes[r.size]
