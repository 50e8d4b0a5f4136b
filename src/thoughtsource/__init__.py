"""thoughtsource: chain-of-thought datasets, generation, evaluation, annotation and STaR.

Importing this package is cheap: heavy libraries (torch, transformers, datasets) are imported only
by the functions that need them.
"""

from __future__ import annotations

from .collection import Collection
from .errors import DataError, ThoughtSourceError
from .schema import Annotation, Answer, GeneratedCot, Sample

__version__ = "0.1.0"
__all__ = ["Annotation", "Answer", "Collection", "DataError", "GeneratedCot", "Sample", "ThoughtSourceError", "__version__"]
