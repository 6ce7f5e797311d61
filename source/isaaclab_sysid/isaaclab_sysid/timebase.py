"""The replay's time base: one physics tick of 1 ms (docs/replay.md, "Time base").

Every backend steps its physics at this tick, setpoints are zero-order held on
it, sample instants and delays are counted in it, and a 1 kHz log has one row per
tick. It is defined here once; ``data.schema.TICK_HZ`` and
``robots.robot.PHYSICS_DT`` are the same objects under their historical names.
"""

from __future__ import annotations

#: Physics step of every replay [s] (one tick).
TICK_S: float = 1e-3
#: Physics rate of every replay [Hz] (ticks per second; ``1 / TICK_S``).
TICK_HZ: int = 1000
