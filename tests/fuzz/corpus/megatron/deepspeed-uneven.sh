deepspeed --num_nodes 2 --num_gpus 8 pretrain_gpt.py --tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 \
  --num-layers 30 --decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6 \
  --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 \
  --vocab-size 50257 --micro-batch-size=2 --global-batch-size=128 --bf16 --recompute-activations
