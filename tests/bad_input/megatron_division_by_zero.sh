GPUS=8
NODES=0
PER=$((GPUS / NODES))
torchrun --nproc-per-node $PER pretrain_gpt.py --tensor-model-parallel-size 8
