"""Export a fit: intervals -> randomization ranges -> Isaac Lab configs and neutral JSON/YAML (docs/intervals_and_export.md)."""
