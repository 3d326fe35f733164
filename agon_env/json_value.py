"""The type of a value read from or written to a JSON or YAML file: one alias, defined once.

Reports (``eval.json``, ``results.json``), metrics records (``metrics.jsonl``), configs read from
YAML and the run folder's records hold such values; a function that takes or returns one says
so with :data:`JSONValue` (or :data:`JSONRecord` for an object) instead of ``Any``, so ``Any``
in an annotation means a value that is truly arbitrary. It imports nothing, so every layer,
the floor included, may use it.
"""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = str | int | float | bool | list["JSONValue"] | dict[str, "JSONValue"] | None
"""A JSON (or YAML-loaded) value: a scalar, a list of values, an object of values."""
JSONRecord: TypeAlias = dict[str, JSONValue]
"""A JSON object: one record of a report or a metrics file."""
