"""The block manager: allocation on block boundaries, freeing, errors and its invariants;
sharing (reference counts, fork, prefix caching, copy-on-write) by example and as
properties of random operation sequences, each property checked to fail on a manager
broken on purpose."""

import traceback

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from explorer.serving.block_manager import BlockManager, blocks_for


def test_block_manager_allocates_on_block_boundaries_and_frees_everything():
    bm = BlockManager(num_blocks=6, block_size=4)
    assert bm.allocate(seq_id=7, num_tokens=5) == [0, 1]  # ceil(5 / 4) blocks at once
    bm.check_invariants()
    assert [bm.append_token(7) for _ in range(3)] == [None, None, None]  # positions 5, 6, 7
    assert bm.append_token(7) == 2  # position 8: 8 % 4 == 0, the last block is full
    assert bm.context_lens[7] == 9 and bm.block_tables[7] == [0, 1, 2]
    bm.allocate(8, 4)
    bm.check_invariants()
    bm.free(7)
    bm.check_invariants()
    # Freed blocks go to the back of the free list: the next allocation skips them.
    assert list(bm.free_blocks) == [4, 5, 0, 1, 2]
    assert bm.pool_owner().tolist() == [-1, -1, -1, 8, -1, -1]
    assert bm.block_table([8]).tolist() == [[3]]


def test_block_manager_errors():
    bm = BlockManager(2, 4)
    bm.allocate(0, 8)
    with pytest.raises(ValueError, match="already holds"):
        bm.allocate(0, 1)
    with pytest.raises(RuntimeError, match="free"):
        bm.allocate(1, 1)
    with pytest.raises(RuntimeError, match="free list is empty"):
        bm.append_token(0)
    with pytest.raises(ValueError, match="num_blocks must be a positive integer"):
        BlockManager(0, 4)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        BlockManager(4, 0)


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda bm: bm.block_tables[0].append(bm.free_blocks[0]), "conservation"),
        (lambda bm: bm.free_blocks.append(bm.block_tables[0][0]) or bm.free_blocks.popleft(), "listed twice"),
        (lambda bm: bm._owner.__setitem__(bm.free_blocks[0], 0), "pool owner"),
        (lambda bm: bm.context_lens.__setitem__(0, 9), r"expected ceil\(9/4\)"),
        (lambda bm: bm.block_tables[0].__setitem__(1, 99), "outside the pool"),
    ],
)
def test_check_invariants_names_the_broken_rule(corrupt, message):
    bm = BlockManager(8, 4)
    bm.allocate(0, 6)
    bm.allocate(1, 3)
    bm.check_invariants()
    corrupt(bm)
    with pytest.raises(AssertionError, match=message):
        bm.check_invariants()


# -- sharing, by example ---------------------------------------------------------------


def test_fork_shares_every_block_and_copy_on_write_splits_the_last():
    bm = BlockManager(8, 4)
    bm.allocate(0, tokens=[1, 2, 3, 4, 5, 6])  # blocks 0 (full) and 1 (2 of 4 slots)
    assert bm.fork(0, 1) == [0, 1]
    assert bm.ref_counts[:2].tolist() == [2, 2] and bm.num_used == 2
    bm.check_invariants()
    # Sequence 1 writes into the shared partly filled block: it gets a copy (block 2).
    assert bm.needs_block(1)
    assert bm.append_token(1, 70) == 2
    assert bm.cow_copies == 1 and bm.block_tables[1] == [0, 2] and bm.ref_counts[:3].tolist() == [2, 1, 1]
    # Block 1 is now sequence 0's alone: its next token needs no block and no copy.
    assert not bm.needs_block(0) and bm.append_token(0, 60) is None
    assert bm.sequence_tokens(0) == [1, 2, 3, 4, 5, 6, 60]
    assert bm.sequence_tokens(1) == [1, 2, 3, 4, 5, 6, 70]
    bm.check_invariants()
    bm.free(0)  # block 0 stays (sequence 1 holds it), block 1 is free
    assert bm.ref_counts[:3].tolist() == [1, 0, 1] and bm.pool_owner().tolist()[:3] == [1, -1, 1]
    bm.check_invariants()


def test_appending_past_a_shared_full_block_copies_nothing():
    bm = BlockManager(6, 2)
    bm.allocate(0, tokens=[1, 2, 3, 4])
    bm.fork(0, 1)
    assert bm.append_token(1, 5) == 2 and bm.cow_copies == 0
    assert bm.block_tables[1] == [0, 1, 2] and bm.ref_counts[:3].tolist() == [2, 2, 1]


def test_prefix_cache_shares_full_blocks_of_a_common_prompt():
    bm = BlockManager(16, 4)
    system = [9, 8, 7, 6, 5, 4, 3, 2]  # two full blocks
    assert bm.allocate(0, tokens=system + [1, 1]) == [0, 1, 2]
    # Same two full blocks, then a different tail: only the tail is new.
    assert bm.allocate(1, tokens=system + [2, 2, 2]) == [0, 1, 3]
    assert (bm.prefix_queries, bm.prefix_hits) == (4, 2)
    # The same tokens at another position are a different prefix: no hit.
    assert bm.allocate(2, tokens=[5, 4, 3, 2, 9, 8, 7, 6]) == [4, 5]
    # A partly filled last block is never shared by the prefix cache.
    assert bm.allocate(3, tokens=[9, 8, 7]) == [6]
    assert bm.ref_counts[:3].tolist() == [2, 2, 1] and bm.num_used == 7
    assert bm.blocks_needed(tokens=system + [0]) == 1
    bm.check_invariants()


def test_a_freed_prefix_stays_cached_until_its_block_is_reused():
    bm = BlockManager(4, 2)
    bm.allocate(0, tokens=[1, 2, 3, 4, 5])  # blocks 0, 1 cached, 2 partly filled
    bm.free(0)  # tail first onto the free list: 3, 2, 1, 0
    assert list(bm.free_blocks) == [3, 2, 1, 0] and bm.cached_blocks() == [0, 1]
    assert bm.blocks_needed(tokens=[1, 2, 3, 4]) == 2  # cached, but on the free list
    assert bm.allocate(1, tokens=[1, 2, 3, 4]) == [0, 1] and bm.prefix_hits == 2
    bm.free(1)
    bm.allocate(2, 4)  # plain blocks from the head: 3, 2, then 1 (evicting the prefix's tail)
    assert bm.block_tables[2] == [3, 2] and bm.cached_blocks() == [0, 1]
    bm.allocate(3, 2)
    assert bm.block_tables[3] == [1] and bm.cached_blocks() == [0]
    bm.free(3)
    # The head of the prefix is still cached: one hit, and the tail is computed again.
    assert bm.allocate(4, tokens=[1, 2, 3, 4]) == [0, 1]
    assert bm.prefix_hits == 3 and bm.cached_blocks() == [0, 1]
    bm.check_invariants()


def test_sharing_errors():
    bm = BlockManager(4, 2)
    bm.allocate(0, tokens=[1, 2, 3])
    bm.allocate(5, 3)
    with pytest.raises(ValueError, match="cannot fork sequence 7: it is not live"):
        bm.fork(7, 8)
    with pytest.raises(ValueError, match="cannot fork into sequence 5: it already holds blocks"):
        bm.fork(0, 5)
    with pytest.raises(ValueError, match="append_token needs its token id"):
        bm.append_token(0)
    with pytest.raises(ValueError, match="takes no token id"):
        bm.append_token(5, 3)
    with pytest.raises(ValueError, match="token must be an integer >= 0"):
        bm.append_token(0, -1)
    with pytest.raises(ValueError, match="cannot append to sequence 9: it is not live"):
        bm.append_token(9, 1)
    with pytest.raises(ValueError, match="cannot free sequence 9: it is not live"):
        bm.free(9)
    with pytest.raises(ValueError, match="num_tokens is 2 but 3 tokens were given"):
        bm.allocate(1, 2, tokens=[1, 2, 3])
    with pytest.raises(ValueError, match="len\\(tokens\\) must be a positive integer"):
        bm.allocate(1, tokens=[])
    with pytest.raises(ValueError, match="a token id must be an integer >= 0"):
        bm.allocate(1, tokens=[1, "a"])
    with pytest.raises(ValueError, match="num_tokens or tokens"):
        bm.allocate(1)
    with pytest.raises(ValueError, match="allocated without tokens"):
        bm.sequence_tokens(5)
    bm.check_invariants()  # the refused calls changed nothing


def test_check_invariants_names_a_wrong_reference_count():
    bm = BlockManager(4, 2)
    bm.allocate(0, tokens=[1, 2, 3])
    bm.fork(0, 1)
    bm.ref_counts[1] = 1
    with pytest.raises(AssertionError, match="reference count of block 1 is 1, but 2 table entries"):
        bm.check_invariants()


# -- sharing, as properties of random operation sequences ---------------------------------

TOKENS = st.integers(0, 2)  # a small vocabulary, so prompts and blocks coincide often

#: The properties, each an invariant of the machine below (by name); a run can check a subset.
INVARIANTS = {
    "ref_counts": "ref_count_is_the_number_of_table_entries",
    "free_list": "free_list_holds_exactly_the_unreferenced_blocks",
    "contents": "every_sequence_reads_exactly_what_was_written_to_it",
    "in_use": "sharing_uses_no_more_blocks_than_private_copies",
    "prefix_hits": "a_prompt_shares_the_full_blocks_a_live_sequence_filled_with_its_prefix",
}
PROPERTIES = tuple(INVARIANTS)


def sharing_machine(manager=BlockManager, properties=PROPERTIES):
    """A hypothesis state machine that adds (with prompts sharing prefixes, or
    without tokens), forks, appends to and frees sequences of ``manager`` and checks
    ``properties`` after every step, from outside the manager (its own
    ``check_invariants`` is not trusted here)."""

    class Sharing(RuleBasedStateMachine):
        @initialize(num_blocks=st.integers(4, 24), block_size=st.integers(1, 4),
                    prompts=st.lists(st.lists(TOKENS, min_size=1, max_size=12), min_size=1, max_size=3))
        def setup(self, num_blocks, block_size, prompts):
            self.bm = manager(num_blocks, block_size)
            self.prompts = prompts  # the common prompts new sequences start with
            self.tokens: dict[int, list[int]] = {}  # what was written to each sequence
            self.plain: dict[int, int] = {}  # sequences without tokens -> length
            self.prompt_full: dict[int, int] = {}  # full blocks each token sequence's prompt filled
            self.hit_shortfall = 0
            self.next_id = 0

        def live(self):
            return sorted([*self.tokens, *self.plain])

        def _prompt_hits(self, prompt):
            """Full blocks of ``prompt`` that a live sequence filled with the same
            prefix: a prefix cache must find at least these."""
            bs = self.bm.block_size
            best = 0
            for seq, toks in self.tokens.items():
                k = 0
                while (k + 1) * bs <= min(len(prompt), self.prompt_full[seq] * bs) and \
                        prompt[k * bs:(k + 1) * bs] == toks[k * bs:(k + 1) * bs]:
                    k += 1
                best = max(best, k)
            return best

        @rule(which=st.integers(0, 2), cut=st.integers(0, 12), suffix=st.lists(TOKENS, max_size=6))
        def add(self, which, cut, suffix):
            prompt = self.prompts[which % len(self.prompts)][:cut] + suffix
            if not prompt:
                return
            seq, self.next_id = self.next_id, self.next_id + 1
            must_hit = self._prompt_hits(prompt)
            hits_before = self.bm.prefix_hits
            try:
                table = self.bm.allocate(seq, tokens=prompt)
            except RuntimeError:
                # Refused for want of blocks: only right if even the blocks a prefix
                # cache must share would not have made it fit (checked by the
                # prefix-hit property, so a manager without one fails there).
                if self.bm.num_free >= blocks_for(len(prompt), self.bm.block_size) - must_hit:
                    self.hit_shortfall = max(must_hit, 1)
                return
            assert len(table) == blocks_for(len(prompt), self.bm.block_size)
            self.tokens[seq] = list(prompt)
            self.prompt_full[seq] = len(prompt) // self.bm.block_size
            self.hit_shortfall = must_hit - (self.bm.prefix_hits - hits_before)

        @rule(n=st.integers(1, 9))
        def add_plain(self, n):
            seq, self.next_id = self.next_id, self.next_id + 1
            if blocks_for(n, self.bm.block_size) > self.bm.num_free:
                return
            self.bm.allocate(seq, n)
            self.plain[seq] = n

        @precondition(lambda self: self.tokens or self.plain)
        @rule(pick=st.integers(0, 10 ** 6))
        def fork(self, pick):
            live = self.live()
            parent = live[pick % len(live)]
            child, self.next_id = self.next_id, self.next_id + 1
            self.bm.fork(parent, child)
            if parent in self.tokens:
                self.tokens[child] = list(self.tokens[parent])
                self.prompt_full[child] = self.prompt_full[parent]
            else:
                self.plain[child] = self.plain[parent]

        @precondition(lambda self: self.tokens or self.plain)
        @rule(pick=st.integers(0, 10 ** 6), token=TOKENS)
        def append(self, pick, token):
            live = self.live()
            seq = live[pick % len(live)]
            with_tokens = seq in self.tokens
            try:
                self.bm.append_token(seq, token if with_tokens else None)
            except RuntimeError:
                assert not self.bm.free_blocks, "an append was refused with blocks free"
                return
            if with_tokens:
                self.tokens[seq].append(token)
            else:
                self.plain[seq] += 1

        @precondition(lambda self: self.tokens or self.plain)
        @rule(pick=st.integers(0, 10 ** 6))
        def free(self, pick):
            live = self.live()
            seq = live[pick % len(live)]
            self.bm.free(seq)
            self.tokens.pop(seq, None)
            self.plain.pop(seq, None)

        def _entries(self):
            counts = [0] * self.bm.num_blocks
            for table in self.bm.block_tables.values():
                for b in table:
                    counts[b] += 1
            return counts

        if "ref_counts" in properties:
            @invariant()
            def ref_count_is_the_number_of_table_entries(self):
                assert self.bm.ref_counts.tolist() == self._entries()

        if "free_list" in properties:
            @invariant()
            def free_list_holds_exactly_the_unreferenced_blocks(self):
                counts = self._entries()
                free = list(self.bm.free_blocks)
                assert len(free) == len(set(free))
                assert not [b for b in free if counts[b]], "a referenced block is on the free list"
                assert sorted(free) == [b for b in range(self.bm.num_blocks) if not counts[b]]

        if "contents" in properties:
            @invariant()
            def every_sequence_reads_exactly_what_was_written_to_it(self):
                assert set(self.bm.block_tables) == set(self.live())
                for seq, toks in self.tokens.items():
                    assert self.bm.sequence_tokens(seq) == toks, f"sequence {seq}"
                for seq, n in self.plain.items():
                    assert self.bm.context_lens[seq] == n

        if "in_use" in properties:
            @invariant()
            def sharing_uses_no_more_blocks_than_private_copies(self):
                private = sum(blocks_for(n, self.bm.block_size) for n in self.bm.context_lens.values())
                assert self.bm.num_used <= private
                assert all(len(t) == blocks_for(self.bm.context_lens[s], self.bm.block_size)
                           for s, t in self.bm.block_tables.items())

        if "prefix_hits" in properties:
            @invariant()
            def a_prompt_shares_the_full_blocks_a_live_sequence_filled_with_its_prefix(self):
                assert self.hit_shortfall <= 0

    return Sharing


def _run(machine, max_examples, shrink=True):
    phases = list(Phase) if shrink else [Phase.explicit, Phase.generate]
    run_state_machine_as_test(machine, settings=settings(
        max_examples=max_examples, stateful_step_count=40, deadline=None, database=None, phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


def test_sharing_properties_hold_over_random_operations():
    _run(sharing_machine(), max_examples=150)


def test_sharing_properties_hold_with_the_managers_own_checks():
    class Checked(BlockManager):
        def _checked(self, name, *args, **kwargs):
            out = getattr(super(), name)(*args, **kwargs)
            self.check_invariants()
            return out

        def allocate(self, *a, **k): return self._checked("allocate", *a, **k)
        def fork(self, *a, **k): return self._checked("fork", *a, **k)
        def append_token(self, *a, **k): return self._checked("append_token", *a, **k)
        def free(self, *a, **k): return self._checked("free", *a, **k)

    _run(sharing_machine(Checked), max_examples=60)


# Managers broken on purpose, one bug each, and the property that must catch it.
class _SkipsSharedDecrement(BlockManager):
    def _release(self, seq_id, block):
        if self.ref_counts[block] > 1:
            return  # forgets the reference it drops
        super()._release(seq_id, block)


class _FreesWhileShared(BlockManager):
    def _release(self, seq_id, block):
        super()._release(seq_id, block)
        if self.ref_counts[block] > 0 and block not in self.free_blocks:
            self.free_blocks.append(block)


class _WritesIntoSharedBlocks(BlockManager):
    def append_token(self, seq_id, token=None):
        table = self.block_tables.get(seq_id)
        if not table or self.context_lens[seq_id] % self.block_size == 0:
            return super().append_token(seq_id, token)
        last, refs = table[-1], self.ref_counts[table[-1]]
        self.ref_counts[last] = 1  # no copy-on-write: the write lands in the shared block
        try:
            return super().append_token(seq_id, token)
        finally:
            self.ref_counts[last] = refs


class _CopiesNothingOnWrite(BlockManager):
    def append_token(self, seq_id, token=None):
        before = self.cow_copies
        out = super().append_token(seq_id, token)
        if self.cow_copies > before and self.slot_tokens is not None:
            n = self.context_lens[seq_id] - 1
            self.slot_tokens[out, : n % self.block_size] = -1  # the copy forgot the filled slots
        return out


class _LeaksFreedBlocks(BlockManager):
    def _release(self, seq_id, block):
        super()._release(seq_id, block)
        if self.ref_counts[block] == 0:
            self.free_blocks.pop()  # never comes back


class _NoPrefixCache(BlockManager):
    def _prefix_hits(self, tokens):
        return []


@pytest.mark.parametrize(
    "manager, prop",
    [
        (_SkipsSharedDecrement, "ref_counts"),
        (_FreesWhileShared, "free_list"),
        (_WritesIntoSharedBlocks, "contents"),
        (_CopiesNothingOnWrite, "contents"),
        (_LeaksFreedBlocks, "in_use"),
        (_NoPrefixCache, "prefix_hits"),
    ],
)
def test_each_sharing_property_catches_a_broken_manager(manager, prop):
    with pytest.raises(AssertionError) as failure:
        _run(sharing_machine(manager, (prop,)), max_examples=300, shrink=False)
    # Caught by the property itself, not by some other check on the way.
    assert traceback.extract_tb(failure.value.__traceback__)[-1].name == INVARIANTS[prop]
