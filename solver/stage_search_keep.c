/*
 * stage_search_keep.c — what the search keeps of each configuration it
 * evaluates (loom_search_consider): it counts as a plan when it fits, has
 * the pinned sizes (--tp, --pp, --dp, --cp, --ep, --mbs, --vpp) and meets
 * the latency bound; then it may become the best (a strictly lower score,
 * relative 1e-12, so ties keep the first found: output is deterministic),
 * one of the top runners-up (one per distinct shape), the best of its
 * layout (all GPUs or NVLink-domain tiles) and the best on its side of 8
 * GPUs per tensor- or expert-parallel group. What does not fit still lowers
 * the least memory reported when nothing fits.
 */
#include <stdio.h>
#include <string.h>

#include "solver/stage_search_impl.h"

/* Does cfg (evaluated: ev) respect the pinned dimensions? */
static bool pinned_ok(loom_search *s, const loom_search_config *cfg,
                      const loom_search_eval_result *ev)
{
    const loom_search_options *o = &s->opt;
    const loom_graph *g;
    loom_error e2;
    if (o->pin_ep && (loom_search_graph(s, cfg->mbs, &g, &e2) != LOOM_OK ||
                      !loom_search_ep_is(g, cfg, ev, o->pin_ep)))
        return false;
    if ((o->pin_dp && cfg->dp != o->pin_dp) || (o->pin_pp && cfg->pp != o->pin_pp) ||
        (o->pin_vpp && cfg->vpp != o->pin_vpp) || (o->pin_mbs && cfg->mbs != o->pin_mbs))
        return false;
    for (int32_t i = 0; o->pin_tp && i < cfg->n_stages; i++)
        if (cfg->stages[i].mesh.n1 != o->pin_tp) return false;
    /* expert TP: 1 under expert folding, else the stage's TP */
    for (int32_t i = 0; o->pin_etp && i < cfg->n_stages; i++) {
        const loom_search_stage *x = &cfg->stages[i];
        if ((x->megatron && x->expert_fold ? 1 : x->mesh.n1) != o->pin_etp || !x->megatron)
            return false;
    }
    for (int32_t i = 0; o->pin_cp && i < cfg->n_stages; i++) {
        const loom_search_stage *x = &cfg->stages[i];
        if ((x->megatron && x->context_parallel ? x->mesh.n0 : 1) != o->pin_cp ||
            (o->pin_cp > 1 && !x->megatron))
            return false;
    }
    return true;
}

bool loom_search_pins_given(const loom_search_options *o)
{
    return o->pin_tp || o->pin_pp || o->pin_dp || o->pin_mbs || o->pin_vpp || o->pin_cp ||
           o->pin_ep || o->pin_etp;
}

/* "tp 8, ep 4": the pinned sizes, for messages. */
void loom_search_pins_text(const loom_search_options *o, char *dst, size_t cap)
{
    const char *names[] = {"tp", "pp", "dp", "cp", "ep", "etp", "mbs", "vpp"};
    int64_t vals[] = {o->pin_tp, o->pin_pp, o->pin_dp, o->pin_cp, o->pin_ep, o->pin_etp,
                      o->pin_mbs, o->pin_vpp};
    size_t n = 0;
    dst[0] = '\0';
    for (int i = 0; i < 8 && n < cap; i++)
        if (vals[i])
            n += (size_t)snprintf(dst + n, cap - n, "%s%s %lld", n ? ", " : "", names[i],
                                  (long long)vals[i]);
}

/* Keeps (cfg, ev) among the top runners-up when it is distinct from them
 * or better than its twin. */
static void keep_top(loom_search *s, const loom_search_config *cfg, const loom_search_eval_result *ev)
{
    int32_t cap = s->opt.top < LOOM_SEARCH_TOP_MAX ? s->opt.top : LOOM_SEARCH_TOP_MAX;
    if (cap < 1) cap = 1;
    const loom_search_stage *s0 = &cfg->stages[0];
    loom_search_top e = {.dp = cfg->dp, .pp = cfg->pp, .vpp = cfg->vpp, .mbs = cfg->mbs,
                         .micro_batches = cfg->micro_batches, .tp = s0->mesh.n1,
                         .stage_dp = s0->context_parallel ? 1 : s0->mesh.n0,
                         .cp = s0->context_parallel ? s0->mesh.n0 : 1, .zero = cfg->zero,
                         .megatron = true, .tp_comm_overlap = true, .tiled = cfg->tiled,
                         .step_s = s->pb.inference ? ev->latency_s : ev->step_s,
                         .score = ev->score, .memory_per_gpu_bytes = ev->memory_per_gpu_bytes};
    for (int32_t i = 0; i < cfg->n_stages; i++) {
        const loom_search_stage *x = &cfg->stages[i];
        e.megatron &= x->megatron;
        e.tp_comm_overlap &= x->tp_comm_overlap;
        e.recompute_stages += x->recompute != LOOM_RECOMPUTE_NONE;
        if (x->mesh.n1 != e.tp) e.tp = 0;   /* mixed: no one TP size */
        if ((x->context_parallel ? x->mesh.n0 : 1) != e.cp) e.cp = 0;
    }
    loom_search_top *t = s->res.top;
    int32_t n = s->res.n_top, at = n;
    for (int32_t i = 0; i < n; i++)
        if (t[i].dp == e.dp && t[i].pp == e.pp && t[i].vpp == e.vpp && t[i].mbs == e.mbs &&
            t[i].tp == e.tp && t[i].stage_dp == e.stage_dp && t[i].cp == e.cp &&
            t[i].zero == e.zero && t[i].megatron == e.megatron &&
            t[i].tp_comm_overlap == e.tp_comm_overlap && t[i].tiled == e.tiled &&
            t[i].recompute_stages == e.recompute_stages) {
            if (t[i].score <= e.score) return;
            at = i;   /* its twin, now replaced */
            break;
        }
    if (at == n) {
        if (n == cap && t[n - 1].score <= e.score) return;
        if (n < cap) s->res.n_top = ++n;
        at = n - 1;
    }
    while (at > 0 && t[at - 1].score > e.score) t[at] = t[at - 1], at--;
    t[at] = e;
}

/* Keeps cfg if it fits and beats the best; takes ownership of ev either way. */
void loom_search_consider(loom_search *s, const loom_search_config *cfg,
                          loom_search_eval_result *ev)
{
    s->res.configs_evaluated++;
    bool pinned = pinned_ok(s, cfg, ev);
    s->pinned_candidates += pinned;
    bool ok = ev->fits && pinned;
    if (s->pb.objective == LOOM_OBJ_THROUGHPUT && s->pb.latency_bound_s > 0 &&
        ev->latency_s > s->pb.latency_bound_s)
        ok = false;
    if (ok) keep_top(s, cfg, ev);
    /* the best of each layout, for the plan's account of the NVLink domain */
    int lay = cfg->tiled ? 1 : 0;
    if (ok && (!s->have_lay[lay] || ev->score < s->lay_score[lay] * (1 - 1e-12))) {
        s->have_lay[lay] = true;
        s->lay_score[lay] = ev->score;
        s->lay_step[lay] = s->pb.inference ? ev->latency_s : ev->step_s;
        s->lay_best[lay] = *cfg;
    }
    /* ... and on each side of 8 GPUs per tensor- or expert-parallel group */
    const loom_graph *g;
    loom_error e2;
    if (ok && s->track_groups && loom_search_graph(s, cfg->mbs, &g, &e2) == LOOM_OK) {
        int big = loom_search_largest_group(g, cfg, ev) > 8;
        if (!s->have_grp[big] || ev->score < s->grp_score[big] * (1 - 1e-12)) {
            s->have_grp[big] = true;
            s->grp_score[big] = ev->score;
            s->grp_step[big] = s->pb.inference ? ev->latency_s : ev->step_s;
            s->grp_best[big] = *cfg;
        }
    }
    if (!ev->fits && pinned &&
        (s->res.min_memory_bytes == 0 || ev->memory_per_gpu_bytes < s->res.min_memory_bytes))
        s->res.min_memory_bytes = ev->memory_per_gpu_bytes;
    if (ok && (!s->have_best || ev->score < s->res.eval.score * (1 - 1e-12))) {
        loom_search_eval_free(&s->res.eval);
        s->res.eval = *ev;
        s->res.best = *cfg;
        s->have_best = true;
        memset(ev, 0, sizeof *ev);
        return;
    }
    loom_search_eval_free(ev);
}
