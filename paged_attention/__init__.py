"""Paged-attention decode: a float64 reference and three implementations.

Importing this package on a machine without a CUDA GPU sets ``TRITON_INTERPRET=1``
(unless it is already set) so the Triton kernel runs in Triton's interpreter on
CPU tensors. See :func:`execution_mode`.
"""

from .runtime import HAS_CUDA, default_device, device_description, execution_mode  # first: sets TRITON_INTERPRET

from .inputs import DecodeInputs, assign_blocks, build_decode_inputs, unquantized_cache
from .poison import LOUD_VALUE
from .config import BLOCK_LAYOUTS, DTYPES, KV_DTYPES, KV_SCALES, TOLERANCES, DecodeConfig, ragged_lengths, tolerance
from .implementations import GRAPH_CAPTURABLE, IMPLEMENTATIONS, LABELS, VARIANTS, get_implementation, prepare
from .launcher import PreparedCall
from .naive import naive_decode
from .reference import reference_decode
from .launch_plan import plan_launch
from .tiling import cdiv, next_pow2
from .shared_prefix import PrefixGroup, find_shared_prefixes
from .triton_decode import prepare_triton_decode, triton_decode
from .triton_decode_simple import triton_decode_simple
from .validation import DecodeShape, check_decode_args
from .vectorized import vectorized_decode

__all__ = [
    "BLOCK_LAYOUTS", "DTYPES", "GRAPH_CAPTURABLE", "HAS_CUDA", "IMPLEMENTATIONS", "KV_DTYPES", "KV_SCALES", "LABELS",
    "LOUD_VALUE", "TOLERANCES", "VARIANTS", "DecodeConfig", "DecodeInputs", "DecodeShape", "PreparedCall",
    "assign_blocks", "build_decode_inputs", "cdiv", "check_decode_args", "default_device",
    "device_description", "execution_mode", "get_implementation", "naive_decode", "next_pow2", "plan_launch", "PrefixGroup", "find_shared_prefixes",
    "prepare", "prepare_triton_decode", "ragged_lengths", "reference_decode", "tolerance",
    "triton_decode", "triton_decode_simple", "unquantized_cache", "vectorized_decode",
]
