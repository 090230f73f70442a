/*
 * megatron_import.c — a Megatron-LM launch line into a runtime configuration
 * (megatron_import.h).
 *
 * Three steps. (1) shell_words.c turns the text into commands of words, as
 * bash would. (2) megatron_cmdline.c splits the training command into
 * launcher words and Megatron-LM arguments with their values, as argparse
 * would. (3) Here the arguments are read with Megatron-LM's defaults and
 * checked the way its validate_args (megatron/training/arguments.py) would,
 * into a loom_runtime_config.
 *
 * The layer split is read by megatron_split.c.
 */
#include "planner/import/megatron_import.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/limits.h"
#include "costs/recompute.h"
#include "planner/export/megatron_args.h"
#include "planner/import/megatron_cmdline.h"
#include "planner/import/megatron_split.h"
#include "planner/import/shell_words.h"

/* Short names for the argument lookups of megatron_cmdline.h. */
typedef loom_megatron_line ctx;

static loom_status failf(const ctx *c, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static loom_status failf(const ctx *c, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    loom_status s = loom_megatron_line_vfail(c, line, fmt, ap);
    va_end(ap);
    return s;
}

static bool has(const ctx *c, const char *name) { return loom_megatron_line_has(c, name); }
static int line_of(const ctx *c, const char *name) { return loom_megatron_line_at(c, name); }
static loom_status get_int(const ctx *c, const char *name, int64_t dflt, int64_t lo, int64_t hi,
                           int64_t *out)
{
    return loom_megatron_line_int(c, name, dflt, lo, hi, out);
}
static loom_status get_num(const ctx *c, const char *name, double dflt, double *out)
{
    return loom_megatron_line_num(c, name, dflt, out);
}
static loom_status get_str(const ctx *c, const char *name, const char *dflt, const char **out)
{
    return loom_megatron_line_str(c, name, dflt, out);
}


/* Megatron-LM stops on these (validate_args asserts): name and what to use. */
static loom_status reject_deprecated(const ctx *c)
{
    static const char *const gone[][2] = {
        {"--batch-size", "--micro-batch-size"},
        {"--model-parallel-size", "--tensor-model-parallel-size"},
        {"--warmup", "--lr-warmup-fraction or --lr-warmup-iters"},
        {"--checkpoint-activations", "--recompute-activations or --recompute-granularity"},
    };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        if (has(c, gone[i][0]))
            return failf(c, line_of(c, gone[i][0]),
                         "%s is no longer accepted by Megatron-LM; use %s", gone[i][0], gone[i][1]);
    return LOOM_OK;
}

/* Parallelism, batch, memory and precision arguments. */
static loom_status read_parallel(const ctx *c, loom_megatron_launch *out)
{
    loom_parallel *p = &out->config.par;
    const int64_t big = (int64_t)1 << 40;
    loom_status s;
    int64_t etp = 0;
    if ((s = get_int(c, "--tensor-model-parallel-size", 1, 1, 1 << 20, &p->tp)) ||
        (s = get_int(c, "--pipeline-model-parallel-size", 1, 1, 1 << 20, &p->pp)) ||
        (s = get_int(c, "--context-parallel-size", 1, 1, 1 << 20, &p->cp)) ||
        (s = get_int(c, "--expert-model-parallel-size", 1, 1, 1 << 20, &p->ep)) ||
        (s = get_int(c, "--expert-tensor-parallel-size", 0, 1, 1 << 20, &etp)) ||
        (s = get_int(c, "--micro-batch-size", 0, 1, big, &p->mbs)) ||
        (s = get_int(c, "--global-batch-size", 0, 1, big, &p->gbs)))
        return s;
    p->etp = etp;
    if (!has(c, "--micro-batch-size"))
        return failf(c, c->line, "--micro-batch-size is required (Megatron-LM asserts it)");
    p->sp = has(c, "--sequence-parallel");
    if (p->sp && p->tp == 1)
        return failf(c, line_of(c, "--sequence-parallel"),
                     "--sequence-parallel needs tensor parallelism, but "
                     "--tensor-model-parallel-size is 1");
    p->tp_comm_overlap = has(c, "--tp-comm-overlap");
    if (p->tp_comm_overlap && !p->sp)
        return failf(c, line_of(c, "--tp-comm-overlap"),
                     "--tp-comm-overlap needs --sequence-parallel (Megatron-LM asserts it)");
    p->overlap_grad_reduce = has(c, "--overlap-grad-reduce");
    /* without it Megatron-LM reduces bf16 runs' gradients in fp32
     * (arguments.py sets accumulate_allreduce_grads_in_fp32) */
    p->grad_reduce_bf16 = has(c, "--grad-reduce-in-bf16");
    /* on by default with an interleaved schedule (megatron/training/arguments.py) */
    p->overlap_p2p = !has(c, "--no-overlap-p2p-communication");
    p->moe_a2a_overlap = has(c, "--overlap-moe-expert-parallel-comm");
    const char *dispatcher = NULL, *flex = NULL;
    if ((s = get_str(c, "--moe-token-dispatcher-type", "allgather", &dispatcher)) ||
        (s = get_str(c, "--moe-flex-dispatcher-backend", "deepep", &flex)))
        return s;
    p->moe_hybridep = strcmp(dispatcher, "flex") == 0 && strcmp(flex, "hybridep") == 0;

    /* recompute */
    const char *gran = NULL, *method = NULL;
    int64_t rc_layers = 0;
    if ((s = get_str(c, "--recompute-granularity", NULL, &gran)) ||
        (s = get_str(c, "--recompute-method", NULL, &method)) ||
        (s = get_int(c, "--recompute-num-layers", 0, 1, INT_MAX, &rc_layers)))
        return s;
    if (has(c, "--recompute-activations")) gran = "selective";
    if (gran && strcmp(gran, "selective") && strcmp(gran, "full"))
        return failf(c, line_of(c, "--recompute-granularity"),
                     "--recompute-granularity must be full or selective, found '%s'", gran);
    if (method && strcmp(method, "uniform") && strcmp(method, "block"))
        return failf(c, line_of(c, "--recompute-method"),
                     "--recompute-method must be uniform or block, found '%s'", method);
    p->recompute = LOOM_RECOMPUTE_NONE;
    if (gran && !strcmp(gran, "selective")) {
        if (method)
            return failf(c, line_of(c, "--recompute-method"),
                         "--recompute-method %s with selective recompute: Megatron-LM supports "
                         "methods only with --recompute-granularity full",
                         method);
        p->recompute = LOOM_RECOMPUTE_SELECTIVE;
        const char *mods;
        if ((s = get_str(c, "--recompute-modules", NULL, &mods))) return s;
        char bad[64];
        if (mods && !loom_recompute_modules_parse(mods, &p->recompute_modules, bad, sizeof bad))
            return failf(c, line_of(c, "--recompute-modules"),
                         "--recompute-modules: unknown module '%s' (Megatron-LM's are core_attn, "
                         "moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts)",
                         bad);
    } else if (gran) {
        if (!method || !has(c, "--recompute-num-layers"))
            return failf(c, line_of(c, "--recompute-granularity"),
                         "--recompute-granularity full needs --recompute-method (uniform or "
                         "block) and --recompute-num-layers");
        p->recompute = LOOM_RECOMPUTE_FULL;
        if (!strcmp(method, "block")) p->recompute_layers = rc_layers;
        else if (rc_layers > 1)
            loom_export_list_add(&out->notes,
                                 "--recompute-method uniform --recompute-num-layers %lld "
                                 "checkpoints every %lld layers; loom models recompute per layer",
                                 (long long)rc_layers, (long long)rc_layers);
    } else if (method) {
        loom_export_list_add(&out->notes, "--recompute-method without --recompute-granularity "
                                          "does nothing in Megatron-LM");
    }
    /* CPU activation offloading (the checks are loom_parallel_check's,
     * Megatron-Core's TransformerConfig's) */
    if ((s = get_int(c, "--cpu-offloading-num-layers", 0, 0, INT_MAX, &p->cpu_offload_layers)))
        return s;
    if (has(c, "--recompute-modules") && p->recompute != LOOM_RECOMPUTE_SELECTIVE)
        loom_export_list_add(&out->notes, "--recompute-modules applies only with "
                                          "--recompute-granularity selective");

    /* optimizer-state sharding */
    if (has(c, "--use-megatron-fsdp")) {
        const char *strat = NULL;
        if ((s = get_str(c, "--data-parallel-sharding-strategy", "no_shard", &strat))) return s;
        static const char *const names[] = {"no_shard", "optim", "optim_grads",
                                            "optim_grads_params"};
        p->zero = -1;
        for (int z = 0; z < 4; z++)
            if (!strcmp(strat, names[z])) p->zero = z;
        if (p->zero < 0)
            return failf(c, line_of(c, "--data-parallel-sharding-strategy"),
                         "--data-parallel-sharding-strategy must be no_shard, optim, optim_grads "
                         "or optim_grads_params, found '%s'",
                         strat);
    } else if (has(c, "--use-torch-fsdp2")) {
        p->zero = has(c, "--torch-fsdp2-no-reshard-after-forward") ? 2 : 3;
    } else if (has(c, "--use-distributed-optimizer")) {
        p->zero = 1;
    }
    p->dist_opt = p->zero == 1;

    /* precision */
    bool fp16 = has(c, "--fp16"), bf16 = has(c, "--bf16");
    if (fp16 && bf16)
        return failf(c, line_of(c, "--fp16"),
                     "--fp16 and --bf16 together (Megatron-LM asserts one)");
    p->dtype = fp16 ? LOOM_DTYPE_FP16 : bf16 ? LOOM_DTYPE_BF16 : LOOM_DTYPE_FP32;
    if (has(c, "--fp8-format")) p->dtype = LOOM_DTYPE_FP8;
    if (has(c, "--fp4-format"))
        loom_export_list_add(&out->notes, "--fp4-format: loom models the run in fp8");
    const char *backend = NULL;
    if ((s = get_str(c, "--attention-backend", "auto", &backend))) return s;
    static const char *const backends[] = {"flash", "fused", "unfused", "local", "auto"};
    bool known = false;
    for (int i = 0; i < 5; i++) known |= !strcmp(backend, backends[i]);
    if (!known)
        return failf(c, line_of(c, "--attention-backend"),
                     "--attention-backend must be flash, fused, unfused, local or auto, found '%s'",
                     backend);
    p->flash = strcmp(backend, "unfused") != 0 && strcmp(backend, "local") != 0;
    out->config.model.flash_attention = p->flash;
    return LOOM_OK;
}

/* The model facts (graph.h loom_model_facts) the line gives, with
 * Megatron-LM's defaults at the commit of megatron_args.txt: RoPE base 10000
 * (--rotary-base, an int), norm epsilon 1e-5, Llama-3 scaling with its fixed
 * 1/4/8192 (rotary_pos_embedding.py), MLA's YaRN (MLATransformerConfig:
 * rope_type "yarn", original context 4096, betas 32/1; --rotary-scaling-factor
 * 1.0, --mscale 1.0, --mscale-all-dim 0.0 from the command line), the router
 * (softmax, top-k then softmax unless --moe-router-pre-softmax, sigmoid
 * always renormalised), and the vocabulary Megatron pads to a multiple of
 * --make-vocab-size-divisible-by x TP (vocab_utils.py). */
static loom_status read_facts(const ctx *c, loom_megatron_launch *out)
{
    loom_model_info *m = &out->config.model;
    loom_model_facts *f = &m->facts;
    const loom_megatron_shape *sh = &out->shape;
    loom_status s;
    int64_t theta = 10000, mtp = 0, groups = 0, group_topk = 0, vdiv = 128;
    const char *rope_type = NULL, *score = NULL, *balance = NULL;
    double coeff = 0;
    memset(f, 0, sizeof *f);
    f->known = true;
    if ((s = get_num(c, "--norm-epsilon", 1e-5, &f->norm_eps)) ||
        (s = get_int(c, "--rotary-base", 10000, 1, (int64_t)1 << 40, &theta)) ||
        (s = get_num(c, "--rope-scaling-factor", 8.0, &f->rope_factor)) ||
        (s = get_str(c, "--rope-type", NULL, &rope_type)) ||
        (s = get_int(c, "--mtp-num-layers", 0, 0, 1000, &mtp)) ||
        (s = get_int(c, "--make-vocab-size-divisible-by", 128, 1, 1 << 20, &vdiv)))
        return s;
    f->rope_theta = sh->rope || sh->mla ? (double)theta : 0;
    if ((s = get_num(c, "--rotary-percent", 1.0, &f->rotary_fraction))) return s;
    if (f->rotary_fraction == 1 || !sh->rope) f->rotary_fraction = 0;
    f->mtp_layers = mtp;
    if (sh->mla && !(rope_type && strcmp(rope_type, "rope") == 0)) {
        snprintf(f->rope_scaling, sizeof f->rope_scaling, "yarn");
        f->rope_original_max = 4096;
        f->yarn_beta_fast = 32;
        f->yarn_beta_slow = 1;
        if ((s = get_num(c, "--rotary-scaling-factor", 1.0, &f->rope_factor)) ||
            (s = get_num(c, "--mscale", 1.0, &f->yarn_mscale)) ||
            (s = get_num(c, "--mscale-all-dim", 0.0, &f->yarn_mscale_all_dim)))
            return s;
    } else if (has(c, "--use-rope-scaling")) {
        snprintf(f->rope_scaling, sizeof f->rope_scaling, "llama3");
        f->rope_low_freq = 1;
        f->rope_high_freq = 4;
        f->rope_original_max = 8192;
    } else {
        f->rope_factor = 0;
    }
    if (m->experts > 0) {
        if ((s = get_str(c, "--moe-router-score-function", "softmax", &score)) ||
            (s = get_num(c, "--moe-router-topk-scaling-factor", 0, &f->router_scaling)) ||
            (s = get_int(c, "--moe-router-num-groups", 0, 0, 1 << 20, &groups)) ||
            (s = get_int(c, "--moe-router-group-topk", 0, 0, 1 << 20, &group_topk)) ||
            (s = get_str(c, "--moe-router-load-balancing-type", "aux_loss", &balance)) ||
            (s = get_num(c, "--moe-aux-loss-coeff", 0, &coeff)))
            return s;
        snprintf(f->router_score, sizeof f->router_score, "%s", score);
        f->router_norm_topk = strcmp(score, "softmax") != 0 || !has(c, "--moe-router-pre-softmax");
        f->router_expert_bias = has(c, "--moe-router-enable-expert-bias");
        f->router_groups = groups > 1 ? groups : 0;
        f->router_group_topk = groups > 1 ? group_topk : 0;
        if (coeff > 0 && strcmp(balance, "none") != 0) {
            snprintf(f->router_balance, sizeof f->router_balance, "%s", balance);
            f->router_aux_coeff = coeff;
        }
    }
    /* the vocabulary Megatron builds */
    out->shape.vocab_stated = m->vocab;
    if (m->vocab > 0 && !has(c, "--padded-vocab-size") && !has(c, "--no-pad-vocab-size") &&
        !has(c, "--disable-pad-vocab-size")) {
        int64_t mult = vdiv * out->config.par.tp;
        m->vocab = (m->vocab + mult - 1) / mult * mult;
    }
    return LOOM_OK;
}

/* Model-shape arguments, with Megatron-LM's defaults. */
static loom_status read_shape(const ctx *c, loom_megatron_launch *out)
{
    loom_model_info *m = &out->config.model;
    loom_megatron_shape *sh = &out->shape;
    loom_status s;
    int64_t layers = 0, enc_layers = 0, dec_layers = 0, qg = 1, shared = 0, seq = 0, enc_seq = 0;
    const char *norm = NULL, *pos = NULL, *freq = NULL;
    if ((s = get_int(c, "--num-layers", 0, 1, LOOM_MAX_LAYERS, &layers)) ||
        (s = get_int(c, "--encoder-num-layers", 0, 1, LOOM_MAX_LAYERS, &enc_layers)) ||
        (s = get_int(c, "--decoder-num-layers", 0, 1, LOOM_MAX_LAYERS, &dec_layers)) ||
        (s = get_int(c, "--hidden-size", 0, 1, LOOM_MAX_WIDTH, &m->hidden)) ||
        (s = get_int(c, "--num-attention-heads", 0, 1, LOOM_MAX_WIDTH, &m->heads)) ||
        (s = get_int(c, "--num-query-groups", 1, 1, LOOM_MAX_WIDTH, &qg)) ||
        (s = get_int(c, "--kv-channels", 0, 1, LOOM_MAX_WIDTH, &m->head_dim)) ||
        (s = get_int(c, "--ffn-hidden-size", 0, 1, LOOM_MAX_FFN, &m->ffn)) ||
        (s = get_int(c, "--vocab-size", 0, 1, LOOM_MAX_VOCAB, &m->vocab)) ||
        (s = get_int(c, "--padded-vocab-size", m->vocab, 1, LOOM_MAX_VOCAB, &m->vocab)) ||
        (s = get_int(c, "--max-position-embeddings", 0, 1, LOOM_MAX_SEQ, &m->max_positions)) ||
        (s = get_int(c, "--seq-length", 0, 1, LOOM_MAX_SEQ, &seq)) ||
        (s = get_int(c, "--encoder-seq-length", 0, 1, LOOM_MAX_SEQ, &enc_seq)) ||
        (s = get_int(c, "--num-experts", 0, 0, LOOM_MAX_EXPERTS, &m->experts)) ||
        (s = get_int(c, "--moe-router-topk", 2, 1, LOOM_MAX_EXPERTS, &m->experts_topk)) ||
        (s = get_int(c, "--moe-shared-expert-intermediate-size", 0, 1, LOOM_MAX_FFN, &shared)) ||
        (s = get_str(c, "--moe-layer-freq", NULL, &freq)) ||
        (s = get_str(c, "--normalization", "LayerNorm", &norm)) ||
        (s = get_str(c, "--position-embedding-type", "learned_absolute", &pos)) ||
        (s = get_num(c, "--hidden-dropout", 0.1, &sh->hidden_dropout)) ||
        (s = get_num(c, "--attention-dropout", 0.1, &sh->attention_dropout)) ||
        (s = get_int(c, "--q-lora-rank", 0, 1, LOOM_MAX_WIDTH, &sh->q_lora)) ||
        (s = get_int(c, "--kv-lora-rank", 32, 1, LOOM_MAX_WIDTH, &sh->kv_lora)) ||
        (s = get_int(c, "--qk-head-dim", 128, 1, LOOM_MAX_WIDTH, &sh->qk_head)) ||
        (s = get_int(c, "--qk-pos-emb-head-dim", 64, 1, LOOM_MAX_WIDTH, &sh->qk_pos)) ||
        (s = get_int(c, "--v-head-dim", 128, 1, LOOM_MAX_WIDTH, &sh->v_head)))
        return s;
    if (layers && enc_layers)
        return failf(c, line_of(c, "--encoder-num-layers"),
                     "--num-layers and --encoder-num-layers together (Megatron-LM asserts one)");
    m->layers = layers ? layers : enc_layers ? enc_layers : dec_layers;
    out->config.par.seq = seq ? seq : enc_seq;
    if (out->config.par.seq == 0) return failf(c, c->line, "--seq-length is required");
    if (m->layers == 0) return failf(c, c->line, "--num-layers is required");
    if (m->hidden == 0 || m->heads == 0)
        return failf(c, c->line, "--hidden-size and --num-attention-heads are required");
    if (!m->head_dim && !has(c, "--multi-latent-attention")) {   /* MLA: set below */
        if (m->hidden % m->heads)
            return failf(c, line_of(c, "--num-attention-heads"),
                         "--hidden-size %lld is not divisible by --num-attention-heads %lld; give "
                         "--kv-channels",
                         (long long)m->hidden, (long long)m->heads);
        m->head_dim = m->hidden / m->heads;
    }
    m->kv_heads = has(c, "--group-query-attention") ? qg : m->heads;
    if (m->heads % m->kv_heads)
        return failf(c, line_of(c, "--num-query-groups"),
                     "--num-query-groups %lld does not divide --num-attention-heads %lld",
                     (long long)m->kv_heads, (long long)m->heads);
    m->gated_mlp = has(c, "--swiglu");
    if (!m->ffn)   /* Megatron-LM's default: 4h, or 2/3 of it in multiples of 64 for SwiGLU */
        m->ffn = m->gated_mlp ? (4 * m->hidden * 2 / 3) / 64 * 64 : 4 * m->hidden;
    m->tied_embeddings = !has(c, "--untie-embeddings-and-output-weights");
    bool bias = !has(c, "--disable-bias-linear");
    m->qkv_bias = bias || has(c, "--add-qkv-bias");
    m->qk_norm = has(c, "--qk-layernorm");
    sh->rmsnorm = !strcmp(norm, "RMSNorm");
    sh->rope = !strcmp(pos, "rope") || has(c, "--use-rotary-position-embeddings");
    sh->mla = has(c, "--multi-latent-attention");
    if (strcmp(norm, "RMSNorm") && strcmp(norm, "LayerNorm"))
        return failf(c, line_of(c, "--normalization"),
                     "--normalization must be LayerNorm or RMSNorm, found '%s'", norm);
    if (m->experts > 0) {
        if ((s = get_int(c, "--moe-ffn-hidden-size", m->ffn, 1, LOOM_MAX_FFN, &m->moe_ffn))) return s;
        if (m->experts_topk > m->experts)
            return failf(c, line_of(c, "--moe-router-topk"),
                         "--moe-router-topk %lld exceeds --num-experts %lld",
                         (long long)m->experts_topk, (long long)m->experts);
        if (shared % m->moe_ffn)
            return failf(c, line_of(c, "--moe-shared-expert-intermediate-size"),
                         "--moe-shared-expert-intermediate-size %lld is not a whole number of "
                         "experts of --moe-ffn-hidden-size %lld",
                         (long long)shared, (long long)m->moe_ffn);
        m->shared_experts = shared / m->moe_ffn;
        if (freq && strcmp(freq, "1")) {
            long long k = -1, rest = -1;
            int used = 0;
            if (sscanf(freq, "([0]*%lld+[1]*%lld)%n", &k, &rest, &used) != 2 || freq[used] ||
                k < 0 || k + rest != m->layers)
                return loom_error_set(c->err, LOOM_ERR_UNSUPPORTED,
                                      "%s:%d: --moe-layer-freq '%s': loom models dense first "
                                      "layers then MoE layers, written ([0]*K+[1]*(L-K)) with "
                                      "K + (L-K) = --num-layers",
                                      c->source, line_of(c, "--moe-layer-freq"), freq);
            m->first_dense = k;
        }
    } else {
        m->experts_topk = 0;
    }
    if (sh->mla) {
        /* DeepSeek-V3's sigmoid gate with expert bias, else V2's softmax */
        const char *score = NULL;
        if ((s = get_str(c, "--moe-router-score-function", "softmax", &score))) return s;
        if (strcmp(score, "softmax") && strcmp(score, "sigmoid"))
            return failf(c, line_of(c, "--moe-router-score-function"),
                         "--moe-router-score-function must be softmax or sigmoid, found '%s'",
                         score);
        bool v3 = !strcmp(score, "sigmoid") || has(c, "--moe-router-enable-expert-bias");
        snprintf(m->arch, sizeof m->arch, v3 ? "deepseek_v3" : "deepseek_v2");
        m->q_lora_rank = sh->q_lora;
        m->kv_lora_rank = sh->kv_lora;
        m->qk_rope_head_dim = sh->qk_pos;
        m->v_head_dim = sh->v_head;
        m->head_dim = sh->qk_head + sh->qk_pos;
    } else if (m->experts > 0) {
        /* shared experts, dense first layers, q/k norms or a QKV bias: GLM-4.5's
         * family holds them all; plain routed experts: Mixtral's */
        bool glm = m->shared_experts > 0 || m->first_dense > 0 || m->qk_norm || m->qkv_bias;
        snprintf(m->arch, sizeof m->arch, glm ? "glm4_moe" : "mixtral");
    } else if (!m->gated_mlp) {
        snprintf(m->arch, sizeof m->arch, "gpt2");
    } else {
        snprintf(m->arch, sizeof m->arch, "%s",
                 m->qk_norm ? "qwen3" : has(c, "--add-qkv-bias") && !bias ? "qwen2" : "llama");
    }
    out->has_model_shape =
        has(c, "--hidden-size") && has(c, "--num-attention-heads") && m->layers > 0 && m->vocab > 0;
    out->stated = (m->layers ? LOOM_MEGATRON_STATED_LAYERS : 0) |
                  (has(c, "--hidden-size") ? LOOM_MEGATRON_STATED_HIDDEN : 0) |
                  (has(c, "--num-attention-heads") ? LOOM_MEGATRON_STATED_HEADS : 0) |
                  (has(c, "--group-query-attention") ? LOOM_MEGATRON_STATED_GROUPS : 0) |
                  (has(c, "--ffn-hidden-size") ? LOOM_MEGATRON_STATED_FFN : 0) |
                  (m->vocab ? LOOM_MEGATRON_STATED_VOCAB : 0) |
                  (has(c, "--num-experts") ? LOOM_MEGATRON_STATED_EXPERTS : 0);
    m->seq = out->config.par.seq;
    m->dtype = out->config.par.dtype;
    return read_facts(c, out);
}

/* Checks Megatron-LM's divisibility rules once the degrees are known. */
static loom_status check_degrees(const ctx *c, const loom_megatron_launch *out)
{
    const loom_parallel *p = &out->config.par;
    const loom_model_info *m = &out->config.model;
    if (m->heads % p->tp)
        return failf(c, line_of(c, "--tensor-model-parallel-size"),
                     "--tensor-model-parallel-size %lld does not divide --num-attention-heads %lld",
                     (long long)p->tp, (long long)m->heads);
    if (m->kv_heads % p->tp)
        return failf(c, line_of(c, "--tensor-model-parallel-size"),
                     "--tensor-model-parallel-size %lld does not divide the %lld query groups "
                     "(Megatron-Core splits them over TP)",
                     (long long)p->tp, (long long)m->kv_heads);
    if (p->vpp > 1 && p->pp < 2)
        return failf(c, c->line, "an interleaved schedule (%lld virtual stages) needs "
                                 "--pipeline-model-parallel-size > 1",
                     (long long)p->vpp);
    if (p->pp > m->layers)
        return failf(c, line_of(c, "--pipeline-model-parallel-size"),
                     "--pipeline-model-parallel-size %lld exceeds --num-layers %lld",
                     (long long)p->pp, (long long)m->layers);
    if (p->cp > 1 && p->seq % (2 * p->cp))
        return failf(c, line_of(c, "--context-parallel-size"),
                     "--seq-length %lld is not a multiple of 2 x --context-parallel-size %lld "
                     "(Megatron-LM asserts it)",
                     (long long)p->seq, (long long)p->cp);
    if (p->ep > 1 && m->experts == 0)
        return failf(c, line_of(c, "--expert-model-parallel-size"),
                     "--expert-model-parallel-size %lld without --num-experts", (long long)p->ep);
    if (m->experts > 0 && m->experts % p->ep)
        return failf(c, line_of(c, "--expert-model-parallel-size"),
                     "--expert-model-parallel-size %lld does not divide --num-experts %lld",
                     (long long)p->ep, (long long)m->experts);
    int64_t etp = p->etp > 0 ? p->etp : p->tp;
    if (m->experts > 0 && (p->tp * p->cp * p->dp) % (p->ep * etp))
        return failf(c, line_of(c, "--expert-model-parallel-size"),
                     "--expert-model-parallel-size %lld x expert TP %lld does not divide TP x CP x "
                     "DP = %lld (Megatron-Core's expert grid must cover the same ranks)",
                     (long long)p->ep, (long long)etp, (long long)(p->tp * p->cp * p->dp));
    return LOOM_OK;
}

/* World size from the launcher, WORLD_SIZE, and the caller; then DP and the batch. */
static loom_status read_world(const ctx *c, const loom_sh_script *sh, int64_t nodes,
                              int64_t per_node, int64_t gpus, loom_megatron_launch *out)
{
    loom_parallel *p = &out->config.par;
    if (per_node > 0 && nodes == 0) nodes = 1;   /* torchrun's and srun's default */
    int64_t launcher = nodes > 0 && per_node > 0 ? nodes * per_node : 0, env = 0;
    const char *ws = loom_sh_var(sh, "WORLD_SIZE");
    if (ws && ws[0] && !loom_megatron_parse_i64(ws, &env))
        return failf(c, c->line, "WORLD_SIZE is '%s', expected a number of GPUs", ws);
    if (launcher && env && launcher != env)
        return failf(c, c->line, "WORLD_SIZE=%lld but the launcher starts %lld x %lld = %lld "
                                 "processes",
                     (long long)env, (long long)nodes, (long long)per_node, (long long)launcher);
    int64_t world = launcher ? launcher : env;
    out->world_from_line = world > 0;
    if (world && gpus && world != gpus)
        return failf(c, c->line,
                     "the launch line starts %lld GPUs but the cluster has %lld; pick a "
                     "cluster of %lld GPUs",
                     (long long)world, (long long)gpus, (long long)world);
    if (!world) world = gpus;
    if (!world)
        return failf(c, c->line, "the world size is unknown: the launch line has no torchrun "
                                 "--nnodes/--nproc-per-node and no WORLD_SIZE; give a cluster");
    out->world_size = world;
    if (per_node > 0) out->config.gpus_per_node = per_node;
    int64_t model = p->tp * p->pp * p->cp;
    if (world % model)
        return failf(c, c->line,
                     "%lld GPUs are not divisible by TP %lld x PP %lld x CP %lld = %lld "
                     "(Megatron-LM asserts world_size %% (TP x PP x CP) == 0)",
                     (long long)world, (long long)p->tp, (long long)p->pp, (long long)p->cp,
                     (long long)model);
    p->dp = world / model;
    /* Megatron's hybrid-sharded distributed optimizer (and Megatron-FSDP's
     * outer data parallelism): k instances, the state sharded over dp / k
     * ranks each, gradients reduce-scattered inside an instance and
     * all-reduced across the k (distributed_data_parallel.py's
     * inter_distributed_optimizer_instance_group): loom's HSDP */
    int64_t instances = 1;
    loom_status s = get_int(c, "--num-distributed-optimizer-instances", 1, 1, 1 << 20, &instances);
    if (s) return s;
    if (instances > 1) {
        if (p->zero < 1)
            return failf(c, line_of(c, "--num-distributed-optimizer-instances"),
                         "--num-distributed-optimizer-instances %lld needs "
                         "--use-distributed-optimizer or --use-megatron-fsdp",
                         (long long)instances);
        if (p->dp % instances)
            return failf(c, line_of(c, "--num-distributed-optimizer-instances"),
                         "--num-distributed-optimizer-instances %lld does not divide the "
                         "data-parallel size %lld", (long long)instances, (long long)p->dp);
        p->fsdp_shard = p->dp / instances;
    }
    if (p->gbs == 0) p->gbs = p->mbs * p->dp;   /* Megatron-LM's default: one micro-batch */
    if (p->gbs % (p->mbs * p->dp))
        return failf(c, line_of(c, "--global-batch-size"),
                     "--global-batch-size %lld is not a multiple of --micro-batch-size %lld x "
                     "data-parallel size %lld",
                     (long long)p->gbs, (long long)p->mbs, (long long)p->dp);
    return LOOM_OK;
}

loom_status loom_megatron_parse(const char *source, const char *text, int64_t gpus,
                                loom_megatron_launch *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    loom_runtime_config_init(&out->config);
    loom_sh_script *sh = NULL;
    loom_status s = loom_sh_parse(source, text, &sh, err);
    if (s) return s;
    ctx c;
    s = loom_megatron_line_read(source, sh, &c, err);
    if (s) {
        loom_sh_destroy(sh);
        return s;
    }
    snprintf(out->script, sizeof out->script, "%s", c.script);
    out->n_args = c.n_args;
    s = reject_deprecated(&c);
    if (s == LOOM_OK) s = read_parallel(&c, out);
    if (s == LOOM_OK) s = read_shape(&c, out);
    if (s == LOOM_OK) s = read_world(&c, sh, c.nodes, c.per_node, gpus, out);
    if (s == LOOM_OK) s = loom_megatron_read_split(&c, &out->config);
    if (s == LOOM_OK) s = check_degrees(&c, out);
    if (s == LOOM_OK && !out->shape.rmsnorm && out->config.model.gated_mlp)
        loom_export_list_add(&out->notes, "SwiGLU with LayerNorm: loom builds the Llama family "
                                          "(RMSNorm); the norm's cost differs little");
    if (s == LOOM_OK && strcmp(out->config.model.arch, "gpt2") && !out->shape.mla &&
        (out->shape.hidden_dropout > 0 || out->shape.attention_dropout > 0))
        loom_export_list_add(&out->notes, "dropout (Megatron-LM's default 0.1 unless "
                                          "--hidden-dropout/--attention-dropout 0) is not modelled "
                                          "for Llama-family models");
    if (s == LOOM_OK && (s = loom_runtime_config_normalize(&out->config, err)))
        loom_error_prefix(err, "%s", source);
    loom_megatron_line_free(&c);
    loom_sh_destroy(sh);
    return s;
}

loom_status loom_megatron_read(const char *arg, int64_t gpus, loom_megatron_launch *out,
                               loom_error *err)
{
    const char *path = arg[0] == '@' ? arg + 1 : arg;
    bool is_file = arg[0] == '@';
    if (!is_file && !strchr(arg, '\n') && !strchr(arg, ' ')) {
        FILE *f = fopen(arg, "r");
        if (f) {
            fclose(f);
            is_file = true;
        }
    }
    if (!is_file) return loom_megatron_parse("--from-megatron", arg, gpus, out, err);
    char *text = NULL;
    size_t len = 0;
    loom_status s = loom_read_file(path, 1 << 22, &text, &len, err);
    if (s) return s;
    if (strlen(text) != len) {
        free(text);
        return loom_error_set(err, LOOM_ERR_PARSE, "%s: not a text file (NUL byte)", path);
    }
    s = loom_megatron_parse(path, text, gpus, out, err);
    free(text);
    return s;
}

loom_status loom_megatron_check_model(const loom_megatron_launch *l, const loom_model_info *m,
                                      loom_error *err)
{
    const loom_model_info *a = &l->config.model;
    const struct {
        uint32_t bit;
        const char *flag;
        int64_t line, model;
    } pairs[] = {
        {LOOM_MEGATRON_STATED_LAYERS, "--num-layers", a->layers, m->layers},
        {LOOM_MEGATRON_STATED_HIDDEN, "--hidden-size", a->hidden, m->hidden},
        {LOOM_MEGATRON_STATED_HEADS, "--num-attention-heads", a->heads, m->heads},
        {LOOM_MEGATRON_STATED_GROUPS, "--num-query-groups", a->kv_heads, m->kv_heads},
        {LOOM_MEGATRON_STATED_FFN, "--ffn-hidden-size", a->ffn, m->ffn},
        {LOOM_MEGATRON_STATED_VOCAB, "--vocab-size", l->shape.vocab_stated, m->vocab},
        {LOOM_MEGATRON_STATED_EXPERTS, "--num-experts", a->experts, m->experts},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if ((l->stated & pairs[i].bit) && pairs[i].line != pairs[i].model)
            return loom_error_set(
                err, LOOM_ERR_INVALID, "the launch line says %s %lld but the model has %lld",
                pairs[i].flag, (long long)pairs[i].line, (long long)pairs[i].model);
    /* the MTP depths are the model's (num_nextn_predict_layers): a line may
     * leave them out, not ask for a different number */
    if (a->facts.mtp_layers > 0 && a->facts.mtp_layers != m->facts.mtp_layers)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "the launch line says --mtp-num-layers %lld but the model has %lld "
                              "multi-token-prediction layers (num_nextn_predict_layers)",
                              (long long)a->facts.mtp_layers, (long long)m->facts.mtp_layers);
    return LOOM_OK;
}

loom_status loom_megatron_eval_setup(const char *arg, const char *model_path, int64_t gpus,
                                     loom_parallel *p, int32_t *chunk_layers, int32_t *n_chunks,
                                     loom_graph **g, loom_export_list *notes, loom_error *err)
{
    *g = NULL;
    *n_chunks = 0;
    loom_megatron_launch *l = malloc(sizeof *l);
    if (!l) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    loom_status s = loom_megatron_read(arg, gpus, l, err);
    if (s == LOOM_OK) {
        *p = l->config.par;
        for (int i = 0; i < l->notes.n; i++) loom_export_list_add(notes, "%s", l->notes.item[i]);
        *n_chunks = l->config.n_chunks;
        memcpy(chunk_layers, l->config.chunk_layers,
               (size_t)l->config.n_chunks * sizeof *chunk_layers);
        loom_model_opts o;
        loom_runtime_model_opts(p, &o);
        /* the line says whether Megatron-LM builds MTP layers: none unless
         * --mtp-num-layers (its default), whatever the model's config has */
        o.mtp = l->config.model.facts.mtp_layers > 0;
        if (model_path) {
            s = loom_model_load(model_path, &o, g, err);
            if (s == LOOM_OK && (s = loom_megatron_check_model(l, loom_graph_info_c(*g), err)))
                loom_error_prefix(err, "%s", model_path);
        } else {
            s = loom_megatron_build_model(l, &o, g, err);
        }
        if (s) {
            loom_graph_destroy(*g);
            *g = NULL;
        }
    }
    free(l);
    return s;
}
