"""Replay: roll out recorded runs in simulated copies of the arm, one candidate per copy."""
