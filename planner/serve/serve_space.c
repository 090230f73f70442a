/*
 * serve_space.c — the instance shapes of a serving deployment (serve_space.h).
 *
 * The enumeration is small: tp over the divisors of a node, pp and attn_dp
 * over powers of two, ep in two values; for Llama-3-70B on 64 GPUs about
 * two dozen shapes, for DeepSeek-V3 on 32 GPUs about a hundred. Building a
 * shape's model reads the one-token graph once (a few dozen GEMM classes),
 * so the whole space costs milliseconds.
 */
#include "planner/serve/serve_space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/model.h"

void loom_serve_inst_label(const loom_serve_inst *i, char *buf, size_t n)
{
    int k = snprintf(buf, n, "tp %lld", (long long)i->tp);
    if (i->attn_dp > 1 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " × attention-dp %lld", (long long)i->attn_dp);
    if (i->pp > 1 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " × pp %lld", (long long)i->pp);
    if (i->ep > 1 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", ep %lld", (long long)i->ep);
    if (i->chunk > 0 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", chunk %lld", (long long)i->chunk);
    if (i->seqs > 0 && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", seqs %lld", (long long)i->seqs);
}

loom_status loom_serve_space_model(const loom_serve_space_opts *o, const loom_serve_inst *inst,
                                   int64_t replicas, loom_serve_model **out, loom_error *err)
{
    loom_serve_model_opts mo = {.graph = o->graph, .cluster = o->cluster, .calib = o->calib,
                                .serve_calib = o->serve_calib, .seq_tokens = o->seq_tokens,
                                .frontend = o->frontend, .client = o->client};
    loom_serve_parallel_init(&mo.par);
    mo.par.tp = inst->tp;
    mo.par.pp = inst->pp;
    mo.par.ep = inst->ep;
    mo.par.attn_dp = inst->attn_dp;
    mo.par.replicas = replicas;
    mo.par.weights = o->weights;
    mo.par.kv_dtype = o->kv_dtype;
    loom_serve_engine_defaults(o->engine, &o->cluster->gpu, inst->tp * inst->attn_dp, &mo.engine);
    mo.engine.compiled_runtime = o->trt_engine || o->frontend == LOOM_FRONTEND_NIM;
    if (inst->chunk > 0) {
        mo.engine.max_batched_tokens = inst->chunk;
        /* vLLM refuses max_num_batched_tokens < max_num_seqs */
        if (o->engine == LOOM_ENGINE_VLLM && mo.engine.max_num_seqs > inst->chunk)
            mo.engine.max_num_seqs = inst->chunk;
    }
    if (inst->seqs > 0 && inst->seqs < mo.engine.max_num_seqs) mo.engine.max_num_seqs = inst->seqs;
    return loom_serve_model_create(&mo, out, err);
}

/* A stage of g GPUs packs the nodes: it divides a node or fills whole ones. */
static bool packs(int64_t g, int64_t per_node)
{
    return per_node % g == 0 || g % per_node == 0;
}

static loom_status add(loom_serve_space *s, int32_t *cap, const loom_serve_space_opts *o,
                       const loom_serve_inst *inst, loom_error *err)
{
    bool shape = inst->chunk == 0 && inst->seqs == 0;   /* variants are not counted as shapes */
    if (shape) s->tried++;
    loom_serve_model *m = NULL;
    loom_error why = {0};
    loom_status st = loom_serve_space_model(o, inst, 1, &m, &why);
    if (st) {
        if (st == LOOM_ERR_NOMEM) return loom_error_set(err, st, "%s", why.msg);
        if (shape) s->refused++;
        return LOOM_OK;
    }
    const loom_serve_memory *mem = loom_serve_model_memory(m);
    if (!mem->fits || mem->kv_capacity_tokens < o->seq_tokens) {
        if (shape) s->no_fit++;
        loom_serve_model_destroy(m);
        return LOOM_OK;
    }
    if (s->n == *cap) {
        int32_t nc = *cap ? 2 * *cap : 32;
        loom_serve_cand *c = realloc(s->cand, (size_t)nc * sizeof *c);
        if (!c) {
            loom_serve_model_destroy(m);
            return loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
        }
        s->cand = c;
        *cap = nc;
    }
    s->cand[s->n++] = (loom_serve_cand){*inst, inst->tp * inst->attn_dp * inst->pp, m, !shape};
    return LOOM_OK;
}

/* The shape inst at the engine's defaults, then, when that fits, with the
 * smaller budgets (vLLM, SGLang) and the smaller sequence caps of
 * serve_space.h, one at a time. */
static loom_status add_variants(loom_serve_space *s, int32_t *cap, const loom_serve_space_opts *o,
                                loom_serve_inst inst, loom_error *err)
{
    int32_t before = s->n;
    loom_status st = add(s, cap, o, &inst, err);
    if (st || s->n == before) return st;
    const loom_serve_engine *e = loom_serve_model_engine(s->cand[s->n - 1].m);
    int64_t def_chunk = e->max_batched_tokens, def_seqs = e->max_num_seqs;
    for (int64_t chunk = 512; o->engine != LOOM_ENGINE_TRTLLM && chunk < def_chunk && chunk <= 4096;
         chunk *= 2) {
        loom_serve_inst v = inst;
        v.chunk = chunk;
        if ((st = add(s, cap, o, &v, err))) return st;
    }
    for (int64_t seqs = 32; seqs < def_seqs && seqs <= 256; seqs *= 2) {
        loom_serve_inst v = inst;
        v.seqs = seqs;
        if ((st = add(s, cap, o, &v, err))) return st;
    }
    return LOOM_OK;
}

loom_status loom_serve_space_build(const loom_serve_space_opts *o, loom_serve_space *out,
                                   loom_error *err)
{
    memset(out, 0, sizeof *out);
    const loom_model_info *mi = loom_graph_info_c(o->graph);
    const loom_cluster *c = o->cluster;
    int64_t per_node = c->gpus_per_node, total = loom_cluster_gpus(c);
    bool moe = mi->experts > 0;
    int32_t cap = 0;
    loom_status s = LOOM_OK;
    for (int64_t tp = 1; tp <= per_node; tp++) {
        if (per_node % tp || (mi->heads > 0 && mi->heads % tp)) continue;
        for (int64_t dp = 1; tp * dp <= total; dp *= 2) {
            if (dp > 1 && !moe) break;
            int64_t stage = tp * dp;
            if (!packs(stage, per_node)) continue;
            for (int64_t pp = 1; stage * pp <= total && pp <= (mi->layers > 0 ? mi->layers : 1);
                 pp *= 2) {
                int64_t eps[2] = {1, stage};
                int n_ep = moe && stage > 1 ? 2 : 1;
                for (int k = 0; k < n_ep; k++) {
                    if (moe && eps[k] > 1 && mi->experts % eps[k]) continue;
                    loom_serve_inst inst = {.tp = tp, .pp = pp, .ep = eps[k], .attn_dp = dp};
                    if ((s = add_variants(out, &cap, o, inst, err))) goto fail;
                }
            }
        }
    }
    return LOOM_OK;
fail:
    loom_serve_space_free(out);
    return s;
}

void loom_serve_space_free(loom_serve_space *s)
{
    if (!s) return;
    for (int32_t i = 0; i < s->n; i++) loom_serve_model_destroy(s->cand[i].m);
    free(s->cand);
    memset(s, 0, sizeof *s);
}
