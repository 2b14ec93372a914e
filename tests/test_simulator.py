"""The serving simulator: traffic, admission and stalls, invariants every step, determinism, snapshots."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.serving.simulator import ServingSimulator
from explorer.serving.traffic import LengthDist, ServingConfig
from explorer.serving.snapshot import METRIC_COLUMNS, Snapshot, metrics_frame
from explorer.serving.tradeoff import DEFAULT_BLOCK_SIZES, block_size_tradeoff
from paged_attention import default_device, reference_decode, tolerance, triton_decode


def small_config(**changes):
    base = dict(
        num_blocks=12, block_size=4, max_batch_size=6, arrival_rate=1.0,
        prompt_len=LengthDist("uniform", 1, 20), output_len=LengthDist("uniform", 1, 20), seed=0,
    )
    return ServingConfig(**{**base, **changes})


def quiet_config(**changes):
    """No random arrivals: requests come from submit()."""
    one = LengthDist("uniform", 1, 1)
    return ServingConfig(**{**dict(arrival_rate=0.0, prompt_len=one, output_len=one), **changes})


def assert_snapshot_matches(sim: ServingSimulator, snap: Snapshot) -> None:
    """The snapshot is a faithful, self-consistent picture of the simulator's state."""
    bs = sim.config.block_size
    ids = [r.seq_id for r in sim.running]
    assert snap.seq_ids.tolist() == ids
    assert snap.block_tables.dtype == torch.int32 and snap.context_lens.dtype == torch.int32
    assert snap.block_tables.shape[0] == len(ids) and snap.block_tables.shape[1] >= 1
    assert snap.pool_owner.shape == (sim.config.num_blocks,)
    for row, seq_id in enumerate(ids):
        n = int(snap.context_lens[row])
        held = math.ceil(n / bs)
        assert n == sim.blocks.context_lens[seq_id]
        assert snap.block_tables[row, :held].tolist() == sim.blocks.block_tables[seq_id]
        assert (snap.block_tables[row, held:] == -1).all()
        assert (snap.pool_owner[snap.block_tables[row, :held].long()] == seq_id).all()
    assert snap.blocks_in_use == sim.blocks.num_used == int((snap.block_tables >= 0).sum())
    assert snap.free_blocks == sim.blocks.num_free
    assert snap.waiting == len(sim.waiting) and snap.finished == len(sim.finished)
    assert 0 <= snap.wasted_slots <= len(ids) * (bs - 1)
    assert snap.wasted_slots == snap.blocks_in_use * bs - snap.tokens_stored


# -- invariants ------------------------------------------------------------------------

def test_simulator_invariants_catch_a_desynchronised_context_len():
    sim = ServingSimulator(small_config())
    sim.run(5)
    sim.check_invariants()
    sim.running[0].generated -= 1
    with pytest.raises(AssertionError, match="context_lens says"):
        sim.check_invariants()


# -- configuration -------------------------------------------------------------

@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(num_blocks=0), "num_blocks must be a positive integer"),
        (dict(block_size=2.5), "block_size must be a positive integer"),
        (dict(max_batch_size=0), "max_batch_size must be a positive integer"),
        (dict(arrival_rate=-1.0), "arrival_rate must be a finite number >= 0"),
        (dict(arrival_rate=float("nan")), "arrival_rate"),
        (dict(seed=-1), "seed must be an integer >= 0"),
        (dict(prompt_len=LengthDist("zipf", 1, 4)), "prompt_len kind must be one of"),
        (dict(output_len=LengthDist("uniform", 0, 4)), "output_len low must be a positive integer"),
        (dict(output_len=LengthDist("uniform", 5, 4)), "output_len needs low <= high"),
        (dict(prompt_len=LengthDist("long-tail", 1, 4, sigma=-1.0)), "prompt_len sigma"),
        (dict(num_blocks=9), "the pool must hold the longest request"),
    ],
)
def test_invalid_config_raises_value_error_naming_the_rule(changes, message):
    with pytest.raises(ValueError, match=message):
        ServingSimulator(small_config(**changes))


@pytest.mark.parametrize("kind", ["uniform", "long-tail"])
def test_length_distributions_stay_in_range_and_are_seeded(kind):
    dist = LengthDist(kind, 16, 2048)
    a = dist.sample(np.random.default_rng(3), 5000)
    b = dist.sample(np.random.default_rng(3), 5000)
    assert a.dtype == np.int64 and (a == b).all()
    assert a.min() >= 16 and a.max() <= 2048
    if kind == "long-tail":
        # Most requests short, a few long: the mean sits well above the median.
        assert np.mean(a) > 1.3 * np.median(a)
        assert np.median(a) == pytest.approx(math.sqrt(16 * 2048), rel=0.1)


# -- simulator -------------------------------------------------------------------

def test_new_request_prefills_then_decodes_in_the_same_step():
    sim = ServingSimulator(quiet_config(num_blocks=8, block_size=4))
    req = sim.submit(prompt_len=4, output_len=2)
    snap = sim.step()
    assert snap.admitted == 1 and snap.decoded == 1
    # Prefill took one block for 4 tokens; token 4 started a second block.
    assert snap.context_lens.tolist() == [5] and snap.blocks_in_use == 2 and snap.wasted_slots == 3
    snap = sim.step()
    assert snap.finished == 1 and snap.num_running == 0 and snap.blocks_in_use == 0
    assert req.finished_step == 1 and req.admitted_step == 0
    sim.check_invariants()


def test_waiting_queue_is_strict_fifo():
    sim = ServingSimulator(quiet_config(num_blocks=10, block_size=4, max_batch_size=4))
    big, medium, tiny = sim.submit(30, 5), sim.submit(20, 5), sim.submit(1, 1)
    snap = sim.step()
    # big holds 8 blocks (9 at the end); medium's 5 prompt blocks do not fit, and the
    # tiny request, which would fit, does not overtake it.
    assert snap.seq_ids.tolist() == [big.seq_id]
    assert snap.waiting == 2 and [r.seq_id for r in sim.waiting] == [medium.seq_id, tiny.seq_id]


def test_block_size_one_wastes_nothing():
    sim = ServingSimulator(small_config(block_size=1, num_blocks=60))
    for snap in sim.run(80):
        assert snap.wasted_slots == 0


def test_tiny_pool_stalls_but_never_deadlocks():
    sim = ServingSimulator(small_config(seed=4))
    snaps = []
    for _ in range(150):
        snaps.append(sim.step())
        sim.check_invariants()
    frame = metrics_frame(snaps)
    assert frame["stalled"].sum() > 0  # sequences did wait for blocks
    busy = frame["decoded"] + frame["stalled"] > 0
    assert (frame.loc[busy, "decoded"] > 0).all()  # yet someone always made progress
    assert frame["finished"].iloc[-1] > 10


def test_queue_drains_after_arrivals_stop():
    sim = ServingSimulator(quiet_config(num_blocks=9, block_size=3, max_batch_size=3))
    rng = np.random.default_rng(0)
    requests = [sim.submit(int(rng.integers(1, 15)), int(rng.integers(1, 12))) for _ in range(25)]
    # At least one token is decoded every step while work remains, so this bound suffices.
    for _ in range(sum(r.output_len for r in requests)):
        sim.step()
        sim.check_invariants()
        if not sim.running and not sim.waiting:
            break
    assert len(sim.finished) == 25 and sim.blocks.num_free == 9


def test_run_returns_snapshots_and_metrics_frame():
    sim = ServingSimulator(small_config())
    snaps = sim.run(30)
    assert [s.step for s in snaps] == list(range(30))
    frame = metrics_frame(snaps)
    assert list(frame.columns) == list(METRIC_COLUMNS) and len(frame) == 30
    assert (frame["blocks_in_use"] + frame["free_blocks"] == 12).all()
    assert frame["finished"].is_monotonic_increasing
    with pytest.raises(ValueError, match="num_steps"):
        sim.run(-1)


def test_same_seed_same_request_stream_whatever_the_pool():
    a = ServingSimulator(small_config(block_size=1, num_blocks=48))
    b = ServingSimulator(small_config(block_size=8, num_blocks=8, max_batch_size=2))
    arrived_a = [s.arrived for s in a.run(60)]
    arrived_b = [s.arrived for s in b.run(60)]
    assert arrived_a == arrived_b

    def requests(sim):
        everyone = [*sim.finished, *sim.running, *sim.waiting]
        return sorted((r.seq_id, r.prompt_len, r.output_len) for r in everyone)

    assert requests(a) == requests(b)


# -- property tests --------------------------------------------------------------

@st.composite
def serving_configs(draw):
    block_size = draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    kind = st.sampled_from(["uniform", "long-tail"])
    p_low = draw(st.integers(1, 40))
    p_high = draw(st.integers(p_low, 64))
    o_low = draw(st.integers(1, 20))
    o_high = draw(st.integers(o_low, 40))
    fits_one = math.ceil((p_high + o_high) / block_size)
    return ServingConfig(
        # From a pool that holds just the longest request (forcing waits) to a roomy one.
        num_blocks=fits_one + draw(st.integers(0, 3 * fits_one)),
        block_size=block_size,
        max_batch_size=draw(st.integers(1, 8)),
        arrival_rate=draw(st.floats(0.0, 3.0)),
        prompt_len=LengthDist(draw(kind), p_low, p_high),
        output_len=LengthDist(draw(kind), o_low, o_high),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@settings(max_examples=150, deadline=None)
@given(config=serving_configs(), steps=st.integers(1, 80))
def test_invariants_hold_after_every_step(config, steps):
    sim = ServingSimulator(config)
    sim.check_invariants()
    for _ in range(steps):
        snap = sim.step()
        sim.check_invariants()
        assert_snapshot_matches(sim, snap)
        assert snap.num_running <= config.max_batch_size
        if snap.decoded + snap.stalled:
            assert snap.decoded > 0, "no running sequence made progress: deadlock"


@settings(max_examples=40, deadline=None)
@given(config=serving_configs(), steps=st.integers(1, 40))
def test_same_seed_gives_identical_runs(config, steps):
    first = ServingSimulator(config).run(steps)
    second = ServingSimulator(config).run(steps)
    for a, b in zip(first, second):
        assert a.metrics() == b.metrics()
        for name in ("seq_ids", "block_tables", "context_lens", "pool_owner"):
            assert torch.equal(getattr(a, name), getattr(b, name))


@settings(max_examples=30, deadline=None)
@given(config=serving_configs(), steps=st.integers(5, 40))
def test_wasted_slots_grow_with_block_size_on_the_same_traffic(config, steps):
    # A pool roomy enough that no block size ever makes a request wait: then every
    # block size runs the same sequences, and each sequence's waste,
    # ceil(n / b) * b - n, can only grow when b doubles.
    longest = config.prompt_len.high + config.output_len.high
    pool_tokens = config.max_batch_size * math.ceil(longest / 256) * 256
    result = block_size_tradeoff(config, steps=steps, pool_tokens=pool_tokens)
    table = result.table
    assert table["block_size"].tolist() == list(DEFAULT_BLOCK_SIZES)
    assert table["mean_tokens_stored"].nunique() == 1 and table["mean_running"].nunique() == 1
    assert table["mean_wasted_slots"].is_monotonic_increasing
    assert table["wasted_fraction"].is_monotonic_increasing
    assert table["mean_blocks_in_use"].is_monotonic_decreasing
    assert table["mean_wasted_slots"].iloc[0] == 0


# -- snapshots as decode inputs, and messages ------------------------------------------

def test_busiest_snapshot_feeds_a_decode_kernel():
    config = small_config(num_blocks=40, max_batch_size=4, seed=2)
    snap = block_size_tradeoff(config, block_sizes=(4,), steps=40).snapshots[4]
    assert snap.num_running > 1
    inputs = snap.decode_inputs(num_heads=4, num_kv_heads=2, head_dim=16, dtype="float32", device=default_device())
    assert inputs.config.num_blocks == snap.num_blocks
    assert inputs.config.lengths == tuple(snap.context_lens.tolist())
    assert inputs.k_cache.shape == (snap.num_blocks, 4, 2, 16)
    assert ((inputs.pool_owner >= 0) == (snap.pool_owner >= 0)).all()
    out = triton_decode(*inputs.args())
    atol, rtol = tolerance(torch.float32)
    torch.testing.assert_close(out.double(), reference_decode(*inputs.args()), atol=atol, rtol=rtol)


def test_decode_inputs_need_a_running_sequence():
    snap = ServingSimulator(quiet_config()).step()
    with pytest.raises(ValueError, match="no running sequence"):
        snap.decode_inputs()


def test_messages_name_the_fields_by_the_labels_given():
    labels = {"num_blocks": "Pool (blocks)", "block_size": "Block size", "prompt_len": "Prompt length",
              "output_len": "Output length", "low": "shortest", "high": "longest"}
    with pytest.raises(ValueError) as exc:
        small_config(num_blocks=9).validate(labels)
    message = str(exc.value)
    assert "Prompt length longest + Output length longest" in message and "Pool (blocks) = 9" in message
    assert "prompt_len" not in message and "num_blocks" not in message
    with pytest.raises(ValueError, match="Output length needs shortest <= longest; got shortest=5, longest=4"):
        small_config(output_len=LengthDist("uniform", 5, 4)).validate(labels)
    with pytest.raises(ValueError, match="Pool \\(blocks\\) must be a positive integer"):
        small_config(num_blocks=0).validate(labels)


# -- sharing: a common system prompt and n samples per request ----------------------------

def sharing_config(**changes):
    base = dict(num_blocks=48, block_size=4, max_batch_size=8, arrival_rate=0.6, system_prompt=10, samples=3,
                prompt_len=LengthDist("uniform", 1, 12), output_len=LengthDist("uniform", 1, 10), seed=0)
    return ServingConfig(**{**base, **changes})


@settings(max_examples=25, deadline=None)
@given(system_prompt=st.integers(0, 24), samples=st.integers(1, 4), block_size=st.sampled_from([1, 2, 4, 8]),
       spare=st.integers(0, 30), seed=st.integers(0, 2**16))
def test_sharing_never_holds_more_blocks_than_the_same_batch_without(system_prompt, samples, block_size, spare, seed):
    config = sharing_config(system_prompt=system_prompt, samples=samples, block_size=block_size, seed=seed)
    config = config.__class__(**{**config.__dict__, "num_blocks": config.max_request_blocks + spare})
    sim = ServingSimulator(config)
    for _ in range(60):
        snap = sim.step()
        sim.check_invariants()
        m = snap.metrics()
        assert m["blocks_in_use"] <= m["blocks_unshared"]
        assert 0 <= m["wasted_slots"] <= m["blocks_in_use"] * block_size
        assert m["prefix_hits"] <= m["prefix_queries"]
    assert sim.finished or sim.running  # it makes progress: never stuck with nothing admitted


def test_sharing_hits_the_system_prompt_and_copies_on_write():
    sim = ServingSimulator(sharing_config())
    frame = metrics_frame(sim.run(80))
    last = frame.iloc[-1]
    assert last["prefix_hits"] > 0 and last["cow_copies"] > 0
    assert (frame["blocks_unshared"] > frame["blocks_in_use"]).any()
    # the samples of a request run together: its first sample and its forks share the prompt's blocks
    first = next(r for r in sim.finished + sim.running if r.siblings)
    assert all(s.admitted_step == first.admitted_step for s in first.siblings)


def test_without_sharing_options_the_simulation_is_unchanged():
    plain = metrics_frame(ServingSimulator(small_config()).run(40))
    same = metrics_frame(ServingSimulator(small_config(system_prompt=0, samples=1)).run(40))
    assert plain.equals(same)
    assert (plain["blocks_unshared"] == plain["blocks_in_use"]).all() and (plain["cow_copies"] == 0).all()


def test_sharing_keeps_the_arrivals_of_the_seed():
    """The samples' lengths come from their own generator: the arrivals do not move."""
    plain = metrics_frame(ServingSimulator(small_config(num_blocks=400)).run(40))
    shared = metrics_frame(ServingSimulator(small_config(num_blocks=400, samples=2, system_prompt=8)).run(40))
    assert plain["arrived"].tolist() == shared["arrived"].tolist()


@pytest.mark.parametrize("changes, message", [
    (dict(samples=9), "samples must be at most max_batch_size"),
    (dict(samples=0), "samples must be a positive integer"),
    (dict(system_prompt=-1), "system_prompt must be an integer >= 0"),
    (dict(num_blocks=17), "the pool must hold the longest request: system_prompt \\+ prompt_len high"),
])
def test_sharing_config_rules(changes, message):
    with pytest.raises(ValueError, match=message):
        sharing_config(**changes).validate()


def test_pool_rule_writes_its_numbers_with_thousands_separators():
    """Issue 27: "32768 tokens ... need up to 135232 blocks ... num_blocks = 16384" read raw."""
    config = ServingConfig(num_blocks=16384, block_size=8, max_batch_size=256, arrival_rate=8.0, samples=64,
                           system_prompt=16384, prompt_len=LengthDist("uniform", 1, 16384),
                           output_len=LengthDist("uniform", 1, 16384), seed=0)
    with pytest.raises(ValueError) as error:
        config.validate()
    message = str(error.value)
    assert "= 32,768 tokens" in message and "64 x (output_len high = 16,384 tokens" in message
    assert "need up to 135,232 blocks" in message and message.endswith("num_blocks = 16,384")
    with pytest.raises(ValueError, match="got low=2,000, high=1,000"):
        LengthDist("uniform", 2000, 1000).validate("prompt_len")
    with pytest.raises(ValueError, match="need 2,000 blocks .* num_blocks = 1,000"):
        ServingConfig(num_blocks=1000, block_size=1, max_batch_size=4, arrival_rate=1.0, seed=0,
                      prompt_len=LengthDist("uniform", 1, 1000), output_len=LengthDist("uniform", 1, 1000)).validate()
