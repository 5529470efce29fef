"""tests/: unit/ (no torch needed: the library, CLI, hostile files, threads),
ops/ (each kernel family against torch eager), integration/ (binding and
lifetime rules, models, examples, README, wheel). Shared helpers are the
`support` package (on the path through pyproject's `pythonpath`)."""
