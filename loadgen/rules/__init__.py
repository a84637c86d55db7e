"""Pure rules: controllers, schedules and counts with no I/O and no clock of their own (injected)."""
