/*
 * plan.c — the plan value: allocation of its stage, GPU and op arrays, and
 * the name table of modes (see plan.h; objectives: solver/problem.h). Assembling a plan
 * from a search result lives in plan_build.c; JSON in plan_json.c; checks in
 * plan_check.c; the picture in plan_svg.c.
 */
#include "planner/plan/plan.h"

#include <stdlib.h>
#include <string.h>

const char *loom_plan_mode_name(loom_plan_mode m)
{
    return m == LOOM_PLAN_TRAIN ? "train" : m == LOOM_PLAN_INFER ? "infer" : "?";
}

bool loom_plan_mode_parse(const char *s, loom_plan_mode *out)
{
    if (strcmp(s, "train") == 0) *out = LOOM_PLAN_TRAIN;
    else if (strcmp(s, "infer") == 0) *out = LOOM_PLAN_INFER;
    else return false;
    return true;
}

loom_status loom_plan_create(loom_plan **out, loom_error *err)
{
    loom_plan *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory creating a plan");
    p->dtype = LOOM_DTYPE_BF16;
    p->objective = LOOM_OBJ_TIME;
    p->virtual_stages = 1;
    p->cost_per_step_usd = p->cost_per_mtoken_usd = -1;
    p->energy_per_step_j = p->energy_per_token_j = -1;
    strcpy(p->space, "full");
    strcpy(p->schedule_kind, "1f1b");
    strcpy(p->algorithm, "alpa");
    strcpy(p->search_status, "optimal");
    *out = p;
    return LOOM_OK;
}

static void free_stages(loom_plan *p)
{
    for (int32_t i = 0; i < p->n_stages; i++) {
        free(p->stages[i].gpus);
        free(p->stages[i].ops);
    }
    free(p->stages);
    p->stages = NULL;
    p->n_stages = 0;
}

void loom_plan_destroy(loom_plan *p)
{
    if (!p) return;
    free_stages(p);
    free(p);
}

loom_status loom_plan_set_stages(loom_plan *p, int32_t n, loom_error *err)
{
    free_stages(p);
    if (n < 0) return loom_error_set(err, LOOM_ERR_INVALID, "negative stage count %d", (int)n);
    if (n == 0) return LOOM_OK;
    p->stages = calloc((size_t)n, sizeof *p->stages);
    if (!p->stages) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory: %d stages", (int)n);
    p->n_stages = n;
    for (int32_t i = 0; i < n; i++) {
        p->stages[i].index = p->stages[i].group = i;
        p->stages[i].context_parallel = p->stages[i].expert_parallel = 1;
    }
    return LOOM_OK;
}

/* Replaces *arr by n zeroed elements of `size` bytes (none when n <= 0). */
static loom_status fresh_array(void **arr, int64_t n, size_t size, const char *what,
                               loom_error *err)
{
    free(*arr);
    *arr = NULL;
    if (n <= 0) return LOOM_OK;
    *arr = calloc((size_t)n, size);
    if (!*arr)
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory: %lld %s", (long long)n, what);
    return LOOM_OK;
}

loom_status loom_plan_stage_set_gpus(loom_plan_stage *s, int64_t n, loom_error *err)
{
    void *a = s->gpus;
    loom_status st = fresh_array(&a, n, sizeof *s->gpus, "GPU ids", err);
    s->gpus = a;
    s->n_gpus = st || n < 0 ? 0 : n;
    return st;
}

loom_status loom_plan_stage_set_ops(loom_plan_stage *s, int32_t n, loom_error *err)
{
    void *a = s->ops;
    loom_status st = fresh_array(&a, n, sizeof *s->ops, "ops", err);
    s->ops = a;
    s->n_ops = st || n < 0 ? 0 : n;
    return st;
}

void loom_plan_memory_sum(loom_plan_memory *m)
{
    m->total = m->params + m->grads + m->optimizer + m->activations + m->kv_cache + m->other;
}

int64_t loom_plan_rank_memory(const loom_plan *p, int32_t rank)
{
    int64_t sum = 0;
    for (int32_t i = 0; i < p->n_stages; i++)
        if (p->stages[i].group == rank)   /* saturating: a read plan may hold absurd totals */
            sum = p->stages[i].memory.total > INT64_MAX - sum ? INT64_MAX : sum + p->stages[i].memory.total;
    return sum;
}

int64_t loom_plan_stage_blocks(const loom_plan *p, const loom_plan_stage *s)
{
    int64_t n = (int64_t)s->last_layer - s->first_layer + 1;
    /* HF graphs: slot 0 is the embedding, slot L+1 the head. */
    if (p->model_info.layers > 0 && p->layer_count == p->model_info.layers + 2) {
        if (s->first_layer == 0) n--;
        if (s->last_layer == p->layer_count - 1) n--;
    }
    return n < 0 ? 0 : n;
}
