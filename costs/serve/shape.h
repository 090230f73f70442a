/*
 * shape.h — the work of one engine instance's GPU, per token, read off the
 * operator graph under the instance's parallelism (docs/design.md §11).
 *
 * A serving iteration runs the same ops as the graph for a varying number of
 * tokens, so its cost is linear pieces of the token count: every weight
 * GEMM costs 2·|W_shard| FLOPs per token and streams |W_shard| bytes once
 * per iteration; attention costs per (query, key) pair in prefill and per
 * cached token in decode; norms, activations and the rest stream bytes per
 * token. The graph (built once, for one token) gives the ops, their weights
 * and their dims; the per-op shardings are those of the training cost model
 * (costs/memory.h loom_memory_tensor_parts: Megatron/vLLM tensor parallel
 * over heads, kv heads, f and the vocab; experts over ep, their f over the
 * expert-TP degree). Identical GEMMs are merged with a count, so an
 * iteration is costed in a few dozen terms whatever the number of layers.
 *
 * Parallelism of an instance: tp (attention heads), attn_dp (attention data
 * parallel: each rank keeps its own sequences and their KV; the MLA models
 * SGLang and vLLM serve with --enable-dp-attention / -dp), pp (layers), ep
 * (experts, over the tp·attn_dp GPUs of a stage; moe_tp = tp·attn_dp / ep).
 * Replicas are independent instances.
 *
 * Weights at their stored bytes: bf16 2; fp8 1 (per-channel or 128×128
 * block scales, < 0.1%); int4 weight-only with a 16-bit scale and zero per
 * group of 128 (AWQ/GPTQ): 0.5 + 4/128 bytes; mxfp4 (OCP Microscaling:
 * 4-bit E2M1 elements and one 8-bit E8M0 scale per block of 32) 0.5 + 1/32
 * bytes. Quantisation covers the GEMM weights of the transformer blocks;
 * embeddings, the LM head, norms and the MoE router stay bf16, as in the
 * published FP8/AWQ checkpoints; mxfp4 covers the expert weights only, as
 * gpt-oss ships them (its attention and router are bf16). int4 and mxfp4
 * run weight-only (dequantised to bf16 in the GEMM: Marlin, and vLLM's
 * Triton MoE kernels on Hopper and Ampere), so they save bytes, not FLOPs.
 * nvfp4 (NVIDIA's 4-bit E2M1 elements with one FP8 E4M3 scale per block of
 * 16, and a per-tensor FP32 scale: 0.5 + 1/16 bytes) quantises the block
 * GEMMs as fp8 does, activations too (TensorRT-LLM's and vLLM's NVFP4
 * GEMMs on Blackwell): they run on the FP4 tensor cores (device.h
 * fp4_flops, 2x fp8); a GPU without them cannot run it (error).
 *
 * Units: FLOPs, bytes, per GPU.
 */
#ifndef LOOM_SERVE_SHAPE_H
#define LOOM_SERVE_SHAPE_H

#include <stdbool.h>
#include <stdint.h>
#include "base/dtype.h"
#include "base/error.h"
#include "costs/device.h"
#include "graph/graph.h"

#define LOOM_SERVE_WEIGHTS_LIST(X) \
    X(BF16, "bf16")                \
    X(FP8, "fp8")                  \
    X(INT4, "int4")                \
    X(MXFP4, "mxfp4")               \
    X(NVFP4, "nvfp4")

typedef enum {
#define LOOM_X(n, s) LOOM_WEIGHTS_##n,
    LOOM_SERVE_WEIGHTS_LIST(LOOM_X)
#undef LOOM_X
    LOOM_WEIGHTS_COUNT
} loom_serve_weights;

const char *loom_serve_weights_name(loom_serve_weights w);
/* Whether device d can run weights w (nvfp4 needs FP4 tensor cores); the
 * error says what is missing and what to use instead. */
loom_status loom_serve_weights_check(loom_serve_weights w, const loom_device *d, loom_error *err);
bool loom_serve_weights_parse(const char *s, loom_serve_weights *out);
/* Stored bytes per parameter of a quantised GEMM weight (scales included). */
double loom_serve_weights_bytes(loom_serve_weights w);
/* The KV-cache dtype a deployment gets when none is stated: fp8 for NVIDIA
 * NIM's fp8 profiles (nim: NIM serves the model), whose TensorRT-LLM
 * engines are built from Model Optimizer FP8 checkpoints that quantise the
 * KV cache with the weights; bf16 (the engines' "auto") otherwise. */
loom_dtype loom_serve_default_kv_dtype(loom_serve_weights w, bool nim);

typedef struct {
    int64_t tp, pp, ep, attn_dp;   /* per instance; GPUs = tp · attn_dp · pp */
    int64_t replicas;              /* independent instances */
    loom_serve_weights weights;
    loom_dtype kv_dtype;           /* bf16 or fp8 */
} loom_serve_parallel;

/* tp = pp = ep = attn_dp = replicas = 1, bf16 weights and KV. */
void loom_serve_parallel_init(loom_serve_parallel *p);

/* One class of weight GEMM (identical ones merged). Dense: per token on
 * this GPU. Expert: one local expert's shard, per token routed to it. */
typedef struct {
    double flops_per_token;
    double weight_bytes;
    double act_bytes_per_token;
    bool expert;
    bool fp8;          /* runs on fp8 tensor cores (fp8 weights, W8A8) */
    bool fp4;          /* runs on fp4 tensor cores (nvfp4 weights, W4A4) */
    int32_t count;     /* GEMMs of this class in the model */
} loom_serve_gemm;

typedef struct {
    loom_serve_gemm *gemm;              /* owned: loom_serve_shape_free */
    int32_t n_gemm;
    loom_serve_parallel par;
    int64_t gpus;                       /* per instance: tp · attn_dp · pp */
    int64_t moe_tp;                     /* expert tensor parallel: tp · attn_dp / ep */
    int64_t layers, hidden, vocab, max_positions;
    int64_t experts, topk, experts_local, moe_layers;
    bool mla;
    /* attention, summed over the layers (per GPU) */
    double attn_prefill_flops_per_pair; /* per (query, key) pair */
    double attn_decode_flops_per_ctx;   /* per cached token of a decoding sequence */
    double kv_bytes_per_token;          /* KV of one token, all layers, this GPU's share */
    /* everything else, per token, all layers */
    double other_bytes_per_token;       /* norms, activations, RoPE, residuals, routing */
    int64_t kernels;                    /* kernels of one forward (non-view ops) */
    /* the LM head: only for sampled tokens */
    double head_flops_per_token, head_weight_bytes;
    /* communication per forward */
    int64_t allreduces;                 /* TP all-reduces of [tokens, h] */
    int64_t alltoalls;                  /* EP dispatch + combine of [tokens · topk, h] */
    /* memory */
    double weight_bytes_gpu;            /* this GPU's weights, all layers (pp = 1) */
    double weight_bytes_stage;          /* the largest pipeline stage's GPU */
    double act_bytes_per_token_peak;    /* largest live activations of one layer, per token */
} loom_serve_shape;

/* Builds the shape of g (built for one token: seq 1, batch 1, from an HF
 * config) under p. Errors: a graph without model info; tp not dividing the
 * heads; tp and the kv heads neither dividing the other (vLLM, SGLang and
 * TensorRT-LLM all refuse it); pp beyond the layers; ep not dividing the
 * experts or tp · attn_dp; each names the option and values at fault. */
loom_status loom_serve_shape_build(const loom_graph *g, const loom_serve_parallel *p,
                                   loom_serve_shape *out, loom_error *err);
void loom_serve_shape_free(loom_serve_shape *s);

#endif
