"""Cron topics: entries whose occurrences become messages on their topic's timeline."""
