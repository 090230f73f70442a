/* parallel.c — defaults and names for loom_parallel (see parallel.h). */
#include "costs/parallel.h"

#include <string.h>

void loom_parallel_init(loom_parallel *p)
{
    memset(p, 0, sizeof *p);
    p->tp = p->pp = p->dp = p->cp = p->ep = 1;
    p->vpp = 1;
    p->mbs = p->gbs = 1;
    p->seq = 2048;
    p->dtype = LOOM_DTYPE_BF16;
    p->flash = true;
    p->overlap_grad_reduce = true;
    p->overlap_p2p = true;
}

static const char *const recompute_names[] = {"none", "selective", "full"};

int64_t loom_parallel_expert_tp(const loom_parallel *p)
{
    return p->etp > 0 ? p->etp : (p->tp > 0 ? p->tp : 1);
}

int64_t loom_parallel_expert_dp(const loom_parallel *p)
{
    int64_t ranks = (p->tp > 0 ? p->tp : 1) * (p->cp > 0 ? p->cp : 1) * (p->dp > 0 ? p->dp : 1);
    int64_t folded = loom_parallel_expert_tp(p) * (p->ep > 0 ? p->ep : 1);
    return ranks / folded > 1 ? ranks / folded : 1;
}

int64_t loom_parallel_shard_ranks(const loom_parallel *p, int64_t group)
{
    int64_t n = p->fsdp_shard;
    if (n <= 0 || n >= p->dp || p->dp % n != 0) return group;
    int64_t replicas = p->dp / n;
    return group % replicas == 0 ? group / replicas : group;
}

const char *loom_recompute_name(loom_recompute r)
{
    return (unsigned)r < 3 ? recompute_names[r] : "?";
}

bool loom_recompute_parse(const char *s, loom_recompute *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, recompute_names[i]) == 0) {
            *out = (loom_recompute)i;
            return true;
        }
    return false;
}

static const char *const framework_names[LOOM_FRAMEWORK_COUNT] = {"megatron", "deepspeed",
                                                                   "torchtitan"};

const char *loom_framework_name(loom_framework f)
{
    return (unsigned)f < LOOM_FRAMEWORK_COUNT ? framework_names[f] : "?";
}

bool loom_framework_parse(const char *s, loom_framework *out)
{
    for (int i = 0; i < LOOM_FRAMEWORK_COUNT; i++)
        if (strcmp(s, framework_names[i]) == 0) {
            *out = (loom_framework)i;
            return true;
        }
    return false;
}

bool loom_parallel_units_split(int64_t L, int64_t e, int64_t l, int64_t n, int32_t *chunks)
{
    int64_t units = L + e + l;
    if (n < 1 || units % n || units / n < e || units / n < l) return false;
    for (int64_t c = 0; c < n; c++) chunks[c] = (int32_t)(units / n);
    chunks[0] -= (int32_t)e;
    chunks[n - 1] -= (int32_t)l;
    return chunks[0] >= 0 && chunks[n - 1] >= 0;
}

