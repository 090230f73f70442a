#!/usr/bin/env bash
# Written by `loom export --to megatron` from tests/golden/export/llama-3-8b-dp.plan.json.
# model: llama-3-8b: 32 layers, hidden 4096, 32 heads (8 kv), ffn 14336, vocab 128256
# parallelism: TP 1 x PP 1 x DP 8 x CP 1 = 8 GPUs; global batch 64 = micro-batch 1 x 8 micro-batches x DP 8, sequence 8192
# loom predicts 12.5 s per step and 50.0 GiB per GPU.
# Argument names checked against NVIDIA/Megatron-LM megatron/training/arguments.py @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22).
# Data, tokenizer and optimizer arguments (--data-path, --tokenizer-type,
# --train-iters, --lr, ...) are not part of the plan: pass them to this
# script and they are appended to the command line.
# note: ZeRO-2 runs as Megatron FSDP, which must not run with CUDA_DEVICE_MAX_CONNECTIONS=1
set -euo pipefail

torchrun --nnodes 1 --nproc-per-node 8 \
    --standalone \
    pretrain_gpt.py \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 1 \
    --context-parallel-size 1 \
    --micro-batch-size 1 \
    --global-batch-size 64 \
    --overlap-grad-reduce \
    --use-megatron-fsdp \
    --data-parallel-sharding-strategy optim_grads \
    --ckpt-format fsdp_dtensor \
    --bf16 \
    --num-layers 32 \
    --hidden-size 4096 \
    --ffn-hidden-size 14336 \
    --num-attention-heads 32 \
    --group-query-attention \
    --num-query-groups 8 \
    --seq-length 8192 \
    --max-position-embeddings 8192 \
    --vocab-size 128256 \
    --normalization RMSNorm \
    --norm-epsilon 1e-05 \
    --position-embedding-type rope \
    --rotary-base 500000 \
    --swiglu \
    --disable-bias-linear \
    --attention-dropout 0 \
    --hidden-dropout 0 \
    --untie-embeddings-and-output-weights \
    "$@"
