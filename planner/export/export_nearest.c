/*
 * export_nearest.c — `loom export --nearest` (export_nearest.h): the best
 * plan a runtime can run, and what running it instead costs.
 *
 * Step 1 plans the original plan's inputs again with the search restricted
 * to the Megatron-style space (plan_run.h, megatron_space): uniform stages,
 * data parallelism on one mesh axis, Megatron tensor parallelism on the
 * other. Every runtime runs that space's core, so most obstacles vanish
 * there; the prediction is the new plan's own.
 *
 * Step 2 handles what a runtime still cannot run of it, setting by setting,
 * to the closest setting it can run (and says so in `changes`):
 *   deepspeed   no SP; selective / partial recompute -> full; fp8 -> bf16;
 *               ZeRO-2/3 with PP -> ZeRO-1; interleaving -> plain 1F1B;
 *               uneven stages -> even
 *   torchtitan  fp16 / fp8 -> bf16; partial recompute -> every layer; ZeRO-1 -> ZeRO-2 (FSDP keeping parameters
 *               gathered; ZeRO-0 with PP, which loom's evaluator cannot
 *               combine with ZeRO-2/3); expert TP -> TP
 *   vllm        EP -> TP x DP (or 1); expert TP -> 1; interleaving -> 1
 * and the adjusted configuration is evaluated with the Megatron evaluator
 * (costs/eval.h) for the prediction. What cannot be changed this way
 * (context parallelism for DeepSpeed or vLLM, TP with PP for DeepSpeed) is
 * reported as an error naming the obstacle.
 */
#include "planner/export/export_nearest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/compute.h"
#include "costs/eval.h"
#include "graph/model.h"
#include "planner/plan/plan_run.h"

void loom_export_nearest_opts_init(loom_export_nearest_opts *o)
{
    memset(o, 0, sizeof *o);
    o->time_limit_s = 60;
}

bool loom_export_adjust(loom_runtime_config *c, loom_export_target t, loom_export_list *changes)
{
    loom_parallel *p = &c->par;
    bool changed = false;
#define CHANGE(cond, action, ...)                              \
    do {                                                       \
        if (cond) {                                            \
            loom_export_list_add(changes, __VA_ARGS__);        \
            action;                                            \
            changed = true;                                    \
        }                                                      \
    } while (0)
    if (t == LOOM_EXPORT_DEEPSPEED) {
        CHANGE(p->sp && p->tp > 1, p->sp = false, "sequence parallelism off");
        CHANGE(p->recompute == LOOM_RECOMPUTE_SELECTIVE, p->recompute = LOOM_RECOMPUTE_FULL,
               "selective recompute -> full recompute");
        CHANGE(p->recompute == LOOM_RECOMPUTE_FULL && p->recompute_layers > 0,
               p->recompute_layers = 0, "recompute of %lld layers per stage -> every layer",
               (long long)p->recompute_layers);
        CHANGE(p->dtype == LOOM_DTYPE_FP8, p->dtype = LOOM_DTYPE_BF16, "fp8 -> bf16");
        CHANGE(p->pp > 1 && p->zero >= 2, p->zero = 1, "ZeRO-%d -> ZeRO-1 (pipeline engine)",
               p->zero);
        CHANGE(p->vpp > 1, (p->vpp = 1, c->n_chunks = 0), "interleaved schedule -> plain 1F1B");
        CHANGE(c->n_chunks > 0 && c->model.layers % p->pp == 0,
               (c->n_chunks = 0, p->first_stage_layers = p->last_stage_layers = 0),
               "uneven stages -> %lld layers per stage", (long long)(c->model.layers / p->pp));
    } else if (t == LOOM_EXPORT_TORCHTITAN) {
        CHANGE(p->dtype == LOOM_DTYPE_FP16 || p->dtype == LOOM_DTYPE_FP8,
               p->dtype = LOOM_DTYPE_BF16, "%s -> bf16", loom_dtype_name(p->dtype));
        CHANGE(p->recompute == LOOM_RECOMPUTE_FULL && p->recompute_layers > 0,
               p->recompute_layers = 0, "recompute of %lld layers per stage -> every layer",
               (long long)p->recompute_layers);
        CHANGE(p->dist_opt && p->pp == 1, (p->dist_opt = false, p->zero = 2),
               "ZeRO-1 -> ZeRO-2 (FSDP)");
        CHANGE(p->dist_opt && p->pp > 1, p->dist_opt = false, "ZeRO-1 -> ZeRO-0 (DDP)");
        CHANGE(c->model.experts > 0 && p->etp > 0 && p->etp != p->tp, p->etp = 0,
               "expert TP %lld -> TP %lld", (long long)p->etp, (long long)p->tp);
        CHANGE(c->model.experts > 0 && p->ep > 1 && p->zero < 2, p->ep = 1,
               "expert parallelism %lld -> 1 (no FSDP ranks to borrow)", (long long)p->ep);
    } else if (t == LOOM_EXPORT_VLLM) {
        int64_t all = p->tp * p->dp;
        bool fits = c->model.experts > 0 && c->model.experts % all == 0;
        CHANGE(c->model.experts > 0 && p->ep > 1 && p->ep != all, p->ep = fits ? all : 1,
               "expert parallelism %lld -> %lld", (long long)p->ep, (long long)(fits ? all : 1));
        CHANGE(c->model.experts > 0 && p->ep > 1 && p->etp > 1, p->etp = 1, "expert TP -> 1");
        CHANGE(p->vpp > 1, (p->vpp = 1, c->n_chunks = 0),
               "interleaved schedule -> 1 chunk per rank");
    }
#undef CHANGE
    return changed;
}

/* "even", or the blocks per chunk run-length coded: "0, 4x15, 1". */
static void split_name(const loom_runtime_config *c, char *buf, size_t cap)
{
    if (c->n_chunks == 0) {
        snprintf(buf, cap, "even");
        return;
    }
    size_t len = 0;
    for (int32_t i = 0; i < c->n_chunks && len < cap;) {
        int32_t j = i;
        while (j < c->n_chunks && c->chunk_layers[j] == c->chunk_layers[i]) j++;
        int w = j - i > 1 ? snprintf(buf + len, cap - len, "%s%dx%d", i ? ", " : "",
                                     (int)c->chunk_layers[i], (int)(j - i))
                          : snprintf(buf + len, cap - len, "%s%d", i ? ", " : "",
                                     (int)c->chunk_layers[i]);
        if (w < 0) break;
        len += (size_t)w;
        i = j;
    }
}

/* What differs between the plan as given (a) and as exported (b). */
static void describe(const loom_runtime_config *a, const loom_runtime_config *b,
                     loom_export_list *changes)
{
    const loom_parallel *x = &a->par, *y = &b->par;
    const struct {
        const char *what;
        int64_t from, to;
    } d[] = {
        {"TP", x->tp, y->tp},           {"PP", x->pp, y->pp},
        {"DP", x->dp, y->dp},           {"EP", x->ep, y->ep},
        {"virtual stages", x->vpp, y->vpp},
        {"micro-batch", x->mbs, y->mbs},
        {"ZeRO stage", loom_runtime_zero(a), loom_runtime_zero(b)},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i].from != d[i].to)
            loom_export_list_add(changes, "%s %lld -> %lld", d[i].what, (long long)d[i].from,
                                 (long long)d[i].to);
    if (x->sp != y->sp)
        loom_export_list_add(changes, "sequence parallelism %s", y->sp ? "on" : "off");
    if (x->dtype != y->dtype)
        loom_export_list_add(changes, "%s -> %s", loom_dtype_name(x->dtype),
                             loom_dtype_name(y->dtype));
    bool xe = a->n_chunks == 0, ye = b->n_chunks == 0;
    if (xe != ye || a->n_chunks != b->n_chunks ||
        (!xe && memcmp(a->chunk_layers, b->chunk_layers,
                       (size_t)a->n_chunks * sizeof a->chunk_layers[0]))) {
        char from[160], to[160];
        split_name(a, from, sizeof from);
        split_name(b, to, sizeof to);
        loom_export_list_add(changes, "layer split %s -> %s", from, to);
    }
    if (x->recompute != y->recompute)
        loom_export_list_add(changes, "recompute %s -> %s", loom_recompute_name(x->recompute),
                             loom_recompute_name(y->recompute));
}

/* The evaluator's inputs, loaded once: the cluster's cost model and the
 * model's graph per micro-batch size (the search asks for a few). */
#define MAX_MBS 8
typedef struct {
    const loom_export_nearest_opts *o;
    loom_cluster cl;
    loom_cost_model *cm;
    loom_graph *g[MAX_MBS + 1];
} eval_ctx;

static loom_status eval_open(eval_ctx *e, const loom_export_nearest_opts *o, loom_error *err)
{
    memset(e, 0, sizeof *e);
    e->o = o;
    loom_calib cal;
    loom_status s = loom_cluster_load(o->cluster, &e->cl, err);
    if (s == LOOM_OK && o->calib_path) s = loom_calib_load(o->calib_path, &cal, err);
    if (s == LOOM_OK)
        s = loom_cost_model_create(&e->cl, o->calib_path ? &cal : NULL, o->profile_path, &e->cm,
                                   err);
    return s;
}

static void eval_close(eval_ctx *e)
{
    for (int i = 0; i <= MAX_MBS; i++) loom_graph_destroy(e->g[i]);
    loom_cost_model_destroy(e->cm);
}

/* Predicts configuration c with costs/eval.h (training only). */
static loom_status eval_config(eval_ctx *e, const loom_runtime_config *c,
                               loom_export_nearest_result *out, loom_error *err)
{
    loom_model_opts mo;
    loom_runtime_model_opts(&c->par, &mo);
    loom_graph *tmp = NULL, **g = c->par.mbs <= MAX_MBS ? &e->g[c->par.mbs] : &tmp;
    loom_status s = *g ? LOOM_OK : loom_model_source_build(e->o->model, &mo, g, err);
    loom_eval_result r;
    memset(&r, 0, sizeof r);
    loom_eval_opts eo = {.chunk_layers = c->chunk_layers, .n_chunks = c->n_chunks};
    if (s == LOOM_OK) s = loom_eval_megatron_ex(*g, e->cm, &c->par, &eo, &r, err);
    if (s == LOOM_OK) {
        out->step_time_s = r.step_time_s;
        out->memory_per_gpu_bytes = r.memory_per_gpu_bytes;
        out->fits = r.fits;
    }
    loom_eval_result_free(&r);
    loom_graph_destroy(tmp);
    return s;
}

static double gib(int64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

/* Keeps in `common` the obstacles that obs has too: after every candidate,
 * what stops all of them (a model the target does not have). */
static void keep_common(loom_export_list *common, bool first, const loom_export_list *obs)
{
    if (first) {
        *common = *obs;
        return;
    }
    int kept = 0;
    for (int i = 0; i < common->n; i++) {
        bool in = false;
        for (int j = 0; j < obs->n && !in; j++) in = strcmp(common->item[i], obs->item[j]) == 0;
        if (in && kept != i) memcpy(common->item[kept], common->item[i], sizeof common->item[0]);
        kept += in;
    }
    common->n = kept;
}

/* Step 3, the target's own space: every configuration of the plan's GPUs,
 * batch and sequence that target t runs without obstacles (even split, TP
 * within a node, micro-batch 1-8, ZeRO 0-3, no / selective / full
 * recompute, EP for MoE), evaluated; the fastest that fits is kept in c.
 * When none fits, LOOM_ERR_INFEASIBLE names the least memory any of them
 * needs, the GPU's capacity, and what would make it fit. */
static loom_status search_target(eval_ctx *e, const loom_runtime_config *base, loom_export_target t,
                                 loom_runtime_config *c, loom_export_nearest_result *out,
                                 loom_error *err)
{
    const loom_model_info *m = &base->model;
    int64_t gpus = loom_runtime_gpus(base), gpn = base->gpus_per_node;
    int64_t cap = loom_cluster_usable_bytes(&e->cl);
    loom_runtime_config *best = malloc(sizeof *best), *cand = malloc(sizeof *cand);
    if (!best || !cand) {
        free(best);
        free(cand);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    }
    loom_export_nearest_result bestr = {0}, r;
    int64_t least_mem = 0;
    int n_eval = 0, n_refused = 0;
    loom_export_list *common = malloc(sizeof *common);   /* what stops every candidate */
    if (!common) {
        free(best);
        free(cand);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    }
    common->n = 0;
    static const loom_recompute rcs[] = {LOOM_RECOMPUTE_NONE, LOOM_RECOMPUTE_SELECTIVE,
                                         LOOM_RECOMPUTE_FULL};
    loom_status s = LOOM_OK;
    for (int64_t tp = 1; tp <= gpn && tp <= gpus && s == LOOM_OK; tp *= 2)
        for (int64_t pp = 1; pp * tp <= gpus && pp <= m->layers && s == LOOM_OK; pp++) {
            if (gpus % (tp * pp) || m->layers % pp) continue;
            int64_t dp = gpus / (tp * pp);
            for (int64_t mbs = 1; mbs <= MAX_MBS && s == LOOM_OK; mbs *= 2) {
                if (base->par.gbs % (mbs * dp)) continue;
                for (int64_t ep = 1; ep <= (m->experts > 0 ? 64 : 1) && s == LOOM_OK; ep *= 2) {
                    if (m->experts > 0 && m->experts % ep) continue;
                    for (int zero = 0; zero <= 3 && s == LOOM_OK; zero++)
                        for (size_t ri = 0; ri < 3 && s == LOOM_OK; ri++) {
                            *cand = *base;
                            loom_parallel *p = &cand->par;
                            p->tp = tp, p->pp = pp, p->dp = dp, p->cp = 1, p->ep = ep, p->etp = 0;
                            p->vpp = 1, p->mbs = mbs;
                            p->sp = tp > 1 && t != LOOM_EXPORT_DEEPSPEED;   /* AutoTP has no SP */
                            p->zero = zero, p->dist_opt = false;
                            p->recompute = rcs[ri], p->recompute_layers = 0;
                            p->first_stage_layers = p->last_stage_layers = 0;
                            cand->n_chunks = 0;
                            loom_error ignored;
                            if (loom_runtime_config_normalize(cand, &ignored)) continue;
                            loom_export_list obs = {0};
                            loom_export_check(cand, t, &obs);
                            if (obs.n > 0) {
                                keep_common(common, n_refused++ == 0, &obs);
                                continue;
                            }
                            if (loom_parallel_check(&cand->par, m, gpus, &ignored)) continue;
                            if ((s = eval_config(e, cand, &r, err))) break;
                            n_eval++;
                            if (least_mem == 0 || r.memory_per_gpu_bytes < least_mem)
                                least_mem = r.memory_per_gpu_bytes;
                            if (r.fits && (!bestr.fits || r.step_time_s < bestr.step_time_s)) {
                                bestr = r;
                                *best = *cand;
                            }
                        }
                }
            }
        }
    if (s == LOOM_OK && n_eval == 0)
        s = loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                           "--nearest: %s runs none of the %d configurations of %lld GPUs "
                           "searched%s%s",
                           loom_export_target_name(t), n_refused, (long long)gpus,
                           common->n > 0 ? "; each has the obstacle: " : "",
                           common->n > 0 ? common->item[0] : "");
    if (s == LOOM_OK && !bestr.fits) {
        s = loom_error_set(
            err, LOOM_ERR_INFEASIBLE,
            "--nearest: nothing %s can run fits: of the %d configurations of %lld GPUs it runs "
            "(TP, PP, DP, micro-batch, ZeRO 0-3, recompute), the leanest needs %.1f GiB per GPU "
            "and the GPU has %.1f GiB (%.1f GiB usable, memory headroom %g); it would fit with "
            "GPUs of at least %.0f GiB, about %lld GPUs of this kind, or a shorter sequence or "
            "smaller global batch",
            loom_export_target_name(t), n_eval, (long long)gpus, gib(least_mem),
            gib(e->cl.gpu.hbm_bytes), gib(cap), e->cl.memory_headroom,
            ceil(gib(loom_cluster_hbm_for_usable(&e->cl, least_mem))),
            (long long)(cap > 0 ? gpus * ((least_mem + cap - 1) / cap) : 0));
    }
    if (s == LOOM_OK) {
        *c = *best;
        out->step_time_s = bestr.step_time_s;
        out->memory_per_gpu_bytes = bestr.memory_per_gpu_bytes;
        out->fits = true;
        snprintf(out->how, sizeof out->how, "searched %s's own space: %d configurations evaluated",
                 loom_export_target_name(t), n_eval);
    }
    free(best);
    free(cand);
    free(common);
    return s;
}

loom_status loom_export_nearest(const loom_plan *p, loom_export_target t,
                                const loom_export_nearest_opts *o, loom_runtime_config *c,
                                loom_export_nearest_result *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    if ((p->mode == LOOM_PLAN_INFER) != (t == LOOM_EXPORT_VLLM))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "--nearest keeps the plan's mode: a %s plan cannot become a %s "
                              "configuration",
                              loom_plan_mode_name(p->mode), loom_export_target_name(t));
    if (!o->model || !o->cluster)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--nearest needs the plan's model and cluster files");
    loom_runtime_config *orig = malloc(sizeof *orig);
    if (!orig) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    loom_export_list ignored = {0};
    loom_status s = loom_export_from_plan(p, orig, &ignored, err);
    if (s) {
        free(orig);
        return s;
    }

    /* step 1: the Megatron-style space */
    loom_plan_request req;
    loom_plan_request_init(&req);
    req.problem.model = o->model;
    req.model_label = p->model;
    req.cluster = o->cluster;
    req.calib_path = o->calib_path;
    req.profile_db_path = o->profile_path;
    req.problem.inference = p->mode == LOOM_PLAN_INFER;
    req.problem.objective = p->objective;
    req.problem.gbs = p->gbs;
    req.problem.seq = p->seq;
    req.problem.dtype = p->dtype;
    req.problem.flash_attention = p->model_info.flash_attention;
    req.search.megatron_only = true;
    req.problem.latency_bound_s = p->latency_bound_s;
    req.search.time_limit_s = o->time_limit_s;
    loom_plan *np = NULL;
    loom_plan_diag diag;
    s = loom_plan_run(&req, &np, &diag, err);
    if (s) {
        free(orig);
        if (s == LOOM_ERR_INFEASIBLE)
            loom_error_prefix(err, "--nearest: no Megatron-style plan fits");
        return s;
    }
    loom_export_list obstacles = {0};
    eval_ctx ev;
    bool opened = false;
    s = loom_export_from_plan(np, c, &obstacles, err);
    out->step_time_s = np->mode == LOOM_PLAN_INFER && np->latency_per_token_s > 0
                           ? np->latency_per_token_s : np->step_time_s;
    out->memory_per_gpu_bytes = np->memory_per_gpu_bytes;
    out->fits = true;   /* loom_plan_run returns plans that fit */
    snprintf(out->how, sizeof out->how, "planned again with --space megatron");
    loom_plan_destroy(np);
    if (s == LOOM_OK && obstacles.n > 0)
        s = loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                           "--nearest: the Megatron-style plan still has an obstacle: %s",
                           obstacles.item[0]);

    /* step 2: what the target still cannot run, set to its closest setting */
    bool adjusted_ok = false;
    if (s == LOOM_OK) {
        loom_export_check(c, t, &obstacles);
        if (obstacles.n == 0) {
            adjusted_ok = true;
        } else {
            loom_export_list adjusted = {0};   /* describe() reports the net changes */
            loom_error invalid;   /* an adjustment that leaves no valid split: step 3 */
            if (!c->inference && loom_export_adjust(c, t, &adjusted) &&
                loom_runtime_config_normalize(c, &invalid) == LOOM_OK) {
                obstacles = (loom_export_list){0};
                loom_export_check(c, t, &obstacles);
                if (obstacles.n == 0) {
                    snprintf(out->how, sizeof out->how,
                             "planned again with --space megatron, then adjusted for %s",
                             loom_export_target_name(t));
                    s = eval_open(&ev, o, err);
                    opened = s == LOOM_OK;
                    if (s == LOOM_OK) s = eval_config(&ev, c, out, err);
                    adjusted_ok = s == LOOM_OK;
                }
            }
            if (s == LOOM_OK && !adjusted_ok && c->inference)
                s = loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                   "--nearest: even the nearest Megatron-style plan cannot run on "
                                   "%s: %s",
                                   loom_export_target_name(t), obstacles.item[0]);
        }
    }
    /* step 3: still an obstacle, or the adjusted configuration does not fit:
     * search what the target itself runs */
    if (s == LOOM_OK && !c->inference && (!adjusted_ok || !out->fits)) {
        if (!opened) {
            s = eval_open(&ev, o, err);
            opened = s == LOOM_OK;
        }
        if (s == LOOM_OK) s = search_target(&ev, orig, t, c, out, err);
    }
    if (opened) eval_close(&ev);
    if (s == LOOM_OK && !out->fits)
        s = loom_error_set(err, LOOM_ERR_INFEASIBLE,
                           "--nearest: the nearest configuration %s can run needs %.1f GiB per GPU, "
                           "more than the GPU has",
                           loom_export_target_name(t), gib(out->memory_per_gpu_bytes));
    if (s == LOOM_OK) {
        describe(orig, c, &out->changes);
        c->predicted_step_s = out->step_time_s;
        c->predicted_memory_bytes = out->memory_per_gpu_bytes;
    }
    free(orig);
    return s;
}
