"""UR10e CSV loader: the opt-in repair of a corrupt block at the start of a log (no shared data needed)."""

from __future__ import annotations

import numpy as np
import pytest
from isaaclab_sysid.data.formats.ur10e import UR10eDataError, load_ur10e_csv


def _write(path, rows):
    path.write_text("\n".join(",".join(f"{v:.4f}" for v in r) for r in rows) + "\n")
    return path


def _clean(T: int = 50, t0: float = 100.0) -> np.ndarray:
    a = np.zeros((T, 31))
    a[:, 0] = t0 + 0.01 * np.arange(T)
    a[:, 1:7] = np.sin(a[:, [0]] + np.arange(6))
    a[:, 13:19] = 0.5
    return a


def test_corrupt_head_refused_by_default_and_dropped_on_request(tmp_path):
    a = _clean()
    a[1, 1:4] = 253.0  # garbage packets in the first rows, as in two of the real logs
    a[3, 0] = -0.12  # time jumps back
    a[4, 8] = 1e150
    f = _write(tmp_path / "head.csv", a)
    with pytest.raises(UR10eDataError, match=r"head.csv: row 2, column 2: joint position \[rad\] 253"):
        load_ur10e_csv(f)
    with pytest.raises(UR10eDataError, match=r"head.csv: row 2, column 2"):
        load_ur10e_csv(f, max_corrupt_head_rows=3)  # the bad block is longer than allowed
    log = load_ur10e_csv(f, max_corrupt_head_rows=10)
    assert log.dropped_head_rows == 5 and log.q.shape == (45, 6)
    np.testing.assert_allclose(log.t, a[5:, 0], atol=1e-4)
    assert load_ur10e_csv(_write(tmp_path / "ok.csv", _clean()), 10).dropped_head_rows == 0


def test_corrupt_row_after_the_head_is_still_refused(tmp_path):
    a = _clean()
    a[1, 2] = 300.0
    a[30, 15] = 500.0  # a bad current deep in the file
    f = _write(tmp_path / "mid.csv", a)
    with pytest.raises(UR10eDataError, match=r"mid.csv: row 31, column 16: motor current"):
        load_ur10e_csv(f, max_corrupt_head_rows=10)
