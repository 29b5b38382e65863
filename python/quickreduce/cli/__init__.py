"""Command-line tools: `quickreduce bench | tune | info | accuracy`.

Every module here imports torch and quickreduce lazily where it can, so the pure pieces
(size parsing, tables, CSV, plots, tuning tables) work and are tested on machines without GPUs.
"""
