"""Hook implementations of the spark plugin (hooks only, no logic)."""
