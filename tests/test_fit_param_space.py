"""Parameter space: layout, normalize/decode round trip, integer delay bins, batches."""

import numpy as np
import pytest

from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, GroupSpec, ParamSpace


def _space(groups=("armature", "friction", "viscous", "delay")):
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in groups}, 7)


def test_layout_and_labels():
    s = _space()
    assert s.dim == 22
    labels = s.labels()
    assert labels[0] == "armature[j1]" and labels[7] == "friction[j1]" and labels[-1] == "delay"


def test_roundtrip_and_clipping():
    s = _space()
    rng = np.random.default_rng(0)
    vals = {"armature": rng.uniform(0, 0.5, 7), "friction": rng.uniform(0, 5, 7), "viscous": rng.uniform(0, 5, 7), "delay": 3}
    x = s.normalize(vals)
    assert np.all((x >= 0) & (x <= 1))
    dec = s.decode(x)
    for g in ("armature", "friction", "viscous"):
        np.testing.assert_allclose(dec[g], vals[g], rtol=0, atol=1e-12)
    assert dec["delay"] == 3 and isinstance(int(dec["delay"]), int)
    # out-of-cube vectors are clipped into the bounds
    dec = s.decode(np.full(22, 1.7))
    np.testing.assert_allclose(dec["armature"], 0.5)
    assert dec["delay"] == 4
    assert s.decode(np.full(22, -3.0))["delay"] == 0


def test_delay_bins_are_equal_width():
    s = ParamSpace([GroupSpec("delay", 0, 4)], 7)
    u = np.linspace(0, 1, 100001)[:, None]
    d = s.decode(u)["delay"]
    counts = np.bincount(d, minlength=5)
    assert set(np.unique(d)) == {0, 1, 2, 3, 4}
    assert counts.max() - counts.min() <= 2
    for k in range(5):
        assert s.decode(s.normalize({"delay": k}))["delay"] == k


def test_batch_and_json_roundtrip():
    s = _space()
    X = np.random.default_rng(1).uniform(size=(5, s.dim))
    b = s.to_batch(X)
    assert b.size == 5 and b.armature.shape == (5, 7) and b.delay.dtype == np.int64 and b.delay.shape == (5,)
    dec = s.decode(X[2])
    js = s.decoded_to_json(dec)
    assert set(js) == {"armature", "friction", "viscous", "motor_delay_steps"}
    back = s.decoded_from_json(js)
    np.testing.assert_allclose(back["friction"], dec["friction"])
    assert back["delay"] == dec["delay"]


def test_errors():
    with pytest.raises(ValueError, match="joint names"):
        ParamSpace([GroupSpec("armature", 0, 0.5)], 7, ["a", "b"])
    with pytest.raises(ValueError):
        GroupSpec("armature", 1.0, 0.5)
    with pytest.raises(ValueError):
        GroupSpec("delay", 0, 2.5)
    with pytest.raises(ValueError):
        GroupSpec("stiffness", 0, 1)
    with pytest.raises(ValueError):
        ParamSpace([GroupSpec("delay", 0, 4), GroupSpec("delay", 0, 4)], 7)


def test_labels_use_the_robot_joint_names_and_description_round_trips():
    names = [f"panda_joint{i + 1}" for i in range(7)]
    s = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "delay")}, 7, names)
    assert s.labels()[2] == "armature[panda_joint3]" and s.labels()[-1] == "delay"
    assert [e.joint for e in s.entries()][:7] == names and s.entries()[-1].joint is None
    back = ParamSpace.from_description(s.describe())
    assert back.labels() == s.labels() and back.joint_names == s.joint_names
    legacy = {k: v for k, v in s.describe().items() if k != "joint_names"}
    with pytest.raises(ValueError, match="joint names"):
        ParamSpace.from_description(legacy)  # never invents names
    assert ParamSpace.from_description(legacy, names).labels() == s.labels()


def test_delay_encoding_bounds_and_continuous_entries():
    s = _space()
    assert s.delay_index == 21 and list(s.continuous_index()) == list(range(21))
    for d in range(5):
        x = s.with_delay(np.full(22, 0.3), d)
        assert s.delay_of(x) == d and x[21] == s.delay_coord(d) and np.all(x[:21] == 0.3)
    lo, hi = s.bounds()
    np.testing.assert_array_equal(hi - lo, s.widths())
    np.testing.assert_allclose(s.decoded_vector(s.low_start())[:7], 0.2 * 0.5)  # armature at 20 % of its range
