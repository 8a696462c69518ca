"""The SDK: producers, consumers and admin, async-first under anyio; sync.py is the
blocking facade."""
