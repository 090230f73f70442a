/*
 * plan_check.c — the plan validator (see loom_plan_check in plan.h).
 *
 * A plan is runnable when:
 *   layers   stages cover the layer slots 0..layer_count-1 in order, each
 *            exactly once (stage i starts where stage i-1 ended + 1);
 *   GPUs     a stage has n0·n1 = nodes·gpus ids, all distinct; in every
 *            replica r (ids + r · replica_stride) they are inside the cluster
 *            and, for a sub-node sub-mesh, inside one node; different
 *            pipeline ranks and replicas never share a GPU, chunks of the
 *            same rank (interleaving) share all of them, and the ranks' GPUs
 *            add up to gpus_per_replica; the replicas fit in the cluster;
 *   memory   each stage's parts sum to its total; a pipeline rank's GPUs
 *            hold all its stages (chunks), so the sum of their totals is
 *            within the GPU's capacity, and the plan's memory_per_gpu_bytes
 *            is the largest such sum;
 *   degrees  tensor_parallel · context_parallel · data_parallel = the stage's GPUs; stages =
 *            pipeline_stages · virtual_stages; micro_batch · micro_batches ·
 *            data_parallel = gbs; every op sits in its stage's layers.
 * The first violation is reported with the JSON path of the field.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "costs/cluster.h"
#include "planner/plan/plan.h"

static loom_status bad(loom_error *err, const char *where, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static loom_status bad(loom_error *err, const char *where, const char *path, const char *fmt, ...)
{
    char body[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    return loom_error_set(err, LOOM_ERR_INVALID, "%s: %s: invalid plan: %s", where ? where : "plan",
                          path, body);
}

static loom_status check_schedule(const loom_plan *p, const char *w, loom_error *err)
{
    if (p->n_stages < 1 || !p->stages) return bad(err, w, "$.stages", "no stages");
    if (p->layer_count < 1) return bad(err, w, "$.model.layer_slots", "no layers");
    if (p->micro_batch < 1 || p->micro_batches < 1 || p->virtual_stages < 1 ||
        p->data_parallel < 1 || p->gpus_per_replica < 1 || p->pipeline_stages < 1)
        return bad(err, w, "$.schedule",
                   "micro_batch, micro_batches, virtual_stages, pipeline_stages, data_parallel "
                   "and gpus_per_replica must all be >= 1");
    /* Products of file values are formed by division: absurd values must
     * give an error, not a signed overflow. */
    if (p->n_stages % p->virtual_stages || p->n_stages / p->virtual_stages != p->pipeline_stages)
        return bad(err, w, "$.schedule.pipeline_stages",
                   "%lld pipeline ranks x %lld virtual stages != %d stages",
                   (long long)p->pipeline_stages, (long long)p->virtual_stages, (int)p->n_stages);
    if (p->nodes < 1 || p->gpus_per_node < 1 || p->nodes > LOOM_CLUSTER_MAX_NODES ||
        p->gpus_per_node > LOOM_CLUSTER_MAX_GPUS_PER_NODE)
        return bad(err, w, "$.hardware", "nodes must be in 1..%d and gpus_per_node in 1..%d",
                   LOOM_CLUSTER_MAX_NODES, LOOM_CLUSTER_MAX_GPUS_PER_NODE);
    if (p->idle_gpus_per_node < 0 ||
        p->idle_gpus_per_node > LOOM_CLUSTER_MAX_GPUS_PER_NODE - p->gpus_per_node)
        return bad(err, w, "$.hardware.idle_gpus_per_node",
                   "expected 0..%lld (a node of at most %d GPUs), found %lld",
                   (long long)(LOOM_CLUSTER_MAX_GPUS_PER_NODE - p->gpus_per_node),
                   LOOM_CLUSTER_MAX_GPUS_PER_NODE, (long long)p->idle_gpus_per_node);
    int64_t cluster = p->nodes * p->gpus_per_node;
    if (p->gpus_per_replica > cluster || p->data_parallel > cluster / p->gpus_per_replica)
        return bad(err, w, "$.schedule.data_parallel",
                   "%lld replicas of %lld GPUs do not fit in the cluster's %lld GPUs",
                   (long long)p->data_parallel, (long long)p->gpus_per_replica,
                   (long long)cluster);
    /* By division, so that absurd values cannot overflow the product. */
    if (p->gbs < 1 || p->gbs % p->data_parallel || (p->gbs / p->data_parallel) % p->micro_batch ||
        p->gbs / p->data_parallel / p->micro_batch != p->micro_batches)
        return bad(err, w, "$.schedule.micro_batches",
                   "micro_batch %lld x micro_batches %lld x data_parallel %lld != gbs %lld",
                   (long long)p->micro_batch, (long long)p->micro_batches,
                   (long long)p->data_parallel, (long long)p->gbs);
    return LOOM_OK;
}

static loom_status check_layers(const loom_plan *p, const char *w, loom_error *err)
{
    int32_t next = 0;
    char path[64];
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        snprintf(path, sizeof path, "$.stages[%d].layers", (int)i);
        if (s->index != i) return bad(err, w, path, "stage index %d, expected %d", (int)s->index, (int)i);
        if (s->first_layer > next)
            return bad(err, w, path, "starts at layer %d: layer %d is in no stage",
                       (int)s->first_layer, (int)next);
        if (s->first_layer < next)
            return bad(err, w, path, "starts at layer %d, which is already in stage %d",
                       (int)s->first_layer, (int)i - 1);
        if (s->last_layer < s->first_layer)
            return bad(err, w, path, "last layer %d before first layer %d", (int)s->last_layer,
                       (int)s->first_layer);
        if (s->last_layer >= p->layer_count)
            return bad(err, w, path, "layer %d does not exist (the model has %d layer slots)",
                       (int)s->last_layer, (int)p->layer_count);
        next = s->last_layer + 1;
        for (int32_t k = 0; k < s->n_ops; k++)
            if (s->ops[k].layer < s->first_layer || s->ops[k].layer > s->last_layer) {
                snprintf(path, sizeof path, "$.stages[%d].ops[%d].layer", (int)i, (int)k);
                return bad(err, w, path, "op %s is in layer %d, outside the stage's layers %d..%d",
                           s->ops[k].name, (int)s->ops[k].layer, (int)s->first_layer,
                           (int)s->last_layer);
            }
    }
    if (next != p->layer_count)
        return bad(err, w, "$.stages", "layers %d..%d are in no stage", (int)next,
                   (int)p->layer_count - 1);
    return LOOM_OK;
}

/* GPU ids of one stage, in every replica, against its shapes; owner[] maps
 * a global GPU id to the pipeline rank using it (-1 free). */
static loom_status check_gpus(const loom_plan *p, int32_t i, int32_t *owner, int32_t *first_of,
                              const char *w, loom_error *err)
{
    const loom_plan_stage *s = &p->stages[i];
    char path[64];
    snprintf(path, sizeof path, "$.stages[%d]", (int)i);
    int64_t g = p->gpus_per_node, cluster = p->nodes * p->gpus_per_node;
    int32_t want_group = (int32_t)(i % p->pipeline_stages);
    if (s->group != want_group)
        return bad(err, w, path, "group %d, expected %d (stage %d of %lld pipeline ranks)",
                   (int)s->group, (int)want_group, (int)i, (long long)p->pipeline_stages);
    if (s->submesh_nodes < 1 || s->submesh_gpus < 1 || s->submesh_gpus > g ||
        s->submesh_nodes > p->nodes ||
        (s->submesh_nodes > 1 && s->submesh_gpus != g))
        return bad(err, w, path, "sub-mesh (%lld, %lld) is not whole nodes or part of one node "
                                 "of %lld GPUs",
                   (long long)s->submesh_nodes, (long long)s->submesh_gpus, (long long)g);
    int64_t n = s->submesh_nodes * s->submesh_gpus;
    if (s->n_gpus != n || s->mesh[0] < 1 || s->mesh[1] < 1 || n % s->mesh[0] ||
        n / s->mesh[0] != s->mesh[1])
        return bad(err, w, path, "%lld GPUs listed, sub-mesh (%lld, %lld) and logical mesh "
                                 "(%lld, %lld) disagree",
                   (long long)s->n_gpus, (long long)s->submesh_nodes, (long long)s->submesh_gpus,
                   (long long)s->mesh[0], (long long)s->mesh[1]);
    int64_t cp = s->context_parallel > 0 ? s->context_parallel : 1;
    if (s->tensor_parallel < 1 || s->data_parallel < 1 || s->context_parallel < 0 ||
        s->expert_parallel < 0 || n % (s->tensor_parallel * cp) ||
        n / (s->tensor_parallel * cp) != s->data_parallel) {
        if (cp > 1)
            return bad(err, w, path, "tensor_parallel %lld x context_parallel %lld x "
                                     "data_parallel %lld != %lld GPUs",
                       (long long)s->tensor_parallel, (long long)cp,
                       (long long)s->data_parallel, (long long)n);
        return bad(err, w, path, "tensor_parallel %lld x data_parallel %lld != %lld GPUs",
                   (long long)s->tensor_parallel, (long long)s->data_parallel, (long long)n);
    }
    if (s->zero < 0 || s->zero > 3) return bad(err, w, path, "ZeRO stage %d not in 0..3", s->zero);
    if (s->replica_stride < 1 || s->replica_stride > cluster)
        return bad(err, w, path, "replica_stride %lld is not in 1..%lld",
                   (long long)s->replica_stride, (long long)cluster);
    bool fresh = first_of[s->group] < 0;   /* first chunk of this pipeline rank */
    if (fresh) first_of[s->group] = i;
    for (int64_t k = 0; k < s->n_gpus; k++) {
        snprintf(path, sizeof path, "$.stages[%d].gpus[%lld]", (int)i, (long long)k);
        /* mark[] (after owner[]) holds the last stage that listed a GPU: a
         * linear check, where comparing pairs took hours for 10^6 GPUs */
        int32_t *mark = owner + cluster;
        if (s->gpus[k] >= 0 && s->gpus[k] < cluster) {   /* else reported just below */
            if (mark[s->gpus[k]] == i)
                return bad(err, w, path, "GPU %lld listed twice", (long long)s->gpus[k]);
            mark[s->gpus[k]] = i;
        }
        for (int64_t r = 0; r < p->data_parallel; r++) {
            int64_t id = s->gpus[k] + r * s->replica_stride;
            if (s->gpus[k] < 0 || id >= cluster)
                return bad(err, w, path, "GPU %lld (replica %lld) is outside the cluster's GPUs "
                                         "0..%lld",
                           (long long)id, (long long)r, (long long)cluster - 1);
            int64_t first = s->gpus[0] + r * s->replica_stride;
            if (s->submesh_nodes == 1 && id / g != first / g)
                return bad(err, w, path, "GPU %lld (replica %lld) is on node %lld, but the "
                                         "sub-mesh is inside node %lld",
                           (long long)id, (long long)r, (long long)(id / g),
                           (long long)(first / g));
            if (fresh) {
                if (owner[id] >= 0)
                    return bad(err, w, path, "GPU %lld (replica %lld) is also used by stage %d",
                               (long long)id, (long long)r, (int)first_of[owner[id]]);
                owner[id] = s->group;
            } else if (owner[id] != s->group) {
                return bad(err, w, path, "GPU %lld (replica %lld) is not one of pipeline rank "
                                         "%d's GPUs (stage %d)",
                           (long long)id, (long long)r, (int)s->group, (int)first_of[s->group]);
            }
        }
    }
    if (!fresh && s->n_gpus != p->stages[first_of[s->group]].n_gpus) {
        snprintf(path, sizeof path, "$.stages[%d].gpus", (int)i);
        return bad(err, w, path, "%lld GPUs, but pipeline rank %d has %lld",
                   (long long)s->n_gpus, (int)s->group,
                   (long long)p->stages[first_of[s->group]].n_gpus);
    }
    return LOOM_OK;
}

static loom_status check_memory(const loom_plan *p, const char *w, loom_error *err)
{
    int64_t worst = 0;
    char path[64];
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_memory *m = &p->stages[i].memory;
        snprintf(path, sizeof path, "$.stages[%d].memory_bytes", (int)i);
        int64_t parts[6] = {m->params, m->grads, m->optimizer, m->activations, m->kv_cache,
                            m->other};
        int64_t sum = 0;
        for (int k = 0; k < 6; k++) {
            if (parts[k] < 0 || parts[k] > ((int64_t)1 << 53))   /* 8 PiB: sums stay exact */
                return bad(err, w, path, "negative or absurd byte count %lld", (long long)parts[k]);
            sum += parts[k];
        }
        if (sum != m->total)
            return bad(err, w, path, "parts sum to %lld bytes, total says %lld", (long long)sum,
                       (long long)m->total);
    }
    for (int32_t i = 0; i < p->n_stages; i++) {
        int32_t r = p->stages[i].group;
        bool first = true;   /* each rank once, at its first stage */
        for (int32_t j = 0; j < i && first; j++) first = p->stages[j].group != r;
        if (!first) continue;
        int64_t rank = loom_plan_rank_memory(p, r);
        snprintf(path, sizeof path, "$.stages[%d].memory_bytes", (int)i);
        if (rank > p->gpu_memory_bytes)
            return bad(err, w, path, "%.2f GiB per GPU%s exceeds the %s's %.2f GiB",
                       (double)rank / 1073741824.0,
                       rank != p->stages[i].memory.total ? " (all chunks of its pipeline rank)"
                                                         : "",
                       p->gpu[0] ? p->gpu : "GPU", (double)p->gpu_memory_bytes / 1073741824.0);
        if (rank > worst) worst = rank;
    }
    if (p->memory_per_gpu_bytes != worst)
        return bad(err, w, "$.predicted.memory_per_gpu_bytes",
                   "%lld, but the largest pipeline rank needs %lld",
                   (long long)p->memory_per_gpu_bytes, (long long)worst);
    return LOOM_OK;
}

loom_status loom_plan_check(const loom_plan *p, const char *where, loom_error *err)
{
    loom_status s = check_schedule(p, where, err);
    if (s) return s;
    s = check_layers(p, where, err);
    if (s) return s;
    int64_t cluster = p->nodes * p->gpus_per_node;
    if (cluster > LOOM_CLUSTER_MAX_GPUS)   /* base/limits.h, as the cluster reader */
        return bad(err, where, "$.hardware", "%lld GPUs: at most %lld", (long long)cluster,
                   (long long)LOOM_CLUSTER_MAX_GPUS);
    int32_t *owner = malloc(sizeof *owner * (size_t)cluster * 2);   /* owner[], then mark[] */
    int32_t *first_of = malloc(sizeof *first_of * (size_t)p->pipeline_stages);
    if (!owner || !first_of) {
        free(owner);
        free(first_of);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory checking a plan");
    }
    for (int64_t k = 0; k < 2 * cluster; k++) owner[k] = -1;
    for (int64_t k = 0; k < p->pipeline_stages; k++) first_of[k] = -1;
    for (int32_t i = 0; i < p->n_stages && !s; i++) s = check_gpus(p, i, owner, first_of, where, err);
    /* every pipeline rank's GPUs add up to the replica */
    int64_t per_replica = 0;
    for (int64_t k = 0; k < p->pipeline_stages && !s; k++)
        per_replica += first_of[k] >= 0 ? p->stages[first_of[k]].n_gpus : 0;
    if (!s && per_replica != p->gpus_per_replica)
        s = bad(err, where, "$.schedule.gpus_per_replica",
                "%lld, but the pipeline ranks use %lld GPUs per replica",
                (long long)p->gpus_per_replica, (long long)per_replica);
    free(owner);
    free(first_of);
    if (s) return s;
    return check_memory(p, where, err);
}
