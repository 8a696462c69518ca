"""Built-in plugins: core pieces registered through the same hooks as any plugin."""
