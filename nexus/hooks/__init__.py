"""Hooks: user scripts evaluated on every event and every timer minute."""
