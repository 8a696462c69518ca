"""Where the sans-IO protocol meets anyio: connections, servers, clients."""
