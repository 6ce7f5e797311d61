"""The simulated twin: writes runs in the real run format from known (hidden) parameters."""
