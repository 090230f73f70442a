torchrun --nproc-per-node 8 pretrain_gpt.py \
  --tensor-model-parallel-size 8 --num-layers 4 --hidden-size 1024 \
  --num-attention-heads 16 --seq-length 1024 --vocab-size 32000 \
  --micro-batch-size 1 --global-batch-size 8 --multi-latent-attention \
  --num-experts 8 --moe-router-score-function sigmod
