"""Gradient compression with Horovod's Compressor interface, written once for
every frontend: compress(tensor) -> (tensor, context) and
decompress(tensor, context) -> tensor. A frontend supplies how to test for a
floating-point tensor and how to cast; the policy lives here."""


class NoneCompressor:
    """Sends tensors unchanged."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor


def _cast_compressor(name, wire_dtype, is_floating, cast, doc):
    def compress(tensor):
        if not is_floating(tensor) or tensor.dtype == wire_dtype:
            return tensor, None
        return cast(tensor, wire_dtype), tensor.dtype

    def decompress(tensor, context):
        return tensor if context is None else cast(tensor, context)

    return type(
        name,
        (),
        {
            "__doc__": doc,
            "wire_dtype": wire_dtype,
            "compress": staticmethod(compress),
            "decompress": staticmethod(decompress),
        },
    )


def make_compression(is_floating, cast, float16, bfloat16):
    """The `Compression` namespace (none, fp16, bf16) for one framework's tensors."""

    class Compression:
        none = NoneCompressor
        fp16 = _cast_compressor(
            "FP16Compressor",
            float16,
            is_floating,
            cast,
            "Halves the bytes of float32 gradients; float16's narrow range can overflow very "
            "large gradients or flush tiny ones to zero.",
        )
        bf16 = _cast_compressor(
            "BF16Compressor",
            bfloat16,
            is_floating,
            cast,
            "Halves the bytes of float32 gradients, keeping float32's range with fewer mantissa bits.",
        )

    return Compression
