"""Checkpoint savers implementing LangGraph's ``BaseCheckpointSaver``."""
