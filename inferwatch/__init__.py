"""inferwatch: observability and SLOs for self-hosted LLM inference.

The concerns live in their own packages (`inferwatch.mappings`,
`inferwatch.exporters`, ...); this package holds the CLI and what they share.
"""

from inferwatch.errors import ExpositionError, InferwatchError, Problem, SpecError

__all__ = ["ExpositionError", "InferwatchError", "Problem", "SpecError", "__version__"]

__version__ = "0.1.0"
