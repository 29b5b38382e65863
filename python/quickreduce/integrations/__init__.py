"""quickreduce inside serving engines, through their own plugin mechanisms (docs/integrations.md).

- ``quickreduce.integrations.vllm``: the ``vllm.general_plugins`` entry point; ``QUICKREDUCE_VLLM=1`` turns it on.
- ``quickreduce.integrations.sglang``: the ``sglang.srt.plugins`` entry point; ``QUICKREDUCE_SGLANG=1`` turns it on.
- ``quickreduce.integrations.common``: what both share (opt-in, routing, workspace sizing, the collective set-up).

Importing this package imports neither engine.
"""
