/*
 * strategy_megatron.c — which placements Megatron-LM can express: the
 * filter of the Megatron-style spaces (strategy.h megatron_only). Data or
 * context parallelism over axis 0, tensor (and sequence) parallelism over
 * axis 1, experts over axis 0 (and over axis 1 too under expert TP 1), a
 * batch an in-mesh data-parallel group divides always split over it; and
 * the specs a tensor may take (loom_strategy_tensor_specs).
 */
#include <stdio.h>
#include <string.h>

#include "solver/strategy_impl.h"

/* Megatron's tensor-parallel dims: attention heads, kv heads, query
 * groups, MLP hidden, vocabulary. Experts (e) are not among them: with
 * --tensor-model-parallel-size t and no expert parallelism Megatron splits
 * every expert's hidden f t ways (--expert-tensor-parallel-size defaults to
 * t), which is what costs/eval.c and the Megatron-style space (mspace.h)
 * mean by a TP degree; expert parallelism runs over data-parallel ranks. */
bool loom_strategy_megatron_tp_dim(const char *dim)
{
    static const char *const tp[] = {"heads", "kvh", "grp", "f", "v"};
    for (size_t i = 0; i < sizeof tp / sizeof tp[0]; i++)
        if (!strcmp(dim, tp[i])) return true;
    return false;
}

/* Megatron-expressible placement of a dim on an axis: data parallel over
 * axis 0 (batch; experts and their tokens for expert parallelism) or, in
 * the context-parallel variant (megatron_cp), context parallel over axis 0
 * (the sequence, in every op: ring attention; the expert tokens, and the
 * experts for expert parallelism over the context-parallel ranks, as
 * Megatron-Core's MoE parallel folding lays its expert groups over the
 * flattened cp × dp ranks; costs/eval.c), tensor
 * parallel over axis 1 (loom_strategy_megatron_tp_dim) and, outside the matmuls that
 * carry a TP dim, sequence parallel on axis 1: the tokens s, and their
 * slots c in the expert buffers (the alltoall token dispatcher permutes a
 * rank's own sequence-parallel tokens, all-gathers the permuted buffer
 * over the TP group before the experts and reduce-scatters it after). */
bool loom_strategy_megatron_ok(const loom_strategy_ctx *c, const char *dim, int axis, bool compute)
{
    /* experts spanning replicas (spec.h ep_span): their token slots reach
     * them through the dispatcher's all-to-all over the whole expert group
     * only, never by a reshard over axis 0 alone */
    if (axis == 0 && c->mesh.ep_span > 1 && !strcmp(dim, "c")) return false;
    /* a pinned EP 1: no op splits the experts */
    if (c->expert_split < 0 && !strcmp(dim, "e") && !(c->expert_fold && axis == 1)) return false;
    if (axis == 0 && c->megatron_cp)
        return !strcmp(dim, "s") || !strcmp(dim, "c") || !strcmp(dim, "e");
    if (axis == 0) return !strcmp(dim, "b") || !strcmp(dim, "e") || !strcmp(dim, "c");
    /* expert TP 1: the experts over the TP ranks (expert ops only:
     * letter_ok, spec_megatron_ok) */
    if (c->expert_fold && !strcmp(dim, "e")) return true;
    return loom_strategy_megatron_tp_dim(dim) || (!compute && (!strcmp(dim, "s") || !strcmp(dim, "c")));
}


/* Megatron's data parallelism splits the batch: an in-mesh axis-0 group
 * (without context parallelism) is data parallel, so a batch it divides is
 * split over it, never computed whole on every rank of the axis (that
 * would be redundant work Megatron cannot run, mislabelled as DP: on a
 * slow inter-node link it avoided the gradient sync the labelled DP pays). */
bool loom_strategy_megatron_dp_forced(const loom_strategy_ctx *c, int64_t batch)
{
    /* stage_search_point.c offers Megatron's space only on meshes whose axis 0
     * divides the micro-batch; a batch it does not divide (a tensor built
     * for another use) keeps its other strategies */
    return c->megatron_only && !c->megatron_cp && c->mesh.mesh.n0 > 1 &&
           batch % c->mesh.mesh.n0 == 0;
}

/* Under expert TP 1 (strategy.h expert_fold), an expert tensor (one with
 * experts e and their hidden f or token slots c) on a mesh with axis 1. */
static bool fold_expert(const loom_strategy_ctx *c, const loom_tensor *t, bool expert)
{
    return c->megatron_only && c->expert_fold && c->mesh.mesh.n1 > 1 && expert &&
           loom_strategy_tensor_has_dim(t, "e");
}

/* Experts split e (over axis 0: expert parallelism) only where they are
 * experts: the expert GEMMs and their token buffers carry f or c. The
 * router's logits [b, s, e] and its weight [h, e] are replicated over the
 * expert-parallel ranks in Megatron (every rank routes its own tokens). */
static bool spec_megatron_ok(const loom_strategy_ctx *c, const loom_spec *s, const loom_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (!strcmp(t->dims[d].name, "b") && loom_strategy_megatron_dp_forced(c, t->dims[d].size) &&
            !(s->ax[d] & LOOM_AXIS0))
            return false;
    bool expert = loom_strategy_tensor_has_dim(t, "c") || loom_strategy_tensor_has_dim(t, "f");
    for (int d = 0; d < t->ndim; d++)
        for (int a = 0; a < 2; a++)
            if ((s->ax[d] & (1u << a)) &&
                (!loom_strategy_megatron_ok(c, t->dims[d].name, a, false) ||
                 (!expert && !strcmp(t->dims[d].name, "e"))))
                return false;
    /* expert TP 1: an expert tensor's axis 1 holds its experts, nothing else */
    if (fold_expert(c, t, expert))
        for (int d = 0; d < t->ndim; d++)
            if (((s->ax[d] & LOOM_AXIS1) != 0) != !strcmp(t->dims[d].name, "e")) return false;
    return true;
}

int loom_strategy_tensor_specs(const loom_strategy_ctx *c, const loom_tensor *t, loom_spec *out,
                               int cap)
{
    int n = 0, nd = t->ndim;
    int hi0 = c->mesh.mesh.n0 > 1 ? nd : 0, hi1 = c->mesh.mesh.n1 > 1 ? nd : 0;
    for (int a0 = -1; a0 < hi0; a0++)
        for (int a1 = -1; a1 < hi1; a1++) {
            loom_spec s;
            memset(&s, 0, sizeof s);
            if (a0 >= 0) s.ax[a0] |= LOOM_AXIS0;
            if (a1 >= 0) s.ax[a1] |= LOOM_AXIS1;
            if (!loom_spec_valid(&s, t, &c->mesh)) continue;
            if (c->megatron_only && !spec_megatron_ok(c, &s, t)) continue;
            if (n < cap) out[n] = s;
            n++;
        }
    return n;
}
