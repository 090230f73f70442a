/*
 * export_megatron.c — a runtime configuration as a Megatron-LM launch script:
 * `torchrun … pretrain_gpt.py` with the parallelism, batch, recompute,
 * optimizer-sharding, precision and model-shape arguments, one per line.
 *
 * Argument names are those of megatron/training/arguments.py at the commit in
 * planner/export/megatron_args.txt; tests check every emitted name against that
 * list, and megatron_import.c reads this script back into the same
 * configuration (parse(export(c)) == c).
 *
 * Mapping (loom → Megatron-LM):
 *   TP, PP, CP, EP, ETP     --tensor/pipeline/context/expert(-tensor)-parallel-size;
 *                           DP is what remains of the world size (torchrun
 *                           --nnodes × --nproc-per-node) after TP·PP·CP
 *   vpp, even split         --num-layers-per-virtual-pipeline-stage L/(pp·vpp)
 *   uneven, vpp 1, middle   --decoder-first/last-pipeline-num-layers
 *     stages equal
 *   any other split         --pipeline-model-parallel-layout "Et*4|t*6|…|t*5L"
 *   recompute selective     --recompute-granularity selective (core attention)
 *   recompute full          --recompute-granularity full --recompute-method uniform
 *                           --recompute-num-layers 1; k layers per stage: block k
 *   ZeRO-1 / dist-opt       --use-distributed-optimizer
 *   ZeRO-2 / ZeRO-3         --use-megatron-fsdp --data-parallel-sharding-strategy
 *                           optim_grads / optim_grads_params (Megatron FSDP)
 *   bf16 / fp16 / fp8       --bf16 / --fp16 / --bf16 --fp8-format hybrid
 *   overlaps                --overlap-grad-reduce (DP > 1), --tp-comm-overlap (with SP)
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/model.h"
#include "planner/export/export_target.h"
#include "planner/export/megatron_args.h"

typedef struct {
    loom_megatron_kv *kv;
    int n;
} arglist;

static void arg(arglist *a, const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void arg(arglist *a, const char *name, const char *fmt, ...)
{
    if (a->n >= LOOM_MEGATRON_MAX_ARGS) return;
    loom_megatron_kv *kv = &a->kv[a->n++];
    kv->name = name;
    kv->value[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(kv->value, sizeof kv->value, fmt, ap);
        va_end(ap);
    }
}

static void arg_int(arglist *a, const char *name, int64_t v) { arg(a, name, "%lld", (long long)v); }

/* Megatron's layout string: chunks in layer order separated by '|', "E" at
 * the head of chunk 0, "L" at the tail of the last, k blocks written t*k,
 * and the multi-token-prediction layers ("m", one per depth) just before
 * "L": validate_layer_layout (pipeline_parallel_layer_layout.py) wants every
 * "m" after the last "t", in the last virtual stage, off PP rank 0. A run of
 * r > 1 equal middle chunks is written "(t*k|)*r", which parse_str_to_list
 * unrolls before "t*k" (Meta's 405B layout: "Et|(tt|)*62tL"), so that 64
 * chunks fit the argument. False when the string does not fit in cap. */
static bool layout_string(const int32_t *chunks, int32_t n, int64_t mtp, char *out, size_t cap)
{
    size_t len = 0;
    char m[32] = "";
    if (mtp == 1) snprintf(m, sizeof m, "m");
    else if (mtp > 1) snprintf(m, sizeof m, "m*%lld", (long long)mtp);
    out[0] = '\0';
    for (int32_t i = 0; i < n; i++) {
        bool last = i == n - 1;
        const char *e = i == 0 ? "E" : "", *l = last ? "L" : "", *mm = last ? m : "";
        /* "t*3" followed by "m" needs a separator Megatron's parser accepts */
        const char *sep = chunks[i] > 0 && mm[0] ? "," : "";
        const char *bar = i + 1 < n ? "|" : "";
        char body[24] = "";
        if (chunks[i] == 1) snprintf(body, sizeof body, "t");
        else if (chunks[i] > 1) snprintf(body, sizeof body, "t*%d", (int)chunks[i]);
        int32_t run = 1;
        while (i > 0 && i + run < n - 1 && chunks[i + run] == chunks[i]) run++;
        int w;
        if (i > 0 && !last && run > 1) {
            w = snprintf(out + len, cap - len, "(%s|)*%d", body, (int)run);
            i += run - 1;
        } else
            w = snprintf(out + len, cap - len, "%s%s%s%s%s%s", e, body, sep, mm, l, bar);
        if (w < 0 || (size_t)w >= cap - len) {
            out[0] = '\0';
            return false;
        }
        len += (size_t)w;
    }
    return true;
}

/* The largest d <= 128 (Megatron's default) with d · tp dividing the
 * vocabulary, so that Megatron pads nothing (vocab_utils.py: padded =
 * ceil(V / (d · tp)) · d · tp); 0 when tp does not divide V. */
static int64_t vocab_divisor(int64_t vocab, int64_t tp)
{
    if (vocab <= 0 || tp <= 0 || vocab % tp) return 0;
    for (int64_t d = 128; d >= 1; d /= 2)
        if (vocab % (d * tp) == 0) return d;
    return 1;
}

/* A number as Megatron's argparse reads it (%g keeps 1e-05 and 2.5 short). */
static void arg_num(arglist *a, const char *name, double v) { arg(a, name, "%.10g", v); }

static bool is_gpt2(const loom_model_info *m) { return strcmp(m->arch, "gpt2") == 0; }
static bool is_mla(const loom_model_info *m) { return strncmp(m->arch, "deepseek", 8) == 0; }

int loom_export_megatron_args(const loom_runtime_config *c, const int32_t *chunks,
                              loom_megatron_kv *out)
{
    const loom_parallel *p = &c->par;
    const loom_model_info *m = &c->model;
    arglist a = {out, 0};
    int32_t n = (int32_t)(p->pp * p->vpp);

    /* parallelism */
    arg_int(&a, "--tensor-model-parallel-size", p->tp);
    arg_int(&a, "--pipeline-model-parallel-size", p->pp);
    arg_int(&a, "--context-parallel-size", p->cp);
    if (m->experts > 0) {
        arg_int(&a, "--expert-model-parallel-size", p->ep);
        if (p->etp > 0 && p->etp != p->tp) arg_int(&a, "--expert-tensor-parallel-size", p->etp);
    }
    if (p->sp && p->tp > 1) arg(&a, "--sequence-parallel", NULL);
    if (p->tp_comm_overlap && p->sp && p->tp > 1) arg(&a, "--tp-comm-overlap", NULL);
    if (loom_export_chunks_even(chunks, n)) {
        if (p->vpp > 1) arg_int(&a, "--num-layers-per-virtual-pipeline-stage", chunks[0]);
    } else {
        /* --decoder-first/last-pipeline-num-layers must be > 0
         * (TransformerConfig); an embedding-only or loss-only stage is said
         * with the layout instead */
        bool middle_equal = p->vpp == 1 && p->pp >= 2 && chunks[0] > 0 && chunks[n - 1] > 0;
        for (int32_t i = 2; middle_equal && i < n - 1; i++)
            if (chunks[i] != chunks[1]) middle_equal = false;
        if (middle_equal && p->pp == 2) {
            /* the last stage takes the rest: one number says it all */
            arg_int(&a, "--decoder-first-pipeline-num-layers", chunks[0]);
        } else if (middle_equal) {
            if (chunks[0] != chunks[1])
                arg_int(&a, "--decoder-first-pipeline-num-layers", chunks[0]);
            if (chunks[n - 1] != chunks[1])
                arg_int(&a, "--decoder-last-pipeline-num-layers", chunks[n - 1]);
        } else {
            /* empty when it does not fit: loom_export_write_megatron refuses it */
            char layout[sizeof out[0].value];
            layout_string(chunks, n, m->facts.mtp_layers, layout, sizeof layout);
            arg(&a, "--pipeline-model-parallel-layout", "%s", layout);
        }
    }

    /* batch */
    arg_int(&a, "--micro-batch-size", p->mbs);
    arg_int(&a, "--global-batch-size", p->gbs);

    /* memory: recompute and optimizer-state sharding */
    if (p->recompute == LOOM_RECOMPUTE_SELECTIVE) {
        arg(&a, "--recompute-granularity", "selective");
    } else if (p->recompute == LOOM_RECOMPUTE_FULL) {
        arg(&a, "--recompute-granularity", "full");
        if (p->recompute_layers > 0) {
            arg(&a, "--recompute-method", "block");
            arg_int(&a, "--recompute-num-layers", p->recompute_layers);
        } else {
            arg(&a, "--recompute-method", "uniform");
            arg_int(&a, "--recompute-num-layers", 1);
        }
    }
    if (p->overlap_grad_reduce && p->dp * p->cp > 1) arg(&a, "--overlap-grad-reduce", NULL);
    if (!p->overlap_p2p && p->vpp > 1) arg(&a, "--no-overlap-p2p-communication", NULL);
    if (p->moe_a2a_overlap) arg(&a, "--overlap-moe-expert-parallel-comm", NULL);

    if (p->zero == 1 || p->dist_opt) {
        arg(&a, "--use-distributed-optimizer", NULL);
    } else if (p->zero >= 2) {
        arg(&a, "--use-megatron-fsdp", NULL);
        arg(&a, "--data-parallel-sharding-strategy",
            p->zero == 2 ? "optim_grads" : "optim_grads_params");
        arg(&a, "--ckpt-format", "fsdp_dtensor");
    }

    /* precision and attention kernel */
    if (p->dtype == LOOM_DTYPE_FP16) {
        arg(&a, "--fp16", NULL);
    } else {
        arg(&a, "--bf16", NULL);
        if (p->dtype == LOOM_DTYPE_FP8) arg(&a, "--fp8-format", "hybrid");
    }
    if (!p->flash) arg(&a, "--attention-backend", "unfused");

    /* model shape */
    arg_int(&a, "--num-layers", m->layers);
    arg_int(&a, "--hidden-size", m->hidden);
    arg_int(&a, "--ffn-hidden-size", m->ffn);
    arg_int(&a, "--num-attention-heads", m->heads);
    if (!is_mla(m) && m->kv_heads > 0 && m->kv_heads < m->heads) {
        arg(&a, "--group-query-attention", NULL);
        arg_int(&a, "--num-query-groups", m->kv_heads);
    }
    if (!is_mla(m) && m->head_dim > 0 && m->heads > 0 && m->head_dim * m->heads != m->hidden)
        arg_int(&a, "--kv-channels", m->head_dim);
    arg_int(&a, "--seq-length", p->seq);
    arg_int(&a, "--max-position-embeddings", m->max_positions > p->seq ? m->max_positions : p->seq);
    arg_int(&a, "--vocab-size", m->vocab);
    int64_t vdiv = vocab_divisor(m->vocab, p->tp);
    if (vdiv > 0 && vdiv != 128) arg_int(&a, "--make-vocab-size-divisible-by", vdiv);
    const loom_model_facts *f = &m->facts;
    if (is_gpt2(m)) {
        arg(&a, "--normalization", "LayerNorm");
        arg(&a, "--position-embedding-type", "learned_absolute");
        if (f->known) arg_num(&a, "--norm-epsilon", f->norm_eps);
    } else {
        arg(&a, "--normalization", "RMSNorm");
        if (f->known) arg_num(&a, "--norm-epsilon", f->norm_eps);
        arg(&a, "--position-embedding-type", "rope");
        if (f->known) {
            /* --rotary-base is an int in arguments.py: "1e6" is refused */
            arg_int(&a, "--rotary-base", (int64_t)f->rope_theta);
            /* GLM-4.5 rotates half of each head (partial_rotary_factor 0.5) */
            if (f->rotary_fraction > 0) arg_num(&a, "--rotary-percent", f->rotary_fraction);
            if (strcmp(f->rope_scaling, "llama3") == 0) {
                arg(&a, "--use-rope-scaling", NULL);
                arg_num(&a, "--rope-scaling-factor", f->rope_factor);
            } else if (strcmp(f->rope_scaling, "yarn") == 0 && is_mla(m)) {
                /* MLATransformerConfig's YaRN: rope_type, rotary_scaling_factor,
                 * mscale, mscale_all_dim from the command line; the original
                 * context and betas are its defaults (checked) */
                arg(&a, "--rope-type", "yarn");
                arg_num(&a, "--rotary-scaling-factor", f->rope_factor);
                arg_num(&a, "--mscale", f->yarn_mscale);
                arg_num(&a, "--mscale-all-dim", f->yarn_mscale_all_dim);
            }
        }
        arg(&a, "--swiglu", NULL);
        arg(&a, "--disable-bias-linear", NULL);
        if (m->qkv_bias) arg(&a, "--add-qkv-bias", NULL);
        if (m->qk_norm) arg(&a, "--qk-layernorm", NULL);   /* Qwen3: q/k RMSNorm per head */
        /* the Llama family trains without dropout; Megatron-LM's default is 0.1 */
        arg(&a, "--attention-dropout", "0");
        arg(&a, "--hidden-dropout", "0");
    }
    if (is_mla(m)) {
        /* Megatron's --qk-head-dim is the part without position encoding
         * (HF qk_nope_head_dim); loom's head_dim is nope + rope */
        arg(&a, "--multi-latent-attention", NULL);
        if (m->q_lora_rank > 0) arg_int(&a, "--q-lora-rank", m->q_lora_rank);
        arg_int(&a, "--kv-lora-rank", m->kv_lora_rank);
        arg_int(&a, "--qk-head-dim", m->head_dim - m->qk_rope_head_dim);
        arg_int(&a, "--qk-pos-emb-head-dim", m->qk_rope_head_dim);
        arg_int(&a, "--v-head-dim", m->v_head_dim);
    }
    if (!m->tied_embeddings) arg(&a, "--untie-embeddings-and-output-weights", NULL);
    if (m->experts > 0) {
        arg_int(&a, "--num-experts", m->experts);
        arg_int(&a, "--moe-router-topk", m->experts_topk);
        arg_int(&a, "--moe-ffn-hidden-size", m->moe_ffn);
        if (m->shared_experts > 0)
            arg_int(&a, "--moe-shared-expert-intermediate-size", m->shared_experts * m->moe_ffn);
        if (m->first_dense > 0)
            arg(&a, "--moe-layer-freq", "([0]*%lld+[1]*%lld)", (long long)m->first_dense,
                (long long)(m->layers - m->first_dense));
        arg(&a, "--moe-grouped-gemm", NULL);
        arg(&a, "--moe-token-dispatcher-type", p->moe_hybridep ? "flex" : "alltoall");
        if (p->moe_hybridep) arg(&a, "--moe-flex-dispatcher-backend", "hybridep");
        if (f->known) {
            /* Megatron's default (no pre-softmax) is top-k then softmax over
             * the k, i.e. HF's renormalised softmax; without renormalisation
             * it is softmax over all experts, then top-k */
            if (f->router_score[0] && strcmp(f->router_score, "softmax") != 0)
                arg(&a, "--moe-router-score-function", "%s", f->router_score);
            else if (!f->router_norm_topk)
                arg(&a, "--moe-router-pre-softmax", NULL);
            if (f->router_expert_bias) arg(&a, "--moe-router-enable-expert-bias", NULL);
            if (f->router_scaling > 0 && f->router_scaling != 1)
                arg_num(&a, "--moe-router-topk-scaling-factor", f->router_scaling);
            if (f->router_groups > 1) {
                arg_int(&a, "--moe-router-num-groups", f->router_groups);
                arg_int(&a, "--moe-router-group-topk", f->router_group_topk);
            }
            if (f->router_balance[0]) {
                arg(&a, "--moe-router-load-balancing-type", "%s", f->router_balance);
                arg_num(&a, "--moe-aux-loss-coeff", f->router_aux_coeff);
            }
        } else if (strcmp(m->arch, "deepseek_v3") == 0) {   /* sigmoid gate with a balancing bias */
            arg(&a, "--moe-router-score-function", "sigmoid");
            arg(&a, "--moe-router-enable-expert-bias", NULL);
        }
    }
    if (f->mtp_layers > 0) arg_int(&a, "--mtp-num-layers", f->mtp_layers);
    return a.n;
}

void loom_export_check_megatron(const loom_runtime_config *c, const int32_t *chunks,
                                loom_export_list *obs)
{
    const loom_parallel *p = &c->par;
    const loom_model_info *m = &c->model;
    (void)chunks;
    int64_t gpus = loom_runtime_gpus(c), gpn = c->gpus_per_node;
    /* Megatron-Core divides heads, query groups and the MLP columns by TP
     * (ColumnParallelLinear / SelfAttention use divide(), which asserts). */
    if (m->heads % p->tp)
        loom_export_list_add(obs, "TP %lld does not divide the %lld attention heads",
                             (long long)p->tp, (long long)m->heads);
    if (m->kv_heads > 0 && m->kv_heads % p->tp)
        loom_export_list_add(obs,
                             "TP %lld does not divide the %lld key/value head groups "
                             "(Megatron-LM needs num_query_groups %% TP == 0)",
                             (long long)p->tp, (long long)m->kv_heads);
    if (m->ffn > 0 && m->ffn % p->tp)
        loom_export_list_add(obs, "TP %lld does not divide the MLP hidden size %lld",
                             (long long)p->tp, (long long)m->ffn);
    if (p->vpp > 1 && p->pp < 2)
        loom_export_list_add(obs, "interleaved schedule (%lld virtual stages) needs "
                                  "pipeline parallelism, the plan has PP 1",
                             (long long)p->vpp);
    if (p->cp > 1 && p->seq % (2 * p->cp))
        loom_export_list_add(obs,
                             "context parallelism %lld needs the sequence length to be a "
                             "multiple of 2 x CP = %lld, found %lld",
                             (long long)p->cp, (long long)(2 * p->cp), (long long)p->seq);
    if (m->experts > 0) {
        int64_t etp = p->etp > 0 ? p->etp : p->tp;
        if (m->experts % p->ep)
            loom_export_list_add(obs, "EP %lld does not divide the %lld experts", (long long)p->ep,
                                 (long long)m->experts);
        /* Megatron-Core's expert grid (ETP x EP x expert-DP) must cover the
         * same ranks as the dense grid (TP x CP x DP) of one pipeline stage. */
        if ((p->tp * p->cp * p->dp) % (p->ep * etp))
            loom_export_list_add(obs,
                                 "EP %lld x expert TP %lld does not divide TP x CP x DP = %lld, "
                                 "as Megatron-Core's expert grid requires",
                                 (long long)p->ep, (long long)etp,
                                 (long long)(p->tp * p->cp * p->dp));
    }
    const loom_model_facts *f = &m->facts;
    if (!f->known && m->arch[0])
        loom_export_list_add(obs, "the plan does not carry the model's RoPE base, norm epsilon "
                                  "and router settings (a plan written before loom carried "
                                  "them): plan again, or keep the model file where the plan "
                                  "names it");
    if (f->known && strcmp(f->rope_scaling, "llama3") == 0 &&
        (f->rope_low_freq != 1 || f->rope_high_freq != 4 || f->rope_original_max != 8192))
        loom_export_list_add(obs, "Llama-3 RoPE scaling with low/high frequency factors %g/%g "
                                  "and original context %lld: Megatron-LM fixes them at 1/4 and "
                                  "8192 (rotary_pos_embedding.py _apply_scaling)",
                             f->rope_low_freq, f->rope_high_freq, (long long)f->rope_original_max);
    if (f->known && f->rope_scaling[0] && strcmp(f->rope_scaling, "llama3") != 0 &&
        strcmp(f->rope_scaling, "yarn") != 0)
        loom_export_list_add(obs, "RoPE scaling \"%s\": loom's Megatron-LM exporter maps only "
                                  "Llama-3 and (MLA) YaRN scaling",
                             f->rope_scaling);
    if (f->known && strcmp(f->rope_scaling, "yarn") == 0 && !is_mla(m))
        loom_export_list_add(obs, "YaRN RoPE scaling outside multi-latent attention: not mapped "
                                  "by loom's Megatron-LM exporter");
    if (f->known && strcmp(f->rope_scaling, "yarn") == 0 && is_mla(m) &&
        (f->rope_original_max != 4096 || f->yarn_beta_fast != 32 || f->yarn_beta_slow != 1))
        loom_export_list_add(obs, "YaRN with original context %lld and betas %g/%g: Megatron-LM's "
                                  "MLA takes 4096 and 32/1 (MLATransformerConfig defaults, no "
                                  "command-line flag)",
                             (long long)f->rope_original_max, f->yarn_beta_fast,
                             f->yarn_beta_slow);
    if (f->known && f->rope_theta != (double)(int64_t)f->rope_theta)
        loom_export_list_add(obs, "RoPE base %g is not an integer: Megatron-LM's --rotary-base "
                                  "takes an int", f->rope_theta);
    if (f->known && strcmp(f->router_score, "sigmoid") == 0 && !f->router_norm_topk &&
        m->experts_topk > 1)
        loom_export_list_add(obs, "sigmoid router without top-k renormalisation: Megatron-LM "
                                  "renormalises sigmoid top-k weights");
    if (f->mtp_layers > 0 && p->pp > 1 && c->n_chunks == 0 && p->vpp > 1)
        loom_export_list_add(obs, "multi-token prediction with an interleaved even split: "
                                  "Megatron-LM needs the MTP layer placed with "
                                  "--pipeline-model-parallel-layout");
    if (gpus > gpn && gpus % gpn)
        loom_export_list_add(obs,
                             "%lld GPUs is not a whole number of %lld-GPU nodes: torchrun "
                             "starts the same number of processes on every node",
                             (long long)gpus, (long long)gpn);
}

/* Quotes a value for bash when it holds anything beyond [A-Za-z0-9_.,:/=+-]:
 * inside single quotes nothing is special but the quote itself, written
 * '\'' (close, escaped quote, reopen). loom builds every value itself, but
 * the quoting does not rely on that. */
static void put_value(FILE *f, const char *v)
{
    bool plain = v[0] != '\0';
    for (const char *s = v; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("_.,:/=+-", *s)))
            plain = false;
    if (plain) {
        fputs(v, f);
        return;
    }
    fputc('\'', f);
    for (const char *s = v; *s; s++)
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    fputc('\'', f);
}

loom_status loom_export_write_megatron(const loom_runtime_config *c, const int32_t *chunks,
                                       const char *source, FILE *f, loom_export_list *notes,
                                       loom_error *err)
{
    const loom_parallel *p = &c->par;
    loom_megatron_kv kv[LOOM_MEGATRON_MAX_ARGS];
    int n = loom_export_megatron_args(c, chunks, kv);
    for (int i = 0; i < n; i++)
        if (!strcmp(kv[i].name, "--pipeline-model-parallel-layout") && !kv[i].value[0])
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "the pipeline layout of %lld chunks does not fit in %zu "
                                  "characters of --pipeline-model-parallel-layout",
                                  (long long)(p->pp * p->vpp), sizeof kv[i].value - 1);
    int64_t gpus = loom_runtime_gpus(c);
    int64_t nproc = gpus < c->gpus_per_node ? gpus : c->gpus_per_node;
    int64_t nnodes = gpus / nproc;

    /* loom builds the MTP depths into the training graph for some families
     * only (graph/model.h loom_model_builds_mtp) */
    if (c->model.facts.mtp_layers > 0)
        loom_export_list_add(notes,
                             "multi-token prediction: %lld MTP layer(s) on the last pipeline "
                             "stage (--mtp-num-layers); %s",
                             (long long)c->model.facts.mtp_layers,
                             loom_model_builds_mtp(c->model.arch)
                                 ? "loom's memory and time figures price them there (a "
                                   "decoder layer, eh_proj, a second output layer and loss, "
                                   "and the embedding table's copy)"
                                 : "loom's memory and time figures leave them out (loom builds "
                                   "MTP layers for DeepSeek models only)");
    if (vocab_divisor(c->model.vocab, p->tp) == 0)
        loom_export_list_add(notes,
                             "TP %lld does not divide the vocabulary of %lld: Megatron-LM pads "
                             "the embedding and output layer to a multiple of 128 x TP",
                             (long long)p->tp, (long long)c->model.vocab);
    if (p->zero >= 2)
        loom_export_list_add(notes,
                             "ZeRO-%d runs as Megatron FSDP, which must not run with "
                             "CUDA_DEVICE_MAX_CONNECTIONS=1",
                             p->zero);
    if (nnodes > 1)
        loom_export_list_add(notes,
                             "run the script once on each of the %lld nodes with NODE_RANK, "
                             "MASTER_ADDR and MASTER_PORT set",
                             (long long)nnodes);

    fprintf(f, "#!/usr/bin/env bash\n");
    loom_export_header(f, "#", LOOM_EXPORT_MEGATRON, c, source);
    fprintf(f, "# Argument names checked against %s.\n", loom_megatron_args_source);
    fprintf(f, "# Data, tokenizer and optimizer arguments (--data-path, --tokenizer-type,\n"
               "# --train-iters, --lr, ...) are not part of the plan: pass them to this\n"
               "# script and they are appended to the command line.\n");
    for (int i = 0; notes && i < notes->n; i++) {
        fputs("# note: ", f);
        loom_export_put_comment_text(f, notes->item[i]);
        fputc('\n', f);
    }
    fprintf(f, "set -euo pipefail\n");
    /* Megatron asserts this for TP or CP > 1 before Blackwell, so that
     * communication kernels are issued in order (arguments.py, validate_args). */
    if ((p->tp > 1 || p->cp > 1) && p->zero < 2)
        fprintf(f, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n");
    fprintf(f, "\ntorchrun --nnodes %lld --nproc-per-node %lld \\\n", (long long)nnodes,
            (long long)nproc);
    if (nnodes > 1)
        fprintf(f,
                "    --node-rank \"${NODE_RANK:-0}\" --master-addr \"${MASTER_ADDR:-localhost}\" "
                "--master-port \"${MASTER_PORT:-6000}\" \\\n");
    else
        fprintf(f, "    --standalone \\\n");
    fprintf(f, "    pretrain_gpt.py \\\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "    %s", kv[i].name);
        if (kv[i].value[0]) {
            fputc(' ', f);
            put_value(f, kv[i].value);
        }
        fputs(" \\\n", f);
    }
    fprintf(f, "    \"$@\"\n");
    return LOOM_OK;
}
