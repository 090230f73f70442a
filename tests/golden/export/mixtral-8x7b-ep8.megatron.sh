#!/usr/bin/env bash
# Written by `loom export --to megatron` from tests/golden/export/mixtral-8x7b-ep8.plan.json.
# model: mixtral-8x7b: 32 layers, hidden 4096, 32 heads (8 kv), ffn 14336, vocab 32000, 8 experts top-2
# parallelism: TP 2 x PP 2 x DP 8 x CP 1 = 32 GPUs, EP 8; global batch 256 = micro-batch 1 x 32 micro-batches x DP 8, sequence 4096
# loom predicts 12.5 s per step and 50.0 GiB per GPU.
# Argument names checked against NVIDIA/Megatron-LM megatron/training/arguments.py @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22).
# Data, tokenizer and optimizer arguments (--data-path, --tokenizer-type,
# --train-iters, --lr, ...) are not part of the plan: pass them to this
# script and they are appended to the command line.
# note: run the script once on each of the 4 nodes with NODE_RANK, MASTER_ADDR and MASTER_PORT set
set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=1

torchrun --nnodes 4 --nproc-per-node 8 \
    --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \
    pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 \
    --context-parallel-size 1 \
    --expert-model-parallel-size 8 \
    --expert-tensor-parallel-size 1 \
    --sequence-parallel \
    --micro-batch-size 1 \
    --global-batch-size 256 \
    --overlap-grad-reduce \
    --use-distributed-optimizer \
    --bf16 \
    --num-layers 32 \
    --hidden-size 4096 \
    --ffn-hidden-size 14336 \
    --num-attention-heads 32 \
    --group-query-attention \
    --num-query-groups 8 \
    --seq-length 4096 \
    --max-position-embeddings 4096 \
    --vocab-size 32000 \
    --normalization RMSNorm \
    --norm-epsilon 1e-05 \
    --position-embedding-type rope \
    --rotary-base 1000000 \
    --swiglu \
    --disable-bias-linear \
    --attention-dropout 0 \
    --hidden-dropout 0 \
    --untie-embeddings-and-output-weights \
    --num-experts 8 \
    --moe-router-topk 2 \
    --moe-ffn-hidden-size 14336 \
    --moe-grouped-gemm \
    --moe-token-dispatcher-type alltoall \
    --moe-router-load-balancing-type aux_loss \
    --moe-aux-loss-coeff 0.02 \
    "$@"
