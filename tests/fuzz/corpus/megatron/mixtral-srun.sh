export CUDA_DEVICE_MAX_CONNECTIONS=1
srun --nodes 4 --ntasks-per-node 8 python pretrain_gpt.py \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --expert-model-parallel-size 8 \
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \
  --group-query-attention --num-query-groups 8 --num-experts 8 --moe-router-topk 2 \
  --seq-length 4096 --max-position-embeddings 32768 --vocab-size 32000 \
  --swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear \
  --untie-embeddings-and-output-weights --micro-batch-size 1 --global-batch-size 256 --bf16 \
  --moe-grouped-gemm --sequence-parallel; echo done
