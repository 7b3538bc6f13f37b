"""Webhooks from the Flow Service: signature schemes, the receiving endpoint, the event store."""
