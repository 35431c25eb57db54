"""Cron entries: schedules whose occurrences become messages on their topic
(a timeline, or a priority topic at the entry's priority)."""
