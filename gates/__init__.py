"""The gate chain and its gates.

`chain.ChainRunner` asks each gate of the chain until it decides or its deadline passes, and is the
one place a gate's exception becomes an ERROR result; `registry.GATES` lists the gates by name (the
default order is the registry's). Each gate's settings are declared once (`basis.setting.Setting`)
and every table, the profile's too, is read through `SettingValues`, which owns the defaults; pure
rules (`leak_rule`, `tool_cases`) have no I/O. `gates/` never imports `launcher/`
(of ours, only `basis` and `vllm_flags`): gates see the world through `context.py` (clock, HTTP,
log, server, memory, expectations) and the launcher supplies the real ones.
"""
