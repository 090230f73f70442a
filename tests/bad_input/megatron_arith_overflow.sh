BIG=$((9223372036854775807 + 1))
torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 8 --global-batch-size $BIG
