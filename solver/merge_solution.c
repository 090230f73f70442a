/*
 * merge_solution.c — reading a solved assignment of a layer's ILP back
 * (merge.h): each op's strategy, its saved activations (with the shards
 * Megatron's sequence-parallel linears keep), the resharding charged to it,
 * and the layer's totals; and the memory floor of the problem.
 *
 * Units: seconds, bytes per GPU.
 */
#include <math.h>
#include <string.h>

#include "solver/merge_impl.h"

const loom_ilp *loom_layer_problem_ilp(const loom_layer_problem *p) { return p->ilp; }
int32_t loom_layer_problem_num_sets(const loom_layer_problem *p) { return p->n_sets; }

/* The original choice of node v under ILP assignment x. */
static int32_t orig(const loom_layer_problem *p, int32_t v, const int32_t *x)
{
    return p->nodes[v].keep[x[v]];
}

const loom_strategy *loom_layer_problem_strategy(const loom_layer_problem *p, int32_t rel,
                                                 const int32_t *x)
{
    LOOM_ASSERT(rel >= 0 && rel < p->n_ops);
    return &p->ops[rel].st[orig(p, p->ops[rel].set, x)];
}

double loom_layer_problem_min_memory(const loom_layer_problem *p)
{
    double total = 0;
    for (int32_t v = 0; v < p->n_sets; v++) {
        double lo = INFINITY;
        for (int32_t j = 0; j < p->nodes[v].k; j++) lo = fmin(lo, p->nodes[v].mem[j]);
        total += lo;
    }
    return total;
}

double loom_layer_problem_act_bytes(const loom_layer_problem *p, int32_t rel, const int32_t *x)
{
    const loom_strategy *s = loom_layer_problem_strategy(p, rel, x);
    double bytes = s->act_bytes;
    if (!p->c->train) return bytes;
    const loom_op *o = loom_graph_op(p->c->g, p->first + rel);
    for (int k = 0; k < o->n_in; k++) {
        if (!loom_merge_saves_input(p, rel, k) || !loom_strategy_charged(p->c, p->first + rel, o->in[k]))
            continue;
        int oslot = -1;
        int32_t prod = loom_merge_internal_producer(p, rel, k, &oslot);
        for (int32_t l = 0; prod < 0 && l < p->n_links; l++)
            if (p->links[l].cons == rel && p->links[l].slot == k)
                prod = p->links[l].prod, oslot = p->links[l].out_slot;
        if (prod < 0 || prod >= p->n_ops || oslot < 0) continue;
        const loom_tensor *t = loom_graph_tensor(p->c->g, o->in[k]);
        const loom_spec *from = &loom_layer_problem_strategy(p, prod, x)->out[oslot];
        if (loom_merge_seq_gather(t, from, &s->in[k]))
            bytes += loom_spec_bytes(from, t, &p->c->mesh) - loom_spec_bytes(&s->in[k], t, &p->c->mesh);
    }
    return bytes;
}

void loom_layer_problem_op_reshard(const loom_layer_problem *p, int32_t rel, const int32_t *x,
                                   double *fwd_s, double *bwd_s)
{
    *fwd_s = *bwd_s = 0;
    for (int32_t i = 0; i < p->n_edges; i++) {
        const ledge *e = &p->edges[i];
        if (e->charge != rel) continue;
        size_t c = (size_t)e->src_cls[orig(p, e->src, x)] * (size_t)e->ndst +
                   (size_t)e->dst_cls[orig(p, e->dst, x)];
        *fwd_s += e->fwd_s[c];
        *bwd_s += e->bwd_s[c];
    }
}

void loom_layer_problem_eval(const loom_layer_problem *p, const int32_t *x, loom_layer_totals *out)
{
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < p->n_ops; i++) {
        const loom_strategy *s = loom_layer_problem_strategy(p, i, x);
        out->compute_s += s->compute_s;
        out->comm_s += s->comm_s;
        out->grad_sync_s += s->grad_sync_s;
        out->comm_bytes_fwd += s->comm_bytes_fwd;
        out->param_count += s->param_count;
        out->param_count_local += s->param_count_local;
        out->param_bytes += s->param_bytes;
        for (int a = 0; a < 4; a++) out->dp_params[a] += s->dp_params[a];
        out->other_sync_s += s->other_sync_s;
        out->act_bytes += loom_layer_problem_act_bytes(p, i, x);
        out->mem_bytes += loom_merge_member_mem(&p->w, s);
    }
    for (int32_t i = 0; i < p->n_edges; i++) {
        const ledge *e = &p->edges[i];
        size_t c = (size_t)e->src_cls[orig(p, e->src, x)] * (size_t)e->ndst +
                   (size_t)e->dst_cls[orig(p, e->dst, x)];
        out->reshard_s += e->fwd_s[c] + e->bwd_s[c];
        out->comm_bytes_fwd += e->fwd_bytes[c];
    }
    out->objective_s = out->compute_s + out->comm_s + out->reshard_s +
                       out->grad_sync_s * p->w.grad_sync_weight;
}
