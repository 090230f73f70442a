torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 8 --data-path "/data/my corpus
 --num-layers 32
