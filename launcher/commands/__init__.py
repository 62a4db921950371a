"""One module per `launch` subcommand, imported only when it runs (`launcher/cli.py`'s `COMMANDS`;
`--help` lists their `SUMMARIES` without importing one: tests/unit/test_cli_start.py). Each turns
options into a call of the package that does the work; exit codes are mapped once, in cli.py.
"""
