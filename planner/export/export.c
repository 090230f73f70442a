/*
 * export.c — the runtime configuration (export.h): defaults, the pipeline
 * split, the canonical form, and the dispatch of checks and renderers to the
 * per-target files export_<target>.c.
 *
 * The split follows Megatron-LM's rules, which every target's own split can
 * be compared with:
 *   even        L / (pp·vpp) blocks per chunk;
 *   first/last  --decoder-first/last-pipeline-num-layers f, l: the first and
 *               last pipeline stage hold f and l blocks and the pp - (f?1:0)
 *               - (l?1:0) other stages share the rest evenly
 *               (TransformerConfig, megatron/core/transformer);
 *   layout      any list of chunks (--pipeline-model-parallel-layout).
 * Rendering writes into an open_memstream buffer, so a renderer that fails
 * half-way returns nothing and the caller writes no partial file.
 */
#include "planner/export/export.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "planner/export/export_target.h"

static const char *const target_names[] = {
#define LOOM_X(n, s) s,
    LOOM_EXPORT_TARGET_LIST(LOOM_X)
#undef LOOM_X
};
_Static_assert(sizeof target_names / sizeof target_names[0] == LOOM_EXPORT_TARGET_COUNT,
               "target name table out of step with the enum");

const char *loom_export_target_name(loom_export_target t)
{
    return (unsigned)t < LOOM_EXPORT_TARGET_COUNT ? target_names[t] : "?";
}

bool loom_export_target_parse(const char *s, loom_export_target *out)
{
    for (int i = 0; i < LOOM_EXPORT_TARGET_COUNT; i++)
        if (strcmp(s, target_names[i]) == 0) {
            *out = (loom_export_target)i;
            return true;
        }
    return false;
}

void loom_runtime_config_init(loom_runtime_config *c)
{
    memset(c, 0, sizeof *c);
    loom_parallel_init(&c->par);
    c->model.dtype = LOOM_DTYPE_BF16;
    c->model.flash_attention = true;
    c->gpus_per_node = 8;
    c->gpu_memory_utilization = 0.9;
}

int64_t loom_runtime_gpus(const loom_runtime_config *c)
{
    return c->par.tp * c->par.pp * c->par.dp * c->par.cp;
}

void loom_runtime_model_opts(const loom_parallel *p, loom_model_opts *o)
{
    loom_model_opts_init(o);
    o->seq = p->seq;
    o->batch = p->mbs;
    o->dtype = p->dtype;
    o->flash_attention = p->flash;
    /* Megatron-LM trains the MTP layers (--mtp-num-layers); torchtitan's
     * DeepSeek-V3 recipes set none and DeepSpeed has none */
    o->mtp = p->framework == LOOM_FRAMEWORK_MEGATRON;
}

int loom_runtime_zero(const loom_runtime_config *c)
{
    return c->par.dist_opt ? 1 : c->par.zero;
}

int64_t loom_runtime_microbatches(const loom_runtime_config *c)
{
    int64_t per_step = c->par.mbs * c->par.dp;
    return per_step > 0 ? c->par.gbs / per_step : 0;
}

void loom_export_list_add(loom_export_list *l, const char *fmt, ...)
{
    if (!l) return;
    if (l->n >= LOOM_EXPORT_MAX_ITEMS) {
        l->dropped++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->item[l->n], LOOM_EXPORT_ITEM_MAX, fmt, ap);
    va_end(ap);
    l->n++;
}

bool loom_export_chunks_even(const int32_t *chunks, int32_t n)
{
    for (int32_t i = 1; i < n; i++)
        if (chunks[i] != chunks[0]) return false;
    return true;
}

loom_status loom_runtime_chunks(const loom_runtime_config *c, int32_t *chunks, loom_error *err)
{
    const loom_parallel *p = &c->par;
    int64_t L = c->model.layers, pp = p->pp, v = p->vpp, n = pp * v;
    if (pp < 1 || v < 1 || n > LOOM_EXPORT_MAX_CHUNKS)
        return loom_error_set(
            err, LOOM_ERR_INVALID,
            "pipeline of %lld stages x %lld virtual stages: expected 1 to %d chunks", (long long)pp,
            (long long)v, LOOM_EXPORT_MAX_CHUNKS);
    if (c->n_chunks > 0) {
        if (c->n_chunks != n)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "the layer split has %d chunks, expected pp x vpp = %lld",
                                  (int)c->n_chunks, (long long)n);
        int64_t sum = 0;
        for (int32_t i = 0; i < c->n_chunks; i++) {
            if (c->chunk_layers[i] < 0)
                return loom_error_set(err, LOOM_ERR_INVALID, "chunk %d has %d layers", (int)i,
                                      (int)c->chunk_layers[i]);
            sum += c->chunk_layers[i];
            chunks[i] = c->chunk_layers[i];
        }
        if (sum != L)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "the layer split covers %lld layers, the model has %lld",
                                  (long long)sum, (long long)L);
        return LOOM_OK;
    }
    int64_t f = p->first_stage_layers, l = p->last_stage_layers;
    if (f == 0 && l == 0) {
        if (L % n != 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "%lld layers do not split evenly into %lld pipeline chunks",
                                  (long long)L, (long long)n);
        for (int64_t i = 0; i < n; i++) chunks[i] = (int32_t)(L / n);
        return LOOM_OK;
    }
    /* Megatron's first/last rule (see the top of this file); vpp must be 1. */
    int64_t rest = L - f - l, others = pp - (f > 0) - (l > 0);
    if (v != 1)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "uneven first/last stages (%lld, %lld layers) with %lld virtual "
                              "stages: give the split chunk by chunk",
                              (long long)f, (long long)l, (long long)v);
    if (f < 0 || l < 0 || rest < 0 || (others == 0 && rest != 0) ||
        (others > 0 && rest % others != 0))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "first stage %lld layers, last stage %lld layers: the other %lld "
                              "stages cannot share the remaining %lld of %lld layers evenly",
                              (long long)f, (long long)l, (long long)others, (long long)rest,
                              (long long)L);
    int64_t mid = others > 0 ? rest / others : 0;
    for (int64_t i = 0; i < pp; i++) chunks[i] = (int32_t)mid;
    if (f > 0) chunks[0] = (int32_t)f;
    if (l > 0) chunks[pp - 1] = (int32_t)l;
    if (pp == 1 && f > 0 && l > 0 && f != l)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "one pipeline stage cannot hold %lld first and %lld last layers",
                              (long long)f, (long long)l);
    return LOOM_OK;
}

loom_status loom_runtime_config_validate(const loom_runtime_config *c, loom_error *err)
{
    const loom_parallel *p = &c->par;
    const struct {
        const char *name;
        int64_t v;
    } pos[] = {{"tp", p->tp},   {"pp", p->pp},   {"dp", p->dp},   {"cp", p->cp},
               {"ep", p->ep},   {"vpp", p->vpp}, {"mbs", p->mbs}, {"gbs", p->gbs},
               {"seq", p->seq}, {"layers", c->model.layers}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1)
            return loom_error_set(err, LOOM_ERR_INVALID, "%s must be >= 1, found %lld",
                                  pos[i].name, (long long)pos[i].v);
    if (p->etp < 0)
        return loom_error_set(err, LOOM_ERR_INVALID, "etp must be >= 0, found %lld",
                              (long long)p->etp);
    if (p->gbs % (p->mbs * p->dp) != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "global batch %lld is not a multiple of micro-batch %lld x "
                              "data-parallel %lld",
                              (long long)p->gbs, (long long)p->mbs, (long long)p->dp);
    if (c->gpus_per_node < 1)
        return loom_error_set(err, LOOM_ERR_INVALID, "gpus per node must be >= 1, found %lld",
                              (long long)c->gpus_per_node);
    int32_t chunks[LOOM_EXPORT_MAX_CHUNKS];
    return loom_runtime_chunks(c, chunks, err);
}

loom_status loom_runtime_config_normalize(loom_runtime_config *c, loom_error *err)
{
    loom_parallel *p = &c->par;
    int32_t chunks[LOOM_EXPORT_MAX_CHUNKS];
    loom_status s = loom_runtime_chunks(c, chunks, err);
    if (s) return s;
    int32_t n = (int32_t)(p->pp * p->vpp);
    p->first_stage_layers = p->last_stage_layers = 0;
    memset(c->chunk_layers, 0, sizeof c->chunk_layers);
    c->n_chunks = 0;
    if (!loom_export_chunks_even(chunks, n)) {
        c->n_chunks = n;
        memcpy(c->chunk_layers, chunks, (size_t)n * sizeof chunks[0]);
        /* first/last form: vpp 1, the stages between first and last equal */
        bool middle_equal = p->vpp == 1 && p->pp >= 2;
        for (int32_t i = 2; middle_equal && i < n - 1; i++)
            if (chunks[i] != chunks[1]) middle_equal = false;
        if (middle_equal) {
            p->first_stage_layers = chunks[0];
            p->last_stage_layers = chunks[n - 1];
        }
    }
    if (p->tp == 1) p->sp = false;
    if (!p->sp) p->tp_comm_overlap = false;           /* it overlaps SP's collectives */
    /* no gradient reduction to hide: the data-parallel group spans dp × cp */
    if (p->dp * p->cp == 1) p->overlap_grad_reduce = false;
    if (p->vpp == 1) p->overlap_p2p = true;           /* 1F1B has nothing to overlap */
    if (p->etp == p->tp) p->etp = 0;
    /* ZeRO-1 and Megatron's distributed optimizer are one thing; costs/eval.h
     * takes it as dist_opt with zero 0 (one name, not both) */
    if (p->zero >= 2) p->dist_opt = false;
    else if (p->zero == 1 || p->dist_opt) p->zero = 0, p->dist_opt = true;
    if (p->recompute != LOOM_RECOMPUTE_FULL) p->recompute_layers = 0;
    if (c->model.experts == 0) p->ep = 1;
    return LOOM_OK;
}

void loom_export_put_comment_text(FILE *f, const char *s)
{
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        if (*u >= 0x20 && *u < 0x7f) fputc(*u, f);
        else fprintf(f, "\\x%02X", (unsigned)*u);
    }
}

void loom_export_header(FILE *f, const char *comment, loom_export_target t,
                        const loom_runtime_config *c, const char *source)
{
    const loom_parallel *p = &c->par;
    const loom_model_info *m = &c->model;
    /* source and model_name come from the plan: written escaped (a newline
     * in either would end the comment and start a command or a key) */
    fprintf(f, "%s Written by `loom export --to %s`%s", comment, loom_export_target_name(t),
            source ? " from " : "");
    if (source) loom_export_put_comment_text(f, source);
    fprintf(f, ".\n%s model: ", comment);
    loom_export_put_comment_text(f, c->model_name);
    fprintf(f, "%s%lld layers, hidden %lld, %lld heads (%lld kv), ffn %lld, vocab %lld",
            c->model_name[0] ? ": " : "", (long long)m->layers,
            (long long)m->hidden, (long long)m->heads, (long long)m->kv_heads, (long long)m->ffn,
            (long long)m->vocab);
    if (m->experts)
        fprintf(f, ", %lld experts top-%lld", (long long)m->experts, (long long)m->experts_topk);
    fprintf(f, "\n%s parallelism: TP %lld x PP %lld x DP %lld x CP %lld = %lld GPUs", comment,
            (long long)p->tp, (long long)p->pp, (long long)p->dp, (long long)p->cp,
            (long long)loom_runtime_gpus(c));
    if (m->experts) fprintf(f, ", EP %lld", (long long)p->ep);
    if (c->inference)
        fprintf(f, "; %lld concurrent sequences of up to %lld tokens\n", (long long)c->max_num_seqs,
                (long long)c->max_model_len);
    else
        fprintf(f, "; global batch %lld = micro-batch %lld x %lld micro-batches x DP %lld, "
                   "sequence %lld\n",
                (long long)p->gbs, (long long)p->mbs, (long long)loom_runtime_microbatches(c),
                (long long)p->dp, (long long)p->seq);
    if (c->predicted_step_s > 0 || c->predicted_memory_bytes > 0)
        fprintf(f, "%s loom predicts %.4g s per %s and %.1f GiB per GPU.\n", comment,
                c->predicted_step_s, c->inference ? "token" : "step",
                (double)c->predicted_memory_bytes / (1024.0 * 1024.0 * 1024.0));
}

typedef struct {
    void (*check)(const loom_runtime_config *, const int32_t *, loom_export_list *);
    loom_status (*write)(const loom_runtime_config *, const int32_t *, const char *, FILE *,
                         loom_export_list *, loom_error *);
    bool inference;   /* the target serves; the others train */
} target_fns;

static const target_fns targets[LOOM_EXPORT_TARGET_COUNT] = {
    [LOOM_EXPORT_MEGATRON] = {loom_export_check_megatron, loom_export_write_megatron, false},
    [LOOM_EXPORT_VLLM] = {loom_export_check_vllm, loom_export_write_vllm, true},
    [LOOM_EXPORT_DEEPSPEED] = {loom_export_check_deepspeed, loom_export_write_deepspeed, false},
    [LOOM_EXPORT_TORCHTITAN] = {loom_export_check_torchtitan, loom_export_write_torchtitan, false},
};

/* Checks with the chunks already resolved. */
static void check_resolved(const loom_runtime_config *c, loom_export_target t,
                           const int32_t *chunks, loom_export_list *obstacles)
{
    const target_fns *fn = &targets[t];
    if (c->inference && !fn->inference)
        loom_export_list_add(obstacles,
                             "the plan is a serving plan (mode infer); %s runs training: "
                             "export it with --to vllm",
                             loom_export_target_name(t));
    if (!c->inference && fn->inference)
        loom_export_list_add(obstacles,
                             "the plan is a training plan (mode train); vLLM serves models: "
                             "plan with --mode infer, or export with --to megatron, deepspeed "
                             "or torchtitan");
    if (c->inference == fn->inference) fn->check(c, chunks, obstacles);
}

void loom_export_check(const loom_runtime_config *c, loom_export_target t,
                       loom_export_list *obstacles)
{
    int32_t chunks[LOOM_EXPORT_MAX_CHUNKS];
    loom_error err;
    if ((unsigned)t >= LOOM_EXPORT_TARGET_COUNT) return;
    if (loom_runtime_chunks(c, chunks, &err)) {
        loom_export_list_add(obstacles, "%s", err.msg);
        return;
    }
    check_resolved(c, t, chunks, obstacles);
}

loom_status loom_export_render(const loom_runtime_config *c, loom_export_target t,
                               const char *source, char **out, loom_export_list *notes,
                               loom_export_list *obstacles, loom_error *err)
{
    *out = NULL;
    if ((unsigned)t >= LOOM_EXPORT_TARGET_COUNT)
        return loom_error_set(err, LOOM_ERR_INVALID, "unknown export target %d", (int)t);
    loom_status s = loom_runtime_config_validate(c, err);
    if (s) return s;
    int32_t chunks[LOOM_EXPORT_MAX_CHUNKS];
    if ((s = loom_runtime_chunks(c, chunks, err))) return s;

    loom_export_list found = {0};
    check_resolved(c, t, chunks, &found);
    if (found.n > 0) {
        for (int i = 0; i < found.n; i++) loom_export_list_add(obstacles, "%s", found.item[i]);
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "%s cannot run this plan as planned (%d obstacle%s%s)",
                              loom_export_target_name(t), found.n + found.dropped,
                              found.n + found.dropped == 1 ? "" : "s",
                              obstacles ? "" : "; loom_export_check lists them");
    }

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return loom_error_set(err, LOOM_ERR_NOMEM, "cannot open a memory stream");
    /* the file carries its notes whether or not the caller asks for them */
    loom_export_list own = {0};
    s = targets[t].write(c, chunks, source, f, &own, err);
    for (int i = 0; i < own.n; i++) loom_export_list_add(notes, "%s", own.item[i]);
    if (c->idle_gpus_per_node > 0)
        loom_export_list_add(notes,
                             "the plan runs on the first %lld GPUs of each %lld-GPU NVLink domain "
                             "(its power-of-two tile), the other %lld idle: a \"node\" here is "
                             "those %lld GPUs of one domain, rank r on GPU r mod %lld of domain "
                             "r / %lld",
                             (long long)c->gpus_per_node,
                             (long long)(c->gpus_per_node + c->idle_gpus_per_node),
                             (long long)c->idle_gpus_per_node, (long long)c->gpus_per_node,
                             (long long)c->gpus_per_node, (long long)c->gpus_per_node);
    if (fclose(f) != 0 && s == LOOM_OK)
        s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory rendering the %s config",
                           loom_export_target_name(t));
    if (s) {
        free(buf);
        return s;
    }
    *out = buf;
    return LOOM_OK;
}
