"""Gradient compression choices for lockstep.keras, independent of the backend.

Each choice resolves to the matching compressor of the active backend's frontend
(lockstep.tensorflow or lockstep.torch). A frontend's own compressor object (with
compress/decompress for that backend's tensors) is accepted as well.
"""


class BackendCompressor:
    """A named compressor, resolved against the active backend when training starts."""

    def __init__(self, key):
        self.key = key

    def resolve(self, frontend_compression):
        return getattr(frontend_compression, self.key)

    def __repr__(self):
        return f"Compression.{self.key}"


class Compression:
    none = BackendCompressor("none")
    fp16 = BackendCompressor("fp16")
    bf16 = BackendCompressor("bf16")


def resolve(compression, frontend_compression):
    """The backend compressor for `compression` (a Compression.* choice or a compressor)."""
    if isinstance(compression, BackendCompressor):
        return compression.resolve(frontend_compression)
    if not (hasattr(compression, "compress") and hasattr(compression, "decompress")):
        raise TypeError(f"compression must be a lockstep Compression choice, got {compression!r}")
    return compression
