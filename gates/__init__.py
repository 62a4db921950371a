"""The gate chain and its gates.

`gates/` never imports `launcher/`: gates declare the small interfaces they need (a clock, an
HTTP client, a log source, a memory probe) and the launcher supplies the real ones.
"""
