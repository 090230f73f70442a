#!/usr/bin/env bash
# Written by `loom export --to megatron` from tests/golden/export/llama-3-70b-pp4.plan.json.
# model: llama-3-70b: 80 layers, hidden 8192, 64 heads (8 kv), ffn 28672, vocab 128256
# parallelism: TP 8 x PP 4 x DP 2 x CP 1 = 64 GPUs; global batch 128 = micro-batch 1 x 64 micro-batches x DP 2, sequence 8192
# loom predicts 12.5 s per step and 50.0 GiB per GPU.
# Argument names checked against NVIDIA/Megatron-LM megatron/training/arguments.py @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22).
# Data, tokenizer and optimizer arguments (--data-path, --tokenizer-type,
# --train-iters, --lr, ...) are not part of the plan: pass them to this
# script and they are appended to the command line.
# note: run the script once on each of the 8 nodes with NODE_RANK, MASTER_ADDR and MASTER_PORT set
set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=1

torchrun --nnodes 8 --nproc-per-node 8 \
    --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \
    pretrain_gpt.py \
    --tensor-model-parallel-size 8 \
    --pipeline-model-parallel-size 4 \
    --context-parallel-size 1 \
    --sequence-parallel \
    --decoder-first-pipeline-num-layers 19 \
    --decoder-last-pipeline-num-layers 21 \
    --micro-batch-size 1 \
    --global-batch-size 128 \
    --recompute-granularity selective \
    --overlap-grad-reduce \
    --use-distributed-optimizer \
    --bf16 \
    --num-layers 80 \
    --hidden-size 8192 \
    --ffn-hidden-size 28672 \
    --num-attention-heads 64 \
    --group-query-attention \
    --num-query-groups 8 \
    --seq-length 8192 \
    --max-position-embeddings 8192 \
    --vocab-size 128256 \
    --make-vocab-size-divisible-by 32 \
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
