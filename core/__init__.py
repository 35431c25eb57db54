"""Pieces shared by broker, driver and storage: errors, the data model, wire codecs."""
