"""Webhook delivery: the broker POSTs each due message of a webhook topic."""
