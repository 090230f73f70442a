/*
 * plan_roles.c — what each mesh axis of a stage does, named the way users and
 * runtimes name it (TP, CP, DP, EP), read off the ops' operand specs; and the
 * layer labels of tables and pictures in the model's own numbering.
 *
 * One reading for every place that names a stage's parallelism: the plan's
 * stage fields (plan_run.c), the `loom plan` table, the SVG legend and the
 * exporters (export_plan.c) all call loom_plan_stage_roles, so a plan cannot
 * say "dp 32" in one place and "context-parallel size 32" in another.
 *
 * The rule (Megatron-LM's vocabulary; an axis of one GPU does nothing):
 *
 *   TP  an axis any dense weight (one without an expert dim e) splits over;
 *       both axes: 2-D tensor parallelism;
 *   CP  an axis, not TP, over which an activation splits the sequence s but
 *       not the batch b (each GPU holds a slice of every sequence; attention
 *       exchanges keys and values: context parallelism);
 *   EP  an axis, neither, over which the expert weights split e; for the
 *       dense ops it is data-parallel, as Megatron's expert ranks are;
 *   DP  the rest.
 *
 * Degrees: tp, cp = the product of their axes' sizes, dp = GPUs / (tp · cp),
 * ep = the GPUs the expert weights split e over (any axes). A stage whose ops
 * carry no weight (or a plan without per-op specs) keeps the degrees it was
 * written with.
 */
#include <stdio.h>
#include <string.h>

#include "planner/plan/plan.h"

const char *loom_plan_axis_role_name(loom_plan_axis_role r)
{
    switch (r) {
    case LOOM_AXIS_TP: return "tp";
    case LOOM_AXIS_CP: return "cp";
    case LOOM_AXIS_EP: return "ep";
    case LOOM_AXIS_DP: return "dp";
    default: return "-";
    }
}

/* Mesh axes (bit 0, bit 1) over which dim `dim` of one operand list
 * ("b@0 s h@1, b s h") splits; any dim when dim is NULL. With `found`, also
 * whether the dim occurs. */
static unsigned dim_axes(const char *spec, const char *dim, bool *found)
{
    unsigned axes = 0;
    if (found) *found = false;
    for (const char *p = spec; *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *name = p;
        while (*p && *p != ' ' && *p != ',' && *p != '@') p++;
        size_t len = (size_t)(p - name);
        unsigned a = 0;
        if (*p == '@')
            for (p++; *p == '0' || *p == '1'; p++) a |= *p == '0' ? 1u : 2u;
        while (*p && *p != ' ' && *p != ',') p++;
        if (!len) continue;
        if (!dim || (strlen(dim) == len && strncmp(dim, name, len) == 0)) {
            axes |= a;
            if (found) *found = true;
        }
    }
    return axes;
}

/* Axes over which some operand of the list splits s but not b. */
static unsigned seq_only_axes(const char *list)
{
    unsigned out = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char one[LOOM_PLAN_SPEC_MAX];
        if (n >= sizeof one) n = sizeof one - 1;
        memcpy(one, p, n);
        one[n] = '\0';
        out |= dim_axes(one, "s", NULL) & ~dim_axes(one, "b", NULL);
        p = end ? end + 1 : p + n;
    }
    return out;
}

/* Whether a weight spec is an expert weight: it has both an e and an f dim
 * (the router's "h e" has no f). *e gets the axes it splits e over. */
static bool expert_weight(const char *w, unsigned *e, unsigned *f)
{
    bool has_e, has_f;
    *e = dim_axes(w, "e", &has_e);
    *f = dim_axes(w, "f", &has_f);
    return has_e && has_f;
}

static int64_t axes_size(unsigned axes, const int64_t mesh[2])
{
    return (axes & 1u ? mesh[0] : 1) * (axes & 2u ? mesh[1] : 1);
}

void loom_plan_stage_roles(const loom_plan_stage *s, loom_plan_roles *r)
{
    unsigned real = (s->mesh[0] > 1 ? 1u : 0u) | (s->mesh[1] > 1 ? 2u : 0u);
    unsigned tp = 0, cp = 0, ep = 0, etp = 0;
    bool any_weight = false, any_expert = false;
    for (int32_t k = 0; k < s->n_ops; k++) {
        const char *w = s->ops[k].weight;
        if (!w[0]) continue;
        any_weight = true;
        unsigned e, f;
        if (expert_weight(w, &e, &f)) ep |= e, etp |= f, any_expert = true;
        else tp |= dim_axes(w, NULL, NULL);
    }
    tp &= real, ep &= real, etp &= real;
    memset(r, 0, sizeof *r);
    int64_t n = s->n_gpus > 0 ? s->n_gpus : 1;
    if (!any_weight) {   /* nothing to read the roles from: the stage's own degrees */
        r->tp = s->tensor_parallel > 0 ? s->tensor_parallel : 1;
        r->cp = s->context_parallel > 0 ? s->context_parallel : 1;
        r->ep = s->expert_parallel > 0 ? s->expert_parallel : 1;
        r->dp = n % (r->tp * r->cp) == 0 ? n / (r->tp * r->cp) : 1;
        unsigned t = r->tp > 1 && r->tp == n && real == 3u  ? 3u
                     : r->tp > 1 && s->mesh[1] == r->tp ? 2u
                     : r->tp > 1 && s->mesh[0] == r->tp ? 1u
                                                        : 0u;
        unsigned c = r->cp > 1 && !(t & 1u) && s->mesh[0] == r->cp ? 1u
                     : r->cp > 1 && !(t & 2u) && s->mesh[1] == r->cp ? 2u
                                                                     : 0u;
        for (int a = 0; a < 2; a++) {
            unsigned bit = 1u << a;
            r->axis[a] = !(real & bit) ? LOOM_AXIS_NONE
                         : t & bit     ? LOOM_AXIS_TP
                         : c & bit     ? LOOM_AXIS_CP
                                       : LOOM_AXIS_DP;
        }
        return;
    }
    for (int32_t k = 0; k < s->n_ops && tp != 3u; k++) {
        cp |= seq_only_axes(s->ops[k].input);
        cp |= seq_only_axes(s->ops[k].output);
    }
    cp &= real & ~tp;
    for (int a = 0; a < 2; a++) {
        unsigned bit = 1u << a;
        r->axis[a] = !(real & bit) ? LOOM_AXIS_NONE
                     : tp & bit    ? LOOM_AXIS_TP
                     : cp & bit    ? LOOM_AXIS_CP
                     : ep & bit    ? LOOM_AXIS_EP
                                   : LOOM_AXIS_DP;
    }
    r->tp = axes_size(tp, s->mesh);
    r->cp = axes_size(cp, s->mesh);
    r->ep = axes_size(ep, s->mesh) * (ep && s->ep_span > 1 ? s->ep_span : 1);
    r->etp = any_expert ? axes_size(etp, s->mesh) : 0;
    r->dp = n % (r->tp * r->cp) == 0 ? n / (r->tp * r->cp) : 1;
}

void loom_plan_roles_label(const loom_plan_roles *r, const int64_t mesh[2], char *dst, size_t cap)
{
    if (cap == 0) return;
    dst[0] = '\0';
    if (r->axis[0] == LOOM_AXIS_TP && r->axis[1] == LOOM_AXIS_TP) {
        snprintf(dst, cap, "tp%lldx%lld", (long long)mesh[0], (long long)mesh[1]);
        return;
    }
    size_t len = 0;
    for (int a = 0; a < 2; a++) {
        if (r->axis[a] == LOOM_AXIS_NONE) continue;
        int n = snprintf(dst + len, cap - len, "%s%s%lld", len ? " x " : "",
                         loom_plan_axis_role_name(r->axis[a]), (long long)mesh[a]);
        if (n < 0 || (size_t)n >= cap - len) return;
        len += (size_t)n;
    }
    if (!len) snprintf(dst, cap, "no split");
}

/* Whether the plan's layer slots are an HF model's: embedding, L blocks,
 * head (layer_count = L + 2). */
static bool hf_slots(const loom_plan *p)
{
    return p->model_info.layers > 0 && p->layer_count == p->model_info.layers + 2;
}

void loom_plan_layers_label(const loom_plan *p, int32_t first, int32_t last, char *dst,
                            size_t cap)
{
    if (!hf_slots(p)) {
        if (first == last) snprintf(dst, cap, "%d", (int)first);
        else snprintf(dst, cap, "%d-%d", (int)first, (int)last);
        return;
    }
    int32_t L = (int32_t)p->model_info.layers;
    int32_t b0 = first < 1 ? 1 : first, b1 = last > L ? L : last;   /* blocks, slots */
    char blocks[32] = "";
    if (b0 <= b1) {
        if (b0 == b1) snprintf(blocks, sizeof blocks, "%d", (int)(b0 - 1));
        else snprintf(blocks, sizeof blocks, "%d-%d", (int)(b0 - 1), (int)(b1 - 1));
    }
    snprintf(dst, cap, "%s%s%s%s%s", first == 0 ? "emb" : "", first == 0 && blocks[0] ? "+" : "",
             blocks, last == L + 1 && (blocks[0] || first == 0) ? "+" : "",
             last == L + 1 ? "head" : "");
}
