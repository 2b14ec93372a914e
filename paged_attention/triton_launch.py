"""What one ``triton_decode`` call decides before a kernel runs: the launch.

:func:`plan_triton_decode` checks the arguments, resolves the shared prefixes,
picks (or checks) the plans of both passes and cuts the batch into their programs,
and returns all of it as a :class:`TritonLaunch`.
:func:`~paged_attention.triton_decode.prepare_triton_decode` launches it; the
explorer's kernel trace draws it, so the trace shows the plan the kernel runs and
refuses what the kernel refuses. :func:`plan_decode` is the same from validated
sizes, for a caller with no tensors (the explorer plans configurations it does not
allocate). Plain Python on host tensors: nothing here launches a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .launch_plan import LaunchPlan, check_plan_fits, plan_launch
from .shared_prefix import PrefixGroup, members_per_tile, own_shape, plan_prefix, resolve_shared_prefixes
from .validation import DecodeShape, check_decode_args
from .work_list import PrefixWork, WorkList, build_work_list, prefix_work


@dataclass(frozen=True)
class TritonLaunch:
    """Everything a decode call decides on the host.

    Attributes
    ----------
    shape : DecodeShape
        The validated sizes, with host copies of the block table and lengths.
    groups : tuple of PrefixGroup
        The shared-prefix groups the prefix pass reads, each with shared blocks;
        empty without a prefix pass.
    plan : LaunchPlan
        The decode kernel's plan (made for the contexts past the shared prefixes).
    work : WorkList
        The decode kernel's programs.
    prefix_plan : LaunchPlan or None
        The prefix pass's plan; None without groups.
    prefix : PrefixWork or None
        The prefix pass's programs; None without groups.
    """

    shape: DecodeShape
    groups: tuple[PrefixGroup, ...]
    plan: LaunchPlan
    work: WorkList
    prefix_plan: LaunchPlan | None = None
    prefix: PrefixWork | None = None

    @property
    def members_per_tile(self) -> int:
        """Sequences whose query rows share one prefix-pass tile; 0 without a pass."""
        if self.prefix_plan is None:
            return 0
        return members_per_tile(self.prefix_plan.query_rows, self.shape.query_group_size)


def plan_work(
    plan: LaunchPlan,
    context_lens: torch.Tensor,
    *,
    groups: Sequence[PrefixGroup] = (),
    prefix_plan: LaunchPlan | None = None,
    query_group_size: int = 1,
    window_blocks: Sequence[int] | None = None,
) -> tuple[PrefixWork | None, WorkList]:
    """The programs of both passes under their plans.

    Parameters
    ----------
    plan : LaunchPlan
        The decode kernel's plan.
    context_lens : Tensor
        ``[batch_size]`` integer lengths on the CPU.
    groups : sequence of PrefixGroup
        The groups the prefix pass reads (none: no prefix pass).
    prefix_plan : LaunchPlan, optional
        The prefix pass's plan (with ``groups``).
    query_group_size : int
        Query heads per KV head (they set how many sequences share a prefix tile).
    window_blocks : sequence of int, optional
        Per sequence, the first block its window needs
        (:attr:`~paged_attention.validation.DecodeShape.first_blocks`); None: no
        window, every sequence from block 0.

    Returns
    -------
    (PrefixWork or None, WorkList)
        The prefix pass's programs (:func:`~paged_attention.work_list.prefix_work`),
        None without ``groups`` and ``prefix_plan``; then the decode kernel's
        (:func:`~paged_attention.work_list.build_work_list`), which start past
        the shared blocks and at each window's first block, and leave the prefix
        partials the first slots.
    """
    prefix = None
    window_blocks = None if window_blocks is None else [int(b) for b in window_blocks]
    if groups and prefix_plan is not None:
        per_tile = members_per_tile(prefix_plan.query_rows, query_group_size)
        prefix = prefix_work(groups, len(context_lens), per_tile, prefix_plan.blocks_per_split,
                             prefix_plan.blocks_per_tile, window_blocks)
    work = build_work_list(plan, context_lens, first_blocks=prefix.first_blocks if prefix else window_blocks,
                           prefix_slots=prefix.prefix_slots if prefix else None)
    return prefix, work


def plan_decode(
    shape: DecodeShape,
    device: torch.device,
    dtype: torch.dtype,
    *,
    groups: tuple[PrefixGroup, ...] = (),
    plan: LaunchPlan | None = None,
    prefix_plan: LaunchPlan | None = None,
    **plan_overrides: int,
) -> TritonLaunch:
    """:func:`plan_triton_decode` from validated sizes and resolved groups.

    Parameters
    ----------
    shape : DecodeShape
        From :func:`~paged_attention.validation.check_decode_args` (or built from
        a configuration, with host copies of the table and lengths).
    device, dtype
        Where the kernels run and the query's dtype, as for
        :func:`~paged_attention.launch_plan.plan_launch`.
    groups : tuple of PrefixGroup
        From :func:`~paged_attention.shared_prefix.resolve_shared_prefixes`.
    plan, prefix_plan, **plan_overrides
        As for :func:`plan_triton_decode`.

    Returns
    -------
    TritonLaunch

    Raises
    ------
    ValueError
        As :func:`plan_triton_decode`, for the plans.
    """
    own = own_shape(shape, groups)
    if plan is None:
        # For what the prefix pass and the window leave: each sequence's own blocks.
        plan = plan_launch(own, device, dtype, **plan_overrides)
    elif plan_overrides:
        raise ValueError(f"pass either plan or overrides of it, not both (got {', '.join(plan_overrides)})")
    else:
        check_plan_fits(plan, own)
    if groups:
        if prefix_plan is None:
            prefix_plan = plan_prefix(shape, groups, device, dtype)
        elif prefix_plan.query_rows < 16 or prefix_plan.block_size != shape.block_size:
            raise ValueError("prefix_plan must come from plan_prefix for these inputs (query_rows >= 16, the "
                             f"cache's block_size {shape.block_size}); got {prefix_plan}")
    elif prefix_plan is not None:
        raise ValueError("prefix_plan needs shared_prefixes")
    prefix, work = plan_work(plan, shape.context_lens, groups=groups, prefix_plan=prefix_plan,
                             query_group_size=shape.query_group_size,
                             window_blocks=None if shape.window is None else shape.first_blocks.tolist())
    return TritonLaunch(shape=shape, groups=groups, plan=plan, work=work, prefix_plan=prefix_plan, prefix=prefix)


def plan_triton_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    soft_cap: float | None = None,
    query_lens: torch.Tensor | None = None,
    plan: LaunchPlan | None = None,
    shared_prefixes: str | Sequence[PrefixGroup] | None = None,
    prefix_plan: LaunchPlan | None = None,
    allow_float64: bool = False,
    **plan_overrides: int,
) -> TritonLaunch:
    """Check the arguments of a ``triton_decode`` call and plan everything it launches.

    Parameters
    ----------
    query, k_cache, v_cache, block_tables, context_lens, scale, k_scale, v_scale, window, sinks, soft_cap, query_lens
        As for :func:`~paged_attention.triton_decode.triton_decode`.
    plan : LaunchPlan, optional
        A fixed decode plan; by default
        :func:`~paged_attention.launch_plan.plan_launch` picks one for the lengths
        past the shared prefixes and from each window's first block
        (:func:`~paged_attention.shared_prefix.own_shape`), so a window's split
        count and programs follow ``min(window, context_len)``.
    shared_prefixes : "detect" or sequence of PrefixGroup, optional
        The prefix pass's groups (:func:`~paged_attention.shared_prefix.resolve_shared_prefixes`);
        None: no prefix pass.
    prefix_plan : LaunchPlan, optional
        The prefix pass's plan; by default
        :func:`~paged_attention.shared_prefix.plan_prefix` picks it.
    allow_float64 : bool
        Accept float64 inputs, which no kernel runs (the explorer's kernel trace
        computes in float64); their plans are made for 8-byte elements.
    **plan_overrides
        ``num_splits``, ``block_n``, ``num_warps``, ``num_stages``, ``balanced``,
        ``max_programs`` for :func:`~paged_attention.launch_plan.plan_launch`
        (not with ``plan``).

    Returns
    -------
    TritonLaunch

    Raises
    ------
    ValueError
        On invalid decode arguments (:func:`~paged_attention.validation.check_decode_args`),
        shared prefixes that do not share, both ``plan`` and overrides, an override
        the kernel cannot take, a ``plan`` not made for these inputs (another
        block size, or splits that do not cover the longest context past the
        prefixes), a ``prefix_plan`` not made by ``plan_prefix`` for them
        (``query_rows`` under 16, another block size), or a ``prefix_plan``
        without shared prefixes.
    TypeError
        On an override :func:`~paged_attention.launch_plan.plan_launch` does not know.
    """
    shape = check_decode_args(
        query, k_cache, v_cache, block_tables, context_lens, scale, k_scale=k_scale, v_scale=v_scale,
        window=window, sinks=sinks, soft_cap=soft_cap, query_lens=query_lens, allow_float64=allow_float64,
    )
    groups = resolve_shared_prefixes(shared_prefixes, shape)
    return plan_decode(shape, query.device, query.dtype, groups=groups, plan=plan, prefix_plan=prefix_plan,
                       **plan_overrides)
